//! The WAL checkpointer: a thread with its own connection that copies the WAL into the
//! database file while the writer goes on committing.
//!
//! A checkpoint copies the pages of the WAL into the database file and fsyncs it: several
//! milliseconds, sometimes tens on a busy disk. Run on the writer thread (inside a commit,
//! as SQLite's `wal_autocheckpoint` does, or after a group's answers), every job arriving
//! meanwhile waits for it; at 1,000 pings/s that was the p99 (fixed-price pings of
//! `bench/ping.sh`: client p99 3.9-56.6 ms with the checkpoint on the writer, 2.7-4.5 ms
//! beside it, alternating on one machine). A PASSIVE checkpoint needs no write lock, so in WAL mode it runs beside
//! the writer's transactions: the writer only [`Nudge`]s this thread when the WAL has grown
//! by [`CHECKPOINT_FRAMES`] since its last nudge.
//!
//! The WAL restarts from its beginning (stays some tens of MB instead of growing) only at a writer
//! transaction that begins after a checkpoint copied every frame. The writer commits while a
//! pass runs, so a pass usually leaves the frames of those commits behind; the checkpointer
//! then runs another pass for that short tail, a few times at most ([`MAX_PASSES`]). Under
//! steady load that rarely lands in a gap between two of the writer's transactions, so the
//! writer checkpoints the tail itself once the WAL has 8,000 frames and no job waits
//! (`db::writer`): a short copy and the fsync of the file, ~2 ms at 1,000 pings/s against
//! 2-12 ms for a whole checkpoint, and the WAL stays bounded as before. A reader pinning an
//! old snapshot (a backup) holds back both, as it did SQLite's own checkpoint.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;

use super::DbError;
use crate::logging::Repeated;

/// Frames the WAL grows by between two nudges of the checkpointer (8 MiB at 4 KiB pages).
/// Every checkpoint copies the pages written since the one before, each once however often
/// it was written, and syncs the file. At SQLite's own `wal_autocheckpoint` mark of 1,000
/// the pages every commit writes (the tables' last leaves, the indexes' upper levels) were
/// copied twice as often: the checkpointer spent 3.3 µs of CPU per batched lead and 3.2 per
/// single lead, at 2,000 2.4 and 2.1 (`/proc/PID/task/*/stat` of its thread under
/// `bench/reference.sh`'s loads). At 4,000 it spent less still (1.7 and 1.4), but on a file
/// of a million leads, whose random index leaves coalesce little, ingest fell to 0.70-0.77 of
/// a fresh file against 0.83-0.89 at 1,000 and 0.86-0.91 at 2,000 (`bench/big_file.sh`,
/// alternating): every page the writer misses in its cache is looked up in the WAL's index,
/// one hash table per 4,096 frames.
pub(super) const CHECKPOINT_FRAMES: i32 = 2000;

/// Passes per nudge: the first copies what the nudge found, the others the frames committed
/// while the one before ran, until none are left.
const MAX_PASSES: u32 = 3;

/// A failed checkpoint (an I/O error) repeats with every nudge: logged at most once per
/// interval with a count.
static CHECKPOINT_FAILED: Repeated = Repeated::new();

/// What a `PRAGMA wal_checkpoint(PASSIVE)` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pass {
    /// Another connection was checkpointing (or a reader held a lock the checkpoint needed):
    /// nothing or not everything was copied.
    pub busy: bool,
    /// Frames in the WAL.
    pub frames: i64,
    /// Frames of the WAL now in the database file, this pass's and earlier ones'.
    pub copied: i64,
}

impl Pass {
    /// Whether every frame of the WAL is in the database file, so that the writer's next
    /// transaction restarts the WAL from its beginning.
    pub(super) fn complete(&self) -> bool {
        !self.busy && self.copied >= self.frames
    }
}

/// Runs one PASSIVE checkpoint on `conn`: copies what no reader still needs, never waits
/// for a lock.
fn passive(conn: &Connection) -> rusqlite::Result<Pass> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok(Pass {
            busy: row.get::<_, i64>(0)? != 0,
            frames: row.get(1)?,
            copied: row.get(2)?,
        })
    })
}

/// Counters of the checkpoints, the checkpointer's and the writer's own, for metrics.
#[derive(Default)]
pub(super) struct Counters {
    /// Passes of the checkpointer thread.
    pub passes: AtomicU64,
    /// Checkpoints the writer ran itself because the WAL grew past its mark.
    pub by_writer: AtomicU64,
    /// Checkpoints that failed (an error, not busy).
    pub failed: AtomicU64,
    /// Times the writer found the WAL restarted from its beginning.
    pub wal_restarts: AtomicU64,
    /// Microseconds spent in the checkpointer's passes.
    pub pass_micros: AtomicU64,
    /// Microseconds the writer spent in its own checkpoints (every job waiting meanwhile
    /// waited for them).
    pub writer_micros: AtomicU64,
}

/// Who runs a checkpoint, for its counters.
#[derive(Debug, Clone, Copy)]
pub(super) enum By {
    Checkpointer,
    Writer,
}

impl Counters {
    /// Runs one PASSIVE checkpoint on `conn` ([`passive`]) for `by`: counted and timed, a
    /// failure counted and logged (at most once per interval with a count). `None` when it
    /// failed.
    pub(super) fn pass(&self, conn: &Connection, by: By) -> Option<Pass> {
        let (runs, micros) = match by {
            By::Checkpointer => (&self.passes, &self.pass_micros),
            By::Writer => (&self.by_writer, &self.writer_micros),
        };
        runs.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let pass = passive(conn);
        micros.fetch_add(
            u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        match pass {
            Ok(pass) => Some(pass),
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                if let Some(repeats) = CHECKPOINT_FAILED.admit() {
                    log::warn!("WAL checkpoint failed: {e}{repeats}");
                }
                None
            }
        }
    }
}

#[derive(Default)]
struct State {
    /// The writer asked for a checkpoint that has not started yet.
    due: bool,
    stop: bool,
}

/// What the writer and the checkpointer thread share.
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is two flags: a panic elsewhere cannot leave them inconsistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The writer's side: asks the checkpointer for a checkpoint, never waits for it.
#[derive(Clone)]
pub(super) struct Nudge {
    shared: Arc<Shared>,
}

impl Nudge {
    /// Asks for a checkpoint; nudges while one is pending count once.
    pub(super) fn nudge(&self) {
        let mut state = self.shared.lock();
        if !state.due && !state.stop {
            state.due = true;
            self.shared.wake.notify_one();
        }
    }
}

/// The checkpointer thread, stopped by [`Checkpointer::stop`] or when dropped.
pub(super) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Opens a connection of its own on `path` (a database already in WAL mode) and starts
    /// the thread.
    pub(super) fn start(path: &Path, counters: Arc<Counters>) -> Result<Checkpointer, DbError> {
        let conn = connection(path)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("db-checkpoint".into())
            .spawn(move || run(&conn, &thread_shared, &counters))
            .map_err(DbError::Io)?;
        Ok(Checkpointer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub(super) fn nudge(&self) -> Nudge {
        Nudge {
            shared: self.shared.clone(),
        }
    }

    /// Stops the thread after the pass under way, and waits for it.
    pub(super) fn stop(&self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            log::error!("database checkpoint thread panicked");
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The checkpointer's connection: through the VFS that starts the database file's
/// writeback as the checkpoint copies pages into it (`sqlite_writes`).
fn connection(path: &Path) -> rusqlite::Result<Connection> {
    super::sqlite_writes::open_connection(path, super::sqlite_writes::CHECKPOINT_VFS_NAME)
}

fn run(conn: &Connection, shared: &Shared, counters: &Counters) {
    loop {
        {
            let mut state = shared.lock();
            while !state.due && !state.stop {
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if state.stop {
                break;
            }
            state.due = false;
        }
        let mut copied_before = -1;
        for _ in 0..MAX_PASSES {
            match counters.pass(conn, By::Checkpointer) {
                // Done, or no further (a reader pins the rest, another checkpoint runs), or
                // failed: the next nudge tries again.
                Some(pass) if pass.complete() || pass.busy || pass.copied <= copied_before => {
                    break;
                }
                Some(pass) => copied_before = pass.copied,
                None => break,
            }
        }
    }
    log::debug!("database checkpoint thread stopped");
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_checkpointer_writes_the_file_through_its_writeback_vfs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        rusqlite::Connection::open(&path)
            .unwrap()
            .pragma_update(None, "journal_mode", "WAL")
            .unwrap();
        let conn = super::connection(&path).unwrap();
        assert_eq!(
            super::super::sqlite_writes::vfs_of(&conn),
            super::super::sqlite_writes::CHECKPOINT_VFS_NAME
                .to_str()
                .unwrap()
        );
    }
}
