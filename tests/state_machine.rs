//! The whole transaction state machine over HTTP: every starting state (reached through
//! the real endpoints) × every requested move, each on its own transaction, checked for
//! status, body and the state afterwards. One server, one buyer, 30 transactions.

use serde_json::{Value, json};

use crate::lifecycle::{CANCELLATION, CONFIRMATION, Fixture, PAYOUT, PAYOUT_PENDING};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Acknowledge,
    Reject,
    PayoutPending,
    Payout,
    Cancel,
}

const CALLS: [Call; 5] = [
    Call::Acknowledge,
    Call::Reject,
    Call::PayoutPending,
    Call::Payout,
    Call::Cancel,
];

/// What the service must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// 200, the transaction moved to this state.
    Moved(&'static str),
    /// 200 with `alreadyApplied: true`; nothing changed.
    Already,
    /// 400 `transition_not_allowed` naming the current state.
    Refused,
}

use Call::*;
use Expect::*;

/// Starting state × call → answer. The same table as the unit test of
/// `lifecycle::state`, now proven end to end.
const TABLE: [(&str, Call, Expect); 30] = [
    ("delivered", Acknowledge, Moved("acknowledged")),
    ("delivered", Reject, Moved("rejected")),
    ("delivered", PayoutPending, Refused),
    ("delivered", Payout, Refused),
    ("delivered", Cancel, Moved("cancelled")),
    ("acknowledged", Acknowledge, Already),
    ("acknowledged", Reject, Refused),
    ("acknowledged", PayoutPending, Moved("payout_pending")),
    ("acknowledged", Payout, Moved("paid")),
    ("acknowledged", Cancel, Moved("cancelled")),
    ("rejected", Acknowledge, Refused),
    ("rejected", Reject, Already),
    ("rejected", PayoutPending, Refused),
    ("rejected", Payout, Refused),
    ("rejected", Cancel, Refused),
    ("payout_pending", Acknowledge, Already),
    ("payout_pending", Reject, Refused),
    ("payout_pending", PayoutPending, Already),
    ("payout_pending", Payout, Moved("paid")),
    ("payout_pending", Cancel, Moved("cancelled")),
    ("paid", Acknowledge, Already),
    ("paid", Reject, Refused),
    ("paid", PayoutPending, Already),
    ("paid", Payout, Already),
    ("paid", Cancel, Refused),
    ("cancelled", Acknowledge, Refused),
    ("cancelled", Reject, Refused),
    ("cancelled", PayoutPending, Refused),
    ("cancelled", Payout, Refused),
    ("cancelled", Cancel, Already),
];

fn send(f: &Fixture, secret: &str, txn: &str, call: Call) -> crate::util::Reply {
    let (path, body) = match call {
        Acknowledge => (
            CONFIRMATION,
            json!({"transactionId": txn, "status": "acknowledged"}),
        ),
        Reject => (
            CONFIRMATION,
            json!({"transactionId": txn, "status": "rejected"}),
        ),
        PayoutPending => (PAYOUT_PENDING, json!({"transactionId": txn})),
        Payout => (PAYOUT, json!({"transactionId": txn})),
        Cancel => (
            CANCELLATION,
            json!({"transactionId": txn, "reason": "table walk"}),
        ),
    };
    f.call(path, secret, &body)
}

/// The calls that take a new transaction to `state`.
fn path_to(state: &str) -> &'static [Call] {
    match state {
        "delivered" => &[],
        "acknowledged" => &[Acknowledge],
        "rejected" => &[Reject],
        "payout_pending" => &[Acknowledge, PayoutPending],
        "paid" => &[Acknowledge, Payout],
        "cancelled" => &[Cancel],
        other => panic!("no path to {other}"),
    }
}

/// The state a body reports: `item.status` (every 200 carries the transaction).
fn reported_state(body: &Value) -> &str {
    body["item"]["status"].as_str().unwrap_or("")
}

#[test]
fn every_state_and_move_answers_as_the_table_says() {
    let f = Fixture::new();
    let secret = f.buyer("b", &[]);

    // Every row once, and every (state, call) pair covered.
    for state in [
        "delivered",
        "acknowledged",
        "rejected",
        "payout_pending",
        "paid",
        "cancelled",
    ] {
        for call in CALLS {
            let rows = TABLE
                .iter()
                .filter(|(s, c, _)| *s == state && *c == call)
                .count();
            assert_eq!(rows, 1, "{state} {call:?}");
        }
    }

    let mut failures = Vec::new();
    for (start, call, expect) in TABLE {
        let txn = f.delivered("b");
        for step in path_to(start) {
            let reply = send(&f, &secret, &txn, *step);
            assert_eq!(reply.status, 200, "reaching {start}: {}", reply.text);
        }
        let before = f.transaction(&txn);
        assert_eq!(before["status"], start);

        let reply = send(&f, &secret, &txn, call);
        let after = f.transaction(&txn);
        let is_confirmation = matches!(call, Acknowledge | Reject);
        let ok = match expect {
            Moved(_) | Already => {
                let (end, already) = match expect {
                    Moved(state) => (state, false),
                    _ => (start, true),
                };
                let shape_ok = if is_confirmation {
                    reply.json["autoStatusChangedTo"].is_null()
                        && reply.json["economicsApplied"] == false
                } else {
                    reply.json["accepted"] == true && reply.json["code"] == end
                };
                let history_grew = after["history"].as_array().unwrap().len()
                    - before["history"].as_array().unwrap().len();
                reply.status == 200
                    && shape_ok
                    && reply.json["alreadyApplied"] == already
                    && reported_state(&reply.json) == end
                    && after["status"] == end
                    && history_grew == usize::from(!already)
            }
            Refused => {
                reply.status == 400
                    && reply.json["accepted"] == false
                    && reply.json["code"] == "transition_not_allowed"
                    && reply.json["currentState"] == start
                    && reply.json["error"]["currentState"] == start
                    && after["status"] == before["status"]
                    && after["history"] == before["history"]
            }
        };
        if !ok {
            failures.push(format!(
                "{start} + {call:?}: expected {expect:?}, got {} {}",
                reply.status, reply.text
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
