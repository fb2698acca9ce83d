//! Operating the service: backup while it writes, the database check, file permissions, and
//! health during shutdown. Everything runs the real binary or the real server.

use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::util::{TempDb, TestServer, basic_setup, bin, lr, mode, wait_until};
use leadrelay::config::ConfigError;
use leadrelay::config::container::{self, ContainerKind, DeliveryMode, NewContainer};
use leadrelay::config::workspace::{self, NewWorkspace};
use leadrelay::db::Db;
use serde_json::Value;

fn count(db: &Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// One write job of the load: a workspace and a channel in it, so a copy that caught half
/// a job would show a workspace without its channel.
fn write_pair(db: &Db, n: u64) -> Result<(), ConfigError> {
    db.write_blocking(move |conn| {
        let ws = format!("load-{n}");
        workspace::create(
            conn,
            &NewWorkspace {
                id: Some(&ws),
                name: "Load",
                timezone: "UTC",
                retention: None,
                suppression_action: None,
            },
        )?;
        container::create(
            conn,
            &NewContainer {
                id: Some(&format!("load-ch-{n}")),
                workspace_id: &ws,
                kind: ContainerKind::Channel,
                name: "Load channel",
                auto_delivery: None,
                delivery_mode: DeliveryMode::Exclusive,
                max_buyers: 3,
                score_threshold: 50,
                ping_ttl_ms: None,
                waterfall: None,
                waterfall_max: None,
            },
        )?;
        Ok(())
    })
}

/// Makes the file a few MiB, so the backup takes several steps.
fn grow(db: &Db) {
    db.write_blocking(|conn| -> Result<(), ConfigError> {
        let padding = "p".repeat(1000);
        for n in 0..6000 {
            workspace::create(
                conn,
                &NewWorkspace {
                    id: Some(&format!("pad-{n}")),
                    name: &format!("{padding}{n}"),
                    timezone: "UTC",
                    retention: None,
                    suppression_action: None,
                },
            )?;
        }
        Ok(())
    })
    .expect("padding is written");
}

#[test]
fn backup_while_the_server_writes_is_a_consistent_copy_that_checks_ok() {
    let server = TestServer::start();
    basic_setup(&server);
    // A second writer on the file, like a CLI command, keeps committing during the backup.
    let load = Db::open(&server.db.path).unwrap();
    grow(&load);
    let committed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (load, committed, stop) = (load.clone(), committed.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                write_pair(&load, n).expect("load write commits");
                n += 1;
                committed.store(n, Ordering::Relaxed);
            }
        })
    };
    wait_until(Duration::from_secs(20), "the load to start", || {
        committed.load(Ordering::Relaxed) >= 20
    });

    let before = committed.load(Ordering::Relaxed) as i64;
    let copy = server.db.dir.path().join("copy.db");
    let report = lr(&server, "backup --out").arg(&copy).json();
    let after = committed.load(Ordering::Relaxed) as i64;
    // The live file checks ok while it is being written.
    let live = lr(&server, "check").json();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    load.close();

    assert_eq!(live["ok"], true, "{live}");
    assert!(
        after > before,
        "the load kept committing during the backup ({before} → {after})"
    );
    assert_eq!(report["out"], copy.to_str().unwrap());
    assert_eq!(report["bytes"], std::fs::metadata(&copy).unwrap().len());
    assert!(report["pages"].as_u64().unwrap() > 1024, "{report}");
    assert_eq!(report["schemaVersion"], leadrelay::db::SCHEMA_VERSION);

    let checked = lr(&copy, "check").json();
    assert_eq!(checked["ok"], true, "{checked}");
    assert_eq!(checked["integrity"], serde_json::json!(["ok"]));
    assert_eq!(checked["foreignKeyViolations"], 0);

    let workspaces = count(
        &copy,
        "SELECT count(*) FROM workspaces WHERE id LIKE 'load-%'",
    );
    let channels = count(
        &copy,
        "SELECT count(*) FROM containers WHERE id LIKE 'load-ch-%'",
    );
    assert_eq!(workspaces, channels, "no write job is half in the copy");
    assert!(
        (before..=after).contains(&workspaces),
        "the copy is a snapshot from during the backup: {before} <= {workspaces} <= {after}"
    );
    assert_eq!(
        count(
            &copy,
            "SELECT count(*) FROM workspaces WHERE id LIKE 'pad-%'"
        ),
        6000
    );
    #[cfg(unix)]
    assert_eq!(mode(&copy), 0o600);
    assert_eq!(server.get("/api/health").status, 200);
}

#[test]
fn backup_never_overwrites_unless_forced() {
    let db = TempDb::new();
    basic_setup(&db);
    let copy = db.dir.path().join("copy.db");
    std::fs::write(&copy, b"keep me").unwrap();

    lr(&db, "backup --out")
        .arg(&copy)
        .fails(1)
        .stderr_contains("--force");
    assert_eq!(std::fs::read(&copy).unwrap(), b"keep me");

    let report = lr(&db, "backup --force --out").arg(&copy).json();
    assert_eq!(report["out"], copy.to_str().unwrap());
    assert_eq!(lr(&copy, "check").json()["ok"], true);
    assert_eq!(count(&copy, "SELECT count(*) FROM workspaces"), 1);

    // The live file itself is never a target, forced or not.
    lr(&db, "backup --force --out")
        .arg(&db.path)
        .fails(1)
        .stderr_contains("being backed up");
    assert_eq!(lr(&db, "check").json()["ok"], true);
}

#[test]
fn backup_and_check_of_a_missing_database_create_nothing() {
    let db = TempDb::new();
    let copy = db.dir.path().join("copy.db");
    for command in [
        lr(&db, "backup --out").arg(&copy),
        lr(&db, "check"),
        lr(&db, "--json check"),
    ] {
        command.fails(1).stderr_contains(&format!(
            "no database at {}: pass --db or set LEADRELAY_DB (leadrelay init creates one)",
            db.path.display()
        ));
    }
    assert!(!db.path.exists());
    assert!(!copy.exists());
    assert_eq!(std::fs::read_dir(db.dir.path()).unwrap().count(), 0);
}

#[test]
fn a_restored_backup_serves_the_same_data() {
    let db = TempDb::new();
    basic_setup(&db);
    let copy = db.dir.path().join("copy.db");
    lr(&db, "backup --out").arg(&copy).json();
    // Restore as docs/operations.md says: stop, copy the file back, start.
    let restored = TempDb::new();
    std::fs::copy(&copy, &restored.path).unwrap();
    let server = TestServer::start_with(restored, Default::default());
    assert_eq!(server.get("/api/health").status, 200);
    let sources = lr(&server, "source list").json();
    assert!(sources.is_array());
    assert_eq!(count(&server.db.path, "SELECT count(*) FROM products"), 1);
}

/// Damages a fresh database with `sql` (foreign keys off, so the damage is possible) and
/// returns what `check --json` says and its exit code.
fn check_damaged(sql: &str) -> (Value, Option<i32>) {
    let db = TempDb::new();
    basic_setup(&db);
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    conn.execute_batch(sql).unwrap();
    drop(conn);
    let output = lr(&db, "--json check").output();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        panic!("check printed no JSON ({e}): {stderr}")
    });
    (report, output.status.code())
}

#[test]
fn check_names_what_is_wrong_and_exits_1() {
    let cases = [
        (
            "orphan row",
            "INSERT INTO containers (id, workspace_id, kind, name, auto_delivery, \
             delivery_mode, max_buyers, score_threshold, created_at) \
             VALUES ('lost', 'no-such-workspace', 'channel', 'Lost', 1, 'exclusive', 3, 50, 0)",
            "point at missing parent rows",
        ),
        (
            "newer schema",
            "PRAGMA user_version = 99",
            "newer than this binary",
        ),
        (
            "missing index",
            "DROP INDEX outbox_buyer_due",
            "schema objects missing: index outbox_buyer_due",
        ),
    ];
    for (name, sql, expected) in cases {
        let (report, code) = check_damaged(sql);
        assert_eq!(code, Some(1), "{name}: {report}");
        assert_eq!(report["ok"], false, "{name}");
        let problems = report["problems"].to_string();
        assert!(problems.contains(expected), "{name}: {problems}");
    }
    let (report, _) = check_damaged(
        "INSERT INTO containers (id, workspace_id, kind, name, auto_delivery, delivery_mode, \
         max_buyers, score_threshold, created_at) \
         VALUES ('lost', 'gone', 'channel', 'Lost', 1, 'exclusive', 3, 50, 0)",
    );
    assert_eq!(report["foreignKeyViolations"], 1);
    assert_eq!(report["foreignKeys"][0]["table"], "containers");
    assert_eq!(report["foreignKeys"][0]["parent"], "workspaces");
}

#[test]
fn check_finds_a_corrupted_page() {
    let db = TempDb::new();
    basic_setup(&db);
    let grower = Db::open(&db.path).unwrap();
    grow(&grower);
    grower.close();
    drop(grower);
    // Overwrite a page in the middle of the file (a workspaces b-tree page) with noise.
    let mut bytes = std::fs::read(&db.path).unwrap();
    let page = 4096;
    let middle = (bytes.len() / page / 2) * page;
    for (i, byte) in bytes[middle..middle + page].iter_mut().enumerate() {
        *byte = (i * 7 + 13) as u8;
    }
    std::fs::write(&db.path, &bytes).unwrap();

    let text = lr(&db, "check").fails(1).stdout;
    assert!(text.contains("problem(s)"), "{text}");
    assert!(!text.contains("result: ok"), "{text}");
}

#[test]
fn check_prints_a_readable_verdict() {
    let db = TempDb::new();
    basic_setup(&db);
    let text = lr(&db, "check").ok();
    for line in [
        "integrity: ok",
        "foreign keys: ok",
        &format!(
            "schema version: {0} (this binary: {0})",
            leadrelay::db::SCHEMA_VERSION
        ),
        "schema objects: ok",
        "states: ok",
        "balances: ok",
        "report: ok",
        "result: ok",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

#[cfg(unix)]
#[test]
fn database_and_backup_files_are_private_whatever_the_umask() {
    let db = TempDb::new();
    let copy = db.dir.path().join("copy.db");
    let script = "umask 000 && \"$0\" --db \"$1\" init >/dev/null \
                  && \"$0\" --db \"$1\" backup --out \"$2\" >/dev/null";
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(bin().get_program())
        .arg(&db.path)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(mode(&db.path), 0o600);
    assert_eq!(mode(&copy), 0o600);
}

#[test]
fn health_answers_503_to_a_call_that_races_shutdown() {
    let server = TestServer::start();
    let addr = server.addr;
    let health_url = server.url("/api/health");
    // Hold the write lock so the health call's write probe waits inside the server.
    let blocker = rusqlite::Connection::open(&server.db.path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let call = std::thread::spawn(move || crate::util::Request::new("GET", &health_url).send());
    wait_until(
        Duration::from_secs(10),
        "the health call to be in flight",
        || crate::metrics::scrape(&server).value("leadrelay_http_requests_in_flight") >= 2.0,
    );

    let stopping = std::thread::spawn(move || drop(server.stop()));
    // The listener closes once shutdown has begun.
    wait_until(Duration::from_secs(10), "the listener to close", || {
        TcpStream::connect(addr).is_err()
    });
    blocker.execute_batch("ROLLBACK").unwrap();

    let reply = call.join().unwrap();
    assert_eq!(reply.status, 503, "{}", reply.text);
    assert_eq!(reply.json["status"], "unavailable");
    assert_eq!(reply.json["reason"], "shutting down");
    assert_eq!(reply.header("retry-after"), Some("1"));
    stopping.join().unwrap();
}

#[test]
fn a_sigterm_right_after_the_address_is_printed_stops_the_server_cleanly() {
    // A supervisor may stop the server as soon as it reports its address. The stop must be
    // the graceful one (exit 0), never death by the signal: the handler is in place before
    // the address is printed. Several rounds, since the window was a few milliseconds.
    let db = TempDb::new();
    lr(&db, "init").json();
    for round in 0..5 {
        let mut child = lr(&db, "serve --listen 127.0.0.1:0")
            .command(false)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the binary starts");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().expect("stdout is piped")),
            &mut line,
        )
        .expect("the server prints its address");
        if !line.contains("listening on") {
            let _ = child.kill();
            panic!("no address in: {line}");
        }
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let status = child.wait().expect("the server exits");
        assert!(status.success(), "round {round}: {status:?}");
    }
}

/// A second `serve` on the file a server runs on refuses to start and names the process
/// that serves it; the CLI keeps working beside the server; once the first has stopped, a
/// new server starts.
#[test]
fn a_second_server_on_one_file_refuses_and_names_the_first() {
    let db = TempDb::new();
    let first = crate::util::process::ServeProcess::start(&db.path, &[]);
    lr(
        &db,
        "serve --listen 127.0.0.1:0 --console-listen off --portal-listen off",
    )
    .fails(1)
    .stderr_contains(&format!(
        "{} is already served by process {} (leadrelay serve)",
        db.path.display(),
        first.pid()
    ));
    assert_eq!(first.get("/api/health").status, 200);
    lr(&db, "workspace create --id ws2 --name Two").json();
    assert_eq!(first.stop().matches("listening on").count(), 1);
    let second = crate::util::process::ServeProcess::start(&db.path, &[]);
    assert_eq!(second.get("/api/health").status, 200);
}
