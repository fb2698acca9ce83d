//! `leadrelay restore --from BACKUP`: puts a checked copy of a backup in place of the
//! database, keeping the database it replaces as `PATH.before-restore`.
//!
//! The order of the steps is what makes it safe:
//! 1. the database's in-use lock is taken exclusively (`db::files::UseLock`): while any
//!    leadrelay process (`serve`, a command) has the file open, the restore is refused, and
//!    none can open it until the restore is done;
//! 2. the backup is copied (one snapshot, SQLite's backup API) into a private temporary
//!    file in the database's directory, and the copy is checked as `check` does: a corrupt,
//!    foreign or too new file is refused before anything is touched;
//! 3. the old database is made one self-contained file by switching it out of WAL mode,
//!    which checkpoints its WAL into it and removes `-wal` and `-shm`. SQLite allows that
//!    only when no connection of any program has the file open (the lock above covers
//!    leadrelay; this covers a `sqlite3` shell or Litestream), so a busy file is refused.
//!    A file without an SQLite header (the damage the restore may be for) is kept as it is
//!    instead, its `-wal`/`-journal` moved along under the kept name so they stay paired
//!    with it: SQLite would delete a WAL it cannot use when it closes such a file;
//! 4. the old file gets its second name `PATH.before-restore` (a hard link), and the copy
//!    is renamed over `PATH`: one atomic step, so `PATH` always names a whole database, the
//!    old or the new, even after a crash at any point. No stale `-wal` is left beside the
//!    new file, where SQLite would replay it into the wrong database.
//!
//! An existing `PATH.before-restore` (an earlier restore's) is replaced only with `--force`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::backup::{self, BackupError};
use super::check::{self, CheckError};
use crate::db::files::{self, UseLock};

/// How long the switch out of WAL mode waits for another program's lock before the restore
/// says the file is in use.
const FOLD_BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// The name the replaced database keeps.
pub(crate) fn kept_path(path: &Path) -> PathBuf {
    files::with_suffix(path, ".before-restore")
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("backup file {} does not exist", .0.display())]
    BackupMissing(PathBuf),
    #[error("{} is the database itself; give the backup file to restore from", .0.display())]
    BackupIsTarget(PathBuf),
    #[error("directory {} does not exist", .0.display())]
    NoDirectory(PathBuf),
    #[error("a leadrelay server or command is using {}; stop it first (systemctl stop leadrelay)", .0.display())]
    InUse(PathBuf),
    #[error("another program has {} open ({reason}); stop it first", .path.display())]
    OpenElsewhere { path: PathBuf, reason: String },
    #[error(
        "{} exists from an earlier restore; move it away or pass --force to replace it",
        .0.display()
    )]
    KeptExists(PathBuf),
    #[error("{} is not a sound leadrelay database, nothing was changed: {}", .backup.display(), .problems.join("; "))]
    Unsound {
        backup: PathBuf,
        problems: Vec<String>,
    },
    #[error("cannot copy the backup: {0}")]
    Copy(BackupError),
    #[error("cannot check the copy: {0}")]
    Check(CheckError),
    #[error("cannot {action}: {error}")]
    Io {
        action: String,
        error: std::io::Error,
    },
}

fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> RestoreError {
    let action = action.into();
    move |error| RestoreError::Io { action, error }
}

/// What a finished restore did.
#[derive(Debug, Clone)]
pub struct RestoreReport {
    pub database: PathBuf,
    pub from: PathBuf,
    /// Where the replaced database is now; `None` when there was none.
    pub kept: Option<PathBuf>,
    pub bytes: u64,
    pub pages: u64,
    pub schema_version: i64,
    pub duration: Duration,
}

/// Replaces the database at `target` with a checked copy of `backup` (see the module
/// header). `force` replaces an existing `PATH.before-restore`.
pub fn restore(target: &Path, backup: &Path, force: bool) -> Result<RestoreReport, RestoreError> {
    let started = Instant::now();
    if !backup.is_file() {
        return Err(RestoreError::BackupMissing(backup.to_path_buf()));
    }
    if target.exists() && backup::same_file(backup, target) {
        return Err(RestoreError::BackupIsTarget(target.to_path_buf()));
    }
    let dir = files::parent_dir(target);
    if !dir.is_dir() {
        return Err(RestoreError::NoDirectory(dir.to_path_buf()));
    }
    let _lock = UseLock::try_exclusive(target)
        .map_err(io("lock the database"))?
        .ok_or_else(|| RestoreError::InUse(target.to_path_buf()))?;

    let had_target = target.exists();
    let kept = kept_path(target);
    if had_target && !force && kept_files(&kept).iter().any(|p| p.exists()) {
        return Err(RestoreError::KeptExists(kept));
    }

    let copy = backup::copy_beside(backup, target).map_err(|e| unsound_copy(backup, e))?;
    let verdict = check::check(&copy.temp.path).map_err(RestoreError::Check)?;
    if !verdict.ok {
        return Err(RestoreError::Unsound {
            backup: backup.to_path_buf(),
            problems: verdict.problems,
        });
    }
    // The restored file belongs to whoever owned the old one (or the directory), not to the
    // root user who may be running the restore.
    let owner = if had_target { target } else { dir };
    if let Ok(file) = std::fs::File::open(&copy.temp.path) {
        files::match_owner(&file, owner);
    }

    if had_target {
        retire(target, &kept, force)?;
    }
    let (bytes, pages, schema_version) = (copy.bytes, copy.pages, copy.schema_version);
    copy.temp
        .publish(target, true)
        .map_err(RestoreError::Copy)?;
    log::info!(
        "restored {} from {}{}",
        target.display(),
        backup.display(),
        if had_target {
            format!("; the previous database is {}", kept.display())
        } else {
            String::new()
        }
    );
    Ok(RestoreReport {
        database: target.to_path_buf(),
        from: backup.to_path_buf(),
        kept: had_target.then_some(kept),
        bytes,
        pages,
        schema_version,
        duration: started.elapsed(),
    })
}

/// A kept database and the side files that belong to it.
fn kept_files(kept: &Path) -> Vec<PathBuf> {
    std::iter::once(kept.to_path_buf())
        .chain(
            files::SQLITE_SIDE_FILES
                .iter()
                .map(|suffix| files::with_suffix(kept, suffix)),
        )
        .collect()
}

/// A backup SQLite cannot read, or whose copy fails its quick check, is refused like one
/// that fails `check`.
fn unsound_copy(backup: &Path, e: BackupError) -> RestoreError {
    let problem = match &e {
        BackupError::Sqlite(sqlite)
            if sqlite.sqlite_error_code() == Some(ErrorCode::NotADatabase) =>
        {
            "not an SQLite database".to_string()
        }
        BackupError::Sqlite(sqlite) => format!("cannot read it: {sqlite}"),
        BackupError::CopyDamaged(verdict) => format!("integrity check failed: {verdict}"),
        _ => return RestoreError::Copy(e),
    };
    RestoreError::Unsound {
        backup: backup.to_path_buf(),
        problems: vec![problem],
    }
}

/// Moves the old database at `target` aside as `kept`, with nothing of it left under
/// `target`'s side-file names (see the module header, step 3 and 4).
fn retire(target: &Path, kept: &Path, force: bool) -> Result<(), RestoreError> {
    let folded = if super::sqlite_header(target).is_some() {
        fold_wal(target)
    } else {
        Ok(())
    };
    match folded {
        Ok(()) => {}
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
            ) =>
        {
            return Err(RestoreError::OpenElsewhere {
                path: target.to_path_buf(),
                reason: e.to_string(),
            });
        }
        Err(e) => log::warn!(
            "cannot fold the WAL of the old {} into it ({e}); keeping the file as it is",
            target.display()
        ),
    }
    if force {
        for path in kept_files(kept) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(format!("remove {}", path.display()))(e)),
            }
        }
    }
    // A second name first, so `target` keeps naming the old database until the new one is
    // renamed over it. Without hard links, a rename: `target` is then missing for a moment,
    // while the lock keeps every leadrelay process away.
    if std::fs::hard_link(target, kept).is_err() {
        std::fs::rename(target, kept).map_err(io(format!(
            "move {} to {}",
            target.display(),
            kept.display()
        )))?;
    }
    for suffix in ["-wal", "-journal"] {
        let side = files::with_suffix(target, suffix);
        if side.exists() {
            let to = files::with_suffix(kept, suffix);
            std::fs::rename(&side, &to).map_err(io(format!(
                "move {} to {}",
                side.display(),
                to.display()
            )))?;
        }
    }
    // The -shm is only an index of the WAL, rebuilt from it; no process has it open.
    let shm = files::with_suffix(target, "-shm");
    match std::fs::remove_file(&shm) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("remove {}", shm.display()))(e)),
    }
    files::make_private(kept).map_err(io(format!("make {} private", kept.display())))?;
    Ok(())
}

/// Checkpoints the WAL into the main file and switches it to a rollback journal, which
/// SQLite does only when no other connection has the file open; `-wal` and `-shm` are gone
/// afterwards.
fn fold_wal(path: &Path) -> rusqlite::Result<()> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(FOLD_BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode=DELETE", [], |row| row.get(0))?;
    if mode != "delete" {
        // SQLite answers with the mode it stayed in when it could not switch.
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            Some(format!("it stayed in journal mode {mode}")),
        ));
    }
    conn.close().map_err(|(_, e)| e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::tests::names;

    #[test]
    fn the_wal_of_the_old_file_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("live.db");
        // A database whose last row is only in its WAL, as after a crash.
        let conn = Connection::open(&target).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
             CREATE TABLE t (x); INSERT INTO t VALUES (1)",
        )
        .unwrap();
        let copy = dir.path().join("copy.db");
        std::fs::copy(&target, &copy).unwrap();
        std::fs::copy(files::wal(&target), files::wal(&copy)).unwrap();
        drop(conn);
        let kept = kept_path(&copy);
        retire(&copy, &kept, false).unwrap();
        // Until the restored file is renamed over it, the old name still reaches the old file.
        assert!(backup::same_file(&copy, &kept));
        let n: i64 = Connection::open(&kept)
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "the WAL's row is in the kept file");
        assert!(!files::wal(&copy).exists());
        assert!(!files::with_suffix(&copy, "-shm").exists());
    }

    #[test]
    fn a_file_sqlite_cannot_open_is_kept_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("broken.db");
        std::fs::write(&target, vec![7u8; 8192]).unwrap();
        std::fs::write(files::wal(&target), b"half a wal").unwrap();
        let kept = kept_path(&target);
        retire(&target, &kept, false).unwrap();
        assert_eq!(std::fs::read(&kept).unwrap(), vec![7u8; 8192]);
        assert_eq!(std::fs::read(files::wal(&kept)).unwrap(), b"half a wal");
        assert!(!files::wal(&target).exists());
        assert_eq!(
            names(dir.path()),
            [
                "broken.db",
                "broken.db.before-restore",
                "broken.db.before-restore-wal"
            ]
        );
    }
}
