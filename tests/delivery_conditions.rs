//! Delivery under real conditions (DESIGN.md section 13), against real local receivers:
//! hanging buyers hold only their own share of sends, a buyer whose endpoint keeps failing
//! goes unhealthy (auto-delivery passes it over, `buyer health` and the metrics say so, a
//! probe brings it back, a restart keeps it), permanent failures are attempted once (a
//! redirect, a 410, a certificate that does not verify), an operator voids a sale and
//! reroutes the lead to another buyer, and re-queues a buyer's failed events in bulk (never
//! those of a sale taken back).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::receiver::{Answer, Receiver};
use crate::util::tls_receiver::TlsReceiver;
use crate::util::{
    TempDb, TestServer, WAIT, basic_setup, buyer, complete_lead, deliver, fast_options,
    lead_request, lr, setup, simple_lead, source, wait_until,
};

/// A complete lead (it passes the evaluator) interested in `solar` with automated delivery.
fn auto_lead(n: usize) -> Value {
    complete_lead(
        &format!("lead-{n}"),
        &format!("ann{n}@example.com"),
        &format!("+49 30 {:07}", 1_000_000 + n),
    )
}

/// Ingests [`auto_lead`] `n` through source `landing` of channel `web`; returns the lead id.
fn ingest(server: &TestServer, n: usize) -> String {
    let reply = server.post_json(
        "/api/webhooks/channels/web/sources/landing/leads",
        &auto_lead(n),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json["item"]["leadId"].as_str().unwrap().to_string()
}

/// The stored decision of the lead's first request (`lead show`).
fn decision(db: &Path, lead_id: &str) -> Value {
    lr(db, format!("lead show {lead_id}")).json()["requests"][0]["decision"].clone()
}

/// The buyer the lead's first request went to, if any.
fn sold_to(db: &Path, lead_id: &str) -> Option<String> {
    decision(db, lead_id)["deliveries"][0]["buyerAccountId"]
        .as_str()
        .map(str::to_string)
}

/// Each candidate's reason, by buyer.
fn reasons(decision: &Value) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = decision["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["buyerAccountId"].as_str().unwrap().to_string(),
                c["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    found.sort();
    found
}

fn health(db: &Path, buyer: &str) -> Value {
    lr(db, format!("buyer health {buyer}")).json()
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
fn two_hanging_buyers_hold_only_their_own_share_and_a_healthy_buyer_gets_its_event() {
    let mut options = fast_options();
    // The hanging calls must outlast the test.
    options.delivery.request_timeout = Duration::from_secs(60);
    options.delivery.concurrency = 8;
    options.delivery.per_buyer = 3;
    let server = TestServer::start_with(TempDb::new(), options);
    let receiver = Receiver::start();
    let db = &server.db.path;
    setup(db);
    for hanging in ["/hang1", "/hang2"] {
        receiver.answer(hanging, Answer::ok().delay(Duration::from_secs(120)));
    }
    buyer(db, "hang1", &receiver.url("/hang1"), Some("25"), []);
    buyer(db, "hang2", &receiver.url("/hang2"), Some("25"), []);
    buyer(db, "healthy", &receiver.url("/healthy"), Some("25"), []);
    let deliver_new = |n: usize, buyer: &str| {
        let (_, request) = lead_request(&server, &simple_lead(n));
        deliver(db, &request, buyer, None)["eventId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Ten events each for the hanging buyers: more than the whole in-flight limit.
    for n in 0..10 {
        deliver_new(n, "hang1");
        deliver_new(100 + n, "hang2");
    }
    receiver.wait_for_on("/hang1", 3, WAIT);
    receiver.wait_for_on("/hang2", 3, WAIT);
    let healthy = deliver_new(200, "healthy");

    let arrived = receiver.wait_for_on("/healthy", 1, WAIT);
    assert_eq!(arrived[0].header("webhook-id"), Some(healthy.as_str()));
    wait_for_status(db, &healthy, "delivered");
    assert_eq!(
        (
            receiver.requests_to("/hang1").len(),
            receiver.requests_to("/hang2").len()
        ),
        (3, 3),
        "each hanging buyer holds its per-buyer share and no more"
    );
    let figures = health(db, "hang1");
    wait_until(WAIT, "the in-flight figures reported", || {
        health(db, "hang1")["inFlight"] == 3
    });
    assert_eq!(figures["state"], "healthy", "hanging, not failed yet");
    let metrics = server.get("/metrics").text;
    assert!(
        metrics
            .lines()
            .any(|l| l == "leadrelay_buyer_deliveries_in_flight{buyer=\"hang2\"} 3"),
        "{metrics}"
    );
    drop(receiver);
    drop(server);
}

/// A server with auto-delivery on channel `web` (source `landing`), a breaker that trips
/// after 3 failures and probes every 300 ms, and a long retry schedule (an event of an
/// unhealthy buyer waits for the probe, not for its own retries).
fn auto_server() -> TestServer {
    let mut options = fast_options();
    options.delivery.retry_schedule =
        leadrelay::outbox::RetrySchedule::parse("1h").expect("a valid schedule");
    options.delivery.breaker = leadrelay::outbox::BreakerConfig {
        failures: 3,
        first_probe_ms: 300,
        max_probe_ms: 300,
        ..Default::default()
    };
    options.delivery.report_interval = Duration::from_millis(100);
    let server = TestServer::start_with(TempDb::new(), options);
    basic_setup(&server);
    source(&server, "web", "landing", "--no-secret");
    server
}

#[test]
fn a_buyer_failing_every_attempt_goes_unhealthy_and_fresh_leads_go_to_another() {
    let server = auto_server();
    let receiver = Receiver::start();
    let db = server.db.path.clone();
    receiver.answer("/down", Answer::status(503).body("maintenance"));
    // `down` pays more, so it gets every lead while it is healthy.
    buyer(&db, "down", &receiver.url("/down"), Some("30"), []);
    buyer(&db, "backup", &receiver.url("/backup"), Some("20"), []);

    for n in 0..3 {
        let lead = ingest(&server, n);
        assert_eq!(sold_to(&db, &lead).as_deref(), Some("down"));
    }
    wait_until(WAIT, "down to be unhealthy", || {
        health(&db, "down")["state"] == "unhealthy"
    });
    let shown = health(&db, "down");
    // Three tripped it; failed probes (every 300 ms) add to them.
    assert!(
        shown["consecutiveFailures"].as_i64().unwrap() >= 3,
        "{shown}"
    );
    assert_eq!(shown["lastError"], "HTTP 503");
    assert_eq!(shown["lastSuccessAt"], Value::Null);
    let every = lr(&db, "buyer health").json();
    let states: Vec<(&str, &str)> = every
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["buyerId"].as_str().unwrap(), h["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("backup", "healthy"), ("down", "unhealthy")]);

    let fresh = ingest(&server, 10);
    assert_eq!(sold_to(&db, &fresh).as_deref(), Some("backup"));
    assert_eq!(
        reasons(&decision(&db, &fresh)),
        [
            ("backup".to_string(), "selected".to_string()),
            ("down".to_string(), "buyer_unhealthy".to_string())
        ]
    );
    receiver.wait_for_on("/backup", 1, WAIT);
    let metrics = server.get("/metrics").text;
    for line in [
        "leadrelay_buyer_endpoint_unhealthy{buyer=\"down\"} 1",
        "leadrelay_buyer_endpoint_unhealthy{buyer=\"backup\"} 0",
        "leadrelay_buyer_delivery_attempts_total{buyer=\"backup\",outcome=\"delivered\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    assert!(
        metrics
            .lines()
            .any(|l| l
                .starts_with("leadrelay_buyer_delivery_duration_seconds_count{buyer=\"down\"}")),
        "{metrics}"
    );

    // The endpoint comes back: the next probe succeeds and the waiting events go out.
    receiver.answer("/down", Answer::ok());
    wait_until(WAIT, "down to recover", || {
        health(&db, "down")["state"] == "healthy"
    });
    wait_until(WAIT, "down's waiting events delivered", || {
        lr(&db, "outbox list --status pending")
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    });
    let recovered = ingest(&server, 20);
    assert_eq!(sold_to(&db, &recovered).as_deref(), Some("down"));
    let shown = health(&db, "down");
    assert!(shown["lastSuccessAt"].is_string(), "{shown}");
    assert_eq!(shown["consecutiveFailures"], 0);
    assert!(
        shown["latencyMs"]["p50"].is_i64() || shown["latencyMs"]["p50"].is_u64(),
        "{shown}"
    );
}

#[test]
fn an_unhealthy_buyer_stays_unhealthy_across_a_restart_and_its_events_wait() {
    let server = auto_server();
    let receiver = Receiver::start();
    let db = server.db.path.clone();
    receiver.answer("/down", Answer::status(500));
    buyer(&db, "down", &receiver.url("/down"), Some("30"), []);
    for n in 0..3 {
        ingest(&server, n);
    }
    wait_until(WAIT, "down to be unhealthy", || {
        health(&db, "down")["state"] == "unhealthy"
    });
    assert!(health(&db, "down")["inFlight"].is_number(), "a server runs");
    let stopped = server.stop();
    let shown = health(&stopped.path, "down");
    assert_eq!(shown["state"], "unhealthy");
    assert_eq!(shown["inFlight"], Value::Null, "no server runs: {shown}");
    // Events of an unhealthy buyer wait rather than burn their retries.
    let pending = lr(&stopped.path, "outbox list --status pending").json();
    assert_eq!(pending.as_array().unwrap().len(), 3, "{pending}");

    let mut options = fast_options();
    options.delivery.breaker.first_probe_ms = 60_000;
    let again = TestServer::start_with(stopped, options);
    let fresh = ingest(&again, 10);
    assert_eq!(sold_to(&again.db.path, &fresh), None);
    assert_eq!(
        reasons(&decision(&again.db.path, &fresh)),
        [("down".to_string(), "buyer_unhealthy".to_string())]
    );
    drop(receiver);
}

#[test]
fn redirects_a_410_and_a_certificate_that_does_not_verify_are_attempted_once() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    let tls = TlsReceiver::start();
    let db = &server.db.path;
    setup(db);
    receiver.answer(
        "/moved",
        Answer::status(302).header("Location", &receiver.url("/elsewhere")),
    );
    receiver.answer(
        "/temporary",
        Answer::status(307).header("Location", &receiver.url("/elsewhere")),
    );
    receiver.answer("/gone", Answer::status(410).body("this endpoint is gone"));
    buyer(db, "moved", &receiver.url("/moved"), Some("25"), []);
    buyer(db, "temporary", &receiver.url("/temporary"), Some("25"), []);
    buyer(db, "gone", &receiver.url("/gone"), Some("25"), []);
    buyer(db, "selfsigned", &tls.url("/hook"), Some("25"), []);
    let mut events = Vec::new();
    for (n, id) in ["moved", "temporary", "gone", "selfsigned"]
        .iter()
        .enumerate()
    {
        let (_, request) = lead_request(&server, &simple_lead(n));
        let delivered = deliver(db, &request, id, None);
        events.push((*id, delivered["eventId"].as_str().unwrap().to_string()));
    }
    for (buyer, id) in &events {
        let shown = wait_for_status(db, id, "failed");
        assert_eq!(shown["attempts"], 1, "{buyer}: one attempt only: {shown}");
        assert_eq!(shown["attemptLog"][0]["outcome"], "failed", "{buyer}");
    }
    let error = |buyer: &str| {
        let id = &events.iter().find(|(b, _)| *b == buyer).unwrap().1;
        event(db, id)["lastError"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(error("moved"), "HTTP 302");
    assert_eq!(error("gone"), "HTTP 410");
    assert!(
        error("selfsigned").to_lowercase().contains("certificate"),
        "{}",
        error("selfsigned")
    );
    assert_eq!(tls.connections(), 1, "the TLS buyer was tried once");
    assert_eq!(receiver.requests_to("/moved").len(), 1);
    assert_eq!(receiver.requests_to("/temporary").len(), 1);
    assert_eq!(receiver.requests_to("/gone").len(), 1);
    assert!(
        receiver.requests_to("/elsewhere").is_empty(),
        "never followed"
    );
}

#[test]
fn a_voided_sale_is_refunded_and_rerouting_sells_the_lead_to_another_buyer() {
    let server = auto_server();
    let receiver = Receiver::start();
    let db = server.db.path.clone();
    // `first` pays more and is prepaid; its endpoint hangs, so the event stays pending.
    receiver.answer("/first", Answer::ok().delay(Duration::from_secs(30)));
    buyer(
        &db,
        "first",
        &receiver.url("/first"),
        Some("30"),
        "--plan prepaid",
    );
    lr(&db, "buyer fund first --amount 100").json();
    buyer(&db, "second", &receiver.url("/second"), Some("20"), []);
    let lead = ingest(&server, 1);
    let sold = decision(&db, &lead);
    assert_eq!(sold["deliveries"][0]["buyerAccountId"], "first");
    let transaction = sold["deliveries"][0]["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    receiver.wait_for_on("/first", 1, WAIT);

    let voided = lr(
        &db,
        format!("transaction void {transaction} --reason 'endpoint down since noon'"),
    )
    .json();
    assert_eq!(voided["item"]["status"], "cancelled", "{voided}");
    assert_eq!(voided["refunded"], true);
    assert_eq!(voided["eventCancelled"], true);
    assert_eq!(voided["requestOpen"], true);
    let shown = lr(&db, format!("transaction show {transaction}")).json();
    let last = shown["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&last["to"], &last["actor"], &last["reason"]),
        (
            &json!("cancelled"),
            &json!("operator"),
            &json!("endpoint down since noon")
        )
    );
    assert_eq!(shown["events"][0]["status"], "failed");
    let refund = shown["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["kind"] == "refund")
        .cloned()
        .unwrap_or_else(|| panic!("a refund row: {shown}"));
    assert_eq!(refund["amount"], 30.0);
    let balance = lr(&db, "buyer list").json();
    let first = balance
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "first")
        .unwrap();
    assert_eq!(first["balance"], 100.0, "{first}");
    assert_eq!(
        lr(&db, format!("lead show {lead}")).json()["status"],
        "active",
        "a void opens no supplier clawback"
    );
    lr(
        &db,
        format!("transaction void {transaction} --reason again"),
    )
    .fails(1)
    .stderr_contains("cancelled already");

    let rerouted = lr(&db, format!("lead reroute {lead}")).json();
    assert_eq!(rerouted["delivered"], 1, "{rerouted}");
    let request = &rerouted["requests"][0];
    assert_eq!(request["deliveries"][0]["buyerAccountId"], "second");
    assert_eq!(
        reasons(request),
        [
            ("first".to_string(), "already_delivered".to_string()),
            ("second".to_string(), "selected".to_string())
        ]
    );
    // The server's poll finds the event the CLI wrote and the new buyer gets it.
    let arrived = receiver.wait_for_on("/second", 1, WAIT);
    assert_eq!(arrived[0].json()["leadId"], lead.as_str());
    assert_eq!(sold_to(&db, &lead).as_deref(), Some("second"));
    lr(&db, format!("lead reroute {lead}"))
        .fails(1)
        .stderr_contains("no open request");
    lr(&db, "lead reroute lead_missing")
        .fails(1)
        .stderr_contains("unknown lead");
    drop(receiver);
}

#[test]
fn outbox_retry_by_buyer_requeues_its_failed_events_in_bulk() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    let db = &server.db.path;
    setup(db);
    receiver.answer("/picky", Answer::status(400).body("schema changed"));
    buyer(db, "picky", &receiver.url("/picky"), Some("25"), []);
    buyer(db, "fine", &receiver.url("/fine"), Some("25"), []);
    let mut events = Vec::new();
    for n in 0..3 {
        let (_, request) = lead_request(&server, &simple_lead(n));
        events.push(
            deliver(db, &request, "picky", None)["eventId"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for id in &events {
        wait_for_status(db, id, "failed");
    }
    // The buyer fixed its side.
    receiver.answer("/picky", Answer::ok());
    let retried = lr(db, "outbox retry --buyer picky --status failed").json();
    assert_eq!(retried, json!({"buyerAccountId": "picky", "retried": 3}));
    for id in &events {
        let shown = wait_for_status(db, id, "delivered");
        assert_eq!(shown["attempts"], 2);
    }
    assert_eq!(
        lr(db, "outbox retry --buyer picky").json()["retried"],
        0,
        "nothing left to retry"
    );
    lr(db, "outbox retry --buyer nobody")
        .fails(1)
        .stderr_contains("unknown buyer 'nobody'");
    lr(db, "outbox retry").fails(2);
    lr(db, "outbox retry evt_x --buyer picky").fails(2);
}

#[test]
fn a_retry_never_sends_again_the_event_of_a_voided_sale() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    let db = &server.db.path;
    setup(db);
    receiver.answer("/picky", Answer::status(400).body("schema changed"));
    buyer(db, "picky", &receiver.url("/picky"), Some("25"), []);
    let mut sold = Vec::new();
    for n in 0..3 {
        let (_, request) = lead_request(&server, &simple_lead(n));
        let delivered = deliver(db, &request, "picky", None);
        let id = |key: &str| delivered[key].as_str().unwrap().to_string();
        sold.push((id("transactionId"), id("eventId")));
    }
    for (_, event_id) in &sold {
        wait_for_status(db, event_id, "failed");
    }
    // The operator takes the first sale back; then the buyer fixes its side.
    let (voided_txn, voided_event) = sold[0].clone();
    let voided = lr(
        db,
        format!("transaction void {voided_txn} --reason 'sold by mistake'"),
    )
    .json();
    assert_eq!(voided["item"]["status"], "cancelled", "{voided}");
    receiver.answer("/picky", Answer::ok());

    // Neither by id nor in bulk is the voided sale's event made due again; the live ones are.
    lr(db, format!("outbox retry {voided_event}"))
        .fails(1)
        .stderr_contains("which is cancelled");
    let retried = lr(db, "outbox retry --buyer picky").json();
    assert_eq!(retried, json!({"buyerAccountId": "picky", "retried": 2}));
    // Attempts only grow: one attempt and failed means it was never tried again.
    let shown = event(db, &voided_event);
    assert_eq!(
        (&shown["status"], &shown["attempts"]),
        (&json!("failed"), &json!(1)),
        "{shown}"
    );
    for (_, event_id) in &sold[1..] {
        wait_for_status(db, event_id, "delivered");
    }
    let shown = lr(db, format!("transaction show {voided_txn}")).json();
    assert_eq!(shown["status"], "cancelled", "{shown}");
    assert_eq!(shown["deliveryStatus"], "failed", "{shown}");
    assert_eq!(
        lr(db, "outbox retry --buyer picky --status failed").json()["retried"],
        0
    );
    // The buyer got the voided sale's lead once: the attempt that failed before the void.
    let sent = receiver
        .requests_to("/picky")
        .iter()
        .filter(|r| r.header("webhook-id") == Some(voided_event.as_str()))
        .count();
    assert_eq!(sent, 1);
}
