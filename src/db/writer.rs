//! The single writer thread and its group commit.
//!
//! SQLite has one writer at a time, and with `synchronous=FULL` every commit costs an
//! fsync. The writer takes every job queued (up to [`MAX_GROUP`]), runs each in its own
//! `SAVEPOINT` inside one `BEGIN IMMEDIATE` transaction, rolls back only a failing job's
//! savepoint, commits once and only then answers every job. So one fsync covers many
//! requests, and because jobs run one after another, checks such as idempotency, duplicates,
//! caps and balances see every earlier job's writes: they cannot race.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::DbError;

/// The most jobs one group transaction holds. Bounds the latency a late job in a big
/// group adds to the early ones.
const MAX_GROUP: usize = 512;

enum Msg {
    Job(Box<dyn Job>),
    Stop,
}

/// A unit of work for the writer with its reply channel, type-erased so that jobs of any
/// result type share one queue.
trait Job: Send {
    /// Runs the job; true when it succeeded and its savepoint is to be kept.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Sends the job's result, or `group_failure` when its writes did not commit.
    fn finish(self: Box<Self>, group_failure: Option<&str>);
}

struct TypedJob<T, E, F> {
    work: Option<F>,
    result: Option<Result<T, E>>,
    reply: oneshot::Sender<Result<T, E>>,
}

impl<T, E, F> Job for TypedJob<T, E, F>
where
    F: FnOnce(&Connection) -> Result<T, E> + Send,
    T: Send,
    E: From<DbError> + Send,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let work = self.work.take().expect("the writer runs each job once");
        // A panicking job must not take the writer thread, and every other job, down.
        let result = match std::panic::catch_unwind(AssertUnwindSafe(|| work(conn))) {
            Ok(result) => result,
            Err(_) => {
                log::error!("a database job panicked; its writes were rolled back");
                Err(E::from(DbError::JobPanicked))
            }
        };
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn finish(self: Box<Self>, group_failure: Option<&str>) {
        let result = match (self.result, group_failure) {
            // A job's own error says more than the group's.
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(value)), None) => Ok(value),
            (_, Some(why)) => Err(E::from(DbError::GroupFailed(why.to_string()))),
            (None, None) => Err(E::from(DbError::GroupFailed("job was not run".into()))),
        };
        // The caller may have gone away (client disconnected); the data is committed anyway.
        let _ = self.reply.send(result);
    }
}

/// Upper bounds of the group-size histogram in [`WriterStats::group_sizes`]; powers of two
/// up to [`MAX_GROUP`], so no group lands in the overflow slot.
pub const GROUP_SIZE_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/// Slots of the group-size histogram: one per bound plus the overflow slot.
const GROUP_SIZE_SLOTS: usize = GROUP_SIZE_BOUNDS.len() + 1;

/// Counters of the writer, for health and metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriterStats {
    /// Jobs handed to the writer; `submitted - jobs` is the queue depth.
    pub submitted: u64,
    pub groups: u64,
    pub jobs: u64,
    pub last_group_size: u64,
    pub max_group_size: u64,
    /// How many groups had a size up to each of [`GROUP_SIZE_BOUNDS`] (not cumulative),
    /// then the overflow slot.
    pub group_sizes: [u64; GROUP_SIZE_SLOTS],
}

#[derive(Default)]
struct Counters {
    submitted: AtomicU64,
    groups: AtomicU64,
    jobs: AtomicU64,
    last_group_size: AtomicU64,
    max_group_size: AtomicU64,
    group_sizes: [AtomicU64; GROUP_SIZE_SLOTS],
}

pub(super) struct WriterHandle {
    sender: mpsc::Sender<Msg>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
}

impl WriterHandle {
    pub(super) fn start(conn: Connection) -> Result<WriterHandle, DbError> {
        let (sender, receiver) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        let thread = std::thread::Builder::new()
            .name("db-writer".into())
            .spawn(move || run(conn, receiver, &thread_counters))
            .map_err(DbError::Io)?;
        Ok(WriterHandle {
            sender,
            thread: Mutex::new(Some(thread)),
            counters,
        })
    }

    pub(super) fn submit<T, E, F>(&self, work: F) -> Result<oneshot::Receiver<Result<T, E>>, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        let (reply, receiver) = oneshot::channel();
        let job = TypedJob {
            work: Some(work),
            result: None,
            reply,
        };
        self.sender
            .send(Msg::Job(Box::new(job)))
            .map_err(|_| E::from(DbError::WriterGone))?;
        self.counters.submitted.fetch_add(1, Ordering::Relaxed);
        Ok(receiver)
    }

    pub(super) fn stats(&self) -> WriterStats {
        WriterStats {
            submitted: self.counters.submitted.load(Ordering::Relaxed),
            groups: self.counters.groups.load(Ordering::Relaxed),
            jobs: self.counters.jobs.load(Ordering::Relaxed),
            last_group_size: self.counters.last_group_size.load(Ordering::Relaxed),
            max_group_size: self.counters.max_group_size.load(Ordering::Relaxed),
            group_sizes: std::array::from_fn(|slot| {
                self.counters.group_sizes[slot].load(Ordering::Relaxed)
            }),
        }
    }

    pub(super) fn stop(&self) {
        let thread = self
            .thread
            .lock()
            .expect("the writer's join handle lock is never held across a panic")
            .take();
        if let Some(thread) = thread {
            let _ = self.sender.send(Msg::Stop);
            if thread.join().is_err() {
                log::error!("database writer thread panicked");
            }
        }
    }
}

fn run(conn: Connection, receiver: mpsc::Receiver<Msg>, counters: &Counters) {
    'serve: while let Ok(Msg::Job(first)) = receiver.recv() {
        let mut group = vec![first];
        let mut stop = false;
        while group.len() < MAX_GROUP {
            match receiver.try_recv() {
                Ok(Msg::Job(job)) => group.push(job),
                Ok(Msg::Stop) => {
                    stop = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let size = group.len() as u64;
        run_group(&conn, group);
        counters.groups.fetch_add(1, Ordering::Relaxed);
        counters.jobs.fetch_add(size, Ordering::Relaxed);
        counters.last_group_size.store(size, Ordering::Relaxed);
        counters.max_group_size.fetch_max(size, Ordering::Relaxed);
        let slot = GROUP_SIZE_BOUNDS
            .iter()
            .position(|&bound| size <= bound)
            .unwrap_or(GROUP_SIZE_BOUNDS.len());
        counters.group_sizes[slot].fetch_add(1, Ordering::Relaxed);
        if stop {
            break 'serve;
        }
    }
    // Fold the WAL back into the main file so a stopped server leaves one self-contained
    // file behind. PASSIVE never waits: a CLI command closing while the server reads must
    // not stall, and when the server itself stops no reader is left, so it completes.
    if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
        log::warn!("WAL checkpoint at shutdown failed: {e}");
    }
    log::debug!("database writer stopped");
}

fn run_group(conn: &Connection, mut jobs: Vec<Box<dyn Job>>) {
    let mut failures: Vec<Option<String>> = vec![None; jobs.len()];
    let mut succeeded = vec![false; jobs.len()];
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let why = format!("could not begin the write transaction: {e}");
        log::error!("{why}");
        return finish_with(jobs, vec![Some(why); failures.len()]);
    }
    // Index of the first job in the current transaction; a transaction is restarted when a
    // job's error made SQLite roll back the whole of it.
    let mut first_in_transaction = 0;
    for index in 0..jobs.len() {
        if let Err(e) = conn.execute_batch("SAVEPOINT job") {
            failures[index] = Some(format!("could not open a savepoint: {e}"));
            continue;
        }
        let ok = jobs[index].run(conn);
        if conn.is_autocommit() {
            // Some errors (disk full, I/O) roll back the whole transaction, not just the
            // savepoint: every earlier job of this transaction lost its writes too.
            let why = "the group transaction was rolled back by an earlier error".to_string();
            for earlier in first_in_transaction..=index {
                if succeeded[earlier] || earlier == index {
                    failures[earlier] = Some(why.clone());
                }
                succeeded[earlier] = false;
            }
            first_in_transaction = index + 1;
            if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
                let why = format!("could not begin the write transaction: {e}");
                for later in failures.iter_mut().skip(index + 1) {
                    *later = Some(why.clone());
                }
                return finish_with(jobs, failures);
            }
            continue;
        }
        let end = if ok {
            "RELEASE job"
        } else {
            "ROLLBACK TO job; RELEASE job"
        };
        if let Err(e) = conn.execute_batch(end) {
            failures[index] = Some(format!("could not close the savepoint: {e}"));
        }
        succeeded[index] = ok;
    }
    if let Err(e) = conn.execute_batch("COMMIT") {
        let why = format!("commit failed: {e}");
        log::error!("{why}");
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for (index, failure) in failures.iter_mut().enumerate().skip(first_in_transaction) {
            if failure.is_none() {
                *failure = Some(why.clone());
            }
            succeeded[index] = false;
        }
    }
    finish_with(jobs, failures);
}

fn finish_with(jobs: Vec<Box<dyn Job>>, failures: Vec<Option<String>>) {
    for (job, failure) in jobs.into_iter().zip(failures) {
        job.finish(failure.as_deref());
    }
}
