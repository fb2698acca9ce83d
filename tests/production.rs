//! Running in production (DESIGN.md section 16): request ids in answers, logs and the
//! database; log lines that name a refusal's code; back-pressure (a bounded writer queue,
//! a connection limit); HEAD; gzip bodies and other encodings; the CLI's busy timeout;
//! outbound URL rules; the process metrics.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::metrics::scrape;
use crate::util::process::ServeProcess;
use crate::util::receiver::{Answer, Receiver};
use crate::util::{
    TempDb, TestServer, WAIT, basic_setup, buyer, lr, setup, simple_lead, source, wait_until,
};

const INGEST: &str = "/api/webhooks/channels/web/sources/src/leads";

fn request_ids_of(db: &std::path::Path) -> Vec<Option<String>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT request_id FROM lead_requests ORDER BY rowid")
        .unwrap();
    // One stored form: the text, ours and a client's alike (migration 33).
    stmt.query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn request_ids_are_taken_when_sane_generated_otherwise_and_stored() {
    let server = TestServer::start();
    setup(&server.db.path);
    let id_of = |sent: Option<&str>| {
        let mut request = server.request("GET", "/api/health");
        if let Some(sent) = sent {
            request = request.header("X-Request-Id", sent);
        }
        let reply = request.send();
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply
            .header("x-request-id")
            .expect("every answer has one")
            .to_string()
    };
    assert_eq!(id_of(Some("lb-7f3a:trace/42")), "lb-7f3a:trace/42");
    for insane in ["has spaces", "quote\"d", &"x".repeat(129)] {
        let replaced = id_of(Some(insane));
        assert!(replaced.starts_with("req_"), "{insane:?} → {replaced}");
    }
    let (a, b) = (id_of(None), id_of(None));
    assert!(
        a.starts_with("req_") && b.starts_with("req_") && a != b,
        "{a} {b}"
    );
    // Errors and unknown paths carry one too.
    let reply = server
        .request("GET", "/nothing")
        .header("X-Request-Id", "lost-1")
        .send();
    assert_eq!(reply.status, 404);
    assert_eq!(reply.header("x-request-id"), Some("lost-1"));

    // The id is kept on each lead request the call stores.
    let reply = server
        .request("POST", INGEST)
        .header("X-Request-Id", "partner-batch-9")
        .json(&json!({"leads": [simple_lead(1), simple_lead(2)]}))
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    let reply = server.post_json(INGEST, &simple_lead(3));
    let generated = reply.header("x-request-id").unwrap().to_string();
    let conn = rusqlite::Connection::open(&server.db.path).unwrap();
    let stored: Vec<String> = conn
        .prepare("SELECT typeof(request_id) || ':' || length(request_id) FROM lead_requests ORDER BY rowid")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(stored, ["text:15", "text:15", "text:30"]);
    assert_eq!(
        request_ids_of(&server.db.path),
        vec![
            Some("partner-batch-9".to_string()),
            Some("partner-batch-9".to_string()),
            Some(generated),
        ]
    );
}

/// The lines of `log` that name `request_id`.
fn lines_of<'a>(log: &'a str, request_id: &str) -> Vec<&'a str> {
    let tag = format!("request_id={request_id}");
    log.lines()
        .filter(|line| line.split_whitespace().any(|word| word == tag))
        .collect()
}

#[test]
fn log_lines_name_the_request_and_the_code_of_a_refusal() {
    let db = TempDb::new();
    let receiver = Receiver::start();
    // The buyer's system is down: every attempt is retried, and the outbox says so.
    receiver.answer("/b", Answer::status(500));
    basic_setup(&db.path);
    source(
        &db.path,
        "web",
        "src",
        "--secret source-secret-0123456789 --result-detail full",
    );
    buyer(
        &db.path,
        "b",
        &receiver.url("/b"),
        Some("20"),
        "--secret buyer-secret-0123456789",
    );
    let server = ServeProcess::start_with(
        lr(
            &db.path,
            "serve --listen 127.0.0.1:0 --retry-schedule 200ms",
        )
        .env("RUST_LOG", "info,leadrelay::db=debug"),
    );
    let lead = json!({"firstName": "Ann", "lastName": "Lee", "email": "ann@example.com",
                      "phone": "+49 30 1234567", "street": "Hauptstr.", "houseNumber": "1",
                      "postalCode": "10115", "city": "Berlin", "country": "DE",
                      "consentStatus": "granted", "productSlug": "solar",
                      "triggerAutoDelivery": true});
    let reply = server
        .post(INGEST)
        .json(&lead)
        .secret("source-secret-0123456789")
        .header("X-Request-Id", "trace-ingest-1")
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(
        reply.json["item"]["autoDelivery"]["delivered"], 1,
        "{}",
        reply.text
    );
    let transaction =
        reply.json["item"]["autoDelivery"]["requests"][0]["deliveries"][0]["transactionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a transaction in {}", reply.text))
            .to_string();
    let refused = server
        .post(INGEST)
        .json(&lead)
        .secret("wrong-secret-0123456789")
        .header("X-Request-Id", "trace-refused-2")
        .send();
    assert_eq!(refused.status, 401);
    let invalid = server
        .post(INGEST)
        .json(&json!({"firstName": ""}))
        .secret("source-secret-0123456789")
        .header("X-Request-Id", "trace-invalid-3")
        .send();
    assert_eq!(invalid.status, 400);
    // A disallowed move is refused inside its writer job, which the writer logs.
    let payout = server
        .post("/api/webhooks/partner-payout")
        .json(&json!({"transactionId": transaction}))
        .secret("buyer-secret-0123456789")
        .header("X-Request-Id", "trace-writer-4")
        .send();
    assert_eq!(payout.status, 400, "{}", payout.text);
    // A request that names no id gets one of ours, which its lead request stores as its
    // text, as a client's: the outbox's line names it all the same.
    let mut other = lead.clone();
    other["email"] = json!("bob@example.com");
    other["phone"] = json!("+49 30 7654321");
    let reply = server
        .post(INGEST)
        .json(&other)
        .secret("source-secret-0123456789")
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(
        reply.json["item"]["autoDelivery"]["delivered"], 1,
        "{}",
        reply.text
    );
    let generated = reply.header("x-request-id").unwrap().to_string();
    assert!(generated.starts_with("req_"), "{generated}");
    wait_until(
        WAIT,
        "the outbox to log a failed attempt of both events",
        || {
            let log = server.log();
            ["trace-ingest-1", generated.as_str()].iter().all(|id| {
                lines_of(&log, id)
                    .iter()
                    .any(|line| line.contains("outbox: event") && line.contains("retry"))
            })
        },
    );
    let log = server.stop();
    let named = lines_of(&log, &generated);
    assert!(
        named
            .iter()
            .any(|l| l.contains("outbox: event") && l.contains("HTTP 500")),
        "the outbox's line about the event of a generated id: {named:#?}\n{log}"
    );

    let ingest = lines_of(&log, "trace-ingest-1");
    assert!(
        ingest
            .iter()
            .any(|l| l.contains("POST /api/webhooks/channels/web/sources/src/leads 201 ")),
        "the request's line: {ingest:#?}"
    );
    assert!(
        ingest
            .iter()
            .any(|l| l.contains("outbox: event") && l.contains("HTTP 500")),
        "the outbox's line about the event it caused: {ingest:#?}\n{log}"
    );
    let refused = lines_of(&log, "trace-refused-2");
    assert!(
        refused.iter().any(|l| l.contains(" 401 unauthorized ")),
        "{refused:#?}"
    );
    let invalid = lines_of(&log, "trace-invalid-3");
    assert!(
        invalid
            .iter()
            .any(|l| l.contains(" 400 validation_failed ")),
        "{invalid:#?}"
    );
    let writer = lines_of(&log, "trace-writer-4");
    assert!(
        writer
            .iter()
            .any(|l| l.contains("db::writer") && l.contains("rolled back")),
        "the writer's line: {writer:#?}"
    );
    assert!(
        writer
            .iter()
            .any(|l| l.contains(" 400 transition_not_allowed ")),
        "{writer:#?}"
    );
}

#[test]
fn gzip_bodies_are_decoded_within_the_limit_and_other_encodings_refused() {
    use crate::util::http::{gzip, gzip_bomb};

    let server = TestServer::start();
    setup(&server.db.path);
    let lead = serde_json::to_vec(&simple_lead(1)).unwrap();
    let reply = server
        .request("POST", INGEST)
        .header("Content-Type", "application/json")
        .header("Content-Encoding", "gzip")
        .body(gzip(&lead))
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["item"]["status"], "accepted");
    // The stored raw body is the JSON, not the gzip bytes.
    let shown = lr(
        &server,
        format!(
            "lead show {}",
            reply.json["item"]["leadId"].as_str().unwrap()
        ),
    )
    .json();
    assert_eq!(shown["person"]["lastName"], "Lovelace 1", "{shown}");

    // A bomb: 2 MiB of JSON whitespace in a few kilobytes is refused at the limit.
    let bomb = gzip_bomb(2 * 1024 * 1024);
    assert!(bomb.len() < 64 * 1024);
    let reply = server
        .request("POST", INGEST)
        .header("Content-Encoding", "gzip")
        .body(bomb)
        .send();
    assert_eq!(reply.status, 413, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "payload_too_large");

    let reply = server
        .request("POST", INGEST)
        .header("Content-Encoding", "gzip")
        .body(lead.clone())
        .send();
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "invalid_gzip");

    for encoding in ["br", "deflate", "gzip, gzip", "zstd"] {
        let reply = server
            .request("POST", INGEST)
            .header("Content-Encoding", encoding)
            .body(lead.clone())
            .send();
        assert_eq!(reply.status, 415, "{encoding}: {}", reply.text);
        assert_eq!(reply.json["error"]["code"], "unsupported_content_encoding");
        assert_eq!(reply.header("accept-encoding"), Some("gzip, identity"));
    }
    let reply = server
        .request("POST", "/api/webhooks/partner-payout")
        .header("Content-Encoding", "br")
        .body("{}")
        .send();
    assert_eq!(reply.status, 415, "{}", reply.text);
    assert_eq!(reply.json["code"], "unsupported_content_encoding");
    let reply = server
        .request("POST", INGEST)
        .header("Content-Encoding", "identity")
        .json(&simple_lead(2))
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
}

#[test]
fn the_writer_queue_is_bounded_and_a_full_one_answers_503() {
    let db = TempDb::new();
    let database = leadrelay::db::Db::open_with(
        &db.path,
        leadrelay::db::DbOptions {
            max_queued_writes: 2,
        },
    )
    .unwrap();
    let server = TestServer::start_on(db, database, Default::default());
    setup(&server.db.path);
    // Another process holds the write lock: the writer waits, and jobs queue up behind it.
    let blocker = rusqlite::Connection::open(&server.db.path).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let queued: Vec<_> = (0..2)
        .map(|n| {
            let url = server.url(INGEST);
            std::thread::spawn(move || {
                crate::util::Request::new("POST", &url)
                    .json(&simple_lead(n))
                    .send()
            })
        })
        .collect();
    wait_until(WAIT, "two jobs in the writer's queue", || {
        scrape(&server).value("leadrelay_db_write_queue_depth") == 2.0
    });
    let refused = server.post_json(INGEST, &simple_lead(9));
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert_eq!(refused.json["error"]["code"], "overloaded");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(
        scrape(&server).value("leadrelay_db_writes_refused_total"),
        1.0
    );
    blocker.execute_batch("ROLLBACK").unwrap();
    for handle in queued {
        let reply = handle.join().unwrap();
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    assert_eq!(
        request_ids_of(&server.db.path).len(),
        2,
        "exactly the accepted leads"
    );
    assert_eq!(server.post_json(INGEST, &simple_lead(9)).status, 201);
}

#[test]
fn write_requests_past_the_limit_are_refused_before_their_body_is_read() {
    let mut options = leadrelay::service::ServiceOptions::default();
    options.server.max_write_requests = 1;
    let server = TestServer::start_with(TempDb::new(), options);
    setup(&server.db.path);
    let blocker = rusqlite::Connection::open(&server.db.path).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let in_progress = {
        let url = server.url(INGEST);
        std::thread::spawn(move || {
            crate::util::Request::new("POST", &url)
                .json(&simple_lead(1))
                .send()
        })
    };
    wait_until(WAIT, "one write request in progress", || {
        scrape(&server).value("leadrelay_http_write_requests_in_progress") == 1.0
    });
    // Not even read: a body that is not JSON gets the 503, not a 400.
    for path in [INGEST, "/api/webhooks/partner-payout"] {
        let refused = server.request("POST", path).body("{not json").send();
        assert_eq!(refused.status, 503, "{path}: {}", refused.text);
        assert_eq!(refused.header("retry-after"), Some("1"));
        let code = match path {
            INGEST => &refused.json["error"]["code"],
            _ => &refused.json["code"],
        };
        assert_eq!(code, "overloaded", "{}", refused.text);
    }
    // Reads are not write requests.
    assert_eq!(server.get("/api/openapi.json").status, 200);
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(in_progress.join().unwrap().status, 201);
    assert_eq!(server.post_json(INGEST, &simple_lead(2)).status, 201);
    assert_eq!(
        scrape(&server).value("leadrelay_http_write_requests_max"),
        1.0
    );
}

/// Sends a raw `GET /api/health` on `stream` and returns the whole answer.
fn raw_health(mut stream: TcpStream) -> String {
    stream
        .write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn connections_past_the_limit_are_answered_503_and_closed() {
    let mut options = leadrelay::service::ServiceOptions::default();
    options.server.max_connections = 2;
    let server = TestServer::start_with(TempDb::new(), options);
    let open: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    // The two idle connections hold both places once accepted.
    let mut refused = String::new();
    wait_until(WAIT, "a connection to be refused", || {
        refused = raw_health(TcpStream::connect(server.addr).unwrap());
        refused.starts_with("HTTP/1.1 503")
    });
    let lower = refused.to_ascii_lowercase();
    assert!(lower.contains("retry-after: 1\r\n"), "{refused}");
    assert!(lower.contains("x-request-id: req_"), "{refused}");
    let body: Value = serde_json::from_str(refused.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "overloaded");
    drop(open);
    wait_until(WAIT, "a place to free up", || {
        raw_health(TcpStream::connect(server.addr).unwrap()).starts_with("HTTP/1.1 200")
    });
    let metrics = scrape(&server);
    assert!(metrics.value("leadrelay_http_connections_refused_total") >= 1.0);
    assert_eq!(metrics.value("leadrelay_http_connections_max"), 2.0);
}

#[test]
fn a_cli_write_waits_for_the_lock_and_then_says_the_database_is_busy() {
    let db = TempDb::new();
    basic_setup(&db.path);
    let blocker = rusqlite::Connection::open(&db.path).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = std::time::Instant::now();
    let output = lr(
        &db,
        "--busy-timeout 1s workspace create --name Other --id other",
    )
    .output();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("database is busy: another process held the write lock for 1s; retry"),
        "{stderr}"
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
    blocker.execute_batch("ROLLBACK").unwrap();
    // Within the timeout, the write goes through once the lock is released.
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let waiting = {
        let path = db.path.clone();
        std::thread::spawn(move || {
            lr(
                &path,
                "--busy-timeout 30s workspace create --name Other --id other",
            )
            .output()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    blocker.execute_batch("ROLLBACK").unwrap();
    let output = waiting.join().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let help = lr(&db, "--help").output();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--busy-timeout"), "{help}");
    assert!(help.contains("[default: 30s]"), "{help}");
}

#[test]
fn webhook_urls_with_credentials_or_link_local_hosts_are_refused_with_the_reason() {
    let db = TempDb::new();
    basic_setup(&db.path);
    let create = |url: &str| {
        lr(
            &db,
            format!("buyer create --workspace ws --name B --webhook-url {url}"),
        )
        .output()
    };
    for (url, why) in [
        (
            "http://user:hunter2@buyer.example/hook",
            "printed by `show` and sent in clear",
        ),
        (
            "https://hunter2@buyer.example/hook",
            "printed by `show` and sent in clear",
        ),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[fe80::1]:8080/hook", "cloud metadata"),
        ("http://2852039166/", "cloud metadata"),
    ] {
        let output = create(url);
        assert_eq!(output.status.code(), Some(1), "{url}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("invalid webhook URL"), "{url}: {stderr}");
        assert!(stderr.contains(why), "{url}: {stderr}");
        assert!(
            !stderr.contains("hunter2"),
            "the password is not repeated: {stderr}"
        );
    }
    for url in [
        "http://127.0.0.1:9000/hook",
        "http://10.1.2.3/hook",
        "http://[::1]/hook",
        "https://buyer.example/hook",
    ] {
        let output = create(url);
        assert!(
            output.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn a_stored_url_with_credentials_is_not_sent_to() {
    let server = TestServer::start_with(TempDb::new(), crate::util::fast_options());
    let receiver = Receiver::start();
    setup(&server.db.path);
    buyer(&server, "b", &receiver.url("/b"), Some("20"), "");
    // Written before the rule existed, or by hand: the outbox checks again before sending.
    let with_credentials = receiver
        .url("/b")
        .replace("http://", "http://user:hunter2@");
    rusqlite::Connection::open(&server.db.path)
        .unwrap()
        .execute(
            "UPDATE buyers SET webhook_url = ?1 WHERE id = 'b'",
            [&with_credentials],
        )
        .unwrap();
    let (_, request) = crate::util::lead_request(&server, &simple_lead(1));
    crate::util::deliver(&server, &request, "b", None);
    wait_until(WAIT, "the event to fail", || {
        let events = lr(&server, "outbox list").json();
        events[0]["status"] == "failed"
    });
    let events = lr(&server, "outbox list").json();
    assert!(
        events[0]["lastError"]
            .as_str()
            .unwrap()
            .contains("not sent"),
        "{events}"
    );
    assert_eq!(receiver.count(), 0, "nothing was sent");
}

#[test]
fn metrics_include_the_process_figures() {
    let server = TestServer::start();
    let metrics = scrape(&server);
    for (series, kind) in [
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ] {
        assert!(
            metrics.text.contains(&format!("# TYPE {series} {kind}\n")),
            "{series}"
        );
        assert!(metrics.value(series) > 0.0, "{series}");
    }
    assert!(metrics.value("process_open_fds") <= metrics.value("process_max_fds"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = metrics.value("process_start_time_seconds");
    assert!(
        started <= now + 1.0 && started > now - 86_400.0,
        "{started} vs {now}"
    );
    assert_eq!(metrics.value("leadrelay_db_write_queue_capacity"), 1024.0);
}

/// mimalloc advised its arenas as transparent huge pages, and the kernel zeroed a whole
/// 2 MiB page at the first touch of each (6% of the server's samples under batch ingest).
/// The server's memory has none after it has ingested.
#[cfg(target_os = "linux")]
#[test]
fn the_server_holds_no_transparent_huge_pages() {
    let db = TempDb::new();
    setup(&db.path);
    let server = ServeProcess::start(&db.path, &[]);
    let ingest = server.post(INGEST).json(&simple_lead(1)).send();
    assert_eq!(ingest.status, 201, "{}", ingest.text);
    let memory = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", server.pid())).unwrap();
    let line = memory
        .lines()
        .find(|line| line.starts_with("AnonHugePages:"))
        .expect("smaps_rollup names AnonHugePages");
    assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
}

/// A tmpfs of `size` mounted on a new temp directory, unmounted when dropped; `None` (with
/// the reason) when this process may not mount one.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Result<SmallDisk, String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root, so no small file system can be mounted".into());
        }
        let dir = tempfile::tempdir().expect("a temp dir can be made");
        let mounted = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount cannot run: {e}"))?;
        if !mounted.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&mounted.stderr).trim()
            ));
        }
        Ok(SmallDisk { dir })
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Writes a filler file until the disk is full; returns its path.
    fn fill(&self) -> std::path::PathBuf {
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).expect("the filler is created");
        let chunk = vec![0u8; 64 * 1024];
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        // The last partial blocks too.
        for size in [4096usize, 512, 1] {
            while file.write_all(&chunk[..size]).is_ok() {}
        }
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn count_leads(db: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT count(*) FROM leads", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_full_disk_is_503_everywhere_health_says_so_and_the_service_recovers() {
    let disk = match SmallDisk::mount("16m") {
        Ok(disk) => disk,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let contract = crate::util::contract::Contract::new();
    let db = disk.path().join("leadrelay.db");
    let receiver = Receiver::start();
    // The buyer's system is down, so the outbox keeps recording attempts: writes that
    // fail on a full disk too, and once flooded the log.
    receiver.answer("/b", Answer::status(500));
    setup(&db);
    buyer(&db, "b", &receiver.url("/b"), Some("20"), "");
    // The server's output goes to files beside it in the temp dir, not on the full disk.
    let server = ServeProcess::start_with(
        lr(&db, "serve --listen 127.0.0.1:0")
            .args([
                "--retry-schedule",
                "200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms",
            ])
            .env("RUST_LOG", "info"),
    );
    let auto = |n: usize| {
        let mut lead = simple_lead(n);
        lead["phone"] = json!(format!("+49 30 {:07}", 1_000_000 + n));
        lead["street"] = json!("Hauptstr.");
        lead["houseNumber"] = json!("1");
        lead["postalCode"] = json!("10115");
        lead["city"] = json!("Berlin");
        lead["consentStatus"] = json!("granted");
        lead["triggerAutoDelivery"] = json!(true);
        lead
    };
    let mut acknowledged = 0;
    for n in 0..5 {
        let reply = server.post(INGEST).json(&auto(n)).send();
        assert_eq!(reply.status, 201, "{}", reply.text);
        acknowledged += 1;
    }
    receiver.wait_for_on("/b", 1, WAIT);
    assert_eq!(server.request("GET", "/api/health").send().status, 200);

    let filler = disk.fill();
    let before_full = server.log().lines().count();
    let health = server.request("GET", "/api/health").send();
    assert_eq!(health.status, 503, "{}", health.text);
    assert_eq!(health.json["status"], "unavailable");
    assert!(
        health.json["reason"].as_str().unwrap().contains("full"),
        "{}",
        health.text
    );
    assert!(health.header("retry-after").is_some());
    contract.check("get", "/api/health", &health);

    // Every write is refused with 503 and Retry-After while the disk is full, never 500;
    // reads still answer.
    let mut statuses = std::collections::BTreeMap::new();
    let clients: Vec<_> = (0..4)
        .map(|client| {
            let base = server.base.clone();
            std::thread::spawn(move || {
                (0..50)
                    .map(|n| {
                        let lead = json!({"firstName": "Full", "lastName": format!("Disk {client}-{n}"),
                                          "productSlug": "solar"});
                        crate::util::Request::new("POST", &format!("{base}{INGEST}"))
                            .json(&lead)
                            .send()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for client in clients {
        for reply in client.join().unwrap() {
            *statuses.entry(reply.status).or_insert(0) += 1;
            match reply.status {
                201 => acknowledged += 1,
                503 => {
                    assert!(reply.header("retry-after").is_some(), "{}", reply.text);
                    assert_eq!(reply.json["error"]["code"], "disk_full", "{}", reply.text);
                    contract.check(
                        "post",
                        "/api/webhooks/channels/{channelId}/sources/{sourceId}/leads",
                        &reply,
                    );
                }
                other => panic!("{other} on a full disk: {}", reply.text),
            }
        }
    }
    assert!(statuses.get(&503).copied().unwrap_or(0) > 0, "{statuses:?}");
    assert_eq!(
        server.request("GET", "/api/openapi.json").send().status,
        200
    );
    // Let the outbox fail a few rounds (an attempt is due every 200 ms).
    std::thread::sleep(Duration::from_secs(2));
    let log = server.log();
    let during: Vec<&str> = log.lines().skip(before_full).collect();
    let warnings: Vec<&&str> = during
        .iter()
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .collect();
    assert!(
        warnings.len() <= 12,
        "the log is flooded ({} warnings):\n{}",
        warnings.len(),
        warnings
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        during.iter().any(|l| l.contains("disk_full")),
        "the refusals name their code"
    );

    // Space comes back: health and writes recover without a restart.
    std::fs::remove_file(&filler).unwrap();
    wait_until(WAIT, "health to recover", || {
        server.request("GET", "/api/health").send().status == 200
    });
    let reply = server.post(INGEST).json(&simple_lead(99)).send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    acknowledged += 1;
    let log = server.stop();
    let answered_500: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("leadrelay::http::server") && l.contains(" 500 "))
        .collect();
    assert!(answered_500.is_empty(), "answered 500: {answered_500:#?}");
    // Every acknowledged lead is in the file, and nothing else is.
    assert_eq!(count_leads(&db), acknowledged);
}
