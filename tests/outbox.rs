//! The outbox workers against a real local receiver: retries on the schedule with
//! `Retry-After`, failures at once, timeouts and refused connections, the operator's
//! `outbox` commands, health, a slow buyer beside fast ones, a clean stop after the current
//! attempt, and at-least-once delivery across a SIGKILL of the real binary.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::process::ServeProcess;
use crate::util::receiver::{Answer, Receiver};
use crate::util::{
    SIGNING_SECRET, TempDb, TestServer, WAIT, buyer, deliver, fast_options, lead_request, lr,
    setup, simple_lead, strings, wait_until,
};

/// A server with fast retries, a receiver, the basic setup and buyer `b` on `path`.
fn started(path: &str) -> (TestServer, Receiver) {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    setup(&server);
    buyer(&server.db.path, "b", &receiver.url(path), Some("25"), []);
    (server, receiver)
}

/// Ingests a fresh lead and delivers its request to `buyer_id` with the CLI; returns
/// (transaction id, event id).
fn new_delivery(server: &TestServer, n: usize, buyer_id: &str) -> (String, String) {
    let (_, request) = lead_request(server, &simple_lead(n));
    let delivered = deliver(&server.db.path, &request, buyer_id, None);
    (
        delivered["transactionId"].as_str().unwrap().to_string(),
        delivered["eventId"].as_str().unwrap().to_string(),
    )
}

fn event(db: &Path, id: &str) -> Value {
    lr(db, format!("outbox show {id}")).json()
}

fn wait_for_status(db: &Path, id: &str, status: &str) -> Value {
    wait_until(WAIT, &format!("event {id} to be {status}"), || {
        event(db, id)["status"] == status
    });
    event(db, id)
}

#[test]
fn retryable_answers_are_retried_with_the_same_id_until_delivered() {
    let (server, receiver) = started("/flaky");
    let db = &server.db.path;
    receiver.answer_sequence(
        "/flaky",
        vec![
            Answer::status(503).header("Retry-After", "1").body("busy"),
            Answer::status(429),
            Answer::status(408),
            Answer::ok().json(&json!({"partnerExternalId": "P-9"})),
        ],
    );
    let (transaction_id, event_id) = new_delivery(&server, 1, "b");

    let shown = wait_for_status(db, &event_id, "delivered");
    let requests = receiver.requests_to("/flaky");
    assert_eq!(requests.len(), 4);
    let body = requests[0].text();
    for request in &requests {
        assert_eq!(request.header("webhook-id"), Some(event_id.as_str()));
        assert_eq!(
            request.text(),
            body,
            "the body is the same on every attempt"
        );
        // Each attempt is signed over its own timestamp.
        assert!(request.is_signed_with(SIGNING_SECRET));
    }
    // Retry-After: 1 is honoured up to twice the 200ms step: 400ms at least.
    let after_retry_after = requests[1].at - requests[0].at;
    assert!(
        after_retry_after >= Duration::from_millis(390),
        "{after_retry_after:?}"
    );

    let log = shown["attemptLog"].as_array().unwrap();
    let statuses: Vec<(i64, &str)> = log
        .iter()
        .map(|a| {
            (
                a["httpStatus"].as_i64().unwrap(),
                a["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (503, "retry"),
            (429, "retry"),
            (408, "retry"),
            (200, "delivered")
        ]
    );
    assert_eq!(log[0]["responseExcerpt"], "busy");
    assert_eq!(log[0]["attempt"], 1);
    assert!(log[0]["durationMs"].is_i64());
    assert!(log[0]["at"].is_string());
    assert_eq!(shown["attempts"], 4);
    assert_eq!(shown["payload"]["transactionId"], transaction_id.as_str());
    let transaction = lr(db, format!("transaction show {transaction_id}")).json();
    assert_eq!(transaction["deliveryStatus"], "sent");
    assert_eq!(transaction["partnerExternalId"], "P-9");

    // Every recorded attempt is counted by its outcome.
    let metrics = server.get("/metrics").text;
    for (outcome, count) in [("retry", 3), ("delivered", 1), ("failed", 0)] {
        let line = format!("leadrelay_deliveries_total{{outcome=\"{outcome}\"}} {count}");
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
}

#[test]
fn other_4xx_and_redirects_fail_at_once() {
    let (server, receiver) = started("/unused");
    let db = &server.db.path;
    let cases = [
        ("/bad", Answer::status(400).body("no such product")),
        ("/gone", Answer::status(404)),
        ("/conflict", Answer::status(409)),
        (
            "/moved",
            Answer::status(301).header("Location", &receiver.url("/elsewhere")),
        ),
        (
            "/found",
            Answer::status(302).header("Location", &receiver.url("/elsewhere")),
        ),
    ];
    let mut events = Vec::new();
    for (n, (path, answer)) in cases.into_iter().enumerate() {
        let id = format!("b{n}");
        receiver.answer(path, answer);
        buyer(db, &id, &receiver.url(path), Some("25"), []);
        events.push((path, new_delivery(&server, n, &id)));
    }
    for (path, (transaction_id, event_id)) in &events {
        let shown = wait_for_status(db, event_id, "failed");
        assert_eq!(shown["attempts"], 1, "{path}: one attempt only");
        assert_eq!(shown["attemptLog"][0]["outcome"], "failed", "{path}");
        assert!(
            shown["lastError"].as_str().unwrap().starts_with("HTTP "),
            "{path}"
        );
        let transaction = lr(db, format!("transaction show {transaction_id}")).json();
        assert_eq!(transaction["deliveryStatus"], "failed", "{path}");
        assert_eq!(
            transaction["status"], "delivered",
            "{path}: the sale stands"
        );
    }
    assert!(
        receiver.requests_to("/elsewhere").is_empty(),
        "redirects are not followed"
    );
    assert_eq!(receiver.count(), events.len(), "no second attempt anywhere");
    let failed = lr(db, "outbox list --status failed").json();
    assert_eq!(failed.as_array().unwrap().len(), events.len());
    let health = server.get("/api/health").json;
    assert_eq!(health["outbox"]["failed"], events.len());
    assert_eq!(health["outbox"]["pending"], 0);
}

#[test]
fn a_used_up_schedule_fails_the_event_and_outbox_retry_sends_it_again() {
    let (server, receiver) = started("/down");
    let db = &server.db.path;
    receiver.answer("/down", Answer::status(500));
    let (transaction_id, event_id) = new_delivery(&server, 1, "b");

    let shown = wait_for_status(db, &event_id, "failed");
    // The first attempt and one per step of the 200ms,200ms,200ms schedule.
    assert_eq!(shown["attempts"], 4);
    let outcomes = strings(&shown["attemptLog"], "outcome");
    assert_eq!(outcomes, ["retry", "retry", "retry", "failed"]);
    assert_eq!(
        lr(db, format!("transaction show {transaction_id}")).json()["deliveryStatus"],
        "failed"
    );

    // The buyer is back: the operator retries; the server's poll picks it up.
    receiver.answer("/down", Answer::ok());
    let retried = lr(db, format!("outbox retry {event_id}")).json();
    assert_eq!(retried["status"], "pending");
    let shown = wait_for_status(db, &event_id, "delivered");
    assert_eq!(shown["attempts"], 5);
    let requests = receiver.requests_to("/down");
    assert_eq!(requests.len(), 5);
    assert!(
        requests
            .iter()
            .all(|r| r.header("webhook-id") == Some(event_id.as_str())),
        "the same webhook-id on every attempt"
    );
    assert_eq!(
        lr(db, format!("transaction show {transaction_id}")).json()["deliveryStatus"],
        "sent"
    );
    let output = lr(db, format!("outbox retry {event_id}")).fails(1);
    output.stderr_contains("was delivered already");
}

#[test]
fn timeouts_and_refused_connections_are_retried() {
    let mut options = fast_options();
    options.delivery.request_timeout = Duration::from_millis(300);
    let server = TestServer::start_with(TempDb::new(), options);
    let receiver = Receiver::start();
    let db = &server.db.path;
    setup(db);
    receiver.answer_sequence(
        "/slow",
        vec![Answer::ok().delay(Duration::from_secs(5)), Answer::ok()],
    );
    buyer(db, "slow", &receiver.url("/slow"), Some("25"), []);
    // A port nobody listens on: bind one, then let it go.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused_url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    buyer(db, "refused", &refused_url, Some("25"), []);

    let (_, slow_event) = new_delivery(&server, 1, "slow");
    let (_, refused_event) = new_delivery(&server, 2, "refused");

    let shown = wait_for_status(db, &slow_event, "delivered");
    let log = shown["attemptLog"].as_array().unwrap();
    assert_eq!(log[0]["outcome"], "retry");
    assert!(log[0]["httpStatus"].is_null());
    assert!(
        log[0]["error"].as_str().unwrap().contains("timeout"),
        "{}",
        log[0]
    );
    assert_eq!(log[1]["outcome"], "delivered");

    let shown = wait_for_status(db, &refused_event, "failed");
    let log = shown["attemptLog"].as_array().unwrap();
    assert_eq!(log.len(), 4, "retried on the whole schedule");
    assert!(
        log.iter()
            .all(|a| a["httpStatus"].is_null() && a["error"].is_string())
    );
}

#[test]
fn health_reports_pending_and_failed_counts_and_the_oldest_pending_age() {
    let mut options = fast_options();
    options.delivery.retry_schedule = leadrelay::outbox::RetrySchedule::parse("60").unwrap();
    let server = TestServer::start_with(TempDb::new(), options);
    let receiver = Receiver::start();
    let db = &server.db.path;
    setup(db);
    receiver.answer("/later", Answer::status(503));
    receiver.answer("/never", Answer::status(400));
    buyer(db, "later", &receiver.url("/later"), Some("25"), []);
    buyer(db, "never", &receiver.url("/never"), Some("25"), []);
    let (_, older) = new_delivery(&server, 1, "later");
    let (_, newer) = new_delivery(&server, 2, "later");
    let (_, never) = new_delivery(&server, 3, "never");
    wait_for_status(db, &never, "failed");
    for id in [&older, &newer] {
        wait_until(WAIT, "the first attempt of a pending event", || {
            event(db, id)["attempts"] == 1
        });
    }
    // Known ages: the pending events were made two hours and one hour ago, the failed one
    // three hours ago (a failed event is not pending, so it must not count).
    let conn = rusqlite::Connection::open(db).unwrap();
    let now = leadrelay::clock::now_ms();
    for (id, hours) in [(&older, 2), (&newer, 1), (&never, 3)] {
        let updated = conn
            .execute(
                "UPDATE outbox_events SET created_at = ?2 WHERE id = ?1",
                rusqlite::params![id, now - hours * 3_600_000],
            )
            .unwrap();
        assert_eq!(updated, 1, "{id}");
    }

    let health = server.get("/api/health").json;
    assert_eq!(health["outbox"]["pending"], 2, "{health}");
    assert_eq!(health["outbox"]["failed"], 1, "{health}");
    let oldest = health["outbox"]["oldestPendingSeconds"].as_i64().unwrap();
    assert!(
        (7_200..7_260).contains(&oldest),
        "the older pending event's age, two hours: {health}"
    );
    let pending = lr(db, "outbox list --status pending").json();
    let mut ids = strings(&pending, "id");
    ids.sort_unstable();
    let mut expected = [older.as_str(), newer.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected);
    assert!(pending[0]["nextAttemptAt"].is_string(), "{pending}");
}

#[test]
fn a_slow_buyer_does_not_delay_the_others() {
    let mut options = fast_options();
    options.delivery.request_timeout = Duration::from_secs(30);
    options.delivery.per_buyer = 3;
    let server = TestServer::start_with(TempDb::new(), options);
    let receiver = Receiver::start();
    let db = &server.db.path;
    setup(db);
    receiver.answer("/slow", Answer::ok().delay(Duration::from_secs(20)));
    buyer(db, "slow", &receiver.url("/slow"), Some("25"), []);
    buyer(db, "fast", &receiver.url("/fast"), Some("25"), []);
    let slow: Vec<String> = (0..6).map(|n| new_delivery(&server, n, "slow").1).collect();
    receiver.wait_for_on("/slow", 3, WAIT);
    let fast: Vec<String> = (10..16)
        .map(|n| new_delivery(&server, n, "fast").1)
        .collect();

    for id in &fast {
        wait_for_status(db, id, "delivered");
    }
    // Every fast event went out while the slow buyer still held its first requests.
    let slow_requests = receiver.requests_to("/slow");
    assert_eq!(
        slow_requests.len(),
        3,
        "the slow buyer gets at most its per-buyer limit of requests at once"
    );
    for id in &slow {
        assert_eq!(event(db, id)["status"], "pending");
    }
    // The receiver goes first so the slow requests end now rather than in 20 seconds.
    drop(receiver);
    drop(server);
}

#[test]
fn stopping_finishes_the_current_attempt_and_releases_unsent_claims() {
    let (server, receiver) = started("/slowish");
    receiver.answer("/slowish", Answer::ok().delay(Duration::from_millis(700)));
    let events: Vec<String> = (0..5).map(|n| new_delivery(&server, n, "b").1).collect();
    receiver.wait_for_on("/slowish", 3, WAIT);

    let db = server.stop();
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let rows: Vec<(String, String, Option<i64>)> = conn
        .prepare("SELECT id, status, lease_until FROM outbox_events")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), events.len());
    let delivered = rows.iter().filter(|(_, s, _)| s == "delivered").count();
    assert!(
        delivered >= 3,
        "the attempts in progress at the stop were finished and recorded: {rows:?}"
    );
    for (id, status, lease) in &rows {
        if status == "pending" {
            assert_eq!(*lease, None, "{id}: an unsent claim is released at stop");
        }
    }
    drop(conn);

    // The next start sends the rest.
    let server = TestServer::start_with(db, fast_options());
    for id in &events {
        wait_for_status(&server.db.path, id, "delivered");
    }
}

/// `leadrelay serve` as a child process with fast retries.
fn spawn_server(db: &Path) -> ServeProcess {
    ServeProcess::start(
        db,
        &[
            "--retry-schedule",
            "200ms,200ms,200ms,200ms,200ms",
            "--delivery-timeout",
            "1s",
            // Exactly the three hanging calls are in flight when the first server dies.
            "--delivery-per-buyer",
            "3",
        ],
    )
}

#[test]
fn every_event_is_delivered_across_a_crash_with_the_same_webhook_id() {
    let receiver = Receiver::start();
    // The first calls hang (in flight when the server dies); later ones answer at once.
    receiver.answer_sequence(
        "/crash",
        vec![
            Answer::ok().delay(Duration::from_secs(30)),
            Answer::ok().delay(Duration::from_secs(30)),
            Answer::ok().delay(Duration::from_secs(30)),
            Answer::ok(),
        ],
    );
    // The leads come in through the real ingest endpoint; the deliveries are made while no
    // server runs, so all 20 events are pending when the binary starts.
    let ingesting = TestServer::start();
    setup(&ingesting.db.path);
    buyer(
        &ingesting.db.path,
        "b",
        &receiver.url("/crash"),
        Some("25"),
        [],
    );
    let requests: Vec<String> = (0..20)
        .map(|n| lead_request(&ingesting, &simple_lead(n)).1)
        .collect();
    let db = ingesting.stop();
    let path = &db.path;
    let events: Vec<String> = requests
        .iter()
        .map(|request| {
            deliver(path, request, "b", None)["eventId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();

    let first = spawn_server(path);
    receiver.wait_for_on("/crash", 3, WAIT);
    first.kill(); // SIGKILL: no shutdown, no recording, claims left leased.
    let conn = rusqlite::Connection::open(path).unwrap();
    let pending: i64 = conn
        .query_row(
            "SELECT count(*) FROM outbox_events WHERE status = 'pending'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(pending, 20, "nothing was acknowledged before the crash");
    let leased: i64 = conn
        .query_row(
            "SELECT count(*) FROM outbox_events WHERE lease_until IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(leased >= 3, "the crash left claims in flight");

    let second = spawn_server(path);
    wait_until(Duration::from_secs(30), "every event delivered", || {
        conn.query_row(
            "SELECT count(*) FROM outbox_events WHERE status = 'delivered'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
            == 20
    });
    let health: Value = crate::util::Request::new("GET", &format!("{}/api/health", second.base))
        .send()
        .json;
    assert_eq!(health["outbox"]["pending"], 0, "{health}");
    second.kill();

    let mut bodies: HashMap<String, String> = HashMap::new();
    for request in receiver.requests_to("/crash") {
        let id = request.header("webhook-id").unwrap().to_string();
        let body = request.text();
        let first_body = bodies.entry(id.clone()).or_insert_with(|| body.clone());
        assert_eq!(*first_body, body, "{id}: a repeat carries the same body");
    }
    let received: HashSet<&String> = bodies.keys().collect();
    let expected: HashSet<&String> = events.iter().collect();
    assert_eq!(received, expected, "every event arrived, under its own id");
    assert!(
        receiver.requests_to("/crash").len() > 20,
        "the events in flight at the crash were sent again"
    );
}

#[test]
fn public_outbound_only_refuses_a_host_name_resolving_to_loopback_at_send_time() {
    let receiver = Receiver::start();
    // A host name, not an address: only what it resolves to says it is loopback.
    let by_name = receiver.url("/by-name").replace("127.0.0.1", "localhost");
    assert!(by_name.starts_with("http://localhost:"), "{by_name}");
    let server = TestServer::start_with(TempDb::new(), fast_options());
    setup(&server);
    buyer(&server.db.path, "local", &by_name, Some("25"), []);
    // By default (DESIGN.md section 16) a buyer on the same host is sent to.
    let (_, sent) = new_delivery(&server, 1, "local");
    wait_for_status(&server.db.path, &sent, "delivered");
    assert_eq!(receiver.requests_to("/by-name").len(), 1);
    let (_, request) = lead_request(&server, &simple_lead(2));
    let db = server.stop();
    let event_id = deliver(&db.path, &request, "local", None)["eventId"]
        .as_str()
        .unwrap()
        .to_string();

    let restricted = ServeProcess::start(&db.path, &["--public-outbound-only"]);
    let shown = wait_for_status(&db.path, &event_id, "failed");
    restricted.kill();
    assert_eq!(shown["attempts"], 1, "refused once, not retried: {shown}");
    let error = shown["lastError"].as_str().unwrap();
    assert!(
        error.starts_with("not sent: localhost (resolved to ")
            && error.contains("is a loopback address")
            && error.contains("--public-outbound-only"),
        "{error}"
    );
    assert!(shown["attemptLog"][0]["httpStatus"].is_null(), "{shown}");
    assert_eq!(
        receiver.requests_to("/by-name").len(),
        1,
        "the refused event never reached the receiver"
    );
}

/// The statements that write the CHECKed columns of a delivery's rows, each with a value
/// its CHECK allows and one it refuses, for the event `event_id` of transaction `txn`.
fn checked_writes(event_id: &str, txn: &str) -> Vec<(String, &'static str)> {
    vec![
        (
            format!("UPDATE outbox_events SET status = ?1 WHERE id = '{event_id}'"),
            "failed",
        ),
        (
            format!(
                "INSERT INTO outbox_attempts (event_id, attempt, url, started_at, duration_ms,
                    outcome) VALUES ('{event_id}', 99, 'http://x', 0, 0, ?1)"
            ),
            "refused",
        ),
        (
            format!("UPDATE transactions SET status = ?1 WHERE id = '{txn}'"),
            "payout_pending",
        ),
        (
            format!("UPDATE transactions SET delivery_status = ?1 WHERE id = '{txn}'"),
            "failed",
        ),
    ]
}

/// Migration 22: the CHECKs of the rows a delivery writes compare with OR, so SQLite
/// evaluates them without building a temporary b-tree (an `OpenEphemeral` in the
/// statement's program, which an IN list of three or more constants needs on every run),
/// and they still refuse what they refused.
fn assert_checks_without_in_that_still_refuse(db: &Path, event_id: &str, txn: &str) {
    let mut conn = rusqlite::Connection::open(db).unwrap();
    for (sql, allowed) in checked_writes(event_id, txn) {
        let program: Vec<String> = conn
            .prepare(&format!("EXPLAIN {sql}"))
            .unwrap()
            .query_map([allowed], |row| row.get::<_, String>(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            !program.iter().any(|op| op == "OpenEphemeral"),
            "{sql} builds a temporary b-tree: {program:?}"
        );
        let tx = conn.transaction().unwrap();
        assert_eq!(tx.execute(&sql, [allowed]).unwrap(), 1, "{sql}");
        let refused = tx.execute(&sql, ["bogus"]).unwrap_err().to_string();
        assert!(
            refused.contains("CHECK constraint failed"),
            "{sql}: {refused}"
        );
        tx.rollback().unwrap();
    }
}

#[test]
fn the_checks_a_delivery_writes_need_no_temporary_b_tree_and_still_refuse_other_values() {
    let (server, _receiver) = started("/ok");
    let db = &server.db.path;
    let (txn, event_id) = new_delivery(&server, 1, "b");
    wait_for_status(db, &event_id, "delivered");
    assert_checks_without_in_that_still_refuse(db, &event_id, &txn);
}

#[test]
fn migration_22_rewrites_the_checks_of_a_file_written_before_it_and_it_reads_the_same() {
    let (server, _receiver) = started("/ok");
    let db = server.db.path.clone();
    let (txn, event_id) = new_delivery(&server, 1, "b");
    let before = wait_for_status(&db, &event_id, "delivered");
    let transaction = lr(&db, format!("transaction show {txn}")).json();
    let _file = server.stop();

    // The file as a build before migration 22 left it: the CHECKs with their IN lists,
    // schema version 21 (the migrations after it run again and must not mind).
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "schema_version", |r| r.get(0))
            .unwrap();
        conn.execute_batch(&format!(
            "BEGIN;
             PRAGMA writable_schema = ON;
             UPDATE sqlite_schema SET sql = replace(sql,
                 'CHECK (status = ''pending'' OR status = ''delivered'' OR status = ''failed''
                            OR status = ''voided'')',
                 'CHECK (status IN (''pending'', ''delivered'', ''failed''))')
             WHERE name = 'outbox_events';
             UPDATE sqlite_schema SET sql = replace(sql,
                 'CHECK (delivery_status = ''pending'' OR delivery_status = ''sent''
                                OR delivery_status = ''failed'')',
                 'CHECK (delivery_status IN (''pending'', ''sent'', ''failed''))')
             WHERE name = 'transactions';
             PRAGMA writable_schema = RESET;
             PRAGMA schema_version = {};
             PRAGMA user_version = 21;
             COMMIT;",
            version + 1
        ))
        .unwrap();
        let program: Vec<String> = conn
            .prepare(&format!(
                "EXPLAIN UPDATE outbox_events SET status = 'failed' WHERE id = '{event_id}'"
            ))
            .unwrap()
            .query_map([], |row| row.get::<_, String>(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            program.iter().any(|op| op == "OpenEphemeral"),
            "the IN list is back: {program:?}"
        );
    }

    // Any command opens the file and migrates it.
    assert_eq!(event(&db, &event_id), before);
    assert_eq!(
        lr(&db, format!("transaction show {txn}")).json(),
        transaction
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, leadrelay::db::SCHEMA_VERSION);
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    drop(conn);
    assert_checks_without_in_that_still_refuse(&db, &event_id, &txn);
}

/// A `lead.delivered` not yet sent whose sale the buyer cancels or rejects first is voided,
/// never sent: the person's data does not go out for a sale that no longer exists. The
/// outbox is held back by a long poll: events written by the CLI wait until the server
/// writes one itself (an automated delivery), which wakes the workers for every due event.
#[test]
fn an_event_whose_sale_ended_before_its_first_attempt_is_voided_not_sent() {
    let options = leadrelay::service::ServiceOptions {
        delivery: leadrelay::outbox::WorkerConfig {
            poll_interval: Duration::from_secs(3600),
            ..fast_options().delivery
        },
        ..Default::default()
    };
    let server = TestServer::start_with(TempDb::new(), options);
    let receiver = Receiver::start();
    setup(&server);
    let secret = "buyer-b-inbound-secret-0123456789";
    buyer(
        &server.db.path,
        "b",
        &receiver.url("/b"),
        Some("25"),
        ["--secret", secret],
    );
    let db = &server.db.path;
    let (cancelled, cancelled_event) = new_delivery(&server, 1, "b");
    let (rejected, rejected_event) = new_delivery(&server, 2, "b");
    let lifecycle = |path: &str, body: Value| {
        let reply = server
            .post(path)
            .header("X-Service-Webhook-Secret", secret)
            .json(&body)
            .send();
        assert_eq!(reply.status, 200, "{}", reply.text);
    };
    lifecycle(
        "/api/webhooks/partner-cancellation",
        json!({"transactionId": cancelled, "reason": "bought elsewhere"}),
    );
    lifecycle(
        "/api/webhooks/partner-confirmation",
        json!({"transactionId": rejected, "status": "rejected"}),
    );

    // The server's own delivery wakes the workers; once its event has arrived, every
    // event due before it has been claimed.
    let mut lead = simple_lead(3);
    lead["triggerAutoDelivery"] = json!(true);
    let (lead_id, _) = lead_request(&server, &lead);
    let arrived = receiver.wait_for(1, WAIT);
    assert_eq!(arrived[0].json()["leadId"], lead_id.as_str());
    wait_until(WAIT, "the outbox to settle", || {
        lr(db, "outbox list --status pending").json() == json!([])
    });
    let sent: Vec<Value> = receiver
        .requests()
        .iter()
        .map(|r| r.json()["transactionId"].clone())
        .collect();
    assert!(
        !sent.contains(&json!(cancelled)) && !sent.contains(&json!(rejected)),
        "{sent:?}"
    );
    for (event_id, transaction_id, status) in [
        (&cancelled_event, &cancelled, "cancelled"),
        (&rejected_event, &rejected, "rejected"),
    ] {
        let shown = event(db, event_id);
        assert_eq!(shown["status"], "voided", "{shown}");
        assert_eq!(shown["attempts"], 0, "{shown}");
        assert_eq!(shown["attemptLog"], json!([]), "{shown}");
        assert_eq!(
            shown["lastError"],
            format!("voided: the transaction was {status} before its first attempt")
        );
        let voided = lr(db, "outbox list --status voided").json();
        assert!(
            voided
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["id"] == event_id.as_str()),
            "{voided}"
        );
        // An operator's retry cannot bring it back: the sale is over.
        lr(db, format!("outbox retry {event_id}"))
            .fails(1)
            .stderr_contains(transaction_id);
    }
}
