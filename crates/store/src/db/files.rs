//! The files of one database on disk: the main file, SQLite's `-wal`, `-shm` and
//! `-journal` beside it, and leadrelay's `.lock`.
//!
//! Owns their names, keeping them private (mode 0600: they hold personal data and secret
//! hashes) and the advisory lock that says "a leadrelay process is using this database":
//! every [`super::Db`] holds it shared for its whole life, and `restore` takes it
//! exclusively, so a restore can never swap the file under a running server or command;
//! and `.serve.lock`, which `serve` alone holds, so a second server refuses to start. It
//! does not own what is inside the files (SQLite) or when a file is replaced
//! (`ops::restore`).
//!
//! SQLite creates `-wal` and `-shm` with the main file's permission bits (and, when run as
//! root, gives them the main file's owner), which is why the main file is made private
//! before the first connection opens it.

use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

/// The suffixes SQLite gives the files it keeps beside a database.
pub const SQLITE_SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// `path` with `suffix` appended to its file name (`db` + `-wal` → `db-wal`), the way
/// SQLite names its side files.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// The write-ahead log beside `path`.
pub fn wal(path: &Path) -> PathBuf {
    with_suffix(path, "-wal")
}

/// The directory holding `path` (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Options that create a new file readable and writable by its owner only, whatever the
/// umask.
pub fn private_new_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Makes sure the database file exists and that it and any `-wal`/`-shm` beside it are
/// private, before SQLite opens it. A new file is created 0600; an existing one that other
/// users could read is tightened, with a warning saying what changed.
pub(crate) fn prepare(path: &Path) -> io::Result<()> {
    match private_new_file().open(path) {
        Ok(_) => {}
        // Already there (or created by another process just now): tighten it below.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    make_private(path)?;
    for suffix in ["-wal", "-shm"] {
        let side = with_suffix(path, suffix);
        if side.exists() {
            make_private(&side)?;
        }
    }
    Ok(())
}

/// Removes the group and other permission bits of an existing file (0644 → 0600) and logs
/// the change; a file that is private already is left alone.
#[cfg(unix)]
pub fn make_private(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    let private = mode & 0o700;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(private)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot make {} private (mode {mode:04o}): {e}",
                path.display()
            ),
        )
    })?;
    log::warn!(
        "{} was open to other users (mode {mode:04o}); tightened it to {private:04o}",
        path.display()
    );
    Ok(())
}

#[cfg(not(unix))]
pub(crate) fn make_private(_path: &Path) -> io::Result<()> {
    Ok(())
}

/// Gives `file` the owner and group of `reference` when they differ. Only root can do that;
/// for anyone else the file is theirs already, and a failure changes nothing. It keeps a
/// file that `sudo leadrelay …` created from locking the service user out, as SQLite does
/// for its own side files.
pub fn match_owner(file: &File, reference: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (Ok(mine), Ok(wanted)) = (file.metadata(), std::fs::metadata(reference)) else {
            return;
        };
        if (mine.uid(), mine.gid()) != (wanted.uid(), wanted.gid()) {
            let _ = std::os::unix::fs::fchown(file, Some(wanted.uid()), Some(wanted.gid()));
        }
    }
    #[cfg(not(unix))]
    let _ = (file, reference);
}

/// What the file system holding the database can take: the bytes an unprivileged process
/// may still write, and whether it is mounted read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    pub available_bytes: u64,
    /// The file system's size (what `available_bytes` is a share of).
    pub total_bytes: u64,
    pub read_only: bool,
}

/// [`Space`] of the file system holding `path` (`statvfs`); `None` where the platform
/// cannot say.
pub fn space(path: &Path) -> io::Result<Option<Space>> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::ffi::CString::new(parent_dir(path).as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: `dir` is a NUL-terminated path that outlives the call, and `stats` is a
        // plain C struct that statvfs fills in; it is only read after statvfs succeeded.
        let stats = unsafe {
            let mut stats: libc::statvfs = std::mem::zeroed();
            if libc::statvfs(dir.as_ptr(), &mut stats) != 0 {
                return Err(io::Error::last_os_error());
            }
            stats
        };
        // f_bavail, not f_bfree: the service does not run as root, so the blocks reserved
        // for root are not its to use.
        #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
        let available_bytes = (stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64);
        #[allow(clippy::unnecessary_cast)]
        let total_bytes = (stats.f_blocks as u64).saturating_mul(stats.f_frsize as u64);
        #[allow(clippy::unnecessary_cast)]
        let read_only = (stats.f_flag as u64) & (libc::ST_RDONLY as u64) != 0;
        Ok(Some(Space {
            available_bytes,
            total_bytes,
            read_only,
        }))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(None)
    }
}

/// Makes a new directory entry durable. Best effort: not every platform can open a
/// directory for syncing, and the data itself is synced already.
pub fn sync_dir(path: &Path) {
    if let Ok(dir) = File::open(parent_dir(path)) {
        let _ = dir.sync_all();
    }
}

/// The advisory lock on `PATH.lock` (a `flock`, released by the kernel when the process
/// ends, however it ends). Held shared by every open [`super::Db`] and exclusively by a
/// restore. The lock file is never removed: removing it would let two processes lock two
/// different files of the same name.
#[derive(Debug)]
pub struct UseLock {
    _file: File,
}

/// The lock file of the database at `path`.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    with_suffix(path, ".lock")
}

fn open_lock_file(path: &Path) -> io::Result<File> {
    open_side_lock(path, lock_path(path))
}

/// Opens (or creates, private and owned like the database) `lock`, a lock file beside the
/// database at `path`.
fn open_side_lock(path: &Path, lock: PathBuf) -> io::Result<File> {
    let opened = match private_new_file().open(&lock) {
        Ok(file) => {
            // Created by us: give it the owner of the database (or its directory), so a
            // root-run command does not leave a lock file the service cannot open.
            let reference = if path.exists() {
                path
            } else {
                parent_dir(path)
            };
            match_owner(&file, reference);
            Ok(file)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            OpenOptions::new().read(true).write(true).open(&lock)
        }
        Err(e) => Err(e),
    };
    opened.map_err(|e| io::Error::new(e.kind(), format!("cannot open {}: {e}", lock.display())))
}

impl UseLock {
    /// Takes the lock shared, as every user of the database does. While a restore holds it
    /// exclusively this waits (saying so) until the restore is done, so nothing opens the
    /// file halfway through a restore.
    pub(crate) fn shared(path: &Path) -> io::Result<UseLock> {
        let file = open_lock_file(path)?;
        match file.try_lock_shared() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                log::warn!(
                    "{} is being restored; waiting for the restore to finish",
                    path.display()
                );
                file.lock_shared()?;
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
        Ok(UseLock { _file: file })
    }

    /// Takes the lock exclusively without waiting: `None` while any leadrelay process
    /// (`serve`, another command) has the database open.
    pub fn try_exclusive(path: &Path) -> io::Result<Option<UseLock>> {
        let file = open_lock_file(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(UseLock { _file: file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

/// The lock file that says which process serves the database at `path`.
pub fn serve_lock_path(path: &Path) -> PathBuf {
    with_suffix(path, ".serve.lock")
}

/// The lock only `serve` takes (a `flock`, exclusive, on `PATH.serve.lock`, which holds
/// the serving process's id): one server per database. Two servers on one file would
/// each run an outbox worker and a retention purge over the same rows, and the second
/// would start without a word. It is separate from [`UseLock`], which every command holds
/// shared, so the CLI keeps working beside the server. Like that lock, the file is never
/// removed, and the kernel releases the lock however the server ends.
#[derive(Debug)]
pub struct ServeLock {
    _file: File,
}

/// Why `serve` could not take the [`ServeLock`].
#[derive(Debug, thiserror::Error)]
pub enum ServeLockError {
    #[error(
        "{path} is already served by process {pid} (leadrelay serve); stop that server first, or serve another --db"
    )]
    Held { path: String, pid: String },
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl ServeLock {
    /// Takes the lock without waiting and writes this process's id into it, or says which
    /// process holds it.
    pub fn take(path: &Path) -> Result<ServeLock, ServeLockError> {
        use std::io::{Read, Seek, Write};
        let mut file = open_side_lock(path, serve_lock_path(path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = match pid.trim() {
                    // The holder took the lock a moment ago and has not written its id yet.
                    "" => "(its id not yet written)".to_string(),
                    id => id.to_string(),
                };
                return Err(ServeLockError::Held {
                    path: path.display().to_string(),
                    pid,
                });
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        file.flush()?;
        Ok(ServeLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_files_are_named_like_sqlite_names_them() {
        let path = Path::new("/var/lib/leadrelay/leadrelay.db");
        assert_eq!(wal(path), Path::new("/var/lib/leadrelay/leadrelay.db-wal"));
        assert_eq!(
            lock_path(Path::new("leadrelay.db")),
            Path::new("leadrelay.db.lock")
        );
        assert_eq!(parent_dir(Path::new("leadrelay.db")), Path::new("."));
    }

    #[test]
    fn an_exclusive_lock_is_refused_while_a_shared_one_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let shared = UseLock::shared(&path).unwrap();
        // A second shared holder is fine (a CLI command beside the server).
        let second = UseLock::shared(&path).unwrap();
        assert!(UseLock::try_exclusive(&path).unwrap().is_none());
        drop(shared);
        assert!(UseLock::try_exclusive(&path).unwrap().is_none());
        drop(second);
        let exclusive = UseLock::try_exclusive(&path).unwrap();
        assert!(exclusive.is_some());
        assert!(UseLock::try_exclusive(&path).unwrap().is_none());
    }

    #[test]
    fn a_second_serve_lock_names_the_holder_and_the_first_dropped_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let first = ServeLock::take(&path).unwrap();
        // The use lock is independent: commands keep working beside the server.
        let _command = UseLock::shared(&path).unwrap();
        match ServeLock::take(&path) {
            Err(ServeLockError::Held { pid, .. }) => {
                assert_eq!(pid, std::process::id().to_string())
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        drop(first);
        ServeLock::take(&path).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn an_open_file_is_tightened_and_a_private_one_left_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        let wal = wal(&path);
        std::fs::write(&wal, b"").unwrap();
        std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o644)).unwrap();
        prepare(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&wal), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        make_private(&path).unwrap();
        assert_eq!(mode(&path), 0o400);
    }
}
