//! The writer connection's WAL writes, gathered into one system call per commit.
//!
//! Why: SQLite writes every WAL frame as two `pwrite` calls (its 24-byte header, then the
//! page), so a commit of 36 pages (22 single leads: the `leads` leaf, a leaf of each
//! random-keyed index, the roll-ups) makes 72 calls before its `fsync`. Each call pays the
//! system call and the file system's per-write bookkeeping; written as one run, the same
//! bytes cost 80-90 µs less CPU per commit (36 frames, on this project's machines).
//!
//! How: a VFS named [`VFS_NAME`] that is the platform's default VFS except for the files
//! SQLite opens as a WAL. Those hold back a write that continues the run of bytes before
//! it (up to [`MAX_HELD`]) and write the run at once before anything else touches the file:
//! before a sync, a read, a size, a truncation, a file control, a fetch or the close. Any
//! other write (not contiguous, or too large) writes the held run first.
//!
//! Why that is safe: other connections (the readers, the checkpointer, another process)
//! read WAL frames through their own file descriptors, but only frames that a commit has
//! published in the WAL index, and SQLite publishes a commit only after it synced the WAL
//! when the connection runs `synchronous=FULL` (`sqlite3WalFrames`: write the frames, sync,
//! then append them to the index and write its header). The sync writes the held run
//! first. With `synchronous=NORMAL` a commit is published without a sync, so only a
//! connection that keeps `FULL` may use this VFS: [`super::Db`]'s writer, whose settings
//! say so. A failed write of the run fails the sync, so the commit fails as it would had
//! its own write failed; a crash loses only bytes that were never synced, which a commit
//! never relies on.

#[cfg(test)]
use std::cell::Cell;
use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name a connection opens the file with to use this VFS.
pub(crate) const VFS_NAME: &CStr = c"leadrelay-wal-writes";

/// The most bytes held back before they are written: a few commits of frames. A large
/// transaction (a migration) writes its frames in runs of this size.
const MAX_HELD: usize = 1024 * 1024;

/// The most bytes one write passes to the default VFS: the unix VFS writes at most
/// 128 KiB - 1 bytes per call (it masks the length), so a held run goes in pieces of 64 KiB,
/// 16 pages and their frame headers.
const MAX_WRITE: usize = 64 * 1024;

// What a test reads: writes that joined a held run (no system call of their own) and runs
// written, per thread (SQLite writes on the thread that runs the statement, so a test counts
// its own connection's). Not kept outside tests.
#[cfg(test)]
thread_local! {
    static WRITES_JOINED: Cell<u64> = const { Cell::new(0) };
    static RUNS_WRITTEN: Cell<u64> = const { Cell::new(0) };
}

/// Writes on this thread that joined a held run instead of making their own system call.
#[cfg(test)]
pub(crate) fn writes_joined() -> u64 {
    WRITES_JOINED.with(Cell::get)
}

/// Held runs written on this thread.
#[cfg(test)]
pub(crate) fn runs_written() -> u64 {
    RUNS_WRITTEN.with(Cell::get)
}

/// The default VFS the registered one forwards to.
struct Inner(*mut ffi::sqlite3_vfs);
// SAFETY: SQLite's default VFS lives for the process and is only read; SQLite reads it from
// any thread, as it does its own VFSes.
unsafe impl Send for Inner {}
unsafe impl Sync for Inner {}

static INNER: OnceLock<Inner> = OnceLock::new();
/// The outcome of the registration, made once per process.
static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();

/// Registers the VFS (once per process); an error is SQLite's code when it has no default
/// VFS or refuses the registration.
pub(crate) fn register() -> Result<(), c_int> {
    *REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, which lives for the
        // process; the copy is leaked, so it outlives every connection using it.
        unsafe {
            let rc = ffi::sqlite3_initialize();
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            let inner = ffi::sqlite3_vfs_find(std::ptr::null());
            if inner.is_null() {
                return Err(ffi::SQLITE_ERROR);
            }
            let _ = INNER.set(Inner(inner));
            let mut vfs = std::ptr::read(inner);
            // The copy keeps the default VFS's methods and their `pAppData` (the unix VFS
            // finds its locking style there), so every call but xOpen behaves as the default
            // VFS's.
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pNext = std::ptr::null_mut();
            vfs.szOsFile = (*inner).szOsFile + std::mem::size_of::<WalFile>() as c_int;
            vfs.xOpen = Some(open);
            match ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 0) {
                ffi::SQLITE_OK => Ok(()),
                rc => Err(rc),
            }
        }
    })
}

fn inner_vfs() -> *mut ffi::sqlite3_vfs {
    INNER.get().expect("registered before any open").0
}

/// A WAL file: SQLite's file header, the default VFS's file after this struct (in the
/// same allocation of `szOsFile` bytes), and the held run.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    held: Vec<u8>,
    held_at: i64,
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let inner_vfs = inner_vfs();
    // SAFETY: `file` has room for `szOsFile` bytes, ours: the default VFS's file fits at
    // its start, or after a WalFile; SQLite calls xClose only when pMethods is set.
    unsafe {
        let inner_open = (*inner_vfs).xOpen.expect("a VFS opens files");
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            return inner_open(inner_vfs, name, file, flags, out_flags);
        }
        let wal = file as *mut WalFile;
        let inner = wal.add(1) as *mut ffi::sqlite3_file;
        let rc = inner_open(inner_vfs, name, inner, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*inner).pMethods.is_null() {
            (*file).pMethods = std::ptr::null();
            return if rc == ffi::SQLITE_OK {
                ffi::SQLITE_CANTOPEN
            } else {
                rc
            };
        }
        std::ptr::write(
            wal,
            WalFile {
                base: ffi::sqlite3_file {
                    pMethods: &WAL_METHODS,
                },
                inner,
                held: Vec::new(),
                held_at: 0,
            },
        );
        ffi::SQLITE_OK
    }
}

/// The WAL file behind `file`.
///
/// # Safety
/// `file` was opened by [`open`] as a WAL and not closed.
unsafe fn wal<'a>(file: *mut ffi::sqlite3_file) -> &'a mut WalFile {
    unsafe { &mut *(file as *mut WalFile) }
}

/// The default VFS's methods for the file.
fn methods(wal: &WalFile) -> &'static ffi::sqlite3_io_methods {
    // SAFETY: the default VFS set them at open and they live for the process.
    unsafe { &*(*wal.inner).pMethods }
}

/// Writes the held run, if any; the run is dropped either way, so that a failed write is
/// reported once (by the call that needed it) and never written later at a stale place.
fn write_held(wal: &mut WalFile) -> c_int {
    if wal.held.is_empty() {
        return ffi::SQLITE_OK;
    }
    let write = methods(wal).xWrite.expect("a file writes");
    let mut rc = ffi::SQLITE_OK;
    let mut offset = wal.held_at;
    for piece in wal.held.chunks(MAX_WRITE) {
        // SAFETY: the piece is valid for its length, at most MAX_WRITE.
        rc = unsafe {
            write(
                wal.inner,
                piece.as_ptr() as *const c_void,
                piece.len() as c_int,
                offset,
            )
        };
        if rc != ffi::SQLITE_OK {
            break;
        }
        offset += piece.len() as i64;
    }
    wal.held.clear();
    #[cfg(test)]
    RUNS_WRITTEN.with(|runs| runs.set(runs.get() + 1));
    rc
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: SQLite passes a file opened by `open` and `amount` readable bytes at `data`.
    let (wal, bytes) = unsafe {
        (
            wal(file),
            std::slice::from_raw_parts(data as *const u8, amount.max(0) as usize),
        )
    };
    let continues = offset == wal.held_at + wal.held.len() as i64;
    if !wal.held.is_empty() && continues && wal.held.len() + bytes.len() <= MAX_HELD {
        wal.held.extend_from_slice(bytes);
        #[cfg(test)]
        WRITES_JOINED.with(|joined| joined.set(joined.get() + 1));
        return ffi::SQLITE_OK;
    }
    let rc = write_held(wal);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    if bytes.len() > MAX_WRITE {
        let write = methods(wal).xWrite.expect("a file writes");
        // SAFETY: forwarded as SQLite gave them.
        return unsafe { write(wal.inner, data, amount, offset) };
    }
    wal.held.extend_from_slice(bytes);
    wal.held_at = offset;
    ffi::SQLITE_OK
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: the last call on the file: its WalFile is dropped in place, as SQLite frees
    // the memory afterwards without knowing of the Vec.
    unsafe {
        let wal = wal(file);
        let written = write_held(wal);
        let close = methods(wal).xClose.expect("a file closes");
        let closed = close(wal.inner);
        std::ptr::drop_in_place(wal as *mut WalFile);
        (*file).pMethods = std::ptr::null();
        if written != ffi::SQLITE_OK {
            written
        } else {
            closed
        }
    }
}

/// Forwards a method that reads or changes the file after writing the held run.
macro_rules! after_held {
    ($name:ident, $method:ident, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> c_int {
            // SAFETY: SQLite passes a file opened by `open`; the arguments are forwarded.
            unsafe {
                let wal = wal(file);
                let rc = write_held(wal);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                match methods(wal).$method {
                    Some(method) => method(wal.inner, $($arg),*),
                    None => ffi::SQLITE_NOTFOUND,
                }
            }
        }
    };
}

/// Forwards a method that neither reads nor changes the file's bytes.
macro_rules! forward {
    ($name:ident, $method:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty, $missing:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> $ret {
            // SAFETY: SQLite passes a file opened by `open`; the arguments are forwarded.
            unsafe {
                let wal = wal(file);
                match methods(wal).$method {
                    Some(method) => method(wal.inner, $($arg),*),
                    None => $missing,
                }
            }
        }
    };
}

after_held!(read, xRead, (data: *mut c_void, amount: c_int, offset: ffi::sqlite3_int64));
after_held!(truncate, xTruncate, (size: ffi::sqlite3_int64));
after_held!(sync, xSync, (flags: c_int));
after_held!(file_size, xFileSize, (size: *mut ffi::sqlite3_int64));
after_held!(file_control, xFileControl, (op: c_int, arg: *mut c_void));
after_held!(fetch, xFetch, (offset: ffi::sqlite3_int64, amount: c_int, out: *mut *mut c_void));
after_held!(unfetch, xUnfetch, (offset: ffi::sqlite3_int64, page: *mut c_void));
forward!(lock, xLock, (level: c_int) -> c_int, ffi::SQLITE_OK);
forward!(unlock, xUnlock, (level: c_int) -> c_int, ffi::SQLITE_OK);
forward!(check_reserved_lock, xCheckReservedLock, (out: *mut c_int) -> c_int, ffi::SQLITE_OK);
forward!(sector_size, xSectorSize, () -> c_int, 4096);
forward!(device_characteristics, xDeviceCharacteristics, () -> c_int, 0);
forward!(shm_map, xShmMap, (region: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int, ffi::SQLITE_IOERR);
forward!(shm_lock, xShmLock, (offset: c_int, n: c_int, flags: c_int) -> c_int, ffi::SQLITE_IOERR);
forward!(shm_unmap, xShmUnmap, (delete: c_int) -> c_int, ffi::SQLITE_OK);

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: SQLite passes a file opened by `open`.
    unsafe {
        if let Some(barrier) = methods(wal(file)).xShmBarrier {
            barrier(wal(file).inner)
        }
    }
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    fn writer(path: &std::path::Path) -> Connection {
        register().expect("the VFS registers");
        let conn =
            Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), VFS_NAME)
                .expect("opens through the VFS");
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", "FULL").unwrap();
        conn
    }

    #[test]
    fn commits_are_written_as_runs_and_every_reader_sees_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.db");
        let conn = writer(&path);
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        let (joined, runs) = (writes_joined(), runs_written());
        for commit in 1..=50_i64 {
            conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4) \
                 INSERT INTO t (v) SELECT randomblob(3000) FROM n",
                [],
            )
            .unwrap();
            let rows: i64 = reader
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .unwrap();
            assert_eq!(rows, commit * 4);
        }
        // Each commit writes at least three frames (two leaves and the root), two writes
        // each, of which all but the first join the run.
        assert!(
            writes_joined() - joined >= 50 * 5,
            "{}",
            writes_joined() - joined
        );
        // At least one run per commit, written before the commit's sync.
        assert!(runs_written() - runs >= 50, "{}", runs_written() - runs);
    }

    fn sum_and_count(conn: &Connection) -> (i64, i64) {
        conn.query_row("SELECT coalesce(sum(n), 0), count(*) FROM t", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
    }

    fn insert(conn: &Connection, rows: i64, size: i64) {
        conn.execute(
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1) \
             INSERT INTO t (n, v) SELECT i, randomblob(?2) FROM s",
            (rows, size),
        )
        .unwrap();
    }

    #[test]
    fn large_transactions_spills_rollbacks_and_restarts_keep_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("large.db");
        let conn = writer(&path);
        // A small cache makes a large transaction write frames before its commit.
        conn.pragma_update(None, "cache_size", 50).unwrap();
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, v BLOB)")
            .unwrap();
        let reader = Connection::open(&path).unwrap();

        // 3 MB in one commit: runs past the held limit and past the unix VFS's largest
        // write (128 KiB), which it refuses as a full disk.
        insert(&conn, 1000, 3000);
        assert_eq!(sum_and_count(&reader), (500_500, 1000));

        // Spilled, then rolled back: the reader never sees it, the writer goes on.
        conn.execute_batch("BEGIN").unwrap();
        insert(&conn, 2000, 3000);
        conn.execute_batch("ROLLBACK").unwrap();
        assert_eq!(sum_and_count(&reader), (500_500, 1000));

        // Checkpointed and truncated by another connection: the next commit restarts the
        // WAL from its first byte.
        reader
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap();
        for _ in 0..20 {
            insert(&conn, 10, 100);
        }
        assert_eq!(sum_and_count(&reader), (500_500 + 20 * 55, 1200));
        drop(conn);
        let check: String = reader
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        assert_eq!(
            sum_and_count(&Connection::open(&path).unwrap()),
            (501_600, 1200)
        );
    }

    #[test]
    fn a_file_that_cannot_be_opened_is_an_error() {
        register().unwrap();
        let missing = std::path::Path::new("/nonexistent-dir/x.db");
        assert!(
            Connection::open_with_flags_and_vfs(missing, rusqlite::OpenFlags::default(), VFS_NAME)
                .is_err()
        );
    }
}
