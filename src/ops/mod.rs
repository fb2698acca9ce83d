//! Operator tools that work on the database file itself: an online backup
//! ([`backup::backup`]) and a health check of the file's contents ([`check::check`]).
//!
//! Owns opening the file read-only for these two jobs, next to the `Db` handle, because
//! neither may create, migrate or write the file it reads: a backup of a missing file, or a
//! check of a file with an unknown schema, must say so instead of "fixing" it. It does not
//! own the command line (`cli::ops`) or the schema (`db::migrate`).

pub mod backup;
pub mod check;
pub mod states;

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How long a read waits for a lock held by the server (a WAL checkpoint) before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens an existing database file read-only; never creates it.
fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}
