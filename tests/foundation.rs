//! The server skeleton: health, routing errors, body limits, shutdown.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::util::{TestServer, basic_setup, lr, wait_until};
use serde_json::json;

#[test]
fn health_reports_database_and_outbox() {
    let server = TestServer::start();
    let reply = server.get("/api/health");
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json["status"], "ok");
    assert_eq!(reply.json["database"], "ok");
    assert_eq!(reply.json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(reply.json["outbox"]["pending"], 0);
    assert_eq!(reply.json["outbox"]["failed"], 0);
    assert!(reply.json["outbox"]["oldestPendingSeconds"].is_null());
    assert!(reply.json["uptimeSeconds"].is_u64());
}

#[test]
fn health_is_unavailable_when_the_database_cannot_be_written() {
    let server = TestServer::start();
    // Another process holds the write lock longer than the writer's busy timeout.
    let blocker = rusqlite::Connection::open(&server.db.path).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let reply = server.get("/api/health");
    assert_eq!(reply.status, 503, "{}", reply.text);
    assert_eq!(reply.json["status"], "unavailable");
    assert!(reply.json["reason"].as_str().unwrap().contains("written"));
    blocker.execute_batch("ROLLBACK").unwrap();
    // The failed probe is kept for up to a second, so a polling load balancer does not
    // make the service write on every poll.
    wait_until(Duration::from_secs(10), "health to recover", || {
        server.get("/api/health").status == 200
    });
}

#[test]
fn unknown_paths_are_404_and_wrong_methods_405_with_allow() {
    let server = TestServer::start();
    let reply = server.get("/api/nothing");
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json["error"]["code"], "not_found");

    let reply = server.post_json("/api/health", &json!({}));
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), Some("GET, HEAD"));
    assert_eq!(reply.json["error"]["code"], "method_not_allowed");

    let reply = server.get("/api/webhooks/partner-confirmation");
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), Some("POST"));
}

#[test]
fn every_route_of_the_interface_is_recognised() {
    let server = TestServer::start();
    for route in leadrelay::http::router::ROUTES {
        let path = route
            .pattern
            .replace("{channelId}", "c")
            .replace("{tableId}", "t")
            .replace("{sourceId}", "s");
        let reply = server.request(route.method.as_str(), &path).send();
        let message = reply.json["error"]["message"].as_str().unwrap_or("");
        assert!(
            !message.starts_with("no such path"),
            "{} {path} is not routed: {}",
            route.method,
            reply.text
        );
        assert_ne!(reply.status, 405, "{} {path}", route.method);
    }
}

#[test]
fn bodies_over_the_limit_are_413() {
    let server = TestServer::start();
    // A raw socket that declares more than the limit and sends nothing: the server answers
    // from the header alone, so the client is never cut off mid-upload (which would race).
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .write_all(
            b"POST /api/webhooks/partner-confirmation HTTP/1.1\r\nHost: x\r\n\
              Content-Type: application/json\r\nContent-Length: 1048577\r\n\r\n",
        )
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("payload_too_large"), "{text}");
}

#[test]
fn slow_header_senders_are_cut_off() {
    let options = leadrelay::service::ServiceOptions {
        server: leadrelay::http::ServerConfig {
            header_read_timeout: Duration::from_millis(300),
            ..Default::default()
        },
        ..Default::default()
    };
    let server = TestServer::start_with(crate::util::TempDb::new(), options);
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = Vec::new();
    // The server closes the connection (possibly after a 408) instead of waiting forever:
    // the read ends at end-of-file, not at this client's own 10 s timeout.
    stream
        .read_to_end(&mut buf)
        .expect("the server closes the connection before the client gives up");
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "unexpected answer: {text}"
    );
    assert_eq!(server.get("/api/health").status, 200);
}

#[test]
fn shutdown_drains_and_the_data_stays() {
    let server = TestServer::start();
    basic_setup(&server);
    assert_eq!(server.get("/api/health").status, 200);
    let addr = server.addr;
    let db = server.stop();
    // The listener is gone after shutdown.
    wait_until(Duration::from_secs(5), "listener to close", || {
        TcpStream::connect(addr).is_err()
    });
    // The file is complete on its own: the WAL was checkpointed on close.
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let workspaces: i64 = conn
        .query_row("SELECT count(*) FROM workspaces", [], |r| r.get(0))
        .unwrap();
    assert_eq!(workspaces, 1);
}

#[test]
fn early_answers_reach_clients_that_are_still_sending_a_body() {
    // An answer given before the body is read (unknown path, unknown source, wrong
    // secret, a content type or encoding not taken) must not be lost: closing a socket
    // with unread data resets the connection.
    let server = TestServer::start();
    basic_setup(&server);
    lr(
        &server,
        "source create --channel web --name S --id src --secret right-secret-0123456789",
    )
    .json();
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(900 * 1024));
    let json = ("Content-Type", "application/json");
    let right = ("X-Service-Webhook-Secret", "right-secret-0123456789");
    let ingest = "/api/webhooks/channels/web/sources/src/leads";
    for (path, headers, status) in [
        ("/api/nothing", vec![json], 404),
        (
            "/api/webhooks/channels/web/sources/nope/leads",
            vec![json],
            404,
        ),
        (ingest, vec![json], 401),
        (
            ingest,
            vec![
                json,
                ("X-Service-Webhook-Secret", "wrong-secret-0123456789"),
            ],
            401,
        ),
        ("/api/health", vec![json], 405),
        ("/api/webhooks/partner-confirmation", vec![json], 401),
        (
            "/api/webhooks/supplier-cancellation-confirmation",
            vec![json, ("X-Service-Webhook-Secret", "no-such-key-0123456789")],
            401,
        ),
        (ingest, vec![("Content-Type", "text/plain"), right], 415),
        (ingest, vec![json, ("Content-Encoding", "br"), right], 415),
    ] {
        for _ in 0..3 {
            let mut request = server.post(path).body(big.clone());
            for (name, value) in &headers {
                request = request.header(name, value);
            }
            let reply = request.send();
            assert_eq!(reply.status, status, "{path} {headers:?}: {}", reply.text);
        }
    }
}
