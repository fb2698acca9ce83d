//! Retention: leads older than their workspace's retention (`workspace create --retention
//! 180d`) become tombstones, the same as an erasure, and the pings that never became a lead
//! (rejected, expired, released) are deleted with their reservations and bids. `serve` runs [`run_retention`] at start
//! and then once an hour; `leadrelay purge --older-than` runs [`purge`] by hand.
//!
//! A purge walks each source's leads in creation order, one range of the
//! `leads_source_mix` index per stored statuses (`ingest::erase::stored_statuses`), from where the workspace's last finished purge stopped (its log row's `cutoff`:
//! everything created before it is a tombstone) up to the cutoff, in writer jobs of at most
//! [`PURGE_LEADS_PER_JOB`] leads, pausing between jobs [`PAUSE_FACTOR`] times as long as
//! the job took, so the purge has the writer at most a fifth of the time and an ingest job
//! waits behind at most one short purge job. A backlog goes slowly (a first run on a large
//! file may take hours); what retention adds each hour is a few minutes of it. A run that purged leads logs one
//! row in the erasure log, with its counts, and closes it when the walk is done.
//!
//! With `auto_vacuum=INCREMENTAL` (new files; `leadrelay vacuum` switches older ones) a run
//! ends by giving the freed pages back to the file system in bounded steps
//! ([`VACUUM_PAGES_PER_JOB`] pages per job).

use crate::db::PrepareKept;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

use super::{Counts, NewLogRow, PrivacyError, erase_lead, log_progress, log_start};
use crate::db::Db;
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::quality::QualityStatus;

/// How many index entries (tombstones included) one purge job may walk.
const WALK_PER_JOB: usize = 1_000;

/// The most leads one purge job makes tombstones of. Measured (BENCHMARKS.md, "Purge while
/// ingesting"): jobs of 100 leads with a pause as long as the job moved ingest's p99 by tens
/// of milliseconds on a loaded machine.
const PURGE_LEADS_PER_JOB: usize = 20;

/// The most pings one purge job deletes: a ping is one row, its bids and reservations,
/// cheaper than a lead's tombstone.
const PURGE_PINGS_PER_JOB: usize = 100;

/// The pause after a purge job, as a multiple of the job's time.
const PAUSE_FACTOR: u32 = 4;

/// Pages one incremental-vacuum job gives back (1 MiB at the default page size).
pub(crate) const VACUUM_PAGES_PER_JOB: i64 = 256;

/// Who purges: the hourly run of `serve` or an operator's `purge` command.
#[derive(Debug, Clone)]
pub enum Trigger {
    Retention,
    /// `actor` as the erasure log names it, `by` as the audit log does.
    Operator {
        actor: String,
        by: crate::audit::Actor,
    },
}

impl Trigger {
    fn selector(&self) -> &'static str {
        match self {
            Trigger::Retention => "retention",
            Trigger::Operator { .. } => "older_than",
        }
    }

    fn actor(&self) -> &str {
        match self {
            Trigger::Retention => "retention",
            Trigger::Operator { actor, .. } => actor,
        }
    }

    /// Who purges, for the audit log: the server for retention.
    fn by(&self) -> crate::audit::Actor {
        match self {
            Trigger::Retention => crate::audit::Actor::Server,
            Trigger::Operator { by, .. } => by.clone(),
        }
    }
}

/// What a purge did (or, with `dry_run`, would do).
#[derive(Debug, Default, Clone)]
pub struct PurgeReport {
    pub counts: Counts,
    /// Pings deleted (or, with `dry_run`, due): created before the cutoff and never
    /// posted.
    pub pings: u64,
    pub dry_run: bool,
    /// The log rows written, one per workspace that had leads to purge.
    pub erasure_ids: Vec<String>,
    /// Pages given back to the file system afterwards.
    pub vacuumed_pages: i64,
}

/// The workspaces with a retention, and each one's cutoff at `now` (leads created before
/// it are due).
pub(crate) fn due_workspaces(conn: &Connection, now: i64) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut stmt = conn.prepare_kept(
        "SELECT id, retention_ms FROM workspaces WHERE retention_ms IS NOT NULL ORDER BY id",
    )?;
    let rows = stmt.query_map([], |row| {
        let retention: i64 = row.get(1)?;
        Ok((row.get::<_, String>(0)?, now.saturating_sub(retention)))
    })?;
    rows.collect()
}

/// How often `serve` purges by retention (and once at start).
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(3_600);

/// Tells a running purge to stop between two jobs; the pauses between jobs wait on it, so a
/// stopping server does not wait out a pause.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<(Mutex<bool>, Condvar)>);

impl Cancel {
    pub(crate) fn cancel(&self) {
        let (flag, changed) = &*self.0;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        changed.notify_all();
    }

    /// Waits `timeout` or until cancelled; `true` when cancelled.
    fn wait(&self, timeout: Duration) -> bool {
        let (flag, changed) = &*self.0;
        let guard = flag.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = changed
            .wait_timeout_while(guard, timeout, |cancelled| !*cancelled)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

/// The thread of `serve` that purges by retention at start and then every `interval`.
pub struct RetentionWorker {
    cancel: Cancel,
    thread: Option<JoinHandle<()>>,
}

impl RetentionWorker {
    pub fn start(db: Db, interval: Duration) -> std::io::Result<RetentionWorker> {
        let cancel = Cancel::default();
        let thread = std::thread::Builder::new()
            .name("retention".into())
            .spawn({
                let cancel = cancel.clone();
                move || {
                    loop {
                        match run_retention(&db, &cancel) {
                            Ok(report) if report.counts.leads > 0 || report.pings > 0 => {
                                log::info!(
                                    "retention purged {} leads and {} pings, gave back {} pages",
                                    report.counts.leads,
                                    report.pings,
                                    report.vacuumed_pages
                                )
                            }
                            Ok(_) => {}
                            Err(e) => log::warn!("retention purge failed: {e}"),
                        }
                        if cancel.wait(interval) {
                            return;
                        }
                    }
                }
            })?;
        Ok(RetentionWorker {
            cancel,
            thread: Some(thread),
        })
    }

    /// Stops after the job in progress and waits for the thread.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.cancel.cancel();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            log::error!("retention thread panicked");
        }
    }
}

impl Drop for RetentionWorker {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Purges every workspace that has a retention (what `serve` runs hourly).
pub(crate) fn run_retention(db: &Db, cancel: &Cancel) -> Result<PurgeReport, PrivacyError> {
    let due = db.read_blocking(|conn| {
        due_workspaces(conn, crate::clock::now_ms()).map_err(PrivacyError::from)
    })?;
    let mut report = PurgeReport::default();
    for (workspace_id, cutoff) in due {
        let one = purge_workspace(
            db,
            &workspace_id,
            cutoff,
            &Trigger::Retention,
            false,
            cancel,
        )?;
        report.counts.add(one.counts);
        report.pings += one.pings;
        report.erasure_ids.extend(one.erasure_ids);
    }
    report.vacuumed_pages = give_back_free_pages(db, cancel)?;
    Ok(report)
}

/// `leadrelay purge --older-than AGE [--workspace W] [--dry-run]`: makes tombstones of the
/// leads created before `cutoff`, in workspace `workspace` or in all.
pub fn purge(
    db: &Db,
    workspace: Option<&str>,
    cutoff: i64,
    trigger: &Trigger,
    dry_run: bool,
    cancel: &Cancel,
) -> Result<PurgeReport, PrivacyError> {
    let workspaces = db.read_blocking(|conn| {
        let mut stmt = conn.prepare("SELECT id FROM workspaces WHERE ?1 IS NULL OR id = ?1")?;
        let ids = stmt
            .query_map([workspace], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok::<_, PrivacyError>(ids)
    })?;
    if let Some(id) = workspace
        && workspaces.is_empty()
    {
        return Err(PrivacyError::UnknownWorkspace(id.to_string()));
    }
    let mut report = PurgeReport {
        dry_run,
        ..PurgeReport::default()
    };
    for workspace_id in workspaces {
        let one = purge_workspace(db, &workspace_id, cutoff, trigger, dry_run, cancel)?;
        report.counts.add(one.counts);
        report.pings += one.pings;
        report.erasure_ids.extend(one.erasure_ids);
    }
    if !dry_run {
        report.vacuumed_pages = give_back_free_pages(db, cancel)?;
    }
    Ok(report)
}

/// Where the workspace's last finished purge stopped: leads created before it are
/// tombstones already.
fn purged_before(conn: &Connection, workspace_id: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_kept(
        "SELECT max(cutoff) FROM erasures
         WHERE kind = 'purge' AND workspace_id = ?1 AND finished_at IS NOT NULL",
    )?
    .query_row([workspace_id], |row| row.get(0))
}

fn sources_of(
    conn: &Connection,
    workspace_id: &str,
) -> rusqlite::Result<Vec<crate::ids::SourceId>> {
    let mut stmt = conn.prepare_kept(
        "SELECT s.id FROM sources s JOIN containers c ON c.id = s.container_id
         WHERE c.workspace_id = ?1 ORDER BY s.id",
    )?;
    let rows = stmt.query_map([workspace_id], |row| row.get(0))?;
    rows.collect()
}

fn purge_workspace(
    db: &Db,
    workspace_id: &str,
    cutoff: i64,
    trigger: &Trigger,
    dry_run: bool,
    cancel: &Cancel,
) -> Result<PurgeReport, PrivacyError> {
    let (from, sources) = db.read_blocking(|conn| {
        let from = purged_before(conn, workspace_id)?;
        Ok::<_, PrivacyError>((from, sources_of(conn, workspace_id)?))
    })?;
    let mut report = PurgeReport {
        dry_run,
        ..PurgeReport::default()
    };
    let (pings, cancelled) = purge_pings(db, workspace_id, cutoff, dry_run, cancel)?;
    report.pings = pings;
    let from = from.unwrap_or(i64::MIN);
    if from >= cutoff || cancelled {
        return Ok(report);
    }
    if dry_run {
        report.counts.leads = db.read_blocking(|conn| {
            let mut due = 0;
            for source in &sources {
                due += crate::ingest::erase::count_older_than(conn, source, from, cutoff)?;
            }
            Ok::<_, PrivacyError>(due)
        })?;
        return Ok(report);
    }
    let mut log_id: Option<String> = None;
    let ranges = sources.iter().flat_map(|source| {
        crate::ingest::erase::stored_statuses().map(move |statuses| (source, statuses))
    });
    for (source, statuses) in ranges {
        // Just before `from`: the walk starts at the first lead created at `from`.
        let mut after = (from.saturating_sub(1), i64::MAX);
        loop {
            let started = Instant::now();
            let step = db.write_blocking({
                let source = source.clone();
                let workspace_id = workspace_id.to_string();
                let log_id = log_id.clone();
                let trigger = trigger.clone();
                move |conn| {
                    let now = crate::clock::now_ms();
                    let walked = purge_step(conn, &source, statuses, after, cutoff, now)?;
                    let mut log_id = log_id;
                    if walked.counts.leads > 0 && log_id.is_none() {
                        log_id = Some(log_start(
                            conn,
                            &NewLogRow {
                                kind: "purge",
                                selector: trigger.selector(),
                                workspace_id: Some(&workspace_id),
                                cutoff: Some(cutoff),
                                actor: trigger.actor(),
                                reason: None,
                                now,
                            },
                        )?);
                        let changes = crate::audit::Changes::new()
                            .set("purgedBefore", Value::Null, crate::clock::iso(cutoff))
                            .set("trigger", Value::Null, trigger.selector());
                        crate::audit::record(
                            conn,
                            &trigger.by(),
                            "privacy.purge",
                            &workspace_id,
                            &changes,
                            now,
                        )?;
                    }
                    if let Some(id) = &log_id {
                        log_progress(conn, id, walked.counts, None)?;
                    }
                    Ok::<_, PrivacyError>((walked, log_id))
                }
            })?;
            let (walked, id) = step;
            log_id = id;
            report.counts.add(walked.counts);
            if pause_after(started.elapsed(), cancel) {
                // Stopped: the log row stays open (not finished), so the next run starts
                // from the last finished one's cutoff and walks past these tombstones.
                if let Some(id) = log_id {
                    report.erasure_ids.push(id);
                }
                return Ok(report);
            }
            match walked.last {
                Some(position) if !walked.exhausted => after = position,
                _ => break,
            }
        }
    }
    if let Some(id) = log_id {
        db.write_blocking({
            let id = id.clone();
            move |conn| {
                log_progress(conn, &id, Counts::default(), Some(crate::clock::now_ms()))
                    .map_err(PrivacyError::from)
            }
        })?;
        report.erasure_ids.push(id);
    }
    Ok(report)
}

/// Deletes the pings of `workspace_id` created before `cutoff` that never became a lead
/// (`ping::store::delete_unposted_before`), in writer jobs of [`PURGE_PINGS_PER_JOB`] with
/// the lead walk's pauses; with `dry_run`, counts them. A posted ping stays: its lead's
/// tombstone takes the person out of it. Returns how many, and whether it was cancelled.
fn purge_pings(
    db: &Db,
    workspace_id: &str,
    cutoff: i64,
    dry_run: bool,
    cancel: &Cancel,
) -> Result<(u64, bool), PrivacyError> {
    if dry_run {
        let due = db.read_blocking(|conn| {
            crate::ping::store::count_unposted_before(
                conn,
                workspace_id,
                cutoff,
                crate::clock::now_ms(),
            )
            .map_err(PrivacyError::from)
        })?;
        return Ok((due, false));
    }
    let mut total = 0;
    loop {
        let started = Instant::now();
        let deleted = db.write_blocking({
            let workspace_id = workspace_id.to_string();
            move |conn| {
                crate::ping::store::delete_unposted_before(
                    conn,
                    &workspace_id,
                    cutoff,
                    PURGE_PINGS_PER_JOB,
                    crate::clock::now_ms(),
                )
                .map_err(PrivacyError::from)
            }
        })?;
        total += deleted;
        if deleted < PURGE_PINGS_PER_JOB as u64 {
            return Ok((total, false));
        }
        if pause_after(started.elapsed(), cancel) {
            return Ok((total, true));
        }
    }
}

/// What one purge job did on one source.
#[derive(Debug, Default)]
struct LeadsWalked {
    counts: Counts,
    /// The position of the last lead walked: the next job starts after it.
    last: Option<(i64, i64)>,
    /// Whether the range has nothing more before the cutoff.
    exhausted: bool,
}

/// One purge job on one range of a source (its leads with `statuses`): the next leads
/// after `after` created before `cutoff` (at most [`WALK_PER_JOB`] walked,
/// [`PURGE_LEADS_PER_JOB`] erased).
fn purge_step(
    conn: &Connection,
    source_id: &crate::ids::SourceId,
    statuses: (QualityStatus, DuplicateStatus),
    after: (i64, i64),
    cutoff: i64,
    now: i64,
) -> rusqlite::Result<LeadsWalked> {
    let candidates =
        crate::ingest::erase::older_than(conn, source_id, statuses, after, cutoff, WALK_PER_JOB)?;
    let mut walked = LeadsWalked {
        exhausted: candidates.len() < WALK_PER_JOB,
        ..LeadsWalked::default()
    };
    for candidate in candidates {
        walked.last = Some(candidate.position);
        if candidate.erased {
            continue;
        }
        walked.counts.add(erase_lead(conn, candidate.id, now)?);
        if walked.counts.leads as usize >= PURGE_LEADS_PER_JOB {
            // Stop here; the next job goes on from this lead.
            walked.exhausted = false;
            break;
        }
    }
    Ok(walked)
}

/// Waits [`PAUSE_FACTOR`] times as long as the last job took (at least 2 ms), so a purge
/// keeps the writer at most a fifth busy and ingest jobs never queue behind a run of purge
/// jobs; `true` when the purge was cancelled meanwhile.
fn pause_after(job: Duration, cancel: &Cancel) -> bool {
    cancel.wait((job * PAUSE_FACTOR).max(Duration::from_millis(2)))
}

/// With `auto_vacuum=INCREMENTAL`, gives the free pages back to the file system in jobs of
/// [`VACUUM_PAGES_PER_JOB`] pages; returns how many. Without it (a file from before it was
/// the default and not vacuumed since), free pages are reused by later writes and
/// `leadrelay vacuum` gives them back.
pub(crate) fn give_back_free_pages(db: &Db, cancel: &Cancel) -> Result<i64, PrivacyError> {
    let incremental = db.read_blocking(|conn| {
        conn.pragma_query_value(None, "auto_vacuum", |row| row.get::<_, i64>(0))
            .map_err(PrivacyError::from)
    })? == 2;
    if !incremental {
        return Ok(0);
    }
    let mut total = 0;
    loop {
        let started = Instant::now();
        let freed = db.write_blocking(|conn| {
            let before: i64 = conn.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
            // The pragma frees one page per step: run it to the end.
            let mut stmt = conn.prepare(&format!(
                "PRAGMA incremental_vacuum({VACUUM_PAGES_PER_JOB})"
            ))?;
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
            drop(rows);
            drop(stmt);
            let after: i64 = conn.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
            Ok::<_, PrivacyError>((before - after, after))
        })?;
        total += freed.0;
        if pause_after(started.elapsed(), cancel) || freed.0 == 0 || freed.1 == 0 {
            return Ok(total);
        }
    }
}
