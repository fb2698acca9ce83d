//! Operator tools that work on the database file itself: an online backup
//! ([`backup::backup`]), a health check of the file's contents ([`check::check`]) and the
//! restore of a backup in its place ([`restore::restore`]).
//!
//! Owns opening a file read-only for backup and check, next to the `Db` handle, because
//! neither may create, migrate or write the file it reads: a backup of a missing file, or a
//! check of a file with an unknown schema, must say so instead of "fixing" it. Reading must
//! not leave files behind either (see [`ReadOnlyDb::open`]). It does not own the command
//! line (`cli::ops`), the schema (`db::migrate`) or the names, modes and lock of the
//! database's files (`db::files`).

pub mod backup;
pub mod check;
pub mod restore;
pub(crate) mod states;
pub mod vacuum;

use std::path::Path;
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OpenFlags};

use crate::db::files;

/// How long a read waits for a lock held by the server (a WAL checkpoint) before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a read of a file is started again because the file changed under an immutable
/// read (a server started meanwhile, see [`ReadOnlyDb`]); the second attempt reads through
/// the server's WAL, so a third is only needed if servers keep starting and stopping.
const READ_ATTEMPTS: usize = 3;

/// A read-only connection to a database file that creates no file beside it.
///
/// SQLite reads a WAL-mode database through its `-wal` and `-shm`, and a read-only
/// connection creates both when they are missing (an empty `-wal`, a 32 KiB `-shm`) and
/// leaves them there. So:
/// - when a `-wal` is there (a server has the file open, or one stopped without cleaning
///   up), the connection is an ordinary read-only one: it reads the committed data in the
///   WAL through the `-shm` it shares with the server, never writes or checkpoints, and
///   takes SQLite's locks, so reading while the server runs is safe;
/// - when there is no `-wal` and the file is in WAL mode, no process has it open and all
///   committed data is in the main file: it is opened `immutable`, which reads the main
///   file alone, with no lock and no side file, and works on a read-only file in a
///   read-only directory. If a server opens the file meanwhile, [`Self::changed_meanwhile`]
///   says so and the caller reads it again the first way;
/// - a file in rollback-journal mode (every backup) needs no side file to be read, so the
///   ordinary read-only connection is used.
///
/// The one case that still creates a file: a `-wal` without its `-shm` (a copied or
/// half-cleaned file). Reading that WAL needs the `-shm`, which SQLite then creates; the
/// alternative, ignoring the WAL, would check something other than the database.
pub(crate) struct ReadOnlyDb {
    pub(crate) conn: Connection,
    immutable: Option<Fingerprint>,
}

/// What would show that a process wrote a file that was opened immutable.
#[derive(Debug, PartialEq)]
struct Fingerprint {
    len: u64,
    modified: Option<SystemTime>,
}

fn fingerprint(path: &Path) -> std::io::Result<Fingerprint> {
    let metadata = std::fs::metadata(path)?;
    Ok(Fingerprint {
        len: metadata.len(),
        modified: metadata.modified().ok(),
    })
}

impl ReadOnlyDb {
    /// Opens an existing database file read-only; never creates it (see the type's header
    /// for how).
    pub(crate) fn open(path: &Path) -> rusqlite::Result<ReadOnlyDb> {
        let immutable = if !files::wal(path).exists() && in_wal_mode(path) {
            fingerprint(path).ok()
        } else {
            None
        };
        let conn = match immutable {
            Some(_) => Connection::open_with_flags(
                immutable_uri(path),
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?,
            None => Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?,
        };
        conn.busy_timeout(BUSY_TIMEOUT)?;
        Ok(ReadOnlyDb { conn, immutable })
    }

    /// Whether the file was opened immutable and a process has opened or written it since,
    /// so what was read may be torn: read it again through a new [`ReadOnlyDb`].
    pub(crate) fn changed_meanwhile(&self, path: &Path) -> bool {
        match &self.immutable {
            None => false,
            Some(before) => {
                files::wal(path).exists() || fingerprint(path).ok().as_ref() != Some(before)
            }
        }
    }
}

/// The first bytes of an SQLite file's header, `None` for a file that does not start like
/// one (or cannot be read).
fn sqlite_header(path: &Path) -> Option<[u8; 20]> {
    use std::io::Read;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .ok()?;
    header.starts_with(b"SQLite format 3\0").then_some(header)
}

/// Whether the file's header says WAL mode (bytes 18 and 19 are 2). Anything unreadable or
/// not an SQLite header is "no": the ordinary connection then reports what is wrong.
fn in_wal_mode(path: &Path) -> bool {
    sqlite_header(path).is_some_and(|header| header[18] == 2)
}

/// `file:PATH?immutable=1`, with every byte outside the URI's unreserved set escaped, so a
/// `?`, `#` or `%` in a file name cannot change the meaning.
fn immutable_uri(path: &Path) -> String {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    let mut uri = String::from("file:");
    for byte in bytes {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uri_escapes_what_would_change_its_meaning() {
        assert_eq!(
            immutable_uri(Path::new("/srv/a b/x?.db#1%")),
            "file:/srv/a%20b/x%3F.db%231%25?immutable=1"
        );
    }

    /// The names in `dir`, sorted.
    pub(crate) fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn reading_a_closed_wal_mode_file_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1)")
            .unwrap();
        drop(conn);
        assert_eq!(names(dir.path()), ["x.db"]);
        let read = ReadOnlyDb::open(&path).unwrap();
        let n: i64 = read
            .conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        assert!(!read.changed_meanwhile(&path));
        drop(read);
        assert_eq!(names(dir.path()), ["x.db"]);
    }

    #[test]
    fn a_file_in_use_is_read_through_its_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
                 CREATE TABLE t (x); INSERT INTO t VALUES (1)",
            )
            .unwrap();
        let before = names(dir.path());
        let read = ReadOnlyDb::open(&path).unwrap();
        // The row is only in the WAL: an immutable read of the main file would miss it.
        let n: i64 = read
            .conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        drop(read);
        assert_eq!(names(dir.path()), before);
    }

    #[test]
    fn an_immutable_read_notices_a_writer_that_came_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (x)")
            .unwrap();
        drop(conn);
        let read = ReadOnlyDb::open(&path).unwrap();
        let writer = Connection::open(&path).unwrap();
        writer.execute_batch("INSERT INTO t VALUES (1)").unwrap();
        assert!(read.changed_meanwhile(&path));
    }
}
