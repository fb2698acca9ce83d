//! `GET /metrics`: the Prometheus text of the running server, read as a scraper would.

use std::collections::BTreeMap;

use crate::util::{
    Reply, TempDb, TestServer, WAIT, basic_setup, buyer, deliver, fast_options, lead_request, lr,
    setup, simple_lead,
};
use leadrelay::service::ServiceOptions;

/// One scrape: every sample line as `name{labels}` → value, plus the raw text.
pub struct Scrape {
    pub text: String,
    pub samples: BTreeMap<String, f64>,
}

impl Scrape {
    /// The value of the sample written exactly as `series` (`name` or `name{a="b"}`);
    /// panics when the series is absent.
    pub fn value(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("no series {series} in:\n{}", self.text))
    }
}

pub fn scrape(server: &TestServer) -> Scrape {
    parse(server.get("/metrics"))
}

/// Reads a scrape answer, checking the status, content type and sample syntax.
pub fn parse(reply: Reply) -> Scrape {
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let mut samples = BTreeMap::new();
    for line in reply.text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("malformed sample line: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("malformed value: {line}"));
        assert!(
            samples.insert(series.to_string(), value).is_none(),
            "series written twice: {series}"
        );
    }
    Scrape {
        text: reply.text,
        samples,
    }
}

#[test]
fn requests_are_counted_by_endpoint_and_status_with_latency() {
    let server = TestServer::start();
    for _ in 0..3 {
        assert_eq!(server.get("/api/health").status, 200);
    }
    assert_eq!(server.get("/no/such/path").status, 404);
    assert_eq!(
        server
            .post("/api/webhooks/partner-payout")
            .header("Content-Type", "text/plain")
            .body("x")
            .send()
            .status,
        415
    );

    let first = scrape(&server);
    assert_eq!(
        first.value(r#"leadrelay_http_requests_total{endpoint="health",status="200"}"#),
        3.0
    );
    assert_eq!(
        first.value(r#"leadrelay_http_requests_total{endpoint="unmatched",status="404"}"#),
        1.0
    );
    assert_eq!(
        first.value(r#"leadrelay_http_requests_total{endpoint="partner_payout",status="415"}"#),
        1.0
    );
    assert_eq!(
        first.value(r#"leadrelay_http_request_duration_seconds_count{endpoint="health"}"#),
        3.0
    );
    assert_eq!(
        first.value(
            r#"leadrelay_http_request_duration_seconds_bucket{endpoint="health",le="+Inf"}"#
        ),
        3.0
    );
    assert!(first.value(r#"leadrelay_http_request_duration_seconds_sum{endpoint="health"}"#) > 0.0);
    // The scrape itself is the one request in flight.
    assert_eq!(first.value("leadrelay_http_requests_in_flight"), 1.0);
    assert_eq!(first.value(r#"leadrelay_build_info{version="0.1.0"}"#), 1.0);

    // The first scrape is counted by the second.
    let second = scrape(&server);
    assert_eq!(
        second.value(r#"leadrelay_http_requests_total{endpoint="metrics",status="200"}"#),
        1.0
    );
}

#[test]
fn domain_counters_are_exported_from_the_start() {
    let server = TestServer::start();
    let scrape = scrape(&server);
    for status in ["accepted", "duplicate", "idempotent_replay", "rejected"] {
        let series = format!(r#"leadrelay_ingest_leads_total{{status="{status}"}}"#);
        assert_eq!(scrape.value(&series), 0.0);
    }
    for outcome in ["delivered", "retry", "failed"] {
        let series = format!(r#"leadrelay_deliveries_total{{outcome="{outcome}"}}"#);
        assert_eq!(scrape.value(&series), 0.0);
    }
    assert!(
        scrape
            .text
            .contains("# TYPE leadrelay_ingest_leads_total counter\n")
    );
    assert!(
        scrape
            .text
            .contains("# TYPE leadrelay_http_request_duration_seconds histogram\n")
    );
}

#[test]
fn outbox_depth_and_oldest_age_come_from_the_database() {
    let server = TestServer::start();
    basic_setup(&server);
    lr(
        &server,
        "buyer create --workspace ws --name SunCo --id sunco --webhook-url http://127.0.0.1:9/hook",
    )
    .json();
    let empty = scrape(&server);
    assert_eq!(
        empty.value(r#"leadrelay_outbox_events{status="pending"}"#),
        0.0
    );
    assert_eq!(
        empty.value("leadrelay_outbox_oldest_pending_age_seconds"),
        0.0
    );

    let now = leadrelay::clock::now_ms();
    let conn = rusqlite::Connection::open(&server.db.path).unwrap();
    for (id, status, age_ms) in [
        ("evt_a", "pending", 90_000),
        ("evt_b", "pending", 5_000),
        ("evt_c", "failed", 1_000),
        ("evt_d", "delivered", 500_000),
    ] {
        conn.execute(
            "INSERT INTO outbox_events (id, buyer_id, url, payload, status, next_attempt_at, \
             created_at) VALUES (?1, 'sunco', 'http://127.0.0.1:9/hook', '{}', ?2, ?3, ?4)",
            // Not due for an hour, so the workers leave them alone during the test.
            rusqlite::params![id, status, now + 3_600_000, now - age_ms],
        )
        .unwrap();
    }
    let filled = scrape(&server);
    assert_eq!(
        filled.value(r#"leadrelay_outbox_events{status="pending"}"#),
        2.0
    );
    assert_eq!(
        filled.value(r#"leadrelay_outbox_events{status="failed"}"#),
        1.0
    );
    let age = filled.value("leadrelay_outbox_oldest_pending_age_seconds");
    assert!((90.0..120.0).contains(&age), "oldest pending age {age}");
}

/// A server with the basic setup and a source `s` without a secret on channel `web`.
fn server_with_open_source() -> TestServer {
    let server = TestServer::start();
    basic_setup(&server.db.path);
    lr(
        &server,
        "source create --channel web --name Web --id s --no-secret",
    )
    .json();
    server
}

/// Posts `count` new leads one after another (external ids `{prefix}0`, `{prefix}1`, …),
/// each answered 201: each one job through the writer, committed before its answer.
fn post_leads(server: &TestServer, prefix: &str, count: usize) {
    for n in 0..count {
        let reply = server.post_json(
            "/api/webhooks/channels/web/sources/s/leads",
            &serde_json::json!({"externalId": format!("{prefix}{n}"), "firstName": "A", "lastName": "B"}),
        );
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
}

#[test]
fn writer_group_sizes_are_a_histogram() {
    let server = server_with_open_source();
    post_leads(&server, "g", 4);
    let scrape = scrape(&server);
    let groups = scrape.value("leadrelay_db_write_group_size_count");
    let jobs = scrape.value("leadrelay_db_write_group_size_sum");
    assert!(groups >= 1.0 && jobs >= 4.0, "groups {groups}, jobs {jobs}");
    assert_eq!(
        scrape.value(r#"leadrelay_db_write_group_size_bucket{le="+Inf"}"#),
        groups
    );
    assert!(scrape.value(r#"leadrelay_db_write_group_size_bucket{le="1"}"#) <= groups);
    assert!(scrape.value("leadrelay_db_write_group_size_max") >= 1.0);
}

#[test]
fn every_group_commit_is_timed_into_a_histogram() {
    let server = server_with_open_source();
    let before = scrape(&server);
    let commits_before = before.value("leadrelay_db_commit_seconds_count");
    // Each answered lead was committed: three leads one after another are three commits.
    post_leads(&server, "c", 3);
    let after = scrape(&server);
    let commits = after.value("leadrelay_db_commit_seconds_count");
    assert!(
        commits >= commits_before + 3.0,
        "commits {commits_before} -> {commits}"
    );
    // Each commit synced the WAL to the disk: it took time, and every one is in a bucket.
    assert!(
        after.value("leadrelay_db_commit_seconds_sum")
            > before.value("leadrelay_db_commit_seconds_sum")
    );
    assert_eq!(
        after.value(r#"leadrelay_db_commit_seconds_bucket{le="+Inf"}"#),
        commits
    );
    assert!(
        after.value(r#"leadrelay_db_commit_seconds_bucket{le="0.0001"}"#)
            <= after.value(r#"leadrelay_db_commit_seconds_bucket{le="1"}"#)
    );
}

#[test]
fn metrics_off_answers_404_like_an_unknown_path() {
    let mut options = ServiceOptions::default();
    options.server.metrics_endpoint = false;
    let server = TestServer::start_with(TempDb::new(), options);
    let reply = server.get("/metrics");
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "not_found");
    assert_eq!(server.get("/api/health").status, 200);
}

#[test]
fn ingest_results_are_counted_per_lead() {
    let server = TestServer::start();
    basic_setup(&server);
    lr(
        &server,
        "source create --channel web --name Landing --id landing --no-secret",
    )
    .json();
    let path = "/api/webhooks/channels/web/sources/landing/leads";
    let lead = |id: &str, email: &str| serde_json::json!({"externalId": id, "firstName": "Jane", "lastName": "Doe", "email": email});
    let answers = [
        (lead("a", "a@example.com"), 201),
        (lead("a", "a@example.com"), 200),
        (lead("c", "a@example.com"), 201),
        (serde_json::json!({"firstName": "No last name"}), 400),
        (
            serde_json::json!({"leads": [lead("d", "d@example.com"), {"lastName": "No first"}]}),
            201,
        ),
    ];
    for (body, status) in answers {
        let reply = server.post_json(path, &body);
        assert_eq!(reply.status, status, "{body}: {}", reply.text);
    }
    let scrape = scrape(&server);
    for (status, count) in [
        ("accepted", 2.0),
        ("duplicate", 1.0),
        ("idempotent_replay", 1.0),
        ("rejected", 2.0),
    ] {
        let series = format!(r#"leadrelay_ingest_leads_total{{status="{status}"}}"#);
        assert_eq!(scrape.value(&series), count, "{status}");
    }
    assert_eq!(
        scrape.value(r#"leadrelay_http_requests_total{endpoint="channel_ingest",status="201"}"#),
        3.0
    );
}

#[test]
fn delivery_attempts_are_counted_by_outcome() {
    use crate::util::receiver::{Answer, Receiver};

    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    receiver.answer_sequence("/hook", vec![Answer::status(503), Answer::ok()]);
    let db = &server.db.path;
    setup(db);
    buyer(db, "b", &receiver.url("/hook"), Some("25"), []);
    let (_, request) = lead_request(&server, &simple_lead(1));
    deliver(db, &request, "b", None);
    crate::util::wait_until(WAIT, "the delivery to be counted", || {
        scrape(&server).value(r#"leadrelay_deliveries_total{outcome="delivered"}"#) == 1.0
    });
    let scrape = scrape(&server);
    assert_eq!(
        scrape.value(r#"leadrelay_deliveries_total{outcome="retry"}"#),
        1.0
    );
    assert_eq!(
        scrape.value(r#"leadrelay_deliveries_total{outcome="failed"}"#),
        0.0
    );
    assert_eq!(
        scrape.value(r#"leadrelay_outbox_events{status="pending"}"#),
        0.0
    );
}
