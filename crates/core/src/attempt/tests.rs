//! Recording attempts and retrying events on a real, migrated database file: the delivery
//! status of an event's transaction follows what happened to the event.

use rusqlite::Connection;

use super::{RetryError, record_all, retry_buyer, retry_event};
use crate::autodelivery::testing::{self, BuyerFixture};
use crate::delivery::transaction::{self, DeliveryStatus, Status};
use crate::ids::{EventId, TransactionId};
use crate::outbox::RetrySchedule;
use crate::outbox::health::Observation;
use crate::outbox::store::{self, Attempt, EventStatus, NewEvent, Outcome, Verdict};

/// A migrated file with the auto-delivery fixture rows and buyer `a`.
fn database() -> (tempfile::TempDir, Connection) {
    let (dir, conn) = crate::config::testing::migrated();
    testing::rows(&conn);
    testing::add_buyer(&conn, "a", &BuyerFixture::default());
    (dir, conn)
}

/// A sale to `a` (moved to `status`) with its event, due at once: (transaction, event).
fn sale(conn: &Connection, status: &str) -> (TransactionId, EventId) {
    let transaction_id =
        testing::add_transaction(conn, testing::request_id(), "a", "solar", status, 0);
    let event_id = store::insert(
        conn,
        &NewEvent {
            transaction_id: &transaction_id,
            buyer_id: &crate::ids::BuyerId::from("a"),
            url: "http://127.0.0.1:9/hook",
            payload: "{}",
            created_at: 0,
        },
    )
    .unwrap();
    (transaction_id, event_id)
}

/// Claims `a`'s due events at `now` and finishes each with `verdict`.
fn attempts(conn: &Connection, now: i64, verdict: &Verdict) -> Vec<Attempt> {
    store::claim_for_buyer(
        conn,
        &crate::ids::BuyerId::from("a"),
        now,
        now + 1_000,
        10,
        false,
    )
    .unwrap()
    .into_iter()
    .map(|claimed| Attempt {
        event_id: claimed.id,
        row: claimed.row,
        buyer_id: claimed.buyer_id,
        claim: claimed.claim,
        probe: false,
        url: claimed.url,
        started_at: now,
        duration_ms: 1,
        http_status: None,
        error: None,
        response_excerpt: None,
        verdict: verdict.clone(),
        observation: Observation::Failure,
        request: None,
    })
    .collect()
}

fn delivery_status(conn: &Connection, id: &TransactionId) -> DeliveryStatus {
    transaction::find(conn, id)
        .unwrap()
        .unwrap()
        .delivery_status
}

fn event_status(conn: &Connection, id: &EventId) -> EventStatus {
    store::find(conn, id).unwrap().unwrap().status
}

#[test]
fn the_delivery_status_follows_the_attempts_and_a_refusal_takes_the_sale_back() {
    let (_dir, conn) = database();
    let schedule = RetrySchedule::from_secs(&[10]);
    let (txn, _) = sale(&conn, "delivered");

    // A retry to come leaves the transaction pending; the used-up schedule fails it.
    let retry = Verdict::Retry { retry_after: None };
    let recorded = record_all(&conn, &attempts(&conn, 1_000, &retry), &schedule, 1_000).unwrap();
    assert_eq!(recorded.outcomes, [Some(Outcome::Retry)]);
    assert_eq!(delivery_status(&conn, &txn), DeliveryStatus::Pending);
    let recorded = record_all(&conn, &attempts(&conn, 60_000, &retry), &schedule, 60_000).unwrap();
    assert_eq!(recorded.outcomes, [Some(Outcome::Failed)]);
    assert_eq!(delivery_status(&conn, &txn), DeliveryStatus::Failed);

    // The operator's retry, then a 2xx naming the buyer's own id: sent.
    retry_event(
        &conn,
        &store::of_transaction(&conn, &txn).unwrap()[0].id,
        70_000,
    )
    .unwrap();
    assert_eq!(delivery_status(&conn, &txn), DeliveryStatus::Pending);
    let delivered = Verdict::Delivered {
        partner_external_id: Some("crm-7".into()),
    };
    let recorded = record_all(
        &conn,
        &attempts(&conn, 80_000, &delivered),
        &schedule,
        80_000,
    )
    .unwrap();
    assert_eq!(recorded.outcomes, [Some(Outcome::Delivered)]);
    let sent = transaction::find(&conn, &txn).unwrap().unwrap();
    assert_eq!(sent.delivery_status, DeliveryStatus::Sent);
    assert_eq!(sent.partner_external_id.as_deref(), Some("crm-7"));

    // A buyer API's refusal fails the event and takes the sale back in the same job.
    let (refused, event) = sale(&conn, "delivered");
    let verdict = Verdict::Refused {
        reason: "duplicate".into(),
    };
    let recorded =
        record_all(&conn, &attempts(&conn, 90_000, &verdict), &schedule, 90_000).unwrap();
    assert_eq!(recorded.outcomes, [Some(Outcome::Refused)]);
    assert_eq!(
        recorded.rerouted, 0,
        "a sale made by hand does not fall through"
    );
    assert_eq!(event_status(&conn, &event), EventStatus::Failed);
    let taken_back = transaction::find(&conn, &refused).unwrap().unwrap();
    assert_eq!(
        (taken_back.status, taken_back.delivery_status),
        (Status::Rejected, DeliveryStatus::Failed)
    );
}

#[test]
fn a_retry_sets_the_delivery_status_back_to_pending_only_for_a_live_transaction() {
    let (_dir, conn) = database();
    let schedule = RetrySchedule::from_secs(&[]);
    let (live, live_event) = sale(&conn, "delivered");
    let (ended, ended_event) = sale(&conn, "delivered");
    record_all(
        &conn,
        &attempts(&conn, 1_000, &Verdict::Failed),
        &schedule,
        1_000,
    )
    .unwrap();
    transaction::move_to(
        &conn,
        &ended,
        Status::Delivered,
        Status::Rejected,
        "test",
        None,
        2_000,
    )
    .unwrap();
    for txn in [&live, &ended] {
        assert_eq!(delivery_status(&conn, txn), DeliveryStatus::Failed);
    }

    // By id: a sale taken back is refused and left as it was.
    match retry_event(&conn, &ended_event, 3_000) {
        Err(RetryError::TransactionEnded {
            transaction_id,
            status,
            ..
        }) => assert_eq!((transaction_id, status), (ended.clone(), Status::Rejected)),
        other => panic!("refused as taken back: {other:?}"),
    }
    assert_eq!(event_status(&conn, &ended_event), EventStatus::Failed);
    assert_eq!(delivery_status(&conn, &ended), DeliveryStatus::Failed);
    let retried = retry_event(&conn, &live_event, 3_000).unwrap();
    assert_eq!(retried.status, EventStatus::Pending);
    assert_eq!(delivery_status(&conn, &live), DeliveryStatus::Pending);

    // In bulk: the same rule, event by event.
    record_all(
        &conn,
        &attempts(&conn, 4_000, &Verdict::Failed),
        &schedule,
        4_000,
    )
    .unwrap();
    assert_eq!(delivery_status(&conn, &live), DeliveryStatus::Failed);
    let chunk = store::BuyerChunk {
        buyer_id: &crate::ids::BuyerId::from("a"),
        status: None,
        after: "",
        size: 100,
    };
    let (retried, last) = retry_buyer(&conn, &chunk, 5_000).unwrap();
    assert_eq!(retried, 1, "only the live sale's event");
    assert!(last.is_some());
    assert_eq!(delivery_status(&conn, &live), DeliveryStatus::Pending);
    assert_eq!(event_status(&conn, &ended_event), EventStatus::Failed);
    assert_eq!(delivery_status(&conn, &ended), DeliveryStatus::Failed);

    // A delivered event is not retried.
    record_all(
        &conn,
        &attempts(
            &conn,
            6_000,
            &Verdict::Delivered {
                partner_external_id: None,
            },
        ),
        &schedule,
        6_000,
    )
    .unwrap();
    assert!(matches!(
        retry_event(&conn, &live_event, 7_000),
        Err(RetryError::Event(store::OutboxError::AlreadyDelivered(_)))
    ));
    assert_eq!(delivery_status(&conn, &live), DeliveryStatus::Sent);
}
