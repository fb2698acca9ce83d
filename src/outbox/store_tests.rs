//! The claim, lease and record rules of the outbox store, on a real database file.

use std::collections::HashMap;

use super::*;
use crate::config::{buyer, workspace};

/// A migrated database with workspace `ws` and buyers `a` and `b`, opened as a plain
/// connection so each rule can be checked one statement at a time.
fn database() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().expect("a temp dir can be made");
    let path = dir.path().join("test.db");
    crate::db::Db::open(&path)
        .expect("the database opens")
        .close();
    let conn = Connection::open(&path).expect("the file opens");
    // The events below name a transaction that does not exist: these rules never read it.
    conn.pragma_update(None, "foreign_keys", "OFF").unwrap();
    workspace::create(
        &conn,
        &workspace::NewWorkspace {
            id: Some("ws"),
            name: "W",
            timezone: "UTC",
            retention: None,
        },
    )
    .unwrap();
    for id in ["a", "b"] {
        buyer::create(
            &conn,
            &buyer::NewBuyer {
                id: Some(id),
                workspace_id: "ws",
                name: id,
                webhook_url: "http://127.0.0.1:9/hook",
                secret: None,
                signing_secret: None,
                capabilities: Vec::new(),
                cancellation_window_secs: 0,
                auto_payout_pending: false,
                plan: buyer::Plan::Postpaid,
                credit_limit_cents: 0,
            },
        )
        .unwrap();
    }
    (dir, conn)
}

/// An event of `buyer` due at `due`.
fn event(conn: &Connection, buyer: &str, due: i64) -> String {
    let id = insert(
        conn,
        &NewEvent {
            transaction_id: "txn_none",
            buyer_id: buyer,
            url: "http://127.0.0.1:9/hook",
            payload: "{}",
            created_at: due,
        },
    )
    .unwrap();
    conn.execute(
        "UPDATE outbox_events SET next_attempt_at = ?2 WHERE id = ?1",
        params![id, due],
    )
    .unwrap();
    id
}

fn lease(conn: &Connection, id: &str, until: i64) {
    conn.execute(
        "UPDATE outbox_events SET lease_until = ?2 WHERE id = ?1",
        params![id, until],
    )
    .unwrap();
}

fn ids(claim: &Claim) -> Vec<&str> {
    claim.events.iter().map(|e| e.id.as_str()).collect()
}

#[test]
fn a_claim_takes_due_events_and_expired_leases_but_not_live_leases() {
    let (_dir, conn) = database();
    let due = event(&conn, "a", 1_000);
    let leased = event(&conn, "a", 1_001);
    lease(&conn, &leased, 5_000);
    let expired = event(&conn, "a", 1_002);
    lease(&conn, &expired, 1_500);
    let later = event(&conn, "a", 9_000);

    let claim = claim(&conn, 2_000, 3_000, 10, |_, _| Admit::Take).unwrap();
    assert_eq!(ids(&claim), [due.as_str(), expired.as_str()]);
    assert!(!claim.more_due);
    assert!(claim.events.iter().all(|e| e.claim == 1));
    assert!(claim.events[0].signing_secret.starts_with("whsec_"));
    let lease_of = |id: &str| -> Option<i64> {
        conn.query_row(
            "SELECT lease_until FROM outbox_events WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(lease_of(&due), Some(3_000));
    assert_eq!(lease_of(&leased), Some(5_000), "a live lease is left alone");
    assert_eq!(lease_of(&later), None);

    // Taken again once that lease has run out too: a crashed claim is retaken.
    let again = super::claim(&conn, 3_500, 6_000, 10, |_, _| Admit::Take).unwrap();
    assert_eq!(ids(&again), [due.as_str(), expired.as_str()]);
    assert!(again.events.iter().all(|e| e.claim == 2));
}

#[test]
fn a_buyer_at_its_limit_does_not_hide_the_others() {
    let (_dir, conn) = database();
    let a: Vec<String> = (0..40).map(|n| event(&conn, "a", n)).collect();
    let b: Vec<String> = (0..3).map(|n| event(&conn, "b", 100 + n)).collect();
    let mut taken: HashMap<String, usize> = HashMap::new();
    let claim = claim(&conn, 1_000, 2_000, 10, |_, buyer| {
        let count = taken.entry(buyer.to_string()).or_default();
        if buyer == "a" && *count >= 2 {
            return Admit::SkipBuyer;
        }
        *count += 1;
        Admit::Take
    })
    .unwrap();
    assert_eq!(
        ids(&claim),
        [
            a[0].as_str(),
            a[1].as_str(),
            b[0].as_str(),
            b[1].as_str(),
            b[2].as_str()
        ]
    );
    assert!(claim.more_due, "buyer a has more due events");
}

#[test]
fn a_full_claim_says_more_may_be_due() {
    let (_dir, conn) = database();
    for n in 0..5 {
        event(&conn, "a", n);
    }
    let claim = claim(&conn, 1_000, 2_000, 5, |_, _| Admit::Take).unwrap();
    assert_eq!(claim.events.len(), 5);
    assert!(claim.more_due);
}

fn attempt(claimed: &Claimed, verdict: Verdict) -> Attempt {
    Attempt {
        event_id: claimed.id.clone(),
        claim: claimed.claim,
        url: claimed.url.clone(),
        started_at: 0,
        duration_ms: 1,
        http_status: Some(503),
        error: None,
        response_excerpt: None,
        verdict,
    }
}

fn state(conn: &Connection, id: &str) -> (String, i64, i64, Option<i64>) {
    conn.query_row(
        "SELECT status, attempts, next_attempt_at, lease_until FROM outbox_events WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .unwrap()
}

#[test]
fn only_the_latest_claim_reschedules_but_any_claim_delivers() {
    let (_dir, conn) = database();
    let schedule = RetrySchedule::from_secs(&[10, 10]);
    let id = event(&conn, "a", 0);
    let retry = Verdict::Retry { retry_after: None };
    let stale = claim(&conn, 100, 200, 1, |_, _| Admit::Take)
        .unwrap()
        .events
        .remove(0);
    let latest = claim(&conn, 300, 400, 1, |_, _| Admit::Take)
        .unwrap()
        .events
        .remove(0);

    // The stale claim's error is logged as an attempt but moves nothing.
    assert_eq!(
        record(&conn, &attempt(&stale, retry.clone()), &schedule, 1_000).unwrap(),
        Some(Outcome::Retry)
    );
    assert_eq!(state(&conn, &id), ("pending".into(), 1, 0, Some(400)));

    // The latest claim's error reschedules: 10s ± 20% from now, lease released.
    record(&conn, &attempt(&latest, retry.clone()), &schedule, 1_000).unwrap();
    let (status, attempts, due, lease) = state(&conn, &id);
    assert_eq!((status.as_str(), attempts, lease), ("pending", 2, None));
    assert!((9_000..=13_000).contains(&due), "{due}");
    assert_eq!(super::attempts(&conn, &id).unwrap().len(), 2);

    // A 2xx from any claim delivers: the buyer has the event.
    record(
        &conn,
        &attempt(
            &stale,
            Verdict::Delivered {
                partner_external_id: None,
            },
        ),
        &schedule,
        2_000,
    )
    .unwrap();
    assert_eq!(state(&conn, &id).0, "delivered");
}

#[test]
fn a_used_up_schedule_fails_and_an_operator_retry_starts_it_again() {
    let (_dir, conn) = database();
    let schedule = RetrySchedule::from_secs(&[1]);
    let id = event(&conn, "a", 0);
    let retry = Verdict::Retry { retry_after: None };
    let mut now = 10_000;
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let claimed = claim(&conn, now, now + 100, 1, |_, _| Admit::Take)
            .unwrap()
            .events
            .remove(0);
        outcomes.push(record(&conn, &attempt(&claimed, retry.clone()), &schedule, now).unwrap());
        now += 5_000;
    }
    assert_eq!(outcomes, [Some(Outcome::Retry), Some(Outcome::Failed)]);
    assert_eq!(state(&conn, &id).0, "failed");
    assert!(
        claim(&conn, now, now + 100, 1, |_, _| Admit::Take)
            .unwrap()
            .events
            .is_empty(),
        "a failed event is not claimed"
    );

    let retried = retry_event(&conn, &id, now);
    assert_eq!(retried.status, EventStatus::Pending);
    let claimed = claim(&conn, now, now + 100, 1, |_, _| Admit::Take)
        .unwrap()
        .events
        .remove(0);
    assert_eq!(
        record(&conn, &attempt(&claimed, retry), &schedule, now).unwrap(),
        Some(Outcome::Retry),
        "the schedule starts again after an operator retry"
    );
}

fn retry_event(conn: &Connection, id: &str, now: i64) -> Event {
    super::retry(conn, id, now).unwrap()
}
