//! The single writer thread and its group commit.
//!
//! SQLite has one writer at a time, and with `synchronous=FULL` every commit costs an
//! fsync. The writer takes every job queued (up to [`MAX_GROUP`]), runs each in its own
//! `SAVEPOINT` inside one `BEGIN IMMEDIATE` transaction, rolls back only a failing job's
//! savepoint, commits once and only then answers every job. So one fsync covers many
//! requests, and because jobs run one after another, checks such as idempotency, duplicates,
//! caps and balances see every earlier job's writes: they cannot race.
//!
//! A savepoint is not free: SQLite copies every page a job changes into the savepoint's
//! journal first, so that it could undo the job alone. Ingest's jobs fail only before their
//! first write unless the database or a bug fails them (a refused lead is an answer, not an
//! error), so they run without one ([`Undo::Group`]): should such a job fail after writing
//! anyway, the group's transaction is rolled back and its earlier jobs are answered with a
//! group failure (nothing of theirs was answered or committed, so they may retry).
//!
//! SQLite would also checkpoint the WAL inside a commit (`wal_autocheckpoint`, every 1,000
//! frames), so that the jobs of the group whose commit crossed the mark waited for a copy of
//! the WAL into the database file and its fsync, several milliseconds, and every job arriving
//! meanwhile too (the p99 of fixed-price pings, `bench/ping.sh`; `db::checkpoint`). The
//! writer's WAL hook turns that off; after each group the writer nudges the checkpointer
//! thread (`db::checkpoint`) whenever the WAL grew by its mark, and the checkpoint runs there,
//! beside the writer's next transactions ([`checkpoint_if_due`]). Only when the WAL still
//! grows to [`WRITER_CHECKPOINT_FRAMES`] (the checkpointer could not catch up with the
//! commits) does the writer checkpoint the rest itself: when no job waits, or once the WAL has
//! [`CHECKPOINT_FORCED_FRAMES`] even with jobs waiting.
//!
//! The queue is bounded for requests ([`MAX_QUEUED_WRITES`], [`Admission::Bounded`]): a
//! request that finds it full is refused at once ([`DbError::Overloaded`], answered 503),
//! so overload costs refusals, not an ever longer wait for everyone. Each job carries the
//! id of the request that made it; the writer runs the job with that id current, so the
//! lines it logs name the request.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use leadrelay_rules::histogram::{Histogram, HistogramReading};
use rusqlite::Connection;
use rusqlite::hooks::Wal;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::checkpoint::{self, CHECKPOINT_FRAMES, Nudge};
use super::statements::PrepareKept;
use super::{DbError, StorageFault};
use crate::logging::Repeated;
use crate::request_id::RequestId;

/// The most jobs one group transaction holds. Bounds the latency a late job in a big
/// group adds to the early ones.
const MAX_GROUP: usize = 512;

/// The most request jobs queued or running at once by default (`DbOptions`): two full
/// groups. Past it a request's write is refused with [`DbError::Overloaded`]. With the writer as the bottleneck, a
/// job accepted waits for at most the groups ahead of it, which is what bounds the latency
/// of accepted requests under overload (BENCHMARKS.md, "Overload").
pub const MAX_QUEUED_WRITES: usize = 2 * MAX_GROUP;

/// Whether a job may be refused when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// A request's job: refused with [`DbError::Overloaded`] when the queue is full.
    Bounded,
    /// A worker's or a CLI command's job: always queued. These callers are few and each
    /// waits for one job at a time, so they cannot grow the queue without bound.
    Always,
}

/// What undoes a job's writes when the job fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    /// The job's own savepoint: a failing job's writes are rolled back alone.
    Savepoint,
    /// The group's transaction, for a job that fails only before its first write unless the
    /// database or a bug fails it. The job runs without a savepoint; a failure that wrote
    /// nothing needs no undo, and one that wrote (counted by SQLite's changes) rolls back
    /// the whole transaction, whose earlier jobs are then answered with a group failure.
    Group,
}

/// Writes that jobs leave to their group (the report roll-up, `report::buckets`): a job
/// submitted with one ([`super::Db::write_deferring`]) runs between [`Deferred::job_start`]
/// and [`Deferred::job_end`], which keeps what it collected only when the job succeeded
/// (its writes are kept). The writer writes what the group collected, in its transaction,
/// before it commits and before any job that was not submitted with the same one (such a job
/// may read or delete what the deferred writes refer to), and forgets it when the
/// transaction is rolled back. Implementations keep their state per thread: the writer is
/// one thread.
pub trait Deferred: Sync {
    /// A job submitted with this starts.
    fn job_start(&self);
    /// The job ended; `kept`: it succeeded, so its writes are kept.
    fn job_end(&self, kept: bool);
    /// Whether the group holds collected writes not yet written.
    fn pending(&self) -> bool;
    /// Writes and forgets what the group collected. On an error the transaction must not
    /// commit.
    fn write(&self, conn: &Connection) -> rusqlite::Result<()>;
    /// Forgets what the group collected: its transaction was rolled back.
    fn discard(&self);
}

/// Whether two deferrals are the same object.
fn same(a: &'static dyn Deferred, b: &'static dyn Deferred) -> bool {
    std::ptr::addr_eq(a as *const dyn Deferred, b as *const dyn Deferred)
}

/// How the writer's latest group transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastCommit {
    /// When it ended, in ms since the epoch.
    pub at_ms: i64,
    /// `None` when it committed (or had nothing to commit); else why it did not, with the
    /// storage fault when the cause is known to be one.
    pub failed: Option<Option<StorageFault>>,
}

/// WAL frames past which the writer checkpoints itself when no job waits: the WAL did not
/// restart although the checkpointer thread, nudged every [`CHECKPOINT_FRAMES`], copied most
/// of it (its passes seldom end between two of the writer's transactions under steady load;
/// a reader may pin an old snapshot). The writer's checkpoint copies what the checkpointer
/// left, usually a short tail, and the WAL restarts at its next transaction.
pub(super) const WRITER_CHECKPOINT_FRAMES: i32 = 4 * CHECKPOINT_FRAMES;

/// WAL frames past which the writer checkpoints even with jobs waiting, so that a queue that
/// never empties cannot grow the WAL without bound.
const CHECKPOINT_FORCED_FRAMES: i32 = 8 * CHECKPOINT_FRAMES;

thread_local! {
    /// Frames in the WAL after the latest commit on this thread, as SQLite reports them to
    /// [`note_wal_frames`]. A writer is one thread with one connection, so the thread's
    /// value is its writer's.
    static WAL_FRAMES: Cell<i32> = const { Cell::new(0) };
    /// The number of the job running on this thread ([`running_job`]); 0 between jobs.
    static RUNNING_JOB: Cell<u64> = const { Cell::new(0) };
    /// Jobs run on this thread so far, which numbers them.
    static JOBS_RUN: Cell<u64> = const { Cell::new(0) };
    /// Rollbacks the writer on this thread made or found ([`rollbacks`]).
    static ROLLBACKS: Cell<u64> = const { Cell::new(0) };
}

/// The number of the writer job running on this thread now, unique on the thread; `None`
/// between jobs and on any thread but a writer's.
///
/// What a job reads stays true for the rest of that job, but for its own writes: it runs
/// inside the group's write transaction, so no other connection commits meanwhile, and the
/// writer rolls back its writes (or the group's) only after it has returned. A cache on
/// the writer's thread may therefore check itself against the file once per job.
pub fn running_job() -> Option<u64> {
    match RUNNING_JOB.get() {
        0 => None,
        job => Some(job),
    }
}

/// How many times the writer on this thread has rolled back a job's savepoint or its
/// group's transaction, or found the transaction rolled back by an error; 0 on any other
/// thread. A cache on the writer's thread that holds writes of its jobs compares it from
/// one job to the next ([`running_job`]): when it moved, some of those writes may be
/// undone.
pub fn rollbacks() -> u64 {
    ROLLBACKS.get()
}

/// Counts a rollback into [`rollbacks`]: called before every rollback the writer makes
/// and when it finds its transaction rolled back.
fn rolling_back() {
    ROLLBACKS.set(ROLLBACKS.get() + 1);
}

/// Rolls the group's transaction back, counted, unless an error already did (nothing is
/// left to undo then, and `ROLLBACK` would fail).
fn roll_back(conn: &Connection) {
    rolling_back();
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// Runs `job` as the thread's [`running_job`].
fn numbered<R>(job: impl FnOnce() -> R) -> R {
    let number = JOBS_RUN.get() + 1;
    JOBS_RUN.set(number);
    RUNNING_JOB.set(number);
    let result = job();
    RUNNING_JOB.set(0);
    result
}

/// The writer connection's WAL hook: SQLite calls it after each commit with the frames now in
/// the WAL. Registering it turns off SQLite's checkpoint inside the commit.
fn note_wal_frames(_wal: &Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.set(frames);
    Ok(())
}

/// The group-level failures, each logged at most once per interval with a count (a full
/// disk fails every group, many a second).
static BEGIN_FAILED: Repeated = Repeated::new();
static COMMIT_FAILED: Repeated = Repeated::new();
static ROLLED_BACK: Repeated = Repeated::new();

enum Msg {
    Job(Box<dyn Job>),
    Stop,
}

/// Why a job's writes did not commit, when the job itself did not fail.
#[derive(Debug, Clone)]
struct GroupFailure {
    why: String,
    fault: Option<StorageFault>,
}

impl GroupFailure {
    fn of(why: String, e: &rusqlite::Error) -> GroupFailure {
        GroupFailure {
            why,
            fault: StorageFault::of(e),
        }
    }
}

/// A unit of work for the writer with its reply channel, type-erased so that jobs of any
/// result type share one queue.
trait Job: Send {
    /// Runs the job; true when it succeeded and its savepoint is to be kept.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Sends the job's result, or `group_failure` when its writes did not commit.
    fn finish(self: Box<Self>, group_failure: Option<&GroupFailure>);
    /// The request the job works for.
    fn request_id(&self) -> Option<&RequestId>;
    /// What the job leaves to its group, if anything ([`Deferred`]).
    fn deferred(&self) -> Option<&'static dyn Deferred>;
    /// What undoes the job's writes when it fails.
    fn undo(&self) -> Undo;
}

struct TypedJob<T, E, F> {
    work: Option<F>,
    result: Option<Result<T, E>>,
    reply: oneshot::Sender<Result<T, E>>,
    request_id: Option<RequestId>,
    deferred: Option<&'static dyn Deferred>,
    undo: Undo,
    /// The job's place in the bounded queue, given back when the job is answered.
    _permit: Option<OwnedSemaphorePermit>,
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
        if !ok {
            log::debug!("a database job failed; its writes were rolled back");
        }
        self.result = Some(result);
        ok
    }

    fn finish(self: Box<Self>, group_failure: Option<&GroupFailure>) {
        let result = match (self.result, group_failure) {
            // A job's own error says more than the group's.
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(value)), None) => Ok(value),
            (_, Some(failure)) => Err(E::from(DbError::GroupFailed {
                why: failure.why.clone(),
                fault: failure.fault,
            })),
            (None, None) => Err(E::from(DbError::GroupFailed {
                why: "job was not run".into(),
                fault: None,
            })),
        };
        // The caller may have gone away (client disconnected); the data is committed anyway.
        let _ = self.reply.send(result);
    }

    fn request_id(&self) -> Option<&RequestId> {
        self.request_id.as_ref()
    }

    fn deferred(&self) -> Option<&'static dyn Deferred> {
        self.deferred
    }

    fn undo(&self) -> Undo {
        self.undo
    }
}

/// Upper bounds of the group-size histogram in [`WriterStats::group_sizes`]; powers of two
/// up to [`MAX_GROUP`], so no group lands in the overflow slot.
const GROUP_SIZE_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/// Upper bounds, in microseconds, of the commit-time histogram in
/// [`WriterStats::commit_micros`]: from a tenth of a millisecond (a WAL sync on a fast disk)
/// to a second (a disk that stalls). Every job of a group waits for its commit, so this is
/// the part of a write's latency the disk sets, apart from the jobs' own work.
const COMMIT_MICROS_BOUNDS: &[u64] = &[
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];

/// Counters of the writer, for health and metrics.
#[derive(Debug, Clone)]
pub struct WriterStats {
    /// Jobs handed to the writer; `submitted - jobs` is the queue depth.
    pub submitted: u64,
    /// Request jobs refused because [`MAX_QUEUED_WRITES`] were waiting.
    pub refused: u64,
    /// Request jobs queued or running now.
    pub queued: u64,
    /// The most request jobs queued or running at once.
    pub capacity: u64,
    /// Groups run, and the jobs in them: [`Self::group_sizes`]'s count and sum.
    pub groups: u64,
    pub jobs: u64,
    pub last_group_size: u64,
    pub max_group_size: u64,
    /// The groups' sizes in jobs, over [`GROUP_SIZE_BOUNDS`].
    pub group_sizes: HistogramReading,
    /// The group commits' times (`COMMIT`: the WAL's frames written and synced) in
    /// microseconds, over [`COMMIT_MICROS_BOUNDS`].
    pub commit_micros: HistogramReading,
    /// The WAL's checkpoints, the checkpointer's and the writer's own.
    pub checkpoints: CheckpointStats,
}

impl Default for WriterStats {
    /// A writer that has run nothing yet.
    fn default() -> WriterStats {
        WriterStats {
            submitted: 0,
            refused: 0,
            queued: 0,
            capacity: 0,
            groups: 0,
            jobs: 0,
            last_group_size: 0,
            max_group_size: 0,
            group_sizes: Histogram::new(GROUP_SIZE_BOUNDS).read(),
            commit_micros: Histogram::new(COMMIT_MICROS_BOUNDS).read(),
            checkpoints: CheckpointStats::default(),
        }
    }
}

/// Counters of the WAL checkpoints (`db::checkpoint`), for metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckpointStats {
    /// Passes of the checkpointer thread (a nudge runs one, or a few to catch up).
    pub passes: u64,
    /// Microseconds the checkpointer thread spent in its passes.
    pub pass_micros: u64,
    /// Checkpoints the writer ran itself because the WAL reached its mark.
    pub by_writer: u64,
    /// Microseconds the writer spent in them.
    pub writer_micros: u64,
    /// Checkpoints that failed with an error.
    pub failed: u64,
    /// Times the WAL restarted from its beginning (after a checkpoint that copied it all).
    pub wal_restarts: u64,
}

struct Counters {
    submitted: AtomicU64,
    refused: AtomicU64,
    last_group_size: AtomicU64,
    max_group_size: AtomicU64,
    group_sizes: Histogram,
    commit_micros: Histogram,
}

impl Counters {
    fn new() -> Counters {
        Counters {
            submitted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            last_group_size: AtomicU64::new(0),
            max_group_size: AtomicU64::new(0),
            group_sizes: Histogram::new(GROUP_SIZE_BOUNDS),
            commit_micros: Histogram::new(COMMIT_MICROS_BOUNDS),
        }
    }
}

pub(super) struct WriterHandle {
    sender: mpsc::Sender<Msg>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
    /// One permit per place in the bounded queue of request jobs.
    places: Arc<Semaphore>,
    capacity: usize,
    last_commit: Arc<Mutex<Option<LastCommit>>>,
    checkpoints: Arc<checkpoint::Counters>,
}

impl WriterHandle {
    /// Starts the writer thread on `conn`; `nudge` asks the checkpointer (counting into
    /// `checkpoints`) for a checkpoint.
    pub(super) fn start(
        conn: Connection,
        capacity: usize,
        nudge: Nudge,
        checkpoints: Arc<checkpoint::Counters>,
    ) -> Result<WriterHandle, DbError> {
        let (sender, receiver) = mpsc::channel();
        let counters = Arc::new(Counters::new());
        let last_commit = Arc::new(Mutex::new(None));
        let thread_counters = counters.clone();
        let thread_last_commit = last_commit.clone();
        let wal = WalWatch::new(nudge, checkpoints.clone());
        let thread = std::thread::Builder::new()
            .name("db-writer".into())
            .spawn(move || run(conn, receiver, &thread_counters, &thread_last_commit, wal))
            .map_err(DbError::Io)?;
        Ok(WriterHandle {
            sender,
            thread: Mutex::new(Some(thread)),
            counters,
            places: Arc::new(Semaphore::new(capacity)),
            capacity,
            last_commit,
            checkpoints,
        })
    }

    pub(super) fn submit<T, E, F>(
        &self,
        work: F,
        admission: Admission,
        deferred: Option<&'static dyn Deferred>,
        undo: Undo,
    ) -> Result<oneshot::Receiver<Result<T, E>>, E>
    where
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        let permit = match admission {
            Admission::Always => None,
            Admission::Bounded => match self.places.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    self.counters.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(E::from(DbError::Overloaded));
                }
            },
        };
        let (reply, receiver) = oneshot::channel();
        let job = TypedJob {
            work: Some(work),
            result: None,
            reply,
            request_id: crate::request_id::current(),
            deferred,
            undo,
            _permit: permit,
        };
        self.sender
            .send(Msg::Job(Box::new(job)))
            .map_err(|_| E::from(DbError::WriterGone))?;
        self.counters.submitted.fetch_add(1, Ordering::Relaxed);
        Ok(receiver)
    }

    pub(super) fn stats(&self) -> WriterStats {
        let group_sizes = self.counters.group_sizes.read();
        WriterStats {
            submitted: self.counters.submitted.load(Ordering::Relaxed),
            refused: self.counters.refused.load(Ordering::Relaxed),
            queued: (self.capacity - self.places.available_permits()) as u64,
            capacity: self.capacity as u64,
            groups: group_sizes.count,
            jobs: group_sizes.sum,
            last_group_size: self.counters.last_group_size.load(Ordering::Relaxed),
            max_group_size: self.counters.max_group_size.load(Ordering::Relaxed),
            group_sizes,
            commit_micros: self.counters.commit_micros.read(),
            checkpoints: CheckpointStats {
                passes: self.checkpoints.passes.load(Ordering::Relaxed),
                pass_micros: self.checkpoints.pass_micros.load(Ordering::Relaxed),
                by_writer: self.checkpoints.by_writer.load(Ordering::Relaxed),
                writer_micros: self.checkpoints.writer_micros.load(Ordering::Relaxed),
                failed: self.checkpoints.failed.load(Ordering::Relaxed),
                wal_restarts: self.checkpoints.wal_restarts.load(Ordering::Relaxed),
            },
        }
    }

    pub(super) fn last_commit(&self) -> Option<LastCommit> {
        *self
            .last_commit
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

fn run(
    conn: Connection,
    receiver: mpsc::Receiver<Msg>,
    counters: &Counters,
    last_commit: &Mutex<Option<LastCommit>>,
    mut wal: WalWatch,
) {
    conn.wal_hook(Some(note_wal_frames));
    let statements = super::statements::Kept::new(&conn);
    // SAFETY: nothing made inside keeps a statement handle past `serve_jobs`: a job gets
    // `&Connection` for one call and returns owned values, and the writer's own statements
    // (`control`) are dropped where they run.
    unsafe { statements.serve(|| serve_jobs(&conn, &receiver, counters, last_commit, &mut wal)) };
    // Fold the WAL back into the main file so a stopped server leaves one self-contained
    // file behind. PASSIVE never waits: a CLI command closing while the server reads must
    // not stall, and when the server itself stops no reader is left, so it completes. (The
    // checkpointer thread is stopped first, `Db::close`, so its pass cannot make this one
    // busy.)
    if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
        log::warn!("WAL checkpoint at shutdown failed: {e}");
    }
    log::debug!("database writer stopped");
}

/// Runs the jobs `receiver` brings in groups on `conn` until it is told to stop.
fn serve_jobs(
    conn: &Connection,
    receiver: &mpsc::Receiver<Msg>,
    counters: &Counters,
    last_commit: &Mutex<Option<LastCommit>>,
    wal: &mut WalWatch,
) {
    // A job taken off the queue while deciding whether to checkpoint: it starts the next group.
    let mut taken: Option<Box<dyn Job>> = None;
    'serve: loop {
        let first = match taken.take() {
            Some(job) => job,
            None => match receiver.recv() {
                Ok(Msg::Job(job)) => job,
                Ok(Msg::Stop) | Err(_) => break 'serve,
            },
        };
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
        // Counted before the group runs: its jobs are answered inside `run_group`, and a
        // caller that has its answer must find its group in the statistics.
        counters.group_sizes.observe(size);
        counters.last_group_size.store(size, Ordering::Relaxed);
        counters.max_group_size.fetch_max(size, Ordering::Relaxed);
        let failed = run_group(conn, group, counters);
        *last_commit
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(LastCommit {
            at_ms: crate::clock::now_ms(),
            failed,
        });
        if stop {
            break 'serve;
        }
        match checkpoint_if_due(conn, receiver, wal) {
            Ok(next) => taken = next,
            Err(Stopped) => break 'serve,
        }
    }
}

/// What the writer knows of the WAL between its groups.
struct WalWatch {
    nudge: Nudge,
    counters: Arc<checkpoint::Counters>,
    /// Frames in the WAL after the latest commit seen.
    frames: i32,
    /// Frames when the checkpointer was last nudged (0 after a restart).
    nudged_at: i32,
    /// Frames when the writer last checkpointed itself (0 after a restart).
    checkpointed_at: i32,
}

impl WalWatch {
    fn new(nudge: Nudge, counters: Arc<checkpoint::Counters>) -> WalWatch {
        WalWatch {
            nudge,
            counters,
            frames: 0,
            nudged_at: 0,
            checkpointed_at: 0,
        }
    }

    /// Takes in the frames after a group (as [`note_wal_frames`] left them) and nudges the
    /// checkpointer each time the WAL has grown by [`CHECKPOINT_FRAMES`].
    fn observe(&mut self, frames: i32) {
        if frames < self.frames {
            // Only a restart shortens the WAL: a checkpoint copied all of it.
            self.counters.wal_restarts.fetch_add(1, Ordering::Relaxed);
            self.nudged_at = 0;
            self.checkpointed_at = 0;
        }
        self.frames = frames;
        if frames >= self.nudged_at + CHECKPOINT_FRAMES {
            self.nudged_at = frames;
            self.nudge.nudge();
        }
    }

    /// Whether the writer should checkpoint itself now: the WAL reached
    /// [`WRITER_CHECKPOINT_FRAMES`] and grew since the writer's own last try.
    fn writer_due(&self) -> bool {
        self.frames >= WRITER_CHECKPOINT_FRAMES && self.frames > self.checkpointed_at
    }
}

/// The writer was told to stop while it looked at the queue.
struct Stopped;

/// After a group's jobs were answered: nudges the checkpointer when the WAL has grown by
/// [`CHECKPOINT_FRAMES`]. Checkpoints on the writer only when the checkpointer fell behind
/// ([`WRITER_CHECKPOINT_FRAMES`]): at once when no job is waiting, else (the job taken off the
/// queue is returned to start the next group) only once the WAL has
/// [`CHECKPOINT_FORCED_FRAMES`].
fn checkpoint_if_due(
    conn: &Connection,
    receiver: &mpsc::Receiver<Msg>,
    wal: &mut WalWatch,
) -> Result<Option<Box<dyn Job>>, Stopped> {
    wal.observe(WAL_FRAMES.get());
    if !wal.writer_due() {
        return Ok(None);
    }
    let waiting = match receiver.try_recv() {
        Ok(Msg::Job(job)) => Some(job),
        Ok(Msg::Stop) => return Err(Stopped),
        Err(_) => None,
    };
    if waiting.is_none() || wal.frames >= CHECKPOINT_FORCED_FRAMES {
        // Tried once per growth of the WAL: a checkpoint that could not copy everything (a
        // reader on an old snapshot, the checkpointer's pass under way) is tried again after
        // the next commit.
        wal.checkpointed_at = wal.frames;
        wal.counters.pass(conn, checkpoint::By::Writer);
    }
    Ok(waiting)
}

/// Runs one group; `None` when it committed, else why not (with the storage fault when
/// the cause is known to be one).
fn run_group(
    conn: &Connection,
    mut jobs: Vec<Box<dyn Job>>,
    counters: &Counters,
) -> Option<Option<StorageFault>> {
    let mut failures: Vec<Option<GroupFailure>> = vec![None; jobs.len()];
    let mut succeeded = vec![false; jobs.len()];
    // The deferral the group's earlier jobs collected into, if any.
    let mut collecting: Option<&'static dyn Deferred> = None;
    if let Err(e) = control(conn, "BEGIN IMMEDIATE") {
        let failure = GroupFailure::of(format!("could not begin the write transaction: {e}"), &e);
        if let Some(repeats) = BEGIN_FAILED.admit() {
            log::error!("{}{}{repeats}", failure.why, requests_of(&jobs));
        }
        let fault = failure.fault;
        finish_with(jobs, vec![Some(failure); failures.len()]);
        return Some(fault);
    }
    // Index of the first job in the current transaction; a transaction is restarted when a
    // job's error made SQLite roll back the whole of it.
    let mut first_in_transaction = 0;
    let mut rolled_back = false;
    for index in 0..jobs.len() {
        // A job that does not defer finds the figures of the deferring jobs before it
        // written; writing them is part of the transaction, not of the job.
        let own = jobs[index].deferred();
        let flushed = match collecting {
            Some(group) if !own.is_some_and(|own| same(own, group)) && group.pending() => {
                group.write(conn)
            }
            _ => Ok(()),
        };
        if own.is_some() {
            collecting = own;
        }
        if let Err(e) = flushed {
            failures[index] = Some(GroupFailure::of(
                format!("could not write the report roll-up: {e}"),
                &e,
            ));
            roll_back(conn);
        }
        let undo = jobs[index].undo();
        if conn.is_autocommit() {
            // The roll-up's error rolled back the transaction: start it again below.
        } else if undo == Undo::Savepoint
            && let Err(e) = control(conn, "SAVEPOINT job")
        {
            failures[index] = Some(GroupFailure::of(
                format!("could not open a savepoint: {e}"),
                &e,
            ));
            continue;
        }
        let job = &mut jobs[index];
        let request_id = job.request_id().cloned();
        let changes_before = conn.total_changes();
        let ok = !conn.is_autocommit()
            && crate::request_id::on_thread(request_id.as_ref(), || {
                numbered(|| match own {
                    Some(own) => {
                        own.job_start();
                        let ok = job.run(conn);
                        own.job_end(ok);
                        ok
                    }
                    None => job.run(conn),
                })
            });
        if !ok
            && undo == Undo::Group
            && !conn.is_autocommit()
            && conn.total_changes() != changes_before
        {
            // The job wrote before it failed, without a savepoint: only the transaction's
            // rollback undoes its writes, and the earlier jobs' with them.
            roll_back(conn);
        }
        if conn.is_autocommit() {
            rolling_back();
            if let Some(group) = collecting {
                group.discard();
            }
            // Some errors (disk full, I/O) roll back the whole transaction, not just the
            // savepoint: every earlier job of this transaction lost its writes too.
            rolled_back = true;
            let failure = GroupFailure {
                why: "the group transaction was rolled back by an earlier error".to_string(),
                fault: None,
            };
            for earlier in first_in_transaction..=index {
                if succeeded[earlier] || earlier == index {
                    failures[earlier] = Some(failure.clone());
                }
                succeeded[earlier] = false;
            }
            if let Some(repeats) = ROLLED_BACK.admit() {
                log::error!(
                    "a write job's error rolled back its whole group transaction; {} job(s) lost their writes and were told to retry{}{repeats}",
                    index + 1 - first_in_transaction,
                    requests_of(&jobs[first_in_transaction..=index]),
                );
            }
            first_in_transaction = index + 1;
            if let Err(e) = control(conn, "BEGIN IMMEDIATE") {
                let failure =
                    GroupFailure::of(format!("could not begin the write transaction: {e}"), &e);
                if let Some(repeats) = BEGIN_FAILED.admit() {
                    log::error!(
                        "{}{}{repeats}",
                        failure.why,
                        requests_of(&jobs[index + 1..])
                    );
                }
                let fault = failure.fault;
                for later in failures.iter_mut().skip(index + 1) {
                    *later = Some(failure.clone());
                }
                finish_with(jobs, failures);
                return Some(fault);
            }
            continue;
        }
        let end = if undo == Undo::Group {
            Ok(())
        } else if ok {
            control(conn, "RELEASE job")
        } else {
            rolling_back();
            control(conn, "ROLLBACK TO job").and_then(|()| control(conn, "RELEASE job"))
        };
        if let Err(e) = end {
            failures[index] = Some(GroupFailure::of(
                format!("could not close the savepoint: {e}"),
                &e,
            ));
        }
        succeeded[index] = ok;
    }
    let mut outcome = rolled_back.then_some(None);
    let committed = match collecting {
        Some(group) if group.pending() => group.write(conn),
        _ => Ok(()),
    }
    .and_then(|()| commit(conn, counters));
    if let Err(e) = committed {
        let failure = GroupFailure::of(format!("commit failed: {e}"), &e);
        if let Some(repeats) = COMMIT_FAILED.admit() {
            log::error!(
                "{}{}{repeats}",
                failure.why,
                requests_of(&jobs[first_in_transaction..])
            );
        }
        roll_back(conn);
        outcome = Some(failure.fault);
        for (index, slot) in failures.iter_mut().enumerate().skip(first_in_transaction) {
            if slot.is_none() {
                *slot = Some(failure.clone());
            }
            succeeded[index] = false;
        }
    }
    finish_with(jobs, failures);
    outcome
}

/// Commits the group's transaction, timed into the commit-time histogram (a failed commit
/// too: its time is the disk's as well).
fn commit(conn: &Connection, counters: &Counters) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    let committed = control(conn, "COMMIT");
    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    counters.commit_micros.observe(micros);
    committed
}

/// Runs one of the group's transaction and savepoint statements, prepared once: parsed for
/// every job (`execute_batch`) they cost the writer 18,800 instructions per single-lead job,
/// prepared 8,200 (callgrind, BENCHMARKS.md "Plain ingest").
fn control(conn: &Connection, sql: &'static str) -> rusqlite::Result<()> {
    conn.prepare_kept(sql)?.execute([]).map(|_| ())
}

/// `; requests a, b, c and 12 more` for the request ids among `jobs`, for a line about a
/// whole group (which the log format cannot tie to one request).
fn requests_of(jobs: &[Box<dyn Job>]) -> String {
    const SHOWN: usize = 5;
    let ids: Vec<&str> = jobs
        .iter()
        .filter_map(|job| job.request_id().map(|id| &**id))
        .collect();
    match ids.len() {
        0 => String::new(),
        n if n <= SHOWN => format!("; requests {}", ids.join(", ")),
        n => format!(
            "; requests {} and {} more",
            ids[..SHOWN].join(", "),
            n - SHOWN
        ),
    }
}

fn finish_with(jobs: Vec<Box<dyn Job>>, failures: Vec<Option<GroupFailure>>) {
    for (job, failure) in jobs.into_iter().zip(failures) {
        job.finish(failure.as_ref());
    }
}
