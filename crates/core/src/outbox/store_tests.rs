//! The claim, lease and record rules of the outbox store, on a real database file.

use super::*;
use crate::config::testing;
use crate::db::PrepareKept;

/// A migrated database with workspace `ws` and buyers `a` and `b`, opened as a plain
/// connection so each rule can be checked one statement at a time.
fn database() -> (tempfile::TempDir, Connection) {
    let (dir, conn) = testing::migrated();
    // The events below name a transaction that does not exist: these rules never read it.
    conn.pragma_update(None, "foreign_keys", "OFF").unwrap();
    testing::workspace(&conn, "UTC");
    for id in ["a", "b"] {
        testing::buyer(&conn, id);
    }
    (dir, conn)
}

/// An event of `buyer` due at `due`.
fn event(conn: &Connection, buyer: &str, due: i64) -> crate::ids::EventId {
    let id = insert(
        conn,
        &NewEvent {
            transaction_id: &"txn_none".into(),
            buyer_id: &buyer.into(),
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

/// Claims up to `limit` of buyer `a`'s due events at `now`, leased until `lease_until`.
fn claim(conn: &Connection, now: i64, lease_until: i64, limit: usize) -> Vec<Claimed> {
    claim_for_buyer(
        conn,
        &crate::ids::BuyerId::from("a"),
        now,
        lease_until,
        limit,
        false,
    )
    .unwrap()
}

fn ids(claimed: &[Claimed]) -> Vec<&str> {
    claimed.iter().map(|e| e.id.as_str()).collect()
}

#[test]
fn a_claim_takes_due_events_and_an_expired_lease_makes_an_event_due_again() {
    let (_dir, conn) = database();
    let first = event(&conn, "a", 1_000);
    let second = event(&conn, "a", 1_002);
    let later = event(&conn, "a", 9_000);
    event(&conn, "b", 0);

    let claimed = claim(&conn, 2_000, 3_000, 10);
    assert_eq!(ids(&claimed), [first.as_str(), second.as_str()]);
    assert!(claimed.iter().all(|e| e.claim == 1 && !e.probe));
    assert!(claimed[0].signing_secret.starts_with("whsec_"));
    let due_of = |id: &crate::ids::EventId| -> (i64, Option<i64>) {
        conn.query_row(
            "SELECT next_attempt_at, lease_until FROM outbox_events WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    assert_eq!(
        due_of(&first),
        (3_000, Some(3_000)),
        "in flight: due when the lease ends"
    );
    assert_eq!(due_of(&later), (9_000, None));
    assert!(
        claim(&conn, 2_500, 4_000, 10).is_empty(),
        "a live lease is left alone"
    );

    // Taken again once the lease has run out: a crashed claim is retaken.
    let again = claim(&conn, 3_500, 6_000, 10);
    assert_eq!(ids(&again), [first.as_str(), second.as_str()]);
    assert!(again.iter().all(|e| e.claim == 2));
    assert_eq!(claim(&conn, 10_000, 11_000, 1).len(), 1, "the limit holds");
}

#[test]
fn due_buyers_lists_each_buyer_with_pending_events_and_its_breaker() {
    let (_dir, conn) = database();
    assert_eq!(due_buyers(&conn).unwrap(), Vec::new());
    event(&conn, "a", 500);
    event(&conn, "a", 100);
    let b = event(&conn, "b", 700);
    let mut breaker = super::super::health::Breaker::new(&crate::ids::BuyerId::from("b"));
    breaker.state = super::super::health::State::Unhealthy;
    breaker.next_probe_at = Some(9_000);
    super::super::health::save(&conn, &breaker).unwrap();
    assert_eq!(
        due_buyers(&conn).unwrap(),
        [
            DueBuyer {
                buyer_id: "a".into(),
                next_due: 100,
                unhealthy: false,
                next_probe_at: None
            },
            DueBuyer {
                buyer_id: "b".into(),
                next_due: 700,
                unhealthy: true,
                next_probe_at: Some(9_000)
            },
        ]
    );
    conn.execute(
        "UPDATE outbox_events SET status = 'delivered' WHERE id = ?1",
        [&b],
    )
    .unwrap();
    assert_eq!(
        due_buyers(&conn).unwrap().len(),
        1,
        "only pending events count"
    );
}

#[test]
fn due_buyers_seeks_the_due_index_instead_of_reading_every_pending_event() {
    let (_dir, conn) = database();
    for n in 0..50 {
        event(&conn, if n % 2 == 0 { "a" } else { "b" }, n);
    }
    let plan = crate::db::query_plan(&conn, DUE_BUYERS, []);
    let on_events: Vec<&String> = plan
        .iter()
        .filter(|s| s.contains("outbox_events"))
        .collect();
    assert_eq!(on_events.len(), 3, "{plan:?}");
    assert!(
        on_events
            .iter()
            .all(|step| step.starts_with("SEARCH") && step.contains("outbox_buyer_due")),
        "each step is a seek in outbox_buyer_due: {plan:?}"
    );
}

#[test]
fn claims_of_any_size_reuse_the_compiled_statements() {
    let (_dir, conn) = database();
    for n in 0..10 {
        event(&conn, "a", n);
    }
    for (limit, probe) in [(1, false), (3, false), (2, true), (5, false), (1, true)] {
        claim_for_buyer(
            &conn,
            &crate::ids::BuyerId::from("a"),
            100,
            50,
            limit,
            probe,
        )
        .unwrap();
    }
    for sql in [CLAIM_DUE, CLAIM_PROBE] {
        let stmt = conn.prepare_kept(sql).unwrap();
        assert_eq!(
            stmt.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "compiled once: {sql}"
        );
    }
}

#[test]
fn a_bulk_retry_takes_a_buyers_failed_and_idle_pending_events_chunk_by_chunk() {
    let (_dir, conn) = database();
    let failed: Vec<crate::ids::EventId> = (0..5).map(|n| event(&conn, "a", n)).collect();
    for id in &failed {
        conn.execute(
            "UPDATE outbox_events SET status = 'failed', attempts = 8 WHERE id = ?1",
            [id],
        )
        .unwrap();
    }
    let waiting = event(&conn, "a", 50_000);
    let in_flight = event(&conn, "a", 100);
    claim_for_buyer(
        &conn,
        &crate::ids::BuyerId::from("a"),
        1_000,
        30_000,
        1,
        false,
    )
    .unwrap();
    let delivered = event(&conn, "a", 10);
    conn.execute(
        "UPDATE outbox_events SET status = 'delivered' WHERE id = ?1",
        [&delivered],
    )
    .unwrap();
    let other = event(&conn, "b", 60_000);

    let mut after = String::new();
    let mut retried = 0;
    let mut chunks = 0;
    loop {
        let (n, last) = reopen_of_buyer(&conn, None, &after, 2, 2_000);
        retried += n;
        chunks += 1;
        match last {
            Some(last) => after = last,
            None => break,
        }
    }
    assert_eq!(retried, 6, "five failed and the waiting one");
    assert_eq!(
        chunks, 5,
        "seven candidates in chunks of two (the delivered one is no candidate), then none"
    );
    for id in failed.iter().chain([&waiting]) {
        let (status, _, due, lease) = state(&conn, id);
        assert_eq!(
            (status.as_str(), due, lease),
            ("pending", 2_000, None),
            "{id}"
        );
    }
    assert_eq!(state(&conn, &in_flight).2, 30_000, "in flight: left alone");
    assert_eq!(state(&conn, &delivered).0, "delivered");
    assert_eq!(
        state(&conn, &other).2,
        60_000,
        "another buyer's: left alone"
    );
    let base: i64 = conn
        .query_row(
            "SELECT retry_base FROM outbox_events WHERE id = ?1",
            [&failed[0]],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(base, 8, "a failed event starts its schedule again");

    // --status narrows it.
    conn.execute(
        "UPDATE outbox_events SET status = 'failed' WHERE id = ?1",
        [&failed[0]],
    )
    .unwrap();
    let (n, _) = reopen_of_buyer(&conn, Some(EventStatus::Failed), "", 100, 3_000);
    assert_eq!(n, 1);
}

/// Reopens one chunk of buyer `a`'s retryable events, as `attempt::retry_buyer` does for
/// events of live sales: how many, and the last id looked at.
fn reopen_of_buyer(
    conn: &Connection,
    status: Option<EventStatus>,
    after: &str,
    chunk: usize,
    now: i64,
) -> (usize, Option<String>) {
    let chunk = BuyerChunk {
        buyer_id: &crate::ids::BuyerId::from("a"),
        status,
        after,
        size: chunk,
    };
    let (events, last) = retryable_of_buyer(conn, &chunk, now).unwrap();
    for event in &events {
        reopen(conn, event, now).unwrap();
    }
    (events.len(), last)
}

#[test]
fn a_voided_transactions_pending_event_is_given_up() {
    let (_dir, conn) = database();
    let id = event(&conn, "a", 0);
    assert_eq!(
        cancel_pending(&conn, &"txn_none".into(), "voided: buyer down").unwrap(),
        1
    );
    let shown = find(&conn, &id).unwrap().unwrap();
    assert_eq!(shown.status, EventStatus::Failed);
    assert_eq!(shown.last_error.as_deref(), Some("voided: buyer down"));
    assert_eq!(
        cancel_pending(&conn, &"txn_none".into(), "again").unwrap(),
        0
    );
}

fn attempt(claimed: &Claimed, verdict: Verdict) -> Attempt {
    Attempt {
        event_id: claimed.id.clone(),
        row: claimed.row,
        buyer_id: claimed.buyer_id.clone(),
        claim: claimed.claim,
        probe: false,
        url: claimed.url.clone(),
        started_at: 0,
        duration_ms: 1,
        http_status: Some(503),
        error: None,
        response_excerpt: None,
        verdict,
        observation: Observation::Failure,
        request: None,
    }
}

fn state(conn: &Connection, id: &crate::ids::EventId) -> (String, i64, i64, Option<i64>) {
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
    let stale = claim(&conn, 100, 200, 1).remove(0);
    let latest = claim(&conn, 300, 400, 1).remove(0);

    // The stale claim's error is logged as an attempt but moves nothing.
    assert_eq!(
        record(&conn, &attempt(&stale, retry.clone()), &schedule, 1_000).unwrap(),
        Some(Outcome::Retry)
    );
    assert_eq!(state(&conn, &id), ("pending".into(), 1, 400, Some(400)));

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
        let claimed = claim(&conn, now, now + 100, 1).remove(0);
        outcomes.push(record(&conn, &attempt(&claimed, retry.clone()), &schedule, now).unwrap());
        now += 5_000;
    }
    assert_eq!(outcomes, [Some(Outcome::Retry), Some(Outcome::Failed)]);
    assert_eq!(state(&conn, &id).0, "failed");
    assert!(
        claim(&conn, now, now + 100, 1).is_empty(),
        "a failed event is not claimed"
    );

    let retried = retry_event(&conn, &id, now);
    assert_eq!(retried.status, EventStatus::Pending);
    let claimed = claim(&conn, now, now + 100, 1).remove(0);
    assert_eq!(
        record(&conn, &attempt(&claimed, retry), &schedule, now).unwrap(),
        Some(Outcome::Retry),
        "the schedule starts again after an operator retry"
    );
}

/// An operator's retry of event `id` (its transaction's fate is `attempt`'s): the event.
fn retry_event(conn: &Connection, id: &crate::ids::EventId, now: i64) -> Event {
    let event = retryable(conn, id).unwrap();
    assert_eq!(
        reopen(conn, &event, now).unwrap(),
        Some(DeliveryFact {
            transaction_id: "txn_none".into(),
            state: SendState::Pending
        }),
        "a failed event's transaction goes back to pending"
    );
    find(conn, id).unwrap().unwrap()
}

#[test]
fn a_probe_takes_the_earliest_event_not_in_flight_and_its_failure_costs_no_retry_step() {
    let (_dir, conn) = database();
    let schedule = RetrySchedule::from_secs(&[10]);
    let in_flight = event(&conn, "a", 0);
    claim_for_buyer(
        &conn,
        &crate::ids::BuyerId::from("a"),
        100,
        50_000,
        1,
        false,
    )
    .unwrap();
    let waiting = event(&conn, "a", 90_000);
    event(&conn, "a", 95_000);

    let probe = claim_for_buyer(
        &conn,
        &crate::ids::BuyerId::from("a"),
        1_000,
        2_000,
        1,
        true,
    )
    .unwrap();
    assert_eq!(
        ids(&probe),
        [waiting.as_str()],
        "not due yet, but the probe takes it"
    );
    assert!(probe[0].probe);
    assert_ne!(probe[0].id, in_flight);

    let mut failed = attempt(&probe[0], Verdict::Retry { retry_after: None });
    failed.probe = true;
    for _ in 0..3 {
        assert_eq!(
            record(&conn, &failed, &schedule, 1_500).unwrap(),
            Some(Outcome::Retry),
            "a failed probe never uses up the event's schedule"
        );
    }
    let (status, attempts, due, lease) = state(&conn, &waiting);
    assert_eq!(
        (status.as_str(), attempts, due, lease),
        ("pending", 3, 1_500, None)
    );
    // The same failure outside a probe moves on in the schedule: the next one fails it.
    failed.probe = false;
    record(&conn, &failed, &schedule, 2_000).unwrap();
    assert_eq!(
        record(&conn, &failed, &schedule, 3_000).unwrap(),
        Some(Outcome::Failed)
    );
}

#[test]
fn an_attempt_whose_rowid_no_longer_names_its_event_is_recorded_on_the_event_of_its_id() {
    let (_dir, conn) = database();
    let schedule = RetrySchedule::from_secs(&[10]);
    let other = event(&conn, "b", 0);
    let id = event(&conn, "a", 0);
    let claimed = claim(&conn, 100, 200, 1).remove(0);
    assert_eq!(claimed.id, id);
    let other_row: i64 = conn
        .query_row(
            "SELECT rowid FROM outbox_events WHERE id = ?1",
            [&other],
            |r| r.get(0),
        )
        .unwrap();
    assert_ne!(claimed.row, other_row);

    // The claim's rowid now names another event (the file was vacuumed while the server was
    // down, say): the attempt still moves its own event, and only it.
    let mut moved = attempt(
        &claimed,
        Verdict::Delivered {
            partner_external_id: None,
        },
    );
    moved.row = other_row;
    assert_eq!(
        record(&conn, &moved, &schedule, 1_000).unwrap(),
        Some(Outcome::Delivered)
    );
    assert_eq!(state(&conn, &id), ("delivered".into(), 1, 200, None));
    assert_eq!(state(&conn, &other), ("pending".into(), 0, 0, None));

    // An attempt whose event is gone altogether is not recorded.
    moved.event_id = "evt_gone".into();
    assert_eq!(record(&conn, &moved, &schedule, 1_000).unwrap(), None);
}
