//! The database handle: one SQLite file, a pool of read connections, one writer thread and
//! one checkpointer thread.
//!
//! Owns opening the file, the connection PRAGMAs, migrations and the split between reads
//! (r2d2 pool, run on tokio's blocking threads) and writes (the group-commit writer of
//! [`writer`], whose WAL the thread of [`checkpoint`] copies into the file); [`files`] owns the files on disk (names, private modes, the lock that says
//! the database is in use). It does not own any domain SQL: each domain module brings its
//! own statements and runs them through [`Db::read`] and [`Db::write`].

mod checkpoint;
pub mod files;
mod migrate;
pub mod sqlite_memory;
pub mod sqlite_page_cache;
mod sqlite_writes;
mod statements;
pub mod stored;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::Connection;

pub use migrate::{SCHEMA_VERSION, apply as apply_migrations, schema_version};
pub use statements::{KeptStatement, PrepareKept};
pub use writer::{
    CheckpointStats, Deferred, LastCommit, MAX_QUEUED_WRITES, Undo, WriterStats, rollbacks,
    running_job,
};

/// How long a connection waits for another process's write lock (the server's writer
/// behind a full queue, a CLI command, a backup) before it gives up with `SQLITE_BUSY`,
/// unless [`set_busy_timeout`] changed it: long enough that a CLI write queued behind
/// the server's busiest moments goes through.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The busy timeout of this process's connections, in milliseconds. A process setting
/// (`--busy-timeout`, set once at start-up) rather than a `Db` field, because the
/// message of a busy error ([`DbError::Sqlite`]) names it and errors do not know their
/// `Db`.
static BUSY_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_BUSY_TIMEOUT.as_millis() as u64);

/// Sets how long this process's connections wait for another process's write lock. Call it
/// before opening a [`Db`]; connections opened earlier keep their timeout.
pub fn set_busy_timeout(timeout: Duration) {
    let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    BUSY_TIMEOUT_MS.store(ms, Ordering::Relaxed);
}

/// How long this process's connections wait for another process's write lock.
pub fn busy_timeout() -> Duration {
    Duration::from_millis(BUSY_TIMEOUT_MS.load(Ordering::Relaxed))
}

/// The writer connection's page cache: 64 MiB (`PRAGMA cache_size` reads a negative
/// count as KiB).
const WRITER_CACHE_KIB: i64 = -65_536;

/// Prepared statements kept per connection (see [`configure`]).
const STATEMENT_CACHE_CAPACITY: usize = 128;

/// How many read connections the pool keeps. Reads are short; this mostly bounds memory.
const READ_POOL_SIZE: u32 = 16;

/// How long [`Db::checkpoint_truncate`] waits before trying again while another connection
/// checkpoints (a pass takes a few milliseconds).
const CHECKPOINT_RETRY: Duration = Duration::from_millis(5);

/// Errors of the storage layer itself, as opposed to the domain errors that jobs return.
///
/// No variant names its inner error as a `source`: the message already contains it, and
/// the CLI prints the whole chain (`{e:#}`), which would repeat it.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A busy error names the wait and says to retry; see [`sqlite_message`].
    #[error("{}", sqlite_message(.0))]
    Sqlite(rusqlite::Error),
    #[error("database pool error: {0}")]
    Pool(r2d2::Error),
    /// The writer thread has stopped (shutdown) or went away.
    #[error("database writer has stopped")]
    WriterGone,
    /// `DbOptions::max_queued_writes` jobs are waiting for the writer already: the job was not
    /// queued, so that a burst the disk cannot keep up with is refused at once instead of
    /// waiting in an ever longer queue.
    #[error("too many writes are waiting for the database")]
    Overloaded,
    /// The job's writes did not commit (the group's commit failed, or SQLite rolled the
    /// group transaction back); `fault` when the cause was the storage.
    #[error("{}", group_failed_message(why, *fault))]
    GroupFailed {
        why: String,
        fault: Option<StorageFault>,
    },
    /// A job panicked; its writes were rolled back (its savepoint, or for a job without one
    /// its group's transaction, whose other jobs are then told so).
    #[error("database job panicked")]
    JobPanicked,
    #[error("database file error: {0}")]
    Io(std::io::Error),
    /// The file's schema is newer than this binary knows.
    #[error("database schema version {found} is newer than this binary knows ({known})")]
    SchemaTooNew { found: i64, known: i64 },
}

/// The text of an SQLite error: a busy one says how long this process waited and to
/// retry, the others are SQLite's own words.
fn sqlite_message(e: &rusqlite::Error) -> String {
    match StorageFault::of(e) {
        Some(StorageFault::Busy) => busy_message(),
        _ => format!("database error: {e}"),
    }
}

/// The text of a group failure: for a busy file the same words as a busy statement, since
/// that is what the user can act on.
fn group_failed_message(why: &str, fault: Option<StorageFault>) -> String {
    match fault {
        Some(StorageFault::Busy) => busy_message(),
        _ => format!("write not committed: {why}"),
    }
}

fn busy_message() -> String {
    format!(
        "database is busy: another process held the write lock for {}; retry",
        crate::duration::format(busy_timeout())
    )
}

/// Why the file cannot take a write now: the error classes that are the storage's fault,
/// not the request's, and pass when the operator (or the other process) is done. The HTTP
/// layer answers them 503 with `Retry-After`, never 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFault {
    /// `SQLITE_FULL`: the disk (or a quota) is full.
    Full,
    /// `SQLITE_READONLY`: the file or its file system cannot be written.
    ReadOnly,
    /// `SQLITE_IOERR`, `SQLITE_CANTOPEN`: the operating system refused a read or write.
    Io,
    /// `SQLITE_BUSY`, `SQLITE_LOCKED`: another process held the write lock too long.
    Busy,
}

impl StorageFault {
    /// The fault an SQLite error stands for, if it is one.
    pub fn of(e: &rusqlite::Error) -> Option<StorageFault> {
        let rusqlite::Error::SqliteFailure(failure, _) = e else {
            return None;
        };
        use rusqlite::ErrorCode as C;
        match failure.code {
            C::DiskFull => Some(StorageFault::Full),
            C::ReadOnly => Some(StorageFault::ReadOnly),
            C::SystemIoFailure | C::CannotOpen => Some(StorageFault::Io),
            C::DatabaseBusy | C::DatabaseLocked => Some(StorageFault::Busy),
            _ => None,
        }
    }

    /// A short name for log lines and error codes.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageFault::Full => "disk_full",
            StorageFault::ReadOnly => "read_only",
            StorageFault::Io => "io_error",
            StorageFault::Busy => "busy",
        }
    }
}

impl DbError {
    /// The storage fault behind this error, if it is one.
    pub fn storage_fault(&self) -> Option<StorageFault> {
        match self {
            DbError::Sqlite(e) => StorageFault::of(e),
            DbError::GroupFailed { fault, .. } => *fault,
            DbError::Io(e) => match e.kind() {
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                    Some(StorageFault::Full)
                }
                std::io::ErrorKind::ReadOnlyFilesystem => Some(StorageFault::ReadOnly),
                _ => None,
            },
            _ => None,
        }
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        DbError::Sqlite(e)
    }
}

impl From<r2d2::Error> for DbError {
    fn from(e: r2d2::Error) -> Self {
        DbError::Pool(e)
    }
}

/// Cheap to clone; every clone talks to the same pool and writer thread.
#[derive(Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    pool: r2d2::Pool<SqliteConnectionManager>,
    writer: writer::WriterHandle,
    checkpointer: checkpoint::Checkpointer,
    /// Declared last so it is released after the connections above are closed.
    _in_use: files::UseLock,
}

/// Sets the PRAGMAs every connection needs. WAL lets readers run beside the writer;
/// `synchronous=FULL` makes a commit durable before we answer 2xx.
fn configure(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(busy_timeout())?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Deleted and overwritten content is zeroed, in pages that stay and in pages that go to
    // the free list (`FAST` would leave it on free-list pages, which a backup copies), so an
    // erased person is not left in the file's bytes (DESIGN.md section 12).
    conn.pragma_update(None, "secure_delete", "ON")?;
    // Most writer jobs run in a SAVEPOINT, whose journal SQLite would otherwise move to a
    // temporary file once it outgrows 64 KiB: a file created and deleted per large job.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // The writer keeps its statements itself (`statements`); a reader or the CLI runs the same
    // owners' statements through this cache, and rusqlite's default of 16 would re-prepare
    // most of them on every call.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    Ok(())
}

/// The writer's connection: through [`sqlite_writes`], whose held WAL writes are safe
/// only because [`configure`] sets `synchronous=FULL` (a commit syncs the WAL before other
/// connections may read its frames).
fn open_writer_connection(path: &Path) -> rusqlite::Result<Connection> {
    sqlite_writes::open_connection(path, sqlite_writes::VFS_NAME)
}

/// Settings of a [`Db`] beyond its file.
#[derive(Debug, Clone, Copy)]
pub struct DbOptions {
    /// Request write jobs queued or running at most; past it [`Db::write`] answers
    /// [`DbError::Overloaded`].
    pub max_queued_writes: usize,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            max_queued_writes: MAX_QUEUED_WRITES,
        }
    }
}

impl Db {
    /// Opens (creating when missing) the database file, applies migrations and starts the
    /// writer thread. The file and its `-wal`/`-shm` are made private (0600) first, and the
    /// handle holds the database's in-use lock until the last clone is dropped.
    pub fn open(path: impl AsRef<Path>) -> Result<Db, DbError> {
        Db::open_with(path, DbOptions::default())
    }

    /// [`Db::open`] with `options`.
    pub fn open_with(path: impl AsRef<Path>, options: DbOptions) -> Result<Db, DbError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(DbError::Io)?;
        }
        // Lock before touching the file: a restore in progress finishes first.
        let in_use = files::UseLock::shared(&path).map_err(DbError::Io)?;
        files::prepare(&path).map_err(DbError::Io)?;

        let mut write_conn = open_writer_connection(&path)?;
        // A new file gives freed pages back to the file system on request (`PRAGMA
        // incremental_vacuum`, run after a purge). The mode is written into the file's
        // first page, so it must be chosen before anything else writes it (even the switch
        // to WAL); an older file keeps its mode until `leadrelay vacuum` switches it.
        let page_count: i64 = write_conn.pragma_query_value(None, "page_count", |r| r.get(0))?;
        if page_count == 0 {
            write_conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        }
        configure(&mut write_conn)?;
        // The writer's page cache holds the b-tree pages its jobs walk; with SQLite's default
        // of 2 MB, a file of a million delivered leads made every delivery fetch the leaf
        // pages of its random-keyed indexes again from the OS, and auto-delivery ran 6-7%
        // slower than on a fresh file, with it not slower (`PREFILL=1000000
        // bench/autodelivery.sh`, BENCHMARKS.md). Only the writer's: the
        // readers are many and short-lived, and its pages stay valid between jobs since no
        // other connection writes.
        write_conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
        migrate::apply(&mut write_conn)?;

        let manager = SqliteConnectionManager::file(&path).with_init(configure);
        // No test query on checkout: a local SQLite connection does not go stale the way a
        // network connection does, and ingest checks out a connection on every request.
        let pool = r2d2::Pool::builder()
            .max_size(READ_POOL_SIZE)
            .min_idle(Some(2))
            .test_on_check_out(false)
            .build(manager)?;
        let checkpoints = Arc::new(checkpoint::Counters::default());
        let checkpointer = checkpoint::Checkpointer::start(&path, checkpoints.clone())?;
        let writer = writer::WriterHandle::start(
            write_conn,
            options.max_queued_writes.max(1),
            checkpointer.nudge(),
            checkpoints,
        )?;
        Ok(Db {
            inner: Arc::new(Inner {
                path,
                pool,
                writer,
                checkpointer,
                _in_use: in_use,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on a pooled read connection on tokio's blocking threads.
    pub async fn read<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        let db = self.clone();
        match tokio::task::spawn_blocking(move || db.read_blocking(f)).await {
            Ok(result) => result,
            Err(join_error) => {
                log::error!("read job failed: {join_error}");
                Err(E::from(DbError::JobPanicked))
            }
        }
    }

    /// Runs `f` on a pooled read connection on the calling thread (CLI, worker threads).
    pub fn read_blocking<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Connection) -> Result<T, E>,
        E: From<DbError>,
    {
        let conn = self.inner.pool.get().map_err(DbError::from)?;
        f(&conn)
    }

    /// Runs `f` in its own savepoint inside the writer's current group transaction and
    /// answers once the group has committed. An `Err` from `f` rolls back only `f`'s writes.
    ///
    /// For requests: when `DbOptions::max_queued_writes` jobs are waiting already, `f` is not
    /// queued and the answer is [`DbError::Overloaded`] at once. The job carries the
    /// current request id (`request_id::current`) into the writer's log lines.
    pub async fn write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        self.write_as(f, None, Undo::Savepoint).await
    }

    /// [`Db::write`] for a job that leaves writes to its group (`deferred`: the report
    /// roll-up, whose figures for a lead are then summed with the group's other jobs' and
    /// written once before the group commits, in the same transaction). Only for a job that
    /// reads and deletes nothing the deferred writes refer to (ingest).
    ///
    /// `undo`: [`Undo::Group`] for a job that fails only before its first write unless the
    /// database or a bug fails it (ingest, whose refusals are answers): it runs without a
    /// savepoint of its own, which spares SQLite a copy of every page the job changes. Should
    /// it fail after writing anyway, the group's transaction is rolled back, and the group's
    /// earlier jobs are answered with [`DbError::GroupFailed`].
    pub async fn write_deferring<T, E, F>(
        &self,
        deferred: &'static dyn writer::Deferred,
        undo: Undo,
        f: F,
    ) -> Result<T, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        self.write_as(f, Some(deferred), undo).await
    }

    async fn write_as<T, E, F>(
        &self,
        f: F,
        deferred: Option<&'static dyn writer::Deferred>,
        undo: Undo,
    ) -> Result<T, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        let reply = self
            .inner
            .writer
            .submit(f, writer::Admission::Bounded, deferred, undo)?;
        match reply.await {
            Ok(result) => result,
            Err(_) => Err(E::from(DbError::WriterGone)),
        }
    }

    /// [`Db::write`] for threads outside the async runtime (CLI commands, the outbox
    /// workers): always queued, however long the queue, since these callers are few and
    /// each waits for its answer before it writes again.
    pub fn write_blocking<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        let reply =
            self.inner
                .writer
                .submit(f, writer::Admission::Always, None, Undo::Savepoint)?;
        match reply.blocking_recv() {
            Ok(result) => result,
            Err(_) => Err(E::from(DbError::WriterGone)),
        }
    }

    /// Copies the WAL into the database file and truncates it to nothing, so old copies of
    /// changed pages (the content before an erasure) are gone from the WAL too. Waits for
    /// readers, writers and other checkpoints up to the busy timeout; `false` when it could
    /// not finish (the WAL is then emptied by a later checkpoint).
    pub fn checkpoint_truncate(&self) -> Result<bool, DbError> {
        let conn = self.inner.pool.get()?;
        let deadline = std::time::Instant::now() + busy_timeout();
        loop {
            let busy: i64 =
                conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
            if busy == 0 {
                return Ok(true);
            }
            if std::time::Instant::now() >= deadline {
                return Ok(false);
            }
            // SQLite waits (through the busy handler) for readers and writers, but answers
            // busy at once while another connection checkpoints: the running server's
            // checkpointer thread does several passes a second under load, so an erasure's
            // CLI would often report an unemptied WAL without this wait.
            std::thread::sleep(CHECKPOINT_RETRY);
        }
    }

    /// Figures of the writer: groups committed, jobs run, the last group's size, the
    /// queue, refusals.
    pub fn writer_stats(&self) -> WriterStats {
        self.inner.writer.stats()
    }

    /// How the writer's most recent group transaction ended, if it ran one.
    pub fn last_commit(&self) -> Option<LastCommit> {
        self.inner.writer.last_commit()
    }

    /// Stops the writer after the jobs already queued, checkpoints the WAL into the main
    /// file and waits for the thread to end. Later writes fail with [`DbError::WriterGone`].
    pub fn close(&self) {
        // The checkpointer first: a pass of its own under way would make the writer's final
        // checkpoint busy, and leave the WAL behind.
        self.inner.checkpointer.stop();
        self.inner.writer.stop();
    }
}

/// The steps of SQLite's plan for `sql` with `params` (EXPLAIN QUERY PLAN's detail column):
/// the unit tests that pin a statement to an index read them.
#[cfg(any(test, feature = "testing"))]
pub fn query_plan(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Vec<String> {
    conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("the statement under test compiles")
        .query_map(params, |row| row.get::<_, String>(3))
        .expect("its plan can be read")
        .collect::<Result<_, _>>()
        .expect("every plan step is text")
}

#[cfg(test)]
mod tests;
