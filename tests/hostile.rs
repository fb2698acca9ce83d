//! Hostile input: one data-driven table of malformed, oversized and tricky requests against
//! the ingest endpoints, the lifecycle endpoints and health, each sent over a raw
//! `TcpStream` (an HTTP client would refuse to produce most of them) through one [`check`]
//! helper. Every case must get its clear 4xx (or, for the few that hyper refuses before any
//! handler runs, a bare 4xx or a closed connection), never a 5xx or a dropped answer, and
//! the server must answer a health check from another client while the case runs. Inputs
//! that are odd but valid (a name of almost a megabyte, thousands of extra properties, an
//! escaped NUL) must be stored exactly as sent. Then the connection-level attacks: a
//! slowloris client, a half-closed connection, a header flood, pipelined garbage.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::util::{TempDb, TestServer, basic_setup, buyer, lr, source, supplier, table_source};
use serde_json::{Value, json};

const SOURCE_SECRET: &str = "hostile-source-secret-0123456789";
const BUYER_SECRET: &str = "hostile-buyer-secret-0123456789";
const SUPPLIER_KEY: &str = "hostile-supplier-key-0123456789";
const CHANNEL_PATH: &str = "/api/webhooks/channels/web/sources/hostile/leads";
const TABLE_PATH: &str = "/api/webhooks/lead-tables/list/sources/tsrc/leads";
const CONFIRMATION_PATH: &str = "/api/webhooks/partner-confirmation";
const CANCELLATION_PATH: &str = "/api/webhooks/partner-cancellation";
const SUPPLIER_PATH: &str = "/api/webhooks/supplier-cancellation-confirmation";
const BODY_LIMIT: usize = 1024 * 1024;

/// The server's header read timeout in these tests: short, so the slowloris case is quick.
const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(800);

/// A server with a short header read timeout and no rate limit (the table sends hundreds
/// of requests from one address), the basic setup, a channel source with a secret, a lead
/// table source without one, a buyer with a lifecycle secret and a supplier with a key.
pub fn hostile_server() -> TestServer {
    let mut options = leadrelay::service::ServiceOptions::default();
    options.server.header_read_timeout = HEADER_READ_TIMEOUT;
    options.server.rate_limit = leadrelay::ratelimit::RateLimit {
        per_second: 0,
        burst: 0,
    };
    let server = TestServer::start_with(TempDb::new(), options);
    let db = &server.db.path;
    basic_setup(db);
    supplier(db, "sup", SUPPLIER_KEY);
    let secret = format!("--secret {SOURCE_SECRET} --supplier sup");
    source(db, "web", "hostile", secret);
    table_source(db, "list", "tsrc", "--no-secret");
    let secret = format!("--secret {BUYER_SECRET}");
    buyer(db, "b", "http://127.0.0.1:9/unused", None, secret);
    server
}

/// A request written byte for byte. `Host` and `Connection: close` are added, and
/// `Content-Length` unless the case sets its own framing.
#[derive(Clone)]
pub struct RawRequest {
    head: String,
    headers: Vec<u8>,
    body: Vec<u8>,
    framing: Framing,
}

#[derive(Clone, Copy, PartialEq)]
enum Framing {
    /// `Content-Length` of the body.
    Length,
    /// `Transfer-Encoding: chunked`, the body in 64 KiB chunks.
    Chunked,
    /// Whatever the case's own headers say.
    AsGiven,
}

impl RawRequest {
    pub fn new(method: &str, path: &str) -> RawRequest {
        RawRequest {
            head: format!("{method} {path} HTTP/1.1"),
            headers: b"Host: 127.0.0.1\r\nConnection: close\r\n".to_vec(),
            body: Vec::new(),
            framing: Framing::Length,
        }
    }

    /// A request line sent as is (which may be no valid request line at all).
    pub fn line(line: &str) -> RawRequest {
        RawRequest {
            head: line.to_string(),
            ..RawRequest::new("GET", "/")
        }
    }

    /// A header line; `value` may hold any bytes.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> RawRequest {
        self.headers.extend_from_slice(name.as_bytes());
        self.headers.extend_from_slice(b": ");
        self.headers.extend_from_slice(value.as_ref());
        self.headers.extend_from_slice(b"\r\n");
        self
    }

    pub fn json_type(self) -> RawRequest {
        self.header("Content-Type", "application/json")
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> RawRequest {
        self.body = body.into();
        self
    }

    /// A JSON body with its content type.
    pub fn json(self, value: &Value) -> RawRequest {
        self.json_type().body(value.to_string())
    }

    pub fn chunked(mut self) -> RawRequest {
        self.framing = Framing::Chunked;
        self
    }

    pub fn framing_as_given(mut self) -> RawRequest {
        self.framing = Framing::AsGiven;
        self
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.headers.len() + self.body.len() + 128);
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.headers);
        match self.framing {
            Framing::Length => {
                out.extend_from_slice(
                    format!("Content-Length: {}\r\n\r\n", self.body.len()).as_bytes(),
                );
                out.extend_from_slice(&self.body);
            }
            Framing::Chunked => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                for chunk in self.body.chunks(64 * 1024) {
                    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    out.extend_from_slice(chunk);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            }
            Framing::AsGiven => {
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(&self.body);
            }
        }
        out
    }
}

/// What came back on the connection.
#[derive(Debug, Clone)]
pub enum Outcome {
    Answered {
        status: u16,
        /// The status line and headers, lower-cased.
        head: String,
        body: String,
    },
    /// The server closed (or reset) the connection without a status line.
    Closed,
}

impl Outcome {
    pub fn status(&self) -> Option<u16> {
        match self {
            Outcome::Answered { status, .. } => Some(*status),
            Outcome::Closed => None,
        }
    }

    pub fn json(&self) -> Value {
        match self {
            Outcome::Answered { body, .. } => serde_json::from_str(body).unwrap_or(Value::Null),
            Outcome::Closed => Value::Null,
        }
    }
}

/// Sends `request` on a new connection and reads until the server closes it. The request is
/// written on its own thread, so a server that answers before reading everything (413) is
/// heard even when it then resets the connection under the rest of the upload.
pub fn exchange(addr: SocketAddr, request: &[u8]) -> Outcome {
    let stream = TcpStream::connect(addr).expect("the test server accepts connections");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a read timeout can be set");
    let mut writer = stream.try_clone().expect("a TCP stream can be cloned");
    let request = request.to_vec();
    let writing = std::thread::spawn(move || {
        // The server may close early on purpose (413, 431); the answer tells.
        let _ = writer.write_all(&request);
    });
    let received = read_to_close(stream);
    writing.join().expect("the writer thread does not panic");
    parse_response(&received)
}

/// Every byte until EOF, a reset or the read timeout.
fn read_to_close(mut stream: TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    received
}

/// The first response on the connection: its status and body (chunked bodies joined).
pub fn parse_response(received: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(received);
    let Some(status_line) = text.lines().next() else {
        return Outcome::Closed;
    };
    let Some(status) = status_line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
    else {
        return Outcome::Closed;
    };
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Outcome::Answered {
        status,
        head: head.to_ascii_lowercase(),
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

/// What a case must get.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// This status with a JSON error body carrying this `error.code`.
    Error(u16, &'static str),
    /// This status from hyper itself, which answers before any handler and without a body.
    Bare(u16),
    /// This bare status, or the connection closed without an answer.
    BareOrClosed(u16),
    /// Stored: 201 (the caller checks what was stored).
    Created,
}

struct Case {
    name: &'static str,
    request: RawRequest,
    expect: Expect,
}

fn case(name: &'static str, request: RawRequest, expect: Expect) -> Case {
    Case {
        name,
        request,
        expect,
    }
}

/// A valid lead, as a JSON object to build variants from.
fn lead(external_id: &str) -> Value {
    json!({"externalId": external_id, "firstName": "Ann", "lastName": "Lee", "email": "ann@example.com"})
}

fn ingest() -> RawRequest {
    RawRequest::new("POST", CHANNEL_PATH).header("X-Service-Webhook-Secret", SOURCE_SECRET)
}

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// Runs one case while another client checks health, and asserts the case's expectation.
/// Returns the answer for further checks.
fn check(server: &TestServer, case: &Case) -> Outcome {
    let addr = server.addr;
    let bytes = case.request.to_bytes();
    let running = std::thread::spawn(move || exchange(addr, &bytes));
    // Another client is served while the hostile one is in progress.
    let health = exchange(addr, &RawRequest::new("GET", "/api/health").to_bytes());
    assert_eq!(
        health.status(),
        Some(200),
        "{}: health was not served meanwhile: {health:?}",
        case.name
    );
    let outcome = running.join().expect("the client thread does not panic");
    let name = case.name;
    match (case.expect, &outcome) {
        (
            Expect::Error(status, code),
            Outcome::Answered {
                status: got, head, ..
            },
        ) => {
            assert_eq!(*got, status, "{name}: {outcome:?}");
            if status == 405 {
                assert!(
                    head.contains("\r\nallow: "),
                    "{name}: 405 names the allowed methods"
                );
            }
            let body = outcome.json();
            assert_eq!(body["error"]["code"], code, "{name}: {outcome:?}");
            let message = body["error"]["message"].as_str().unwrap_or("");
            assert!(!message.is_empty(), "{name}: an error says what is wrong");
        }
        (Expect::Bare(status), Outcome::Answered { status: got, .. })
        | (Expect::BareOrClosed(status), Outcome::Answered { status: got, .. }) => {
            assert_eq!(*got, status, "{name}: {outcome:?}");
        }
        (Expect::BareOrClosed(_), Outcome::Closed) => {}
        (Expect::Created, Outcome::Answered { status: got, .. }) => {
            assert_eq!(*got, 201, "{name}: {outcome:?}");
        }
        (_, Outcome::Closed) => panic!("{name}: the connection closed without an answer"),
    }
    outcome
}

/// Malformed bodies, wrong framing, content types, methods and ids on the ingest endpoints.
fn ingest_cases() -> Vec<Case> {
    use Expect::*;
    let valid = lead("valid").to_string();
    let mut over_limit = r#"{"firstName":"Ann","lastName":"Lee","pad":""#.to_string();
    over_limit.push_str(&"x".repeat(BODY_LIMIT));
    over_limit.push_str(r#""}"#);
    let mut invalid_utf8 = br#"{"firstName":"An"#.to_vec();
    invalid_utf8.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    invalid_utf8.extend_from_slice(br#"n","lastName":"Lee"}"#);
    let mut overlong_utf8 = br#"{"firstName":""#.to_vec();
    overlong_utf8.extend_from_slice(&[0xc0, 0xaf]);
    overlong_utf8.extend_from_slice(br#"","lastName":"Lee"}"#);
    let raw_nul = "{\"firstName\":\"A\0n\",\"lastName\":\"Lee\"}";
    let many_leads: Vec<Value> = (0..101).map(|n| lead(&format!("many-{n}"))).collect();
    let hundred_thousand_leads = format!(r#"{{"leads":[{}]}}"#, vec!["{}"; 100_000].join(","));
    let deep_in_lead = format!(
        r#"{{"firstName":"Ann","lastName":"Lee","x":{}}}"#,
        nested_arrays(5000)
    );
    let deep_objects = format!("{}{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    vec![
        case(
            "body over the limit, declared",
            ingest().json_type().body(over_limit.clone()),
            Error(413, "payload_too_large"),
        ),
        case(
            "body over the limit, chunked",
            ingest().json_type().body(over_limit).chunked(),
            Error(413, "payload_too_large"),
        ),
        case(
            "declared length far beyond the limit",
            ingest()
                .json_type()
                .header("Content-Length", "99999999999")
                .framing_as_given(),
            Error(413, "payload_too_large"),
        ),
        case(
            "empty body",
            ingest().json_type(),
            Error(400, "invalid_json"),
        ),
        case(
            "truncated JSON",
            ingest().json_type().body(&valid[..valid.len() - 9]),
            Error(400, "invalid_json"),
        ),
        case(
            "invalid JSON",
            ingest().json_type().body("{firstName: Ann}"),
            Error(400, "invalid_json"),
        ),
        case(
            "trailing garbage",
            ingest().json_type().body(format!("{valid} {{")),
            Error(400, "invalid_json"),
        ),
        case(
            "two documents",
            ingest().json_type().body(format!("{valid}{valid}")),
            Error(400, "invalid_json"),
        ),
        case(
            "byte order mark",
            ingest().json_type().body(format!("\u{feff}{valid}")),
            Error(400, "invalid_json"),
        ),
        case(
            "invalid UTF-8 in a string",
            ingest().json_type().body(invalid_utf8),
            Error(400, "invalid_json"),
        ),
        case(
            "overlong UTF-8 encoding",
            ingest().json_type().body(overlong_utf8),
            Error(400, "invalid_json"),
        ),
        case(
            "lone surrogate escape",
            ingest()
                .json_type()
                .body(r#"{"firstName":"\ud800","lastName":"Lee"}"#),
            Error(400, "invalid_json"),
        ),
        case(
            "raw NUL byte in a string",
            ingest().json_type().body(raw_nul),
            Error(400, "invalid_json"),
        ),
        case(
            "deeply nested arrays",
            ingest().json_type().body(nested_arrays(100_000)),
            Error(400, "invalid_json"),
        ),
        case(
            "deeply nested inside a lead",
            ingest().json_type().body(deep_in_lead),
            Error(400, "invalid_json"),
        ),
        case(
            "deeply nested objects",
            ingest().json_type().body(deep_objects),
            Error(400, "invalid_json"),
        ),
        case(
            "number beyond f64",
            ingest()
                .json_type()
                .body(r#"{"firstName":"Ann","lastName":"Lee","n":1e999999}"#),
            Error(400, "invalid_json"),
        ),
        case(
            "huge number as a name",
            ingest().json(&json!({"firstName": 1.0e308, "lastName": 123456789012345678u64})),
            Error(400, "validation_failed"),
        ),
        case(
            "huge number as a flag",
            ingest()
                .json_type()
                .body(r#"{"firstName":"Ann","lastName":"Lee","routingReady":1e308}"#),
            Error(400, "validation_failed"),
        ),
        case(
            "body is an array",
            ingest().json_type().body(nested_arrays(3)),
            Error(400, "validation_failed"),
        ),
        case(
            "body is a string of megabytes",
            ingest()
                .json_type()
                .body(format!("\"{}\"", "s".repeat(BODY_LIMIT - 10))),
            Error(400, "validation_failed"),
        ),
        case(
            "body is null",
            ingest().json_type().body("null"),
            Error(400, "validation_failed"),
        ),
        case(
            "batch of 101",
            ingest().json(&json!({"leads": many_leads})),
            Error(400, "validation_failed"),
        ),
        case(
            "batch of 100,000 empty objects",
            ingest().json_type().body(hundred_thousand_leads),
            Error(400, "validation_failed"),
        ),
        case(
            "empty batch",
            ingest().json(&json!({"leads": []})),
            Error(400, "validation_failed"),
        ),
        case(
            "externalId of 129 characters",
            ingest()
                .json(&json!({"externalId": "e".repeat(129), "firstName": "A", "lastName": "B"})),
            Error(400, "validation_failed"),
        ),
        case(
            "unknown property in capture",
            ingest().json(
                &json!({"firstName": "A", "lastName": "B", "capture": {"evil": {"$where": 1}}}),
            ),
            Error(400, "validation_failed"),
        ),
        case(
            "text/plain",
            ingest()
                .header("Content-Type", "text/plain")
                .body(valid.clone()),
            Error(415, "unsupported_media_type"),
        ),
        case(
            "form encoded",
            ingest()
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body("firstName=Ann"),
            Error(415, "unsupported_media_type"),
        ),
        case(
            "multipart",
            ingest()
                .header("Content-Type", "multipart/form-data; boundary=x")
                .body(valid.clone()),
            Error(415, "unsupported_media_type"),
        ),
        case(
            "json as a parameter of another type",
            ingest()
                .header("Content-Type", "text/html; x=application/json")
                .body(valid.clone()),
            Error(415, "unsupported_media_type"),
        ),
        case(
            "content type of invalid bytes",
            ingest()
                .header("Content-Type", [0xff, 0xfe])
                .body(valid.clone()),
            Error(415, "unsupported_media_type"),
        ),
        case(
            "no secret",
            RawRequest::new("POST", CHANNEL_PATH).json(&lead("x")),
            Error(401, "unauthorized"),
        ),
        case(
            "wrong secret of the right length",
            RawRequest::new("POST", CHANNEL_PATH)
                .header("X-Service-Webhook-Secret", "x".repeat(SOURCE_SECRET.len()))
                .json(&lead("x")),
            Error(401, "unauthorized"),
        ),
        case(
            "secret of 60 KB",
            RawRequest::new("POST", CHANNEL_PATH)
                .header("Authorization", format!("Bearer {}", "s".repeat(60_000)))
                .json(&lead("x")),
            Error(401, "unauthorized"),
        ),
        case(
            "secret of invalid bytes",
            RawRequest::new("POST", CHANNEL_PATH)
                .header("X-Service-Webhook-Secret", [0xff, 0x80, 0x41])
                .json(&lead("x")),
            Error(401, "unauthorized"),
        ),
        case(
            "secret as a prefix of the right one",
            RawRequest::new("POST", CHANNEL_PATH)
                .header("X-Service-Webhook-Secret", &SOURCE_SECRET[..10])
                .json(&lead("x")),
            Error(401, "unauthorized"),
        ),
        case(
            "GET on ingest",
            RawRequest::new("GET", CHANNEL_PATH),
            Error(405, "method_not_allowed"),
        ),
        case(
            "PUT on ingest",
            ingest()
                .json(&lead("x"))
                .clone_with_method("PUT", CHANNEL_PATH),
            Error(405, "method_not_allowed"),
        ),
        case(
            "DELETE on ingest",
            RawRequest::new("DELETE", CHANNEL_PATH),
            Error(405, "method_not_allowed"),
        ),
        case(
            "an invented method",
            RawRequest::new("FROB", CHANNEL_PATH),
            Error(405, "method_not_allowed"),
        ),
        case(
            "POST on health",
            RawRequest::new("POST", "/api/health").json(&lead("x")),
            Error(405, "method_not_allowed"),
        ),
        case(
            "TRACE on health",
            RawRequest::new("TRACE", "/api/health"),
            Error(405, "method_not_allowed"),
        ),
        case(
            "dot-dot segments",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                "/api/webhooks/channels/web/sources/../../channels/web/sources/hostile/leads",
            ),
            Error(404, "not_found"),
        ),
        case(
            "dot-dot as the source id",
            ingest()
                .json(&lead("x"))
                .clone_with_method("POST", "/api/webhooks/channels/web/sources/../leads"),
            Error(404, "not_found"),
        ),
        case(
            "percent-encoded slash in an id",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                "/api/webhooks/channels/web%2Fsources%2Fhostile/sources/hostile/leads",
            ),
            Error(404, "not_found"),
        ),
        case(
            "percent-encoded dot-dot",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                "/api/webhooks/channels/web/sources/%2e%2e%2fhostile/leads",
            ),
            Error(404, "not_found"),
        ),
        case(
            "percent-encoded source id",
            ingest()
                .json(&lead("x"))
                .clone_with_method("POST", "/api/webhooks/channels/web/sources/%68ostile/leads"),
            Error(404, "not_found"),
        ),
        case(
            "double-encoded dot-dot",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                "/api/webhooks/channels/web/sources/%252e%252e/leads",
            ),
            Error(404, "not_found"),
        ),
        case(
            "encoded NUL in an id",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                "/api/webhooks/channels/web/sources/hostile%00/leads",
            ),
            Error(404, "not_found"),
        ),
        case(
            "backslash traversal",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                "/api/webhooks/channels/web/sources/..%5C..%5Chostile/leads",
            ),
            Error(404, "not_found"),
        ),
        case(
            "id of 10,000 characters",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                &format!(
                    "/api/webhooks/channels/web/sources/{}/leads",
                    "a".repeat(10_000)
                ),
            ),
            Error(404, "not_found"),
        ),
        case(
            "SQL in an id",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                "/api/webhooks/channels/web/sources/x'%20OR%20'1'='1/leads",
            ),
            Error(404, "not_found"),
        ),
        case(
            "the source through another container",
            ingest().json(&lead("x")).clone_with_method(
                "POST",
                "/api/webhooks/lead-tables/list/sources/hostile/leads",
            ),
            Error(404, "not_found"),
        ),
        case(
            "a table source through the channel path",
            RawRequest::new("POST", "/api/webhooks/channels/web/sources/tsrc/leads")
                .json(&lead("x")),
            Error(404, "not_found"),
        ),
        case(
            "person wrapper on a lead table",
            RawRequest::new("POST", TABLE_PATH).json(&json!({"person": lead("x")})),
            Error(400, "validation_failed"),
        ),
        case(
            "trailing slash",
            ingest()
                .json(&lead("x"))
                .clone_with_method("POST", &format!("{CHANNEL_PATH}/")),
            Error(404, "not_found"),
        ),
        case(
            "double slash",
            ingest()
                .json(&lead("x"))
                .clone_with_method("POST", "/api/webhooks//channels/web/sources/hostile/leads"),
            Error(404, "not_found"),
        ),
        case(
            "query string is ignored, body still checked",
            ingest()
                .json_type()
                .body("{")
                .clone_with_method("POST", &format!("{CHANNEL_PATH}?debug=1&../../etc/passwd")),
            Error(400, "invalid_json"),
        ),
    ]
}

/// The same attacks on the lifecycle and supplier endpoints.
fn lifecycle_cases() -> Vec<Case> {
    use Expect::*;
    let buyer =
        |path: &str| RawRequest::new("POST", path).header("X-Service-Webhook-Secret", BUYER_SECRET);
    let supplier = || {
        RawRequest::new("POST", SUPPLIER_PATH)
            .header("Authorization", format!("Bearer {SUPPLIER_KEY}"))
    };
    let big = "r".repeat(BODY_LIMIT + 1);
    vec![
        case(
            "confirmation: body over the limit",
            buyer(CONFIRMATION_PATH)
                .json(&json!({"transactionId": "txn_x", "status": "acknowledged", "reason": big})),
            Error(413, "payload_too_large"),
        ),
        case(
            "confirmation: invalid JSON",
            buyer(CONFIRMATION_PATH)
                .json_type()
                .body("{\"transactionId\":"),
            Error(400, "invalid_json"),
        ),
        case(
            "confirmation: wrong content type",
            buyer(CONFIRMATION_PATH)
                .header("Content-Type", "text/xml")
                .body("<a/>"),
            Error(415, "unsupported_media_type"),
        ),
        case(
            "confirmation: no credential",
            RawRequest::new("POST", CONFIRMATION_PATH)
                .json(&json!({"transactionId": "txn_x", "status": "acknowledged"})),
            Error(401, "unauthorized"),
        ),
        case(
            "confirmation: status of the wrong type",
            buyer(CONFIRMATION_PATH)
                .json(&json!({"transactionId": "txn_x", "status": ["acknowledged"]})),
            Error(400, "validation_failed"),
        ),
        case(
            "confirmation: unknown status",
            buyer(CONFIRMATION_PATH).json(&json!({"transactionId": "txn_x", "status": "paid"})),
            Error(400, "validation_failed"),
        ),
        case(
            "confirmation: huge price",
            buyer(CONFIRMATION_PATH)
                .json_type()
                .body(r#"{"transactionId":"txn_x","status":"acknowledged","buyerPrice":1e308}"#),
            Error(400, "validation_failed"),
        ),
        case(
            "confirmation: traversal as the transaction id",
            buyer(CONFIRMATION_PATH)
                .json(&json!({"transactionId": "../../txn_x", "status": "acknowledged"})),
            Error(404, "transaction_not_found"),
        ),
        case(
            "confirmation: SQL as the external id",
            buyer(CONFIRMATION_PATH)
                .json(&json!({"externalId": "x' OR '1'='1", "status": "acknowledged"})),
            Error(404, "transaction_not_found"),
        ),
        case(
            "confirmation: deeply nested",
            buyer(CONFIRMATION_PATH)
                .json_type()
                .body(nested_arrays(50_000)),
            Error(400, "invalid_json"),
        ),
        case(
            "cancellation: NUL in the id",
            buyer(CANCELLATION_PATH).json(&json!({"transactionId": "txn_\u{0}", "reason": "r"})),
            Error(404, "transaction_not_found"),
        ),
        case(
            "cancellation: empty reason",
            buyer(CANCELLATION_PATH).json(&json!({"transactionId": "txn_x", "reason": ""})),
            Error(400, "validation_failed"),
        ),
        case(
            "payout: body is a number",
            buyer("/api/webhooks/partner-payout")
                .json_type()
                .body("1e999"),
            Error(400, "invalid_json"),
        ),
        case(
            "payout-pending: GET",
            RawRequest::new("GET", "/api/webhooks/partner-payout-pending"),
            Error(405, "method_not_allowed"),
        ),
        case(
            "supplier: invalid UTF-8",
            supplier()
                .json_type()
                .body(vec![b'{', b'"', 0xff, b'"', b':', b'1', b'}']),
            Error(400, "invalid_json"),
        ),
        case(
            "supplier: wrong key",
            RawRequest::new("POST", SUPPLIER_PATH)
                .header("X-Service-Webhook-Secret", "k".repeat(SUPPLIER_KEY.len()))
                .json(&json!({"leadId": "lead_x", "status": "acknowledged"})),
            Error(401, "unauthorized"),
        ),
        case(
            "supplier: a lead that is not there",
            supplier().json(&json!({"leadId": "../lead_x", "status": "acknowledged"})),
            Error(400, "lead_not_found"),
        ),
        case(
            "supplier: thousands of properties",
            supplier().json(&Value::Object(
                (0..5000).map(|n| (format!("p{n}"), json!(n))).collect(),
            )),
            Error(400, "validation_failed"),
        ),
    ]
}

/// Broken HTTP itself: hyper refuses it before any handler runs.
fn protocol_cases() -> Vec<Case> {
    use Expect::*;
    let flood = (0..5000).fold(RawRequest::new("GET", "/api/health"), |r, n| {
        r.header(&format!("X-Flood-{n}"), "v")
    });
    vec![
        case("5,000 headers", flood, BareOrClosed(431)),
        case(
            "a 1 MB header",
            RawRequest::new("GET", "/api/health").header("X-Big", "h".repeat(1024 * 1024)),
            BareOrClosed(431),
        ),
        case(
            "a 1 MB path",
            RawRequest::new("GET", &format!("/api/{}", "p".repeat(1024 * 1024))),
            BareOrClosed(431),
        ),
        case("no request line", RawRequest::line(""), BareOrClosed(400)),
        case(
            "garbage request line",
            RawRequest::line("\u{1}\u{2}\u{3} GARBAGE"),
            BareOrClosed(400),
        ),
        case(
            "NUL in the path",
            RawRequest::line("GET /api/health\0 HTTP/1.1"),
            BareOrClosed(400),
        ),
        case(
            "HTTP/2 preface on HTTP/1",
            RawRequest::line("PRI * HTTP/2.0"),
            BareOrClosed(400),
        ),
        case(
            "header without a colon",
            RawRequest::new("GET", "/api/health")
                .framing_as_given()
                .clone_with_raw_header(b"NoColonHere\r\n"),
            Bare(400),
        ),
        case(
            "header value with NUL",
            RawRequest::new("GET", "/api/health").header("X-Nul", b"a\0b"),
            Bare(400),
        ),
        case(
            "invalid content length",
            ingest()
                .json_type()
                .header("Content-Length", "abc")
                .framing_as_given(),
            Bare(400),
        ),
        case(
            "negative content length",
            ingest()
                .json_type()
                .header("Content-Length", "-1")
                .framing_as_given(),
            Bare(400),
        ),
        case(
            "two different content lengths",
            ingest()
                .json_type()
                .header("Content-Length", "2")
                .header("Content-Length", "3")
                .framing_as_given()
                .body("{}"),
            Bare(400),
        ),
        case(
            "content length with chunked encoding",
            ingest()
                .json_type()
                .header("Content-Length", "2")
                .header("Transfer-Encoding", "chunked")
                .framing_as_given()
                .body("{}"),
            Bare(400),
        ),
        case(
            "unknown transfer encoding",
            ingest()
                .json_type()
                .header("Transfer-Encoding", "gzip")
                .framing_as_given()
                .body("{}"),
            Bare(400),
        ),
        case(
            "broken chunk size",
            ingest()
                .json_type()
                .header("Transfer-Encoding", "chunked")
                .framing_as_given()
                .body("zz\r\n{}\r\n0\r\n\r\n"),
            BareOrClosed(400),
        ),
    ]
}

impl RawRequest {
    /// The same headers and body under another method and path.
    fn clone_with_method(&self, method: &str, path: &str) -> RawRequest {
        RawRequest {
            head: format!("{method} {path} HTTP/1.1"),
            ..self.clone()
        }
    }

    /// Adds a header line as raw bytes (which may be no valid header at all).
    fn clone_with_raw_header(&self, line: &[u8]) -> RawRequest {
        let mut copy = self.clone();
        copy.headers.extend_from_slice(line);
        copy
    }
}

fn lead_count(server: &TestServer) -> i64 {
    let conn = rusqlite::Connection::open(&server.db.path).expect("the test database opens");
    conn.query_row("SELECT count(*) FROM leads", [], |row| row.get(0))
        .expect("leads can be counted")
}

#[test]
fn hostile_requests_get_a_clear_4xx_and_store_nothing() {
    let server = hostile_server();
    let cases: Vec<Case> = ingest_cases()
        .into_iter()
        .chain(lifecycle_cases())
        .chain(protocol_cases())
        .collect();
    for case in &cases {
        check(&server, case);
    }
    assert_eq!(lead_count(&server), 0, "no hostile request stored a lead");
    let check = lr(&server, "check").output();
    assert!(check.status.success(), "leadrelay check: {check:?}");
}

#[test]
fn odd_but_valid_leads_are_stored_exactly_as_sent() {
    let server = hostile_server();
    let name = "ü".repeat(450_000); // 900 KB of two-byte characters, just under the limit
    let many: serde_json::Map<String, Value> = (0..5000)
        .map(|n| (format!("extra{n}"), json!(format!("v{n}"))))
        .collect();
    let mut many_lead = lead("many-properties");
    many_lead
        .as_object_mut()
        .expect("a lead is an object")
        .extend(many.clone());
    let nested = serde_json::from_str::<Value>(&nested_arrays(100)).expect("100 levels parse");
    let cases = [
        (
            "huge-name",
            json!({"externalId": "huge-name", "firstName": name, "lastName": "Lee"}),
        ),
        (
            "escaped-nul",
            json!({"externalId": "nul\u{0}id", "firstName": "A\u{0}nn", "lastName": "L\u{0}"}),
        ),
        ("many-properties", many_lead.clone()),
        (
            "nested-extra",
            json!({"externalId": "nested-extra", "firstName": "Ann", "lastName": "Lee", "deep": nested}),
        ),
        (
            "unicode",
            json!({"externalId": "ünï-😀", "firstName": "😀\u{202e}\u{fffd}", "lastName": "\u{2028}Lee"}),
        ),
        (
            "big-integer",
            json!({"externalId": "big-integer", "firstName": "Ann", "lastName": "Lee", "n": u64::MAX}),
        ),
    ];
    for (name, body) in &cases {
        let request = ingest().json(body);
        let answer = check(
            &server,
            &Case {
                name,
                request,
                expect: Expect::Created,
            },
        );
        let lead_id = answer.json()["item"]["leadId"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no leadId in {answer:?}"))
            .to_string();
        let shown = lr(&server, format!("lead show {lead_id}")).json();
        assert_eq!(shown["externalId"], body["externalId"], "{name}");
        assert_eq!(shown["person"]["firstName"], body["firstName"], "{name}");
        assert_eq!(shown["person"]["lastName"], body["lastName"], "{name}");
        // A repeat is a replay of the same lead, found by the same odd external id.
        let again = check(
            &server,
            &Case {
                name,
                request: ingest().json(body),
                expect: Expect::Bare(200),
            },
        );
        assert_eq!(again.json()["item"]["leadId"], lead_id.as_str(), "{name}");
        assert_eq!(
            again.json()["item"]["status"],
            "idempotent_replay",
            "{name}"
        );
    }
    let shown = lr(&server, "lead list --source hostile").json();
    let stored = shown.as_array().map(Vec::len).unwrap_or(0);
    assert_eq!(stored, cases.len(), "{shown}");
    let many_id = lr(&server, "lead list --source hostile").json();
    let many_row = many_id
        .as_array()
        .and_then(|leads| leads.iter().find(|l| l["externalId"] == "many-properties"))
        .expect("the lead with many properties is listed")["id"]
        .as_str()
        .expect("a listed lead has an id")
        .to_string();
    let additional = &lr(&server, format!("lead show {many_row}")).json()["additionalProperties"];
    assert_eq!(
        additional,
        &Value::Object(many),
        "every extra property is kept"
    );
}

#[test]
fn a_slowloris_client_is_cut_off_while_others_are_served() {
    let server = hostile_server();
    let mut slow = TcpStream::connect(server.addr).expect("the server accepts");
    slow.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("a read timeout can be set");
    let request = format!(
        "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: {}\r\n\r\n",
        "s".repeat(300)
    );
    let started = Instant::now();
    let mut sent = 0;
    let mut health_answers = 0;
    let mut buffer = [0u8; 1024];
    let cut_off = loop {
        // One byte every 100 ms: the whole request would take over 30 s.
        if slow.write_all(&request.as_bytes()[sent..sent + 1]).is_err() {
            break true;
        }
        sent += 1;
        match slow.read(&mut buffer) {
            Ok(0) => break true,
            // hyper may say 408 before it closes.
            Ok(n) => {
                let answer = parse_response(&buffer[..n]);
                assert_eq!(answer.status(), Some(408), "{answer:?}");
                break true;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break true,
        }
        if sent % 5 == 0 {
            let health = exchange(
                server.addr,
                &RawRequest::new("GET", "/api/health").to_bytes(),
            );
            assert_eq!(health.status(), Some(200), "others are served: {health:?}");
            health_answers += 1;
        }
        if sent == request.len() {
            break false;
        }
    };
    assert!(
        cut_off,
        "the slow client sent its whole request over {:?} without being cut off",
        started.elapsed()
    );
    assert!(
        sent < request.len(),
        "cut off before it finished ({sent} of {} bytes)",
        request.len()
    );
    assert!(
        health_answers >= 1,
        "health was checked while the slow client hung on"
    );
}

#[test]
fn an_idle_connection_is_closed_after_the_header_read_timeout() {
    let server = hostile_server();
    let idle = TcpStream::connect(server.addr).expect("the server accepts");
    idle.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a read timeout can be set");
    let received = read_to_close(idle);
    let outcome = parse_response(&received);
    assert!(
        matches!(outcome, Outcome::Closed) || outcome.status() == Some(408),
        "{outcome:?}"
    );
}

#[test]
fn a_half_closed_connection_still_gets_its_answer() {
    let server = hostile_server();
    let cases = [
        (RawRequest::new("GET", "/api/health"), 200),
        (ingest().json(&lead("half-closed")), 201),
        (ingest().json(&lead("half-closed")), 200),
        (ingest().json_type().body("{"), 400),
    ];
    for (request, status) in cases {
        let mut stream = TcpStream::connect(server.addr).expect("the server accepts");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a read timeout can be set");
        stream
            .write_all(&request.to_bytes())
            .expect("the request is written");
        stream
            .shutdown(Shutdown::Write)
            .expect("the write side shuts down");
        let outcome = parse_response(&read_to_close(stream));
        assert_eq!(outcome.status(), Some(status), "{outcome:?}");
    }
    assert_eq!(
        lead_count(&server),
        1,
        "the half-closed lead is stored once"
    );
}

#[test]
fn pipelined_requests_on_one_connection_are_answered_in_order() {
    let server = hostile_server();
    let mut first = RawRequest::new("GET", "/api/health").to_bytes();
    // keep-alive for the first two, then a broken one; the server answers what it can.
    first = String::from_utf8(first)
        .expect("ASCII")
        .replace("Connection: close\r\n", "")
        .into_bytes();
    let mut second = ingest().json_type().body("{").to_bytes();
    second = String::from_utf8(second)
        .expect("ASCII")
        .replace("Connection: close\r\n", "")
        .into_bytes();
    let mut bytes = first;
    bytes.extend_from_slice(&second);
    bytes.extend_from_slice(b"GARBAGE\r\n\r\n");
    let received = {
        let stream = TcpStream::connect(server.addr).expect("the server accepts");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a read timeout can be set");
        (&stream).write_all(&bytes).expect("written");
        read_to_close(stream)
    };
    let text = String::from_utf8_lossy(&received);
    let statuses: Vec<&str> = text
        .match_indices("HTTP/1.1 ")
        .map(|(at, _)| &text[at + 9..at + 12])
        .collect();
    assert_eq!(statuses, ["200", "400", "400"], "{text}");
    let health = exchange(
        server.addr,
        &RawRequest::new("GET", "/api/health").to_bytes(),
    );
    assert_eq!(health.status(), Some(200));
}
