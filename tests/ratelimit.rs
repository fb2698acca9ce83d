//! Per-client rate limiting through the real server, and the `serve` flags through the real
//! binary.

use std::time::Duration;

use crate::util::process::ServeProcess;
use crate::util::{Reply, TempDb, TestServer, wait_until};
use leadrelay::ratelimit::RateLimit;
use leadrelay::service::ServiceOptions;
use serde_json::json;

fn limited_server(per_second: u32, burst: u32) -> TestServer {
    let mut options = ServiceOptions::default();
    options.server.rate_limit = RateLimit { per_second, burst };
    TestServer::start_with(TempDb::new(), options)
}

fn assert_rate_limited(reply: &Reply, what: &str) {
    assert_eq!(reply.status, 429, "{what}: {}", reply.text);
    assert_eq!(reply.header("retry-after"), Some("1"), "{what}");
    assert_eq!(
        reply.header("content-type"),
        Some("application/json"),
        "{what}"
    );
    assert_eq!(reply.json["error"]["code"], "rate_limited", "{what}");
    assert!(
        reply.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many requests"),
        "{what}"
    );
}

#[test]
fn every_endpoint_answers_429_once_the_burst_is_spent() {
    // One token per second: the requests below all fall within far less than a second of
    // each other, so once the burst is spent nothing refills in between, except on a
    // machine so slow that a whole second passes between two requests; each endpoint is
    // therefore tried a few times and must give 429 at least once.
    let server = limited_server(1, 3);
    let requests = [
        ("health", "GET", "/api/health", None),
        ("metrics", "GET", "/metrics", None),
        ("openapi", "GET", "/api/openapi.json", None),
        ("unknown path", "GET", "/nothing", None),
        (
            "ingest",
            "POST",
            "/api/webhooks/channels/web/sources/s/leads",
            Some(json!({"firstName": "A", "lastName": "B"})),
        ),
        (
            "lifecycle",
            "POST",
            "/api/webhooks/partner-confirmation",
            Some(json!({"transactionId": "txn_x", "status": "acknowledged"})),
        ),
    ];
    for _ in 0..3 {
        server.get("/api/health");
    }
    for (what, method, path, body) in &requests {
        let send = || match body {
            Some(body) => server.request(method, path).json(body).send(),
            None => server.request(method, path).send(),
        };
        let limited = (0..3)
            .map(|_| send())
            .find(|reply| reply.status == 429)
            .unwrap_or_else(|| panic!("{what} was never rate limited"));
        assert_rate_limited(&limited, what);
    }
}

#[test]
fn a_limited_client_is_served_again_after_retry_after() {
    let server = limited_server(2, 1);
    assert_eq!(server.get("/api/health").status, 200);
    let reply = server.get("/api/health");
    assert_rate_limited(&reply, "second call");
    wait_until(Duration::from_secs(5), "the bucket to refill", || {
        server.get("/api/health").status == 200
    });
    // 429s are counted like any answer. The scrape needs a token too.
    let mut scraped = None;
    wait_until(Duration::from_secs(5), "a token for the scrape", || {
        let reply = server.get("/metrics");
        let served = reply.status == 200;
        scraped = Some(reply);
        served
    });
    let scrape = crate::metrics::parse(scraped.expect("the scrape was answered"));
    assert!(
        scrape.value(r#"leadrelay_http_requests_total{endpoint="health",status="429"}"#) >= 1.0
    );
    assert_eq!(scrape.value("leadrelay_rate_limit_tracked_clients"), 1.0);
}

#[test]
fn zero_turns_rate_limiting_off() {
    // With a burst of 1 and limiting on, the second call would be refused.
    let server = limited_server(0, 1);
    for _ in 0..20 {
        assert_eq!(server.get("/api/health").status, 200);
    }
    assert!(
        !crate::metrics::scrape(&server)
            .text
            .contains("leadrelay_rate_limit_tracked_clients")
    );
}

#[test]
fn the_default_lets_a_busy_partner_through() {
    let server = TestServer::start();
    let limit = RateLimit::default();
    assert!(limit.per_second >= 1000 && limit.burst >= limit.per_second);
    for _ in 0..200 {
        assert_eq!(server.get("/api/health").status, 200);
    }
}

#[cfg(unix)]
#[test]
fn serve_flags_reach_the_server() {
    let db = TempDb::new();
    let served = ServeProcess::start(
        &db.path,
        &["--rate-limit", "1", "--rate-burst", "2", "--metrics", "off"],
    );
    assert_eq!(served.get("/metrics").status, 404);
    assert_eq!(served.get("/api/health").status, 200);
    let third = (0..3)
        .map(|_| served.get("/api/health"))
        .find(|reply| reply.status == 429);
    assert!(third.is_some(), "a burst of 2 allows no third call at once");
    assert!(
        served.terminate().success(),
        "serve stops cleanly on SIGTERM"
    );

    let served = ServeProcess::start(&db.path, &["--rate-limit", "0", "--rate-burst", "1"]);
    for _ in 0..10 {
        assert_eq!(served.get("/api/health").status, 200);
    }
    assert_eq!(served.get("/metrics").status, 200);
    assert!(served.terminate().success());
}
