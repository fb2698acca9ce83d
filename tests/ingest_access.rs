//! Who may post where (SPEC.md 4.2, 4.3, 5; DESIGN.md section 2): the source secret in
//! either header, 401 without it, 404 for an unknown, disabled or misplaced source, and
//! the order of the checks before a body is read.

use std::io::{Read, Write};

use serde_json::json;

use crate::ingest::{CHANNEL_PATH, jane, lead_count, person, server};
use crate::util::{TestServer, lr};

const SECRET: &str = "s3cret-for-the-tests-0123";
const GUARDED: &str = "/api/webhooks/channels/web/sources/guarded/leads";

/// `server()` plus a channel source `guarded` with the secret [`SECRET`].
fn guarded() -> TestServer {
    let server = server();
    let created = lr(
        &server,
        format!("source create --channel web --name Guarded --id guarded --secret {SECRET}"),
    )
    .json();
    assert_eq!(created["secret"], SECRET);
    server
}

#[test]
fn a_configured_secret_is_required_in_either_header() {
    let server = guarded();
    let reply = server.post_json(GUARDED, &jane());
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "unauthorized");
    for wrong in [
        "wrong",
        "s3cret-for-the-tests-012",
        "s3cret-for-the-tests-01234",
    ] {
        let reply = server.post(GUARDED).secret(wrong).json(&jane()).send();
        assert_eq!(reply.status, 401, "{wrong}: {}", reply.text);
        let reply = server.post(GUARDED).bearer(wrong).json(&jane()).send();
        assert_eq!(reply.status, 401, "{wrong}: {}", reply.text);
    }
    let reply = server
        .post(GUARDED)
        .header("Authorization", &format!("Basic {SECRET}"))
        .json(&jane())
        .send();
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_eq!(lead_count(&server, "guarded"), 0);

    let reply = server.post(GUARDED).secret(SECRET).json(&person(1)).send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    let reply = server.post(GUARDED).bearer(SECRET).json(&person(2)).send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    // One right secret among the two headers is enough.
    let reply = server
        .post(GUARDED)
        .secret("wrong")
        .bearer(SECRET)
        .json(&person(3))
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(lead_count(&server, "guarded"), 3);

    // A source without a secret takes leads without one, and ignores one sent anyway.
    let reply = server
        .post(CHANNEL_PATH)
        .secret("anything")
        .json(&jane())
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
}

#[test]
fn a_rotated_secret_applies_on_the_next_request() {
    let server = guarded();
    let rotated = lr(&server, "source rotate-secret guarded").json();
    let new_secret = rotated["secret"].as_str().unwrap();
    let reply = server.post(GUARDED).secret(SECRET).json(&jane()).send();
    assert_eq!(reply.status, 401, "{}", reply.text);
    let reply = server.post(GUARDED).secret(new_secret).json(&jane()).send();
    assert_eq!(reply.status, 201, "{}", reply.text);
}

#[test]
fn a_change_made_while_the_server_keeps_a_source_applies_to_the_next_request() {
    // The server keeps a source it has admitted and confirms it only when the request
    // writes: every change below comes from the CLI's process while `guarded` is kept.
    let server = guarded();
    let post = |secret: &str, lead: &serde_json::Value| {
        server.post(GUARDED).secret(secret).json(lead).send()
    };
    assert_eq!(post(SECRET, &person(1)).status, 201);

    let rotated = lr(&server, "source rotate-secret guarded").json();
    let new_secret = rotated["secret"].as_str().unwrap().to_string();
    let reply = post(SECRET, &person(2));
    assert_eq!(
        reply.status, 401,
        "the old secret after a rotation: {}",
        reply.text
    );
    let reply = post(&new_secret, &person(3));
    assert_eq!(reply.status, 201, "{}", reply.text);

    lr(
        &server,
        "suppression add --workspace ws --email max4@example.com",
    )
    .json();
    let reply = post(&new_secret, &person(4));
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["error"]["details"][0]["code"], "suppressed");
    assert_eq!(post(&new_secret, &person(5)).status, 201);

    lr(&server, "source disable guarded").json();
    // A body refused before anything is written is answered on the source as it is.
    let reply = server
        .post(GUARDED)
        .secret(&new_secret)
        .json(&json!(42))
        .send();
    assert_eq!(reply.status, 404, "{}", reply.text);
    lr(&server, "source enable guarded").json();
    assert_eq!(post(&new_secret, &person(6)).status, 201);
    lr(&server, "source disable guarded").json();
    let reply = post(&new_secret, &person(7));
    assert_eq!(reply.status, 404, "a disabled source: {}", reply.text);
    assert_eq!(lead_count(&server, "guarded"), 4);
}

#[test]
fn unknown_disabled_and_misplaced_sources_are_404() {
    let server = guarded();
    lr(
        &server,
        "channel create --workspace ws --name Other --id other",
    )
    .json();
    let paths = [
        "/api/webhooks/channels/web/sources/nope/leads",
        "/api/webhooks/channels/nope/sources/landing/leads",
        // A channel's source through another channel's path, or the lead-table path.
        "/api/webhooks/channels/other/sources/landing/leads",
        "/api/webhooks/lead-tables/web/sources/landing/leads",
        "/api/webhooks/lead-tables/list/sources/landing/leads",
        // A table's source through a channel path.
        "/api/webhooks/channels/list/sources/import/leads",
        "/api/webhooks/channels/web/sources/import/leads",
        "/api/webhooks/channels/web/sources/%6Canding/leads",
    ];
    for path in paths {
        let reply = server.post_json(path, &jane());
        assert_eq!(reply.status, 404, "{path}: {}", reply.text);
        assert_eq!(reply.json["error"]["code"], "not_found", "{path}");
    }
    lr(&server, "source disable landing").json();
    let reply = server.post_json(CHANNEL_PATH, &jane());
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_eq!(lead_count(&server, "landing"), 0);
    // The right path still works for the others.
    let reply = server.post_json(crate::ingest::TABLE_PATH, &jane());
    assert_eq!(reply.status, 201, "{}", reply.text);
}

#[test]
fn source_and_secret_are_checked_before_the_body() {
    let server = guarded();
    let garbage = "{not json";
    let send = |path: &str, secret: Option<&str>, body: &str, content_type: &str| {
        let mut request = server
            .post(path)
            .header("Content-Type", content_type)
            .body(body.to_string());
        if let Some(secret) = secret {
            request = request.secret(secret);
        }
        request.send()
    };
    let unknown = "/api/webhooks/channels/web/sources/nope/leads";
    assert_eq!(send(unknown, None, garbage, "application/json").status, 404);
    assert_eq!(send(GUARDED, None, garbage, "application/json").status, 401);
    assert_eq!(
        send(GUARDED, Some("wrong"), garbage, "text/plain").status,
        401
    );
    let reply = send(GUARDED, Some(SECRET), garbage, "text/plain");
    assert_eq!(reply.status, 415, "{}", reply.text);
    let reply = send(GUARDED, Some(SECRET), garbage, "application/json");
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "invalid_json");
    // A declared body over 1 MiB is refused before it is read (so send only the head).
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    write!(
        stream,
        "POST {GUARDED} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         X-Service-Webhook-Secret: {SECRET}\r\nContent-Length: {}\r\n\r\n",
        1024 * 1024 + 1
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // Without a content type the body is taken as JSON.
    let reply = server
        .post(GUARDED)
        .secret(SECRET)
        .body(serde_json::to_vec(&json!({"firstName": "A", "lastName": "B"})).unwrap())
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
}

#[test]
fn ingest_paths_take_only_post() {
    let server = server();
    let reply = server.get(CHANNEL_PATH);
    assert_eq!(reply.status, 405, "{}", reply.text);
    assert_eq!(reply.header("allow"), Some("POST"));
}
