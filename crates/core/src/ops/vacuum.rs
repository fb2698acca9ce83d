//! `leadrelay vacuum`: gives the database's free space back to the file system and packs it.
//!
//! SQLite reuses the pages that deletions and purges free, so a file stops growing once
//! retention purges as fast as ingest adds; it does not shrink on its own. New files are
//! created with `auto_vacuum=INCREMENTAL`, and each purge run gives its free pages back in
//! small steps (`privacy::purge`). This command is the full version, for a file from before
//! (it switches it to incremental) and for packing half-empty pages after a large purge:
//! 1. the file is migrated (as any command does), then its in-use lock is taken
//!    exclusively (`db::files::UseLock`): VACUUM holds the write lock for its whole run, so
//!    it is refused while `serve` or another command uses the file (exit 1), as `restore` is;
//! 2. raw bodies stored before the compressed format (files from before migration 7) are
//!    compressed, in transactions of [`BODIES_PER_TRANSACTION`], by their owner (`ingest`),
//!    and so are the auto-delivery decision traces stored before their compressed format;
//! 3. `auto_vacuum` is set to INCREMENTAL and `VACUUM` rebuilds the file (it needs free disk
//!    space of about twice the file: SQLite's temporary copy and the WAL), then the WAL is
//!    checkpointed and truncated.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::db::files::UseLock;

/// Bodies compressed per transaction: bounds the WAL while old bodies are converted.
const BODIES_PER_TRANSACTION: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum VacuumError {
    #[error("database {} does not exist", .0.display())]
    Missing(PathBuf),
    #[error("a leadrelay server or command is using {}; stop it first (systemctl stop leadrelay)", .0.display())]
    InUse(PathBuf),
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
    #[error("vacuum failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot lock the database: {0}")]
    Io(#[from] std::io::Error),
}

/// What a vacuum did.
#[derive(Debug, Clone)]
pub struct VacuumReport {
    pub database: PathBuf,
    /// The file and its WAL before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub bodies_compressed: usize,
    /// Decision traces stored as text before their compressed format, now compressed.
    pub traces_compressed: usize,
    pub duration: Duration,
}

fn size_on_disk(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    size(path) + size(&crate::db::files::wal(path))
}

/// Vacuums the database at `path` (see the module header).
pub fn vacuum(path: &Path) -> Result<VacuumReport, VacuumError> {
    let started = Instant::now();
    if !path.is_file() {
        return Err(VacuumError::Missing(path.to_path_buf()));
    }
    crate::db::Db::open(path)?.close();
    let _lock = UseLock::try_exclusive(path)?.ok_or_else(|| VacuumError::InUse(path.into()))?;
    let bytes_before = size_on_disk(path);
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let mut bodies_compressed = 0;
    loop {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let done = match crate::ingest::store::compress_legacy_bodies(&conn, BODIES_PER_TRANSACTION)
        {
            Ok(done) => done,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e.into());
            }
        };
        conn.execute_batch("COMMIT")?;
        bodies_compressed += done;
        if done < BODIES_PER_TRANSACTION {
            break;
        }
    }
    let mut traces_compressed = 0;
    let mut after = i64::MIN;
    loop {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let step = match crate::ingest::store::compress_legacy_traces(
            &conn,
            after,
            BODIES_PER_TRANSACTION,
        ) {
            Ok(step) => step,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e.into());
            }
        };
        conn.execute_batch("COMMIT")?;
        traces_compressed += step.0;
        match step.1 {
            Some(last) => after = last,
            None => break,
        }
    }
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    conn.execute_batch("VACUUM")?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    drop(conn);
    let report = VacuumReport {
        database: path.to_path_buf(),
        bytes_before,
        bytes_after: size_on_disk(path),
        bodies_compressed,
        traces_compressed,
        duration: started.elapsed(),
    };
    log::info!(
        "vacuumed {}: {} bytes before, {} after",
        path.display(),
        report.bytes_before,
        report.bytes_after
    );
    Ok(report)
}
