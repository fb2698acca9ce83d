//! The database's files on disk: private modes whatever the umask or the mode a file had
//! (`init`, `serve`, `backup` through the real binary), and `check` and `backup` reading a
//! file without leaving anything beside it, also on a read-only file in a read-only
//! directory.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::util::process::ServeProcess;
use crate::util::{TempDb, basic_setup, beside, file_names, lr, mode};

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `leadrelay --db DB ARGS…` started by a shell that set the usual `umask 022` first.
fn with_umask_022(db: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("umask 022 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_leadrelay"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("LEADRELAY_DB")
        .env("RUST_LOG", "warn");
    command
}

fn run(mut command: Command) -> Output {
    let output = command.output().expect("the binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn database_wal_shm_and_backups_are_0600_whatever_the_umask_or_earlier_mode() {
    let db = TempDb::new();
    let wal = beside(&db.path, "-wal");
    let shm = beside(&db.path, "-shm");

    // A new file under umask 022.
    run(with_umask_022(&db.path, &["init"]));
    assert_eq!(mode(&db.path), 0o600);

    // A server killed without cleaning up leaves its -wal and -shm; then someone loosens
    // all three (a copy with `cp`, a careless chmod).
    ServeProcess::start(&db.path, &[]).kill();
    assert!(
        wal.exists() && shm.exists(),
        "{:?}",
        file_names(db.dir.path())
    );
    for path in [&db.path, &wal, &shm] {
        set_mode(path, 0o644);
    }
    let server = ServeProcess::spawn(with_umask_022(
        &db.path,
        &["serve", "--listen", "127.0.0.1:0"],
    ));
    for path in [&db.path, &wal, &shm] {
        assert_eq!(mode(path), 0o600, "{} while serving", path.display());
    }
    let log = server.stop();
    for path in [&db.path, &wal, &shm] {
        let line = format!(
            "{} was open to other users (mode 0644); tightened it to 0600",
            path.display()
        );
        assert!(log.contains(&line), "no '{line}' in:\n{log}");
    }

    // `init` on a loosened file tightens it too, and says so.
    set_mode(&db.path, 0o644);
    let output = run(with_umask_022(&db.path, &["init"]));
    assert_eq!(mode(&db.path), 0o600);
    assert!(
        stderr(&output).contains("tightened it to 0600"),
        "{}",
        stderr(&output)
    );

    // A backup is private, also when it replaces a readable file of the same name.
    let copy = db.dir.path().join("copy.db");
    std::fs::write(&copy, b"an old backup").unwrap();
    set_mode(&copy, 0o644);
    run(with_umask_022(
        &db.path,
        &["backup", "--force", "--out", copy.to_str().unwrap()],
    ));
    assert_eq!(mode(&copy), 0o600);
    let fresh = db.dir.path().join("fresh.db");
    run(with_umask_022(
        &db.path,
        &["backup", "--out", fresh.to_str().unwrap()],
    ));
    assert_eq!(mode(&fresh), 0o600);
    assert_eq!(lr(&copy, "check").json()["ok"], true);
}

/// A stopped database with some data: its directory holds the file and its lock file.
fn stopped_database() -> TempDb {
    let db = TempDb::new();
    basic_setup(&db);
    assert_eq!(
        file_names(db.dir.path()),
        ["leadrelay.db", "leadrelay.db.lock"]
    );
    db
}

#[test]
fn check_and_backup_of_a_stopped_database_leave_nothing_beside_it() {
    let db = stopped_database();
    let before = file_names(db.dir.path());
    let report = lr(&db, "check").json();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(file_names(db.dir.path()), before, "after check");

    let out = tempfile::tempdir().unwrap();
    let copy = out.path().join("copy.db");
    lr(&db, "backup --out").arg(&copy).json();
    assert_eq!(file_names(db.dir.path()), before, "after backup");
    assert_eq!(file_names(out.path()), ["copy.db"]);
    lr(&copy, "check").json();
    assert_eq!(
        file_names(out.path()),
        ["copy.db"],
        "after checking the backup"
    );

    // A copy of the live file (WAL mode, unlike a backup) in a directory of its own.
    let other = tempfile::tempdir().unwrap();
    let raw = other.path().join("raw.db");
    std::fs::copy(&db.path, &raw).unwrap();
    assert_eq!(lr(&raw, "check").json()["ok"], true);
    assert_eq!(file_names(other.path()), ["raw.db"]);
}

/// Makes a directory read-only for the test's user, root included, until dropped. Root
/// ignores permission bits, so as root the directory gets the immutable attribute
/// (`chattr +i`), which stops root too.
struct ReadOnlyDir<'a> {
    dir: &'a Path,
    immutable: bool,
}

impl<'a> ReadOnlyDir<'a> {
    fn new(dir: &'a Path) -> ReadOnlyDir<'a> {
        set_mode(dir, 0o555);
        let probe = dir.join("probe");
        if std::fs::write(&probe, b"").is_err() {
            return ReadOnlyDir {
                dir,
                immutable: false,
            };
        }
        // Permission bits did not stop us: we are root.
        std::fs::remove_file(&probe).unwrap();
        let chattr = Command::new("chattr").arg("+i").arg(dir).status();
        assert!(
            matches!(chattr, Ok(status) if status.success()),
            "running as root, the test needs `chattr +i` (e2fsprogs) on a file system that \
             supports it to make a directory read-only: {chattr:?}"
        );
        let guard = ReadOnlyDir {
            dir,
            immutable: true,
        };
        assert!(
            std::fs::write(&probe, b"").is_err(),
            "the directory is read-only now"
        );
        guard
    }
}

impl Drop for ReadOnlyDir<'_> {
    fn drop(&mut self) {
        if self.immutable {
            let _ = Command::new("chattr").arg("-i").arg(self.dir).status();
        }
        set_mode(self.dir, 0o755);
    }
}

#[test]
fn check_works_on_a_read_only_file_in_a_read_only_directory() {
    let db = stopped_database();
    let place = tempfile::tempdir().unwrap();
    let copy = place.path().join("leadrelay.db");
    // The live file (WAL mode), which a read-only connection can only read through a -wal
    // and -shm it would have to create.
    std::fs::copy(&db.path, &copy).unwrap();
    set_mode(&copy, 0o400);
    let read_only = ReadOnlyDir::new(place.path());

    let output = lr(&copy, "--json check").output();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", stderr(&output)));
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["integrity"], serde_json::json!(["ok"]));
    // A backup reads the same way.
    let out = db.dir.path().join("copy.db");
    let backup = lr(&copy, "backup --out").arg(&out).json();
    assert!(backup["pages"].as_u64().unwrap() > 0);
    drop(read_only);
    assert_eq!(file_names(place.path()), ["leadrelay.db"]);
}

#[test]
fn check_while_the_server_runs_sees_committed_data_and_leaves_its_files_alone() {
    let db = stopped_database();
    let server = ServeProcess::start(&db.path, &[]);
    // Committed while the server runs: in the WAL, not yet in the main file.
    lr(&db, "workspace create --name Later --id later").json();
    let before = file_names(db.dir.path());
    assert!(
        before.contains(&"leadrelay.db-wal".to_string()),
        "{before:?}"
    );
    assert_eq!(lr(&db, "check").json()["ok"], true);
    let copy = tempfile::tempdir().unwrap();
    let out = copy.path().join("copy.db");
    lr(&db, "backup --out").arg(&out).json();
    assert_eq!(file_names(db.dir.path()), before);
    drop(server);
    let conn = rusqlite::Connection::open(&out).unwrap();
    let later: i64 = conn
        .query_row(
            "SELECT count(*) FROM workspaces WHERE id = 'later'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        later, 1,
        "the backup holds the row the server had in its WAL"
    );
}
