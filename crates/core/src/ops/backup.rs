//! `leadrelay backup --out FILE`: a consistent copy of the live database, taken while the
//! server keeps writing.
//!
//! The copy uses SQLite's online backup API from a read-only connection that holds one read
//! transaction for the whole copy. In WAL mode that transaction is a snapshot: the copy is
//! the database exactly as of its first page, the server's writer is never blocked (its
//! commits go to the WAL, which cannot be checkpointed past the snapshot until the copy is
//! done), and the copy never has to restart because of concurrent commits. The copy is
//! written to a temporary file beside the target, switched to a rollback journal (so it is
//! one self-contained file), checked with `PRAGMA quick_check`, synced, and only then given
//! its name; an existing file is replaced only when asked to.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::backup::{Backup, StepResult};

use crate::db::files;

/// Pages copied per step (4 MiB at SQLite's default page size): large enough that a big
/// file needs few steps, small enough to report progress and stay responsive.
const PAGES_PER_STEP: std::ffi::c_int = 1024;

/// How long to wait before retrying a step that found the destination busy.
const BUSY_PAUSE: Duration = Duration::from_millis(10);

/// No variant names its inner error as a `source`: the message already contains it, and
/// the CLI prints the whole chain (`{e:#}`), which would repeat it.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The database to copy does not exist (nothing is created).
    #[error("database file {} does not exist", .0.display())]
    SourceMissing(PathBuf),
    /// The target exists and overwriting was not asked for.
    #[error("{} exists already; pass --force to overwrite it", .0.display())]
    TargetExists(PathBuf),
    /// The target is the live database itself.
    #[error("{} is the database being backed up; choose another file", .0.display())]
    TargetIsSource(PathBuf),
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    #[error("cannot {action}: {error}")]
    Io {
        action: String,
        error: std::io::Error,
    },
    /// The finished copy failed its quick check; it was not kept.
    #[error("the copy failed its check and was removed: {0}")]
    CopyDamaged(String),
}

impl From<rusqlite::Error> for BackupError {
    fn from(e: rusqlite::Error) -> Self {
        BackupError::Sqlite(e)
    }
}

fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
    let action = action.into();
    move |error| BackupError::Io { action, error }
}

/// What a finished backup wrote.
#[derive(Debug, Clone)]
pub struct BackupReport {
    pub out: PathBuf,
    pub bytes: u64,
    pub pages: u64,
    pub schema_version: i64,
    pub duration: Duration,
}

/// Copies the database at `source` to `out`. `overwrite` allows replacing an existing
/// `out` (never the source itself).
pub fn backup(source: &Path, out: &Path, overwrite: bool) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    if !source.is_file() {
        return Err(BackupError::SourceMissing(source.to_path_buf()));
    }
    if out.exists() {
        if same_file(source, out) {
            return Err(BackupError::TargetIsSource(out.to_path_buf()));
        }
        if !overwrite {
            return Err(BackupError::TargetExists(out.to_path_buf()));
        }
    }
    let copy = copy_beside(source, out)?;
    let (bytes, pages, schema_version) = (copy.bytes, copy.pages, copy.schema_version);
    copy.temp.publish(out, overwrite)?;
    Ok(BackupReport {
        out: out.to_path_buf(),
        bytes,
        pages,
        schema_version,
        duration: started.elapsed(),
    })
}

/// A checked and synced copy of a database in a private temporary file, not yet given its
/// name; removed when dropped unless published.
pub(crate) struct Copy {
    pub(crate) temp: TempFile,
    pub(crate) bytes: u64,
    pub(crate) pages: u64,
    pub(crate) schema_version: i64,
}

/// Copies the database at `source` into a temporary file beside `target` (same directory,
/// so a rename can give it `target`'s name atomically): one snapshot, switched to a
/// rollback journal, quick-checked and synced.
pub(crate) fn copy_beside(source: &Path, target: &Path) -> Result<Copy, BackupError> {
    for _ in 0..super::READ_ATTEMPTS {
        let temp = TempFile::create_beside(target)?;
        let src = super::ReadOnlyDb::open(source)?;
        // Start the read transaction now and keep it to the end: every step then reads the
        // same snapshot (see the module header).
        src.conn.execute_batch("BEGIN DEFERRED")?;
        let schema_version: i64 = src
            .conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))?;
        let pages = {
            let mut dst = Connection::open(&temp.path)?;
            let pages = copy_pages(&src.conn, &mut dst)?;
            // A copy in rollback-journal mode is a single file: nothing to forget beside it
            // when it is moved or restored. The server switches it back to WAL on open.
            dst.pragma_update(None, "journal_mode", "DELETE")?;
            let verdict: String = dst.query_row("PRAGMA quick_check", [], |row| row.get(0))?;
            if verdict != "ok" {
                return Err(BackupError::CopyDamaged(verdict));
            }
            pages
        };
        src.conn.execute_batch("COMMIT")?;
        if src.changed_meanwhile(source) {
            log::info!(
                "{} was opened by another process during the copy; copying it again",
                source.display()
            );
            continue;
        }
        drop(src);

        File::open(&temp.path)
            .and_then(|f| f.sync_all())
            .map_err(io(format!("sync {}", temp.path.display())))?;
        let bytes = std::fs::metadata(&temp.path)
            .map_err(io(format!("read {}", temp.path.display())))?
            .len();
        return Ok(Copy {
            temp,
            bytes,
            pages,
            schema_version,
        });
    }
    Err(BackupError::Io {
        action: format!("take a stable copy of {}", source.display()),
        error: std::io::Error::other("it changed during every attempt; try again"),
    })
}

/// Runs the backup steps to the end; returns the number of pages copied.
fn copy_pages(src: &Connection, dst: &mut Connection) -> Result<u64, BackupError> {
    let backup = Backup::new(src, dst)?;
    loop {
        match backup.step(PAGES_PER_STEP)? {
            StepResult::Done => break,
            StepResult::More => {}
            // The destination is our own new file, so this only happens if something else
            // opened it; wait for it like the busy timeout would.
            StepResult::Busy | StepResult::Locked => std::thread::sleep(BUSY_PAUSE),
            // The enum is non-exhaustive; any later variant is treated as "go on".
            _ => {}
        }
    }
    Ok(u64::try_from(backup.progress().pagecount).unwrap_or(0))
}

/// Whether two existing paths name the same file (the same inode on Unix).
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return a.dev() == b.dev() && a.ino() == b.ino();
        }
    }
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The copy under construction: a private (0600) file beside the target, removed unless
/// it was published.
pub(crate) struct TempFile {
    pub(crate) path: PathBuf,
    published: bool,
}

impl TempFile {
    fn create_beside(out: &Path) -> Result<TempFile, BackupError> {
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "backup".into());
        let path = files::parent_dir(out).join(format!(".{name}.partial-{}", std::process::id()));
        // The copy holds the same personal data and secret hashes as the database.
        files::private_new_file()
            .open(&path)
            .map_err(io(format!("create {}", path.display())))?;
        Ok(TempFile {
            path,
            published: false,
        })
    }

    /// Gives the copy its final name. Without `overwrite` a hard link makes the "does not
    /// exist yet" check and the naming one atomic step, so a file that appeared meanwhile
    /// is still never replaced.
    pub(crate) fn publish(mut self, out: &Path, overwrite: bool) -> Result<(), BackupError> {
        if overwrite {
            std::fs::rename(&self.path, out)
                .map_err(io(format!("move the copy to {}", out.display())))?;
        } else {
            match std::fs::hard_link(&self.path, out) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&self.path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(BackupError::TargetExists(out.to_path_buf()));
                }
                // A file system without hard links: fall back to check-then-rename.
                Err(_) => {
                    if out.exists() {
                        return Err(BackupError::TargetExists(out.to_path_buf()));
                    }
                    std::fs::rename(&self.path, out)
                        .map_err(io(format!("move the copy to {}", out.display())))?;
                }
            }
        }
        self.published = true;
        files::sync_dir(out);
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.path);
            let journal = format!("{}-journal", self.path.display());
            let _ = std::fs::remove_file(journal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_missing_source_without_creating_it() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("absent.db");
        let out = dir.path().join("copy.db");
        let e = backup(&source, &out, false).unwrap_err();
        assert!(matches!(e, BackupError::SourceMissing(_)), "{e}");
        assert!(!source.exists());
        assert!(!out.exists());
    }

    #[test]
    fn never_overwrites_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("live.db");
        crate::db::Db::open(&source).unwrap().close();
        let e = backup(&source, &source, true).unwrap_err();
        assert!(matches!(e, BackupError::TargetIsSource(_)), "{e}");
    }

    #[test]
    fn copy_is_one_file_in_rollback_mode() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("live.db");
        let db = crate::db::Db::open(&source).unwrap();
        let out = dir.path().join("copy.db");
        let report = backup(&source, &out, false).unwrap();
        db.close();
        assert!(report.pages > 0);
        assert_eq!(report.bytes, std::fs::metadata(&out).unwrap().len());
        assert_eq!(report.schema_version, crate::db::SCHEMA_VERSION);
        let header = std::fs::read(&out).unwrap();
        // Bytes 18 and 19 of the header: 1 = rollback journal, 2 = WAL.
        assert_eq!((header[18], header[19]), (1, 1));
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("partial") || n.starts_with("copy.db-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
