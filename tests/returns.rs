//! Returns (DESIGN.md section 19): reason codes per workspace, a buyer's return cap and
//! review, the `return_requested` state with the operator's review queue, the
//! `transaction.return_decided` event, `report --by reason`, and the money of each step
//! (`check` proves balances equal the ledger). Through HTTP (partner-cancellation and the
//! other buyer calls) and the CLI; the races go through the real server's one writer.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

use crate::lifecycle::{CANCELLATION, CONFIRMATION, Fixture, PAYOUT, PAYOUT_PENDING, secret_of};
use crate::util::{Reply, SIGNING_SECRET, WAIT, lr};

/// A cancellation (return) of `txn` with `reason`, and `code` as `reasonCode` when given.
fn cancel(f: &Fixture, buyer: &str, txn: &str, reason: &str, code: Option<&str>) -> Reply {
    let mut body = json!({"transactionId": txn, "reason": reason});
    if let Some(code) = code {
        body["reasonCode"] = json!(code);
    }
    f.call(CANCELLATION, &secret_of(buyer), &body)
}

fn call(f: &Fixture, path: &str, buyer: &str, txn: &str) -> Reply {
    f.call(path, &secret_of(buyer), &json!({"transactionId": txn}))
}

fn acknowledge(f: &Fixture, buyer: &str, txn: &str) -> Reply {
    f.call(
        CONFIRMATION,
        &secret_of(buyer),
        &json!({"transactionId": txn, "status": "acknowledged"}),
    )
}

/// The error code of a refused call, checked to be a 400 in the partner form.
fn refused(reply: &Reply) -> String {
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["accepted"], false, "{}", reply.text);
    assert_eq!(
        reply.json["code"], reply.json["error"]["code"],
        "{}",
        reply.text
    );
    reply.json["code"].as_str().unwrap().to_string()
}

/// The review queue as `transaction return list --json` shows it.
fn queue(f: &Fixture, flags: &str) -> Vec<Value> {
    lr(&f.server, format!("transaction return list {flags}"))
        .json()
        .as_array()
        .unwrap()
        .clone()
}

/// The return of `txn` in the queue.
fn return_of(f: &Fixture, txn: &str) -> Option<Value> {
    queue(f, "").into_iter().find(|r| r["transactionId"] == txn)
}

/// `leadrelay check` passes: balances equal the ledger, the report equals its recount.
fn checked(f: &Fixture) {
    let out = lr(&f.server, "check").output();
    assert!(out.status.success(), "leadrelay check: {out:?}");
}

/// The `transaction.return_decided` events `buyer`'s endpoint received.
fn decisions(f: &Fixture, buyer: &str, n: usize) -> Vec<Value> {
    f.receiver
        .wait_for_on(&format!("/{buyer}"), n, WAIT)
        .into_iter()
        .filter(|r| r.json()["event"] == "transaction.return_decided")
        .map(|r| {
            assert!(
                r.is_signed_with(SIGNING_SECRET),
                "signed like lead.delivered"
            );
            r.json()
        })
        .collect()
}

#[test]
fn every_workspace_has_six_reason_codes_and_the_operator_changes_the_list() {
    let f = Fixture::new();
    let codes = |ws: &str| -> Vec<String> {
        lr(&f.server, format!("return-reason list --workspace {ws}"))
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["code"].as_str().unwrap().to_string())
            .collect()
    };
    let defaults = [
        "duplicate",
        "fake",
        "not_interested",
        "other",
        "out_of_area",
        "wrong_contact",
    ];
    assert_eq!(codes("ws"), defaults);
    lr(&f.server, "workspace create --name Two --id two").json();
    assert_eq!(
        codes("two"),
        defaults,
        "a new workspace starts with the six"
    );

    let added = lr(
        &f.server,
        "return-reason add --workspace ws --code no_answer --label 'Never answered'",
    )
    .json();
    assert_eq!(
        added,
        json!({"code": "no_answer", "label": "Never answered"})
    );
    assert!(codes("ws").contains(&"no_answer".to_string()));
    assert!(
        !codes("two").contains(&"no_answer".to_string()),
        "per workspace"
    );
    let text = lr(&f.server, "return-reason list --workspace ws").ok();
    assert!(text.contains("Never answered"), "{text}");

    // (command, what its error says)
    let refused = [
        (
            "add --workspace ws --code no_answer --label Again",
            "already_exists",
        ),
        (
            "add --workspace ws --code 'No Answer' --label X",
            "invalid reason code",
        ),
        ("remove --workspace ws --code other", "cannot be removed"),
        ("remove --workspace ws --code nope", "not_found"),
        ("list --workspace nope", "not_found"),
    ];
    for (command, says) in refused {
        lr(&f.server, format!("return-reason {command}"))
            .fails_json(1)
            .stderr_contains(says);
    }
    lr(
        &f.server,
        "return-reason remove --workspace ws --code no_answer",
    )
    .json();
    assert_eq!(codes("ws"), defaults);

    // A workspace without history is still deleted, its codes with it.
    let deleted = lr(&f.server, "workspace delete two").json();
    assert_eq!(deleted["outcome"], "deleted", "{deleted}");
}

#[test]
fn buyer_create_update_and_show_the_return_policy() {
    let f = Fixture::new();
    f.buyer("b", &["--return-cap", "12.5", "--return-review", "manual"]);
    let shown = lr(&f.server, "buyer show b").json();
    assert_eq!(shown["returnCap"], 12.5);
    assert_eq!(shown["returnReview"], "manual");
    let text = lr(&f.server, "buyer show b").ok();
    assert!(
        text.contains("returnCap") && text.contains("12.5"),
        "{text}"
    );
    assert!(text.contains("manual"), "{text}");

    let updated = lr(
        &f.server,
        "buyer update b --return-cap none --return-review auto",
    )
    .json();
    assert_eq!(updated["returnCap"], Value::Null);
    assert_eq!(updated["returnReview"], "auto");
    let updated = lr(&f.server, "buyer update b --return-cap 100").json();
    assert_eq!(updated["returnCap"], 100.0);
    assert_eq!(
        updated["returnReview"], "auto",
        "only what is given changes"
    );

    f.buyer("plain", &[]);
    let plain = lr(&f.server, "buyer show plain").json();
    assert_eq!(plain["returnCap"], Value::Null, "no cap by default");
    assert_eq!(plain["returnReview"], "auto");

    lr(&f.server, "buyer update b --return-cap 101").fails(2);
    lr(&f.server, "buyer update b --return-cap=-1").fails(2);
    lr(&f.server, "buyer update b --return-review sometimes").fails(2);
}

#[test]
fn a_reason_code_is_checked_and_a_free_text_reason_is_matched_or_kept_under_other() {
    let f = Fixture::new();
    f.buyer("b", &[]);
    let (t1, t2, t3, t4) = (
        f.delivered("b"),
        f.delivered("b"),
        f.delivered("b"),
        f.delivered("b"),
    );

    let reply = cancel(&f, "b", &t1, "called twice, no answer", Some("bogus"));
    assert_eq!(refused(&reply), "unknown_reason_code");
    let valid = reply.json["error"]["validReasonCodes"].clone();
    assert_eq!(valid.as_array().unwrap().len(), 6, "{valid}");
    assert!(
        reply.json["message"]
            .as_str()
            .unwrap()
            .contains("wrong_contact")
    );
    assert_eq!(f.status_of(&t1), "delivered", "nothing changed");
    assert!(return_of(&f, &t1).is_none());

    let reply = cancel(
        &f,
        "b",
        &t1,
        "called twice, no answer",
        Some("wrong_contact"),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["code"], "cancelled");
    let reply = cancel(&f, "b", &t2, "  Duplicate ", None);
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = cancel(&f, "b", &t3, "the man said he never asked", None);
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = cancel(&f, "b", &t4, "anything", Some("FAKE"));
    assert_eq!(reply.status, 200, "{}", reply.text);

    let of = |txn: &str| return_of(&f, txn).unwrap();
    assert_eq!(of(&t1)["reasonCode"], "wrong_contact");
    assert_eq!(of(&t1)["reason"], "called twice, no answer");
    assert_eq!(of(&t2)["reasonCode"], "duplicate");
    assert_eq!(of(&t3)["reasonCode"], "other");
    assert_eq!(of(&t3)["reason"], "the man said he never asked");
    assert_eq!(of(&t4)["reasonCode"], "fake");
    // Under auto review a return is approved as it is made.
    assert_eq!(of(&t1)["status"], "approved");
    assert_eq!(of(&t1)["decidedAt"], of(&t1)["requestedAt"]);
    checked(&f);
}

#[test]
fn manual_review_waits_moves_no_money_and_an_approval_refunds_and_claws_back() {
    let f = Fixture::new();
    f.buyer("m", &["--plan", "prepaid", "--return-review", "manual"]);
    lr(&f.server, "buyer fund m --amount 100").json();
    let (lead, requests) = f.lead_on("src", &["solar"]);
    let txn = f.deliver(&requests[0], "m");
    // The buyer acknowledges what it received. Not waited for, the approval below could
    // cancel the sale before the outbox's first attempt, which then voids the
    // `lead.delivered` event instead of sending it (on a loaded machine it did).
    f.receiver.wait_for_on("/m", 1, WAIT);
    assert_eq!(f.balance("m"), 75.0);
    assert_eq!(acknowledge(&f, "m", &txn).status, 200);

    let reply = cancel(&f, "m", &txn, "fake", None);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["accepted"], true);
    assert_eq!(reply.json["code"], "return_requested");
    assert_eq!(reply.json["outcome"], "pending_review");
    assert_eq!(reply.json["alreadyApplied"], false);
    assert_eq!(reply.json["item"]["status"], "return_requested");
    assert_eq!(f.balance("m"), 75.0, "a pending return moves no money");
    assert_eq!(f.lead(&lead)["status"], "active", "no clawback yet");

    // A repeat while pending, even with another reason, changes nothing.
    let reply = cancel(&f, "m", &txn, "changed my mind", Some("not_interested"));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["code"], "return_requested");
    assert_eq!(reply.json["outcome"], "pending_review");
    assert_eq!(reply.json["alreadyApplied"], true);
    // Every other move waits for the decision.
    for path in [PAYOUT, PAYOUT_PENDING] {
        assert_eq!(refused(&call(&f, path, "m", &txn)), "return_pending");
    }
    assert_eq!(refused(&acknowledge(&f, "m", &txn)), "return_pending");
    lr(&f.server, format!("transaction void {txn} --reason x"))
        .fails_json(1)
        .stderr_contains("return_pending");

    let pending = queue(&f, "--status pending");
    assert_eq!(pending.len(), 1);
    let keys: Vec<&String> = pending[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "transactionId",
            "buyerId",
            "reasonCode",
            "reason",
            "requestedAt",
            "status",
            "decidedAt",
            "note"
        ]
    );
    assert_eq!(pending[0]["reasonCode"], "fake");
    assert_eq!(pending[0]["status"], "pending");
    assert_eq!(pending[0]["decidedAt"], Value::Null);
    assert_eq!(queue(&f, "--workspace ws --status approved").len(), 0);
    checked(&f);

    let decided = lr(
        &f.server,
        format!("transaction return approve {txn} --note 'confirmed fake'"),
    )
    .json();
    assert_eq!(decided["status"], "approved");
    assert_eq!(decided["note"], "confirmed fake");
    assert_eq!(decided["refunded"], true);
    assert_eq!(decided["eventQueued"], true);
    assert_eq!(decided["transaction"]["status"], "cancelled");
    assert_eq!(f.balance("m"), 100.0, "the approval refunds the charge");
    assert_eq!(f.lead(&lead)["status"], "cancellation_pending");
    let history = f.transaction(&txn)["history"].clone();
    let moves: Vec<(String, String)> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["from"].is_null())
        .map(|e| {
            (
                e["to"].as_str().unwrap().into(),
                e["actor"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        moves,
        [
            ("acknowledged".to_string(), "buyer:m".to_string()),
            ("return_requested".into(), "buyer:m".into()),
            ("cancelled".into(), "operator".into()),
        ]
    );

    let events = decisions(&f, "m", 2);
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    let keys: Vec<&String> = event.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["event", "transactionId", "decision", "note", "decidedAt"]
    );
    assert_eq!(event["transactionId"], txn.as_str());
    assert_eq!(event["decision"], "approved");
    assert_eq!(event["note"], "confirmed fake");
    assert_eq!(event["decidedAt"], decided["decidedAt"]);

    // Decided once: a second decision and a new request are refused.
    lr(
        &f.server,
        format!("transaction return deny {txn} --note no"),
    )
    .fails_json(1)
    .stderr_contains("return_already_decided");
    let reply = cancel(&f, "m", &txn, "fake", None);
    assert_eq!(reply.json["alreadyApplied"], true, "{}", reply.text);
    assert_eq!(reply.json["code"], "cancelled");
    checked(&f);
}

#[test]
fn a_denied_return_puts_the_transaction_back_and_is_not_requested_again() {
    let f = Fixture::new();
    f.buyer("m", &["--return-review", "manual"]);
    let txn = f.delivered("m");
    assert_eq!(
        call(&f, PAYOUT_PENDING, "m", &txn).status,
        400,
        "not acknowledged yet"
    );
    assert_eq!(acknowledge(&f, "m", &txn).status, 200);
    assert_eq!(call(&f, PAYOUT_PENDING, "m", &txn).status, 200);
    assert_eq!(cancel(&f, "m", &txn, "duplicate", None).status, 200);
    assert_eq!(f.status_of(&txn), "return_requested");

    lr(&f.server, format!("transaction return deny {txn}")).fails(2);
    let decided = lr(
        &f.server,
        format!("transaction return deny {txn} --note 'not a duplicate: another house'"),
    )
    .json();
    assert_eq!(decided["status"], "denied");
    assert_eq!(decided["refunded"], false);
    assert_eq!(f.status_of(&txn), "payout_pending", "back where it was");

    let reply = cancel(&f, "m", &txn, "duplicate", None);
    assert_eq!(refused(&reply), "return_denied");
    assert_eq!(f.status_of(&txn), "payout_pending");
    lr(
        &f.server,
        format!("transaction return request {txn} --reason-code fake"),
    )
    .fails_json(1)
    .stderr_contains("return_denied");

    let events = decisions(&f, "m", 2);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["decision"], "denied");
    assert_eq!(events[0]["note"], "not a duplicate: another house");

    // The sale goes on.
    assert_eq!(call(&f, PAYOUT, "m", &txn).status, 200);
    assert_eq!(queue(&f, "--status denied").len(), 1);
    checked(&f);
}

#[test]
fn the_return_cap_counts_the_months_returns_and_refuses_past_it() {
    let f = Fixture::new();
    f.buyer("c", &["--return-cap", "50", "--plan", "prepaid"]);
    lr(&f.server, "buyer fund c --amount 100").json();
    let t: Vec<String> = (0..3).map(|_| f.delivered("c")).collect();
    // 3 delivered at 50%: one return (1/3) is within, a second (2/3) is past it.
    assert_eq!(cancel(&f, "c", &t[0], "fake", None).status, 200);
    let balance = f.balance("c");
    let reply = cancel(&f, "c", &t[1], "fake", None);
    assert_eq!(refused(&reply), "return_cap_reached");
    assert_eq!(reply.json["error"]["returnCap"], 50.0);
    assert_eq!(reply.json["error"]["returned"], 1);
    assert_eq!(reply.json["error"]["delivered"], 3);
    assert_eq!(f.status_of(&t[1]), "delivered", "nothing changed");
    assert_eq!(f.balance("c"), balance);
    assert!(return_of(&f, &t[1]).is_none());
    lr(
        &f.server,
        format!("transaction return request {} --reason-code fake", t[1]),
    )
    .fails_json(1)
    .stderr_contains("return_cap_reached");

    // One more delivery makes room for a second return (2 of 4).
    f.delivered("c");
    assert_eq!(cancel(&f, "c", &t[1], "fake", None).status, 200);
    assert_eq!(
        refused(&cancel(&f, "c", &t[2], "fake", None)),
        "return_cap_reached"
    );
    checked(&f);
}

#[test]
fn outside_the_window_on_a_final_state_or_for_another_buyer_a_return_is_refused() {
    let f = Fixture::new();
    f.buyer(
        "closed",
        &["--cancellation-window", "0", "--return-review", "manual"],
    );
    f.buyer("m", &["--return-review", "manual"]);
    f.buyer("other", &[]);
    let late = f.delivered("closed");
    assert_eq!(
        refused(&cancel(&f, "closed", &late, "fake", None)),
        "cancellation_window_elapsed"
    );
    lr(
        &f.server,
        format!("transaction return request {late} --reason-code fake"),
    )
    .fails_json(1)
    .stderr_contains("cancellation_window_elapsed");
    assert_eq!(f.status_of(&late), "delivered");

    let paid = f.delivered("m");
    assert_eq!(acknowledge(&f, "m", &paid).status, 200);
    assert_eq!(call(&f, PAYOUT, "m", &paid).status, 200);
    assert_eq!(
        refused(&cancel(&f, "m", &paid, "fake", None)),
        "transition_not_allowed"
    );

    let mine = f.delivered("m");
    let reply = cancel(&f, "other", &mine, "fake", None);
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_eq!(f.status_of(&mine), "delivered");
    assert!(queue(&f, "").is_empty(), "no return was recorded");
    checked(&f);
}

#[test]
fn the_operator_files_a_return_for_a_buyer_under_the_buyers_rules() {
    let f = Fixture::new();
    f.buyer("m", &["--return-review", "manual"]);
    f.buyer("a", &["--plan", "prepaid"]);
    lr(&f.server, "buyer fund a --amount 50").json();
    let pending = f.delivered("m");
    let shown = lr(
        &f.server,
        format!(
            "transaction return request {pending} --reason-code fake --note 'checked by phone'"
        ),
    )
    .json();
    assert_eq!(shown["code"], "return_requested");
    assert_eq!(shown["outcome"], "pending_review");
    assert_eq!(shown["return"]["reasonCode"], "fake");
    assert_eq!(shown["return"]["reason"], "checked by phone");
    assert_eq!(f.status_of(&pending), "return_requested");

    let now = f.delivered("a");
    let shown = lr(
        &f.server,
        format!("transaction return request {now} --reason-code out_of_area"),
    )
    .json();
    assert_eq!(shown["code"], "cancelled");
    assert_eq!(shown["economicsApplied"], true);
    assert_eq!(f.balance("a"), 50.0);

    let other = f.delivered("m");
    lr(
        &f.server,
        format!("transaction return request {other} --reason-code bogus"),
    )
    .fails_json(1)
    .stderr_contains("unknown_reason_code");
    lr(
        &f.server,
        "transaction return request txn_nope --reason-code fake",
    )
    .fails_json(1)
    .stderr_contains("transaction_not_found");
    lr(&f.server, format!("transaction return approve {other}"))
        .fails_json(1)
        .stderr_contains("no_pending_return");

    let text = lr(&f.server, "transaction return list").ok();
    assert!(
        text.contains(&pending) && text.contains("pending"),
        "{text}"
    );
    let listed = lr(&f.server, "transaction list --status return_requested").json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    checked(&f);
}

#[test]
fn report_by_reason_counts_the_returns_of_the_period_per_code() {
    let f = Fixture::new();
    f.buyer("a", &[]);
    f.buyer("m", &["--return-review", "manual"]);
    for (buyer, code) in [
        ("a", "fake"),
        ("a", "fake"),
        ("a", "duplicate"),
        ("m", "fake"),
    ] {
        let txn = f.delivered(buyer);
        assert_eq!(cancel(&f, buyer, &txn, "x", Some(code)).status, 200);
    }
    let report = lr(&f.server, "report --by reason").json();
    assert_eq!(report["by"], json!(["reason"]));
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{report}");
    assert_eq!(rows[0]["reason"], "duplicate");
    assert_eq!(rows[0]["label"], "Duplicate lead");
    assert_eq!(rows[0]["requested"], 1);
    assert_eq!(rows[1]["reason"], "fake");
    assert_eq!(
        (
            &rows[1]["requested"],
            &rows[1]["approved"],
            &rows[1]["pending"]
        ),
        (&json!(3), &json!(2), &json!(1))
    );
    assert_eq!(report["totals"]["requested"], 4);
    let text = lr(&f.server, "report --by reason").ok();
    assert!(text.contains("Fake or test lead"), "{text}");
    let csv = lr(&f.server, "report --by reason --csv").ok();
    assert!(
        csv.starts_with("reason,label,requested,pending,approved,denied\r\n"),
        "{csv}"
    );
    lr(&f.server, "report --by reason --by buyer")
        .fails_json(1)
        .stderr_contains("a report of its own");

    // The money report's return rate per buyer counts approved returns only.
    let by_buyer = lr(&f.server, "report --by buyer").json();
    let rate = |buyer: &str| {
        by_buyer["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["buyer"] == buyer)
            .unwrap()["returnRate"]
            .clone()
    };
    assert_eq!(rate("a"), 1.0);
    assert_eq!(rate("m"), 0.0, "a pending return is no return yet");
}

#[test]
fn two_requests_for_the_last_place_under_the_cap_leave_the_cap_respected() {
    let f = Fixture::new();
    f.buyer("c", &["--return-cap", "50"]);
    let t: Vec<String> = (0..4).map(|_| f.delivered("c")).collect();
    assert_eq!(cancel(&f, "c", &t[0], "fake", None).status, 200);
    // One place left (2 of 4); two requests race for it.
    let replies: Vec<Reply> = std::thread::scope(|scope| {
        let racers: Vec<_> = [&t[1], &t[2]]
            .into_iter()
            .map(|txn| scope.spawn(|| cancel(&f, "c", txn, "fake", None)))
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let won = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(
        won,
        1,
        "{:?}",
        replies.iter().map(|r| &r.text).collect::<Vec<_>>()
    );
    let lost = replies.iter().find(|r| r.status != 200).unwrap();
    assert_eq!(refused(lost), "return_cap_reached");
    let approved = queue(&f, "--status approved");
    assert_eq!(approved.len(), 2);
    checked(&f);
}

#[test]
fn a_return_racing_a_payout_ends_in_exactly_one_of_the_two() {
    let f = Fixture::new();
    f.buyer("b", &["--plan", "prepaid"]);
    f.buyer("m", &["--return-review", "manual"]);
    lr(&f.server, "buyer fund b --amount 500").json();
    for buyer in ["b", "m"] {
        for _ in 0..4 {
            let txn = f.delivered(buyer);
            assert_eq!(acknowledge(&f, buyer, &txn).status, 200);
            let (returned, paid) = std::thread::scope(|scope| {
                let returned = scope.spawn(|| cancel(&f, buyer, &txn, "fake", None));
                let paid = scope.spawn(|| call(&f, PAYOUT, buyer, &txn));
                (returned.join().unwrap(), paid.join().unwrap())
            });
            let status = f.status_of(&txn);
            match (returned.status, paid.status) {
                (200, 400) => {
                    let code = refused(&paid);
                    assert!(code == "return_pending" || code == "transition_not_allowed");
                    assert!(
                        status == "cancelled" || status == "return_requested",
                        "{status}"
                    );
                }
                (400, 200) => {
                    assert_eq!(refused(&returned), "transition_not_allowed");
                    assert_eq!(status, "paid");
                }
                other => panic!("both or neither applied: {other:?} {}", returned.text),
            }
        }
    }
    checked(&f);
}

#[test]
fn an_approval_racing_a_denial_ends_in_one_decision() {
    let f = Fixture::new();
    f.buyer("m", &["--return-review", "manual", "--plan", "prepaid"]);
    lr(&f.server, "buyer fund m --amount 200").json();
    for _ in 0..3 {
        let txn = f.delivered("m");
        assert_eq!(cancel(&f, "m", &txn, "fake", None).status, 200);
        let server = &f.server;
        let outcomes: Vec<std::process::Output> = std::thread::scope(|scope| {
            let approve =
                scope.spawn(|| lr(server, format!("transaction return approve {txn}")).output());
            let deny = scope
                .spawn(|| lr(server, format!("transaction return deny {txn} --note no")).output());
            vec![approve.join().unwrap(), deny.join().unwrap()]
        });
        let won = outcomes.iter().filter(|o| o.status.success()).count();
        assert_eq!(won, 1, "{outcomes:?}");
        let lost = outcomes.iter().find(|o| !o.status.success()).unwrap();
        assert!(
            String::from_utf8_lossy(&lost.stderr).contains("was approved already")
                || String::from_utf8_lossy(&lost.stderr).contains("was denied already"),
            "{lost:?}"
        );
        let decided = return_of(&f, &txn).unwrap();
        let status = f.status_of(&txn);
        match decided["status"].as_str().unwrap() {
            "approved" => assert_eq!(status, "cancelled"),
            "denied" => assert_eq!(status, "delivered"),
            other => panic!("undecided: {other}"),
        }
    }
    checked(&f);
}

/// One step of a random sequence over a buyer's transactions.
#[derive(Debug, Clone)]
enum Step {
    Return(usize, &'static str),
    Acknowledge(usize),
    PayoutPending(usize),
    Payout(usize),
    Approve(usize),
    Deny(usize),
    Void(usize),
    Review(bool),
}

fn step() -> impl Strategy<Value = Step> {
    let txn = 0..3usize;
    prop_oneof![
        3 => (txn.clone(), proptest::sample::select(&["fake", "duplicate", "bogus"][..]))
            .prop_map(|(t, code)| Step::Return(t, code)),
        2 => txn.clone().prop_map(Step::Acknowledge),
        1 => txn.clone().prop_map(Step::PayoutPending),
        1 => txn.clone().prop_map(Step::Payout),
        2 => txn.clone().prop_map(Step::Approve),
        2 => txn.clone().prop_map(Step::Deny),
        1 => txn.prop_map(Step::Void),
        1 => any::<bool>().prop_map(Step::Review),
    ]
}

#[test]
fn random_returns_decisions_payouts_and_cancellations_keep_balances_equal_to_the_ledger() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(6);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let f = Fixture::new();
    let buyers = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&proptest::collection::vec(step(), 1..10), |steps| {
            // A fresh prepaid buyer per case, so each case's money is its own.
            let n = buyers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let buyer = format!("p{n}");
            f.buyer(&buyer, &["--plan", "prepaid", "--return-cap", "60"]);
            lr(&f.server, format!("buyer fund {buyer} --amount 100")).json();
            let txns: Vec<String> = (0..3).map(|_| f.delivered(&buyer)).collect();
            for step in &steps {
                match step {
                    Step::Return(t, code) => {
                        cancel(&f, &buyer, &txns[*t], "x", Some(code));
                    }
                    Step::Acknowledge(t) => {
                        acknowledge(&f, &buyer, &txns[*t]);
                    }
                    Step::PayoutPending(t) => {
                        call(&f, PAYOUT_PENDING, &buyer, &txns[*t]);
                    }
                    Step::Payout(t) => {
                        call(&f, PAYOUT, &buyer, &txns[*t]);
                    }
                    Step::Approve(t) => {
                        lr(
                            &f.server,
                            format!("transaction return approve {}", txns[*t]),
                        )
                        .output();
                    }
                    Step::Deny(t) => {
                        lr(
                            &f.server,
                            format!("transaction return deny {} --note n", txns[*t]),
                        )
                        .output();
                    }
                    Step::Void(t) => {
                        lr(
                            &f.server,
                            format!("transaction void {} --reason v", txns[*t]),
                        )
                        .output();
                    }
                    Step::Review(manual) => {
                        let review = if *manual { "manual" } else { "auto" };
                        lr(
                            &f.server,
                            format!("buyer update {buyer} --return-review {review}"),
                        )
                        .json();
                    }
                }
            }
            // Every live sale is charged its 25, every ended one refunded.
            let live = txns
                .iter()
                .filter(|t| !matches!(f.status_of(t).as_str(), "cancelled" | "rejected"))
                .count();
            prop_assert_eq!(f.balance(&buyer), 100.0 - 25.0 * live as f64, "{:?}", steps);
            let check = lr(&f.server, "check").output();
            prop_assert!(check.status.success(), "leadrelay check: {:?}", check);
            Ok(())
        })
        .unwrap();
}

/// A file written before migration 23: no reason codes, no return policy columns, no
/// returns table, and the transactions' CHECK without `return_requested`.
fn as_before_migration_23(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "DROP TABLE returns;
         DROP TABLE return_reasons;
         ALTER TABLE buyers DROP COLUMN return_cap_bp;
         ALTER TABLE buyers DROP COLUMN return_review;",
    )
    .unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "schema_version", |r| r.get(0))
        .unwrap();
    conn.execute_batch(&format!(
        "BEGIN;
         PRAGMA writable_schema = ON;
         UPDATE sqlite_schema SET sql = replace(sql, ' OR status = ''return_requested'')', ')')
         WHERE name = 'transactions';
         PRAGMA writable_schema = RESET;
         PRAGMA schema_version = {};
         PRAGMA user_version = 22;
         COMMIT;",
        version + 1
    ))
    .unwrap();
    let sql: String = conn
        .query_row(
            "SELECT sql FROM sqlite_schema WHERE name = 'transactions'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!sql.contains("return_requested"), "{sql}");
    let refused = conn
        .execute("UPDATE transactions SET status = 'return_requested'", [])
        .unwrap_err()
        .to_string();
    assert!(refused.contains("CHECK constraint failed"), "{refused}");
}

#[test]
fn migration_23_brings_an_existing_file_its_reason_codes_policy_and_state() {
    let f = Fixture::new();
    lr(&f.server, "workspace create --name New --id new").json();
    let new_workspace = lr(&f.server, "return-reason list --workspace new").json();
    f.buyer("m", &[]);
    let txn = f.delivered("m");
    let crate::lifecycle::Fixture { server, .. } = f;
    let db = server.stop();
    let before = lr(&db, format!("transaction show {txn}")).json();
    as_before_migration_23(&db.path);

    // Any command opens the file and migrates it.
    let codes = lr(&db, "return-reason list --workspace ws").json();
    assert_eq!(
        codes, new_workspace,
        "the migration's codes are those a new workspace gets"
    );
    assert_eq!(codes.as_array().unwrap().len(), 6, "{codes}");
    let buyer = lr(&db, "buyer show m").json();
    assert_eq!(buyer["returnReview"], "auto");
    assert_eq!(buyer["returnCap"], Value::Null);
    assert_eq!(lr(&db, format!("transaction show {txn}")).json(), before);
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, leadrelay::db::SCHEMA_VERSION);
    drop(conn);

    // The migrated file takes a return waiting for review.
    lr(&db, "buyer update m --return-review manual").json();
    let shown = lr(
        &db,
        format!("transaction return request {txn} --reason-code fake"),
    )
    .json();
    assert_eq!(shown["code"], "return_requested", "{shown}");
    let out = lr(&db, "check").output();
    assert!(out.status.success(), "leadrelay check: {out:?}");
}

#[test]
fn the_return_decided_event_is_retried_like_lead_delivered() {
    use crate::util::receiver::Answer;

    let f = Fixture::new();
    f.buyer("m", &["--return-review", "manual"]);
    let txn = f.delivered("m");
    f.receiver.wait_for_on("/m", 1, WAIT);
    assert_eq!(cancel(&f, "m", &txn, "fake", None).status, 200);
    // The buyer's endpoint fails once, then takes it.
    f.receiver
        .answer_sequence("/m", vec![Answer::status(503), Answer::ok()]);
    lr(&f.server, format!("transaction return approve {txn}")).json();
    let sent: Vec<_> = f
        .receiver
        .wait_for_on("/m", 3, Duration::from_secs(20))
        .into_iter()
        .skip(1)
        .collect();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].text(), sent[1].text(), "the same event again");
    assert_eq!(sent[0].header("webhook-id"), sent[1].header("webhook-id"));
    assert_eq!(sent[1].json()["decision"], "approved");
    // The transaction's own delivery status is the lead.delivered event's, untouched.
    assert_eq!(f.transaction(&txn)["deliveryStatus"], "sent");
}

#[test]
fn an_erasure_removes_the_words_of_a_return_and_keeps_its_code_and_decision() {
    let f = Fixture::new();
    f.buyer("m", &["--return-review", "manual"]);
    let (lead, requests) = f.lead_on("src", &["solar"]);
    let txn = f.deliver(&requests[0], "m");
    let reply = cancel(&f, "m", &txn, "Ada Lovelace hung up at once", Some("fake"));
    assert_eq!(reply.status, 200, "{}", reply.text);
    lr(
        &f.server,
        format!("transaction return deny {txn} --note 'Ada answered the second call'"),
    )
    .json();
    lr(
        &f.server,
        format!("lead erase --lead {lead} --yes --reason ticket-1"),
    )
    .json();
    let erased = return_of(&f, &txn).unwrap();
    assert_eq!(erased["reason"], Value::Null);
    assert_eq!(erased["note"], Value::Null);
    assert_eq!(erased["reasonCode"], "fake");
    assert_eq!(erased["status"], "denied");
}
