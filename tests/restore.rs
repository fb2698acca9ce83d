//! `leadrelay restore --from BACKUP`, through the real binary: refused while a server uses
//! the database and for a backup that fails its check (nothing changed), brings back
//! exactly the backed-up leads, keeps the replaced database (with the data its WAL held)
//! as `DB.before-restore`.

use std::path::Path;

use serde_json::{Value, json};

use crate::ingest::{person, with};
use crate::util::process::ServeProcess;
use crate::util::{Request, TempDb, basic_setup, beside, file_names, lr, mode};

const INGEST_PATH: &str = "/api/webhooks/channels/web/sources/landing/leads";

/// A database with `basic_setup` and a channel source `landing` without a secret.
fn setup() -> TempDb {
    let db = TempDb::new();
    basic_setup(&db);
    lr(
        &db,
        "source create --channel web --name Landing --id landing --no-secret",
    )
    .json();
    db
}

/// Sends leads numbered `numbers` to the running server; returns their ids.
fn ingest(server: &ServeProcess, numbers: std::ops::Range<usize>) -> Vec<String> {
    numbers
        .map(|n| {
            let reply = Request::new("POST", &format!("{}{INGEST_PATH}", server.base))
                .json(&with(person(n), json!({"productSlug": "solar"})))
                .send();
            assert_eq!(reply.status, 201, "{}", reply.text);
            reply.json["item"]["leadId"].as_str().unwrap().to_string()
        })
        .collect()
}

/// The ids of the leads in the database at `path`, sorted, read with plain SQLite.
fn lead_ids(path: &Path) -> Vec<String> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut statement = conn.prepare("SELECT id FROM leads ORDER BY id").unwrap();
    statement
        .query_map([], |r| {
            r.get::<_, leadrelay::ids::LeadId>(0)
                .map(|id| id.to_string())
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

#[test]
fn a_restore_brings_back_exactly_the_backed_up_leads_and_keeps_the_old_file() {
    let db = setup();
    let backup = db.dir.path().join("backup.db");
    let server = ServeProcess::start(&db.path, &[]);
    let backed_up = ingest(&server, 0..3);
    lr(&db, "backup --out").arg(&backup).json();
    let later = ingest(&server, 3..5);

    // Refused while the server runs: nothing changes.
    let before = file_names(db.dir.path());
    let expected = format!(
        "a leadrelay server or command is using {}; stop it first",
        db.path.display()
    );
    lr(&db, "restore --from")
        .arg(&backup)
        .fails(1)
        .stderr_contains(&expected);
    assert_eq!(file_names(db.dir.path()), before);

    // A crash (no checkpoint, no cleanup): the last leads are only in the WAL.
    server.kill();
    let report = lr(&db, "restore --from").arg(&backup).json();
    let kept = beside(&db.path, ".before-restore");
    assert_eq!(report["database"], db.path.to_str().unwrap());
    assert_eq!(report["from"], backup.to_str().unwrap());
    assert_eq!(report["keptAs"], kept.to_str().unwrap());
    assert_eq!(report["schemaVersion"], leadrelay::db::SCHEMA_VERSION);
    assert_eq!(report["bytes"], std::fs::metadata(&db.path).unwrap().len());

    assert_eq!(lead_ids(&db.path), sorted(backed_up.clone()));
    let all = sorted(backed_up.iter().chain(&later).cloned().collect());
    assert_eq!(
        lead_ids(&kept),
        all,
        "the kept file has every lead, its WAL's too"
    );
    // No stale -wal or -shm beside the restored file, no temporary file left.
    assert_eq!(
        file_names(db.dir.path()),
        [
            "backup.db",
            "leadrelay.db",
            "leadrelay.db.before-restore",
            "leadrelay.db.lock",
            // The server that ran on the file left its lock file (never removed).
            "leadrelay.db.serve.lock"
        ]
    );
    #[cfg(unix)]
    for path in [&db.path, &kept] {
        assert_eq!(mode(path), 0o600, "{}", path.display());
    }

    // The restored file serves: the backed-up leads are there, and new ones go in.
    let server = ServeProcess::start(&db.path, &[]);
    let listed: Vec<String> = lr(&db, "lead list")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|lead| lead["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sorted(listed), sorted(backed_up));
    ingest(&server, 10..11);
    assert_eq!(server.terminate().code(), Some(0));
    assert_eq!(lr(&db, "check").json()["ok"], true);
}

#[test]
fn an_earlier_restores_file_is_replaced_only_with_force() {
    let db = setup();
    let backup = db.dir.path().join("backup.db");
    lr(&db, "backup --out").arg(&backup).json();
    lr(&db, "restore --from").arg(&backup).json();
    let kept = beside(&db.path, ".before-restore");
    std::fs::write(&kept, b"the operator's only copy").unwrap();

    lr(&db, "restore --from")
        .arg(&backup)
        .fails(1)
        .stderr_contains("exists from an earlier restore; move it away or pass --force");
    assert_eq!(std::fs::read(&kept).unwrap(), b"the operator's only copy");

    let report = lr(&db, "restore --force --from").arg(&backup).json();
    assert_eq!(report["keptAs"], kept.to_str().unwrap());
    assert_eq!(lr(&kept, "check").json()["ok"], true);
}

/// Restores `backup` over a sound database and expects a refusal naming `problem`, with
/// nothing changed beside the database.
fn refused(db: &TempDb, backup: &Path, problem: &str) {
    let before = file_names(db.dir.path());
    let content = std::fs::read(&db.path).unwrap();
    let message = lr(db, "restore --from").arg(backup).fails(1).stderr;
    assert!(
        message.contains("is not a sound leadrelay database, nothing was changed"),
        "{message}"
    );
    assert!(
        message.contains(problem),
        "{problem} missing from: {message}"
    );
    assert_eq!(file_names(db.dir.path()), before, "{problem}");
    assert_eq!(std::fs::read(&db.path).unwrap(), content, "{problem}");
}

#[test]
fn a_backup_that_fails_its_check_is_refused() {
    let db = setup();
    let dir = db.dir.path();

    let notes = dir.join("notes.txt");
    std::fs::write(&notes, vec![b'x'; 8192]).unwrap();
    refused(&db, &notes, "not an SQLite database");

    let foreign = dir.join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    refused(&db, &foreign, "not a leadrelay database");

    let newer = dir.join("newer.db");
    lr(&db, "backup --out").arg(&newer).json();
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    refused(&db, &newer, "newer than this binary");

    // A backup with a damaged page in the middle.
    let big = TempDb::new();
    basic_setup(&big.path);
    let conn = rusqlite::Connection::open(&big.path).unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO workspaces (id, name, timezone, created_at)
         SELECT 'pad-' || i, printf('%.500c', 'p'), 'UTC', 0 FROM n",
    )
    .unwrap();
    drop(conn);
    let damaged = dir.join("damaged.db");
    lr(&big.path, "backup --out").arg(&damaged).json();
    let mut bytes = std::fs::read(&damaged).unwrap();
    let page = 4096;
    let middle = (bytes.len() / page / 2) * page;
    for (i, byte) in bytes[middle..middle + page].iter_mut().enumerate() {
        *byte = (i * 7 + 13) as u8;
    }
    std::fs::write(&damaged, &bytes).unwrap();
    refused(&db, &damaged, "integrity check failed");

    let missing = dir.join("missing.db");
    lr(&db, "restore --from")
        .arg(&missing)
        .fails(1)
        .stderr_contains("does not exist");
    lr(&db, "restore --from")
        .arg(&db.path)
        .fails(1)
        .stderr_contains("is the database itself");
    lr(&db, "restore").fails(2);
}

#[test]
fn a_restore_is_refused_while_another_program_has_the_database_open() {
    let db = setup();
    let backup = db.dir.path().join("backup.db");
    lr(&db, "backup --out").arg(&backup).json();
    // Like Litestream: a plain SQLite connection holding a read transaction.
    let other = rusqlite::Connection::open(&db.path).unwrap();
    other
        .execute_batch("PRAGMA journal_mode=WAL; BEGIN")
        .unwrap();
    let _: i64 = other
        .query_row("SELECT count(*) FROM workspaces", [], |r| r.get(0))
        .unwrap();
    let before = file_names(db.dir.path());
    lr(&db, "restore --from")
        .arg(&backup)
        .fails(1)
        .stderr_contains(&format!("another program has {} open", db.path.display()));
    assert_eq!(file_names(db.dir.path()), before);
    other.execute_batch("COMMIT").unwrap();
    drop(other);
    lr(&db, "restore --from").arg(&backup).json();
}

#[test]
fn a_restore_onto_a_new_box_needs_no_existing_database() {
    let db = setup();
    let backup = db.dir.path().join("backup.db");
    lr(&db, "backup --out").arg(&backup).json();
    let fresh = TempDb::new();
    let report = lr(&fresh.path, "restore --from").arg(&backup).json();
    assert_eq!(report["keptAs"], Value::Null);
    assert_eq!(
        file_names(fresh.dir.path()),
        ["leadrelay.db", "leadrelay.db.lock"]
    );
    let sources = lr(&fresh.path, "source list").json();
    assert_eq!(sources[0]["id"], "landing");
}
