//! SQLite's writes on the writer's and the checkpointer's connections: the WAL's gathered
//! into one system call per commit, the database file's sent on their way to the disk as
//! they are made.
//!
//! **The WAL.** SQLite writes every WAL frame as two `pwrite` calls (its 24-byte header,
//! then the page), so a commit of 36 pages (22 single leads: the `leads` leaf, a leaf of
//! each random-keyed index, the roll-ups) makes 72 calls before its `fsync`. Each call pays
//! the system call and the file system's per-write bookkeeping; written as one run, the
//! same bytes cost 80-90 µs less CPU per commit (36 frames, on this project's machines).
//!
//! How: the writer's VFS, named [`VFS_NAME`], is the platform's default VFS except for the
//! files SQLite opens as a WAL. Those hold back a write that continues the run of bytes
//! before it (up to [`MAX_HELD`]) and write the run at once before anything else touches
//! the file: before a sync, a read, a size, a truncation, a file control, a fetch or the
//! close. Any other write (not contiguous, or too large) writes the held run first.
//!
//! Why that is safe: other connections (the readers, the checkpointer, another process)
//! read WAL frames through their own file descriptors, but only frames that a commit has
//! published in the WAL index, and SQLite publishes a commit only after it synced the WAL
//! when the connection runs `synchronous=FULL` (`sqlite3WalFrames`: write the frames, sync,
//! then append them to the index and write its header). The sync writes the held run
//! first. With `synchronous=NORMAL` a commit is published without a sync, so only a
//! connection that keeps `FULL` may hold WAL writes: [`super::Db`]'s writer, whose settings
//! say so. A failed write of the run fails the sync, so the commit fails as it would had
//! its own write failed; a crash loses only bytes that were never synced, which a commit
//! never relies on.
//!
//! **The database file.** In WAL mode only checkpoints write the database file: the
//! checkpointer's (a few MB at a time under load) and the writer's own before the WAL
//! restarts. Left to the kernel, a checkpoint's pages stay dirty in the page cache until its
//! closing `fsync`, which then writes them all at once; on this project's disks that sync
//! took 5-9 ms, and the writer's WAL syncs, which every answer waits for, queued behind it:
//! single leads' p99 followed those bursts. Both connections' database files (the
//! checkpointer's VFS, [`CHECKPOINT_VFS_NAME`], wraps only that file) start the writeback of
//! every [`WRITEBACK_BYTES`] they write (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`,
//! which starts the writes and waits for none), so that the closing sync finds little left
//! and the disk's queue never holds a whole checkpoint ahead of a WAL sync. Nothing about
//! durability changes: the checkpoint still syncs the file before it tells the WAL so.

#[cfg(test)]
use std::cell::Cell;
use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name the writer's connection opens the file with: WAL writes held, the database
/// file's written back as they come.
pub(crate) const VFS_NAME: &CStr = c"leadrelay-wal-writes";

/// The name the checkpointer's connection opens the file with: the database file's writes
/// written back as they come, the WAL as the default VFS opens it.
pub(crate) const CHECKPOINT_VFS_NAME: &CStr = c"leadrelay-checkpoint-writes";

/// Bytes of the database file written before their writeback is started: a few hundred
/// KB keep the disk's queue short without a system call per page.
const WRITEBACK_BYTES: i64 = 512 * 1024;

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
    static WRITEBACKS_STARTED: Cell<u64> = const { Cell::new(0) };
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

/// Writebacks of the database file started on this thread.
#[cfg(test)]
pub(crate) fn writebacks_started() -> u64 {
    WRITEBACKS_STARTED.with(Cell::get)
}

/// The name of the VFS `conn` opened its main database file through.
#[cfg(test)]
pub(crate) fn vfs_of(conn: &rusqlite::Connection) -> String {
    let mut vfs: *mut ffi::sqlite3_vfs = std::ptr::null_mut();
    // SAFETY: SQLITE_FCNTL_VFS_POINTER writes the pager's VFS, which lives for the process.
    unsafe {
        let rc = ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_VFS_POINTER,
            &mut vfs as *mut _ as *mut c_void,
        );
        assert_eq!(rc, ffi::SQLITE_OK);
        CStr::from_ptr((*vfs).zName).to_string_lossy().into_owned()
    }
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

/// Registers both VFSes (once per process); an error is SQLite's code when it has no
/// default VFS or refuses a registration.
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
            for name in [VFS_NAME, CHECKPOINT_VFS_NAME] {
                let mut vfs = std::ptr::read(inner);
                // The copy keeps the default VFS's methods and their `pAppData` (the unix
                // VFS finds its locking style there), so every call but xOpen behaves as
                // the default VFS's.
                vfs.zName = name.as_ptr();
                vfs.pNext = std::ptr::null_mut();
                vfs.szOsFile = (*inner).szOsFile + std::mem::size_of::<Wrapped>() as c_int;
                vfs.xOpen = Some(open);
                match ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 0) {
                    ffi::SQLITE_OK => {}
                    rc => return Err(rc),
                }
            }
            Ok(())
        }
    })
}

/// Opens `path` through the VFS named `vfs` ([`VFS_NAME`] or [`CHECKPOINT_VFS_NAME`]), or
/// through the default VFS, with a warning, when SQLite refuses to register them.
pub(crate) fn open_connection(
    path: &std::path::Path,
    vfs: &CStr,
) -> rusqlite::Result<rusqlite::Connection> {
    match register() {
        Ok(()) => {
            rusqlite::Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), vfs)
        }
        Err(code) => {
            log::warn!(
                "WAL writes are not gathered nor checkpoints written back as they go (SQLite \
                 refused the VFS: code {code})"
            );
            rusqlite::Connection::open(path)
        }
    }
}

fn inner_vfs() -> *mut ffi::sqlite3_vfs {
    INNER.get().expect("registered before any open").0
}

/// A wrapped file: SQLite's file header, the default VFS's file after this struct (in the
/// same allocation of `szOsFile` bytes), and what the wrapper keeps of it.
#[repr(C)]
struct Wrapped {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    kind: Kind,
}

enum Kind {
    /// A WAL on the writer's connection: the held run and where it starts.
    Wal { held: Vec<u8>, held_at: i64 },
    /// A database file: a descriptor of its own for `sync_file_range` (the default VFS's
    /// is not reachable; -1 when it could not be opened, and then no writeback is started),
    /// and the range written since the last writeback started.
    Database {
        fd: c_int,
        unstarted: Option<(i64, i64)>,
    },
}

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let inner_vfs = inner_vfs();
    // SAFETY: `file` has room for `szOsFile` bytes, ours: the default VFS's file fits at
    // its start, or after a Wrapped; SQLite calls xClose only when pMethods is set.
    unsafe {
        let inner_open = (*inner_vfs).xOpen.expect("a VFS opens files");
        // The writer's VFS holds WAL writes; the checkpointer's leaves its WAL alone.
        let writers = CStr::from_ptr((*vfs).zName) == VFS_NAME;
        let kind = if flags & ffi::SQLITE_OPEN_WAL != 0 && writers {
            Kind::Wal {
                held: Vec::new(),
                held_at: 0,
            }
        } else if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 && !name.is_null() {
            Kind::Database {
                // Opened below, once the default VFS has made the file if it was new.
                fd: -1,
                unstarted: None,
            }
        } else {
            return inner_open(inner_vfs, name, file, flags, out_flags);
        };
        let wrapped = file as *mut Wrapped;
        let inner = wrapped.add(1) as *mut ffi::sqlite3_file;
        let rc = inner_open(inner_vfs, name, inner, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*inner).pMethods.is_null() {
            (*file).pMethods = std::ptr::null();
            return if rc == ffi::SQLITE_OK {
                ffi::SQLITE_CANTOPEN
            } else {
                rc
            };
        }
        let mut kind = kind;
        if let Kind::Database { fd, .. } = &mut kind {
            *fd = libc::open(name, libc::O_RDONLY | libc::O_CLOEXEC);
        }
        std::ptr::write(
            wrapped,
            Wrapped {
                base: ffi::sqlite3_file {
                    pMethods: &WRAPPED_METHODS,
                },
                inner,
                kind,
            },
        );
        ffi::SQLITE_OK
    }
}

/// The wrapped file behind `file`.
///
/// # Safety
/// `file` was opened by [`open`] as a wrapped file and not closed.
unsafe fn wrapped<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Wrapped {
    unsafe { &mut *(file as *mut Wrapped) }
}

/// The default VFS's methods for the file.
fn methods(file: &Wrapped) -> &'static ffi::sqlite3_io_methods {
    // SAFETY: the default VFS set them at open and they live for the process.
    unsafe { &*(*file.inner).pMethods }
}

/// Writes the held run of a WAL, if any; the run is dropped either way, so that a failed
/// write is reported once (by the call that needed it) and never written later at a stale
/// place. Nothing to do for a database file.
fn write_held(file: &mut Wrapped) -> c_int {
    match &mut file.kind {
        Kind::Wal { held, held_at } => write_run(file.inner, held, *held_at),
        Kind::Database { .. } => ffi::SQLITE_OK,
    }
}

/// Writes `held`, the run at `held_at`, through the default VFS's file `inner`, and empties
/// it (see [`write_held`]).
fn write_run(inner: *mut ffi::sqlite3_file, held: &mut Vec<u8>, held_at: i64) -> c_int {
    if held.is_empty() {
        return ffi::SQLITE_OK;
    }
    // SAFETY: the default VFS set the file's methods at open and they live for the process.
    let write = unsafe { (*(*inner).pMethods).xWrite.expect("a file writes") };
    let mut rc = ffi::SQLITE_OK;
    let mut offset = held_at;
    for piece in held.chunks(MAX_WRITE) {
        // SAFETY: the piece is valid for its length, at most MAX_WRITE.
        rc = unsafe {
            write(
                inner,
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
    held.clear();
    #[cfg(test)]
    RUNS_WRITTEN.with(|runs| runs.set(runs.get() + 1));
    rc
}

/// Notes `amount` bytes written to a database file at `offset`, and starts the writeback
/// of what was written since the last start once that spans [`WRITEBACK_BYTES`].
fn written(fd: c_int, unstarted: &mut Option<(i64, i64)>, offset: i64, amount: i64) {
    if fd < 0 {
        return;
    }
    let (start, end) = match *unstarted {
        Some((start, end)) => (start.min(offset), end.max(offset + amount)),
        None => (offset, offset + amount),
    };
    if end - start < WRITEBACK_BYTES {
        *unstarted = Some((start, end));
        return;
    }
    *unstarted = None;
    start_writeback(fd, start, end - start);
}

/// Starts writing `len` bytes of the file at `offset` back to the disk, waiting for none of
/// it. Advisory: a failure changes nothing that the checkpoint's own sync does not do.
#[cfg(target_os = "linux")]
fn start_writeback(fd: c_int, offset: i64, len: i64) {
    // SAFETY: a plain system call on a descriptor this file owns.
    let rc = unsafe { libc::sync_file_range(fd, offset, len, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 {
        #[cfg(test)]
        WRITEBACKS_STARTED.with(|started| started.set(started.get() + 1));
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_fd: c_int, _offset: i64, _len: i64) {}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: SQLite passes a file opened by `open` and `amount` readable bytes at `data`.
    let (file, bytes) = unsafe {
        (
            wrapped(file),
            std::slice::from_raw_parts(data as *const u8, amount.max(0) as usize),
        )
    };
    let inner_write = methods(file).xWrite.expect("a file writes");
    let (held, held_at) = match &mut file.kind {
        Kind::Database { fd, unstarted } => {
            // SAFETY: forwarded as SQLite gave them.
            let rc = unsafe { inner_write(file.inner, data, amount, offset) };
            if rc == ffi::SQLITE_OK {
                written(*fd, unstarted, offset, i64::from(amount));
            }
            return rc;
        }
        Kind::Wal { held, held_at } => (held, held_at),
    };
    let continues = offset == *held_at + held.len() as i64;
    if !held.is_empty() && continues && held.len() + bytes.len() <= MAX_HELD {
        held.extend_from_slice(bytes);
        #[cfg(test)]
        WRITES_JOINED.with(|joined| joined.set(joined.get() + 1));
        return ffi::SQLITE_OK;
    }
    let rc = write_run(file.inner, held, *held_at);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    if bytes.len() > MAX_WRITE {
        // SAFETY: forwarded as SQLite gave them.
        return unsafe { inner_write(file.inner, data, amount, offset) };
    }
    held.extend_from_slice(bytes);
    *held_at = offset;
    ffi::SQLITE_OK
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: the last call on the file: its Wrapped is dropped in place, as SQLite frees
    // the memory afterwards without knowing of the Vec; the descriptor of a database file
    // is its own.
    unsafe {
        let wrapped = wrapped(file);
        let written = write_held(wrapped);
        let close = methods(wrapped).xClose.expect("a file closes");
        let closed = close(wrapped.inner);
        if let Kind::Database { fd, .. } = wrapped.kind
            && fd >= 0
        {
            libc::close(fd);
        }
        std::ptr::drop_in_place(wrapped as *mut Wrapped);
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
                let file = wrapped(file);
                let rc = write_held(file);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                match methods(file).$method {
                    Some(method) => method(file.inner, $($arg),*),
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
                let file = wrapped(file);
                match methods(file).$method {
                    Some(method) => method(file.inner, $($arg),*),
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
        if let Some(barrier) = methods(wrapped(file)).xShmBarrier {
            barrier(wrapped(file).inner)
        }
    }
}

static WRAPPED_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
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

    /// A file with the table `t` of [`insert`], opened by [`writer`].
    fn with_table(dir: &tempfile::TempDir) -> (std::path::PathBuf, Connection) {
        let path = dir.path().join("t.db");
        let conn = writer(&path);
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, v BLOB)")
            .unwrap();
        (path, conn)
    }

    /// The file passes SQLite's integrity check; `t`'s sum and count as a new connection
    /// reads them.
    fn whole(path: &std::path::Path) -> (i64, i64) {
        let conn = Connection::open(path).unwrap();
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        sum_and_count(&conn)
    }

    #[test]
    fn large_transactions_spills_rollbacks_and_restarts_keep_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = with_table(&dir);
        // A small cache makes a large transaction write frames before its commit.
        conn.pragma_update(None, "cache_size", 50).unwrap();
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
        assert_eq!(whole(&path), (501_600, 1200));
    }

    // `sync_file_range` is Linux's; elsewhere no writeback is started.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_checkpoint_starts_the_writeback_of_what_it_copies_and_keeps_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = with_table(&dir);
        // As the writer of `Db`, whose WAL hook turns SQLite's own checkpoints off.
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        // 3 MB in the WAL, about six times WRITEBACK_BYTES.
        insert(&conn, 1000, 3000);
        let checkpointer = open_connection(&path, CHECKPOINT_VFS_NAME).unwrap();
        let started = writebacks_started();
        let (busy, frames, copied): (i64, i64, i64) = checkpointer
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!((busy, copied), (0, frames), "the whole WAL is copied");
        // Counted on this thread, where the checkpoint wrote.
        let writebacks = writebacks_started() - started;
        assert!(
            (3..=10).contains(&writebacks),
            "{writebacks} writebacks started"
        );
        // The writer's own connection writes the file back too: its checkpoint copies the
        // next 3 MB.
        insert(&conn, 1000, 3000);
        let started = writebacks_started();
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(0))
            .unwrap();
        assert!(writebacks_started() - started >= 3);
        drop(checkpointer);
        drop(conn);
        assert_eq!(whole(&path), (2 * 500_500, 2000));
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
