//! The database handle: one SQLite file, a pool of read connections and one writer thread.
//!
//! Owns opening the file, the connection PRAGMAs, migrations and the split between reads
//! (r2d2 pool, run on tokio's blocking threads) and writes (the group-commit writer of
//! [`writer`]); [`files`] owns the files on disk (names, private modes, the lock that says
//! the database is in use). It does not own any domain SQL: each domain module brings its
//! own statements and runs them through [`Db::read`] and [`Db::write`].

pub(crate) mod files;
mod migrate;
pub(crate) mod stored;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::Connection;

pub use migrate::{SCHEMA_VERSION, apply as apply_migrations, schema_version};
pub use writer::{GROUP_SIZE_BOUNDS, WriterStats};

/// How long a connection waits for another writer (a CLI command on the same file, a
/// backup) before it gives up with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Prepared statements kept per connection (see [`configure`]).
const STATEMENT_CACHE_CAPACITY: usize = 128;

/// How many read connections the pool keeps. Reads are short; this mostly bounds memory.
const READ_POOL_SIZE: u32 = 16;

/// Errors of the storage layer itself, as opposed to the domain errors that jobs return.
///
/// No variant names its inner error as a `source`: the message already contains it, and
/// the CLI prints the whole chain (`{e:#}`), which would repeat it.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    #[error("database pool error: {0}")]
    Pool(r2d2::Error),
    /// The writer thread has stopped (shutdown) or went away.
    #[error("database writer has stopped")]
    WriterGone,
    /// The job's writes did not commit (the group's commit failed, or SQLite rolled the
    /// group transaction back).
    #[error("write not committed: {0}")]
    GroupFailed(String),
    /// A job panicked; its savepoint was rolled back and its neighbours were not affected.
    #[error("database job panicked")]
    JobPanicked,
    #[error("database file error: {0}")]
    Io(std::io::Error),
    /// The file's schema is newer than this binary knows.
    #[error("database schema version {found} is newer than this binary knows ({known})")]
    SchemaTooNew { found: i64, known: i64 },
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
    /// Declared last so it is released after the connections above are closed.
    _in_use: files::UseLock,
}

/// Sets the PRAGMAs every connection needs. WAL lets readers run beside the writer;
/// `synchronous=FULL` makes a commit durable before we answer 2xx.
fn configure(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Deleted and overwritten content is zeroed, in pages that stay and in pages that go to
    // the free list (`FAST` would leave it on free-list pages, which a backup copies), so an
    // erased person is not left in the file's bytes (DESIGN.md section 12).
    conn.pragma_update(None, "secure_delete", "ON")?;
    // Each writer job runs in a SAVEPOINT, whose journal SQLite would otherwise move to a
    // temporary file once it outgrows 64 KiB: a file created and deleted per large job.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // Ingest, auto-delivery, delivery, lifecycle and the outbox run some 50 distinct cached
    // statements on the writer; rusqlite's default cache of 16 would re-prepare most of them
    // on every job.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    Ok(())
}

impl Db {
    /// Opens (creating when missing) the database file, applies migrations and starts the
    /// writer thread. The file and its `-wal`/`-shm` are made private (0600) first, and the
    /// handle holds the database's in-use lock until the last clone is dropped.
    pub fn open(path: impl AsRef<Path>) -> Result<Db, DbError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(DbError::Io)?;
        }
        // Lock before touching the file: a restore in progress finishes first.
        let in_use = files::UseLock::shared(&path).map_err(DbError::Io)?;
        files::prepare(&path).map_err(DbError::Io)?;

        let mut write_conn = Connection::open(&path)?;
        // A new file gives freed pages back to the file system on request (`PRAGMA
        // incremental_vacuum`, run after a purge). The mode is written into the file's
        // first page, so it must be chosen before anything else writes it (even the switch
        // to WAL); an older file keeps its mode until `leadrelay vacuum` switches it.
        let page_count: i64 = write_conn.pragma_query_value(None, "page_count", |r| r.get(0))?;
        if page_count == 0 {
            write_conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        }
        configure(&mut write_conn)?;
        migrate::apply(&mut write_conn)?;

        let manager = SqliteConnectionManager::file(&path).with_init(configure);
        // No test query on checkout: a local SQLite connection does not go stale the way a
        // network connection does, and ingest checks out a connection on every request.
        let pool = r2d2::Pool::builder()
            .max_size(READ_POOL_SIZE)
            .min_idle(Some(2))
            .test_on_check_out(false)
            .build(manager)?;
        let writer = writer::WriterHandle::start(write_conn)?;
        Ok(Db {
            inner: Arc::new(Inner {
                path,
                pool,
                writer,
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
    pub async fn write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        let reply = self.inner.writer.submit(f)?;
        match reply.await {
            Ok(result) => result,
            Err(_) => Err(E::from(DbError::WriterGone)),
        }
    }

    /// [`Db::write`] for threads outside the async runtime.
    pub fn write_blocking<T, E, F>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        let reply = self.inner.writer.submit(f)?;
        match reply.blocking_recv() {
            Ok(result) => result,
            Err(_) => Err(E::from(DbError::WriterGone)),
        }
    }

    /// Copies the WAL into the database file and truncates it to nothing, so old copies of
    /// changed pages (the content before an erasure) are gone from the WAL too. Waits for
    /// readers and writers up to the busy timeout; `false` when it could not finish (the
    /// WAL is then emptied by a later checkpoint).
    pub fn checkpoint_truncate(&self) -> Result<bool, DbError> {
        let conn = self.inner.pool.get()?;
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
        Ok(busy == 0)
    }

    /// Figures of the writer: groups committed, jobs run, the last group's size.
    pub fn writer_stats(&self) -> WriterStats {
        self.inner.writer.stats()
    }

    /// Stops the writer after the jobs already queued, checkpoints the WAL into the main
    /// file and waits for the thread to end. Later writes fail with [`DbError::WriterGone`].
    pub fn close(&self) {
        self.inner.writer.stop();
    }
}

#[cfg(test)]
mod tests;
