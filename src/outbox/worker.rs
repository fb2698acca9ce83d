//! The worker threads: one coordinator that talks to the database, and sender threads that
//! make the HTTP calls.
//!
//! The coordinator runs in rounds. Each round is one write job: it records the attempts the
//! senders finished, renews the leases of events still in flight here, and claims due
//! events for the free places, which it hands to the senders through a queue. Batching
//! the writes this way keeps the database cost per event small, and the senders never wait
//! for a commit. Between rounds it sleeps until a sender finishes, a [`Notifier`] wakes it,
//! the next event falls due, or the poll interval passes.
//!
//! A slow buyer must not hold up the others: at most `senders - 1` of its events are sent
//! at once, so one sender is always free for everyone else, and senders pass over queued
//! events of a buyer that is at its limit.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::sender::Sender;
use super::store::{self, Admit, Attempt, Claimed, Outcome};
use super::{Notifier, WorkerConfig};
use crate::db::{Db, DbError};
use crate::logging::Repeated;
use crate::request_id::RequestId;

/// The longest wait between two rounds after failing ones (a full disk, a locked file):
/// the round is retried, but not in a loop that burns a core and floods the log.
const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(5);

/// The running workers. [`Workers::stop`] ends them after their current attempts.
pub struct Workers {
    notifier: Notifier,
    coordinator: Option<JoinHandle<()>>,
}

/// Starts the coordinator and `config.senders` sender threads on `db`. Each recorded
/// attempt is counted on `notifier` by its outcome.
pub fn start(db: Db, config: WorkerConfig, notifier: Notifier) -> std::io::Result<Workers> {
    notifier.set_stopping(false);
    let senders = config.senders.max(1);
    let queue = Arc::new(Queue::default());
    let sender = Arc::new(Sender::new(config.request_timeout));
    let per_buyer_sending = senders.saturating_sub(1).max(1);
    let mut threads = Vec::with_capacity(senders);
    for index in 0..senders {
        let queue = queue.clone();
        let sender = sender.clone();
        let notifier = notifier.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("outbox-sender-{index}"))
                .spawn(move || {
                    while let Some(event) = queue.take(per_buyer_sending) {
                        // The request that caused the event is current while it is sent.
                        let request_id: Option<RequestId> =
                            event.request_id.as_deref().map(RequestId::from);
                        let attempt = crate::request_id::on_thread(request_id.as_ref(), || {
                            send_catching_panics(&sender, &event)
                        });
                        queue.done(&event.buyer_id);
                        notifier.finished(attempt);
                    }
                })?,
        );
    }
    // Deep enough that one round (one commit) hands the senders plenty of work, so the
    // commit latency does not bound throughput.
    let capacity = (senders * 64).max(256);
    let coordinator = Coordinator {
        db,
        notifier: notifier.clone(),
        queue,
        senders: threads,
        in_flight: HashMap::new(),
        capacity,
        per_buyer_in_flight: (capacity / 2).max(1),
        lease: lease_for(config.request_timeout),
        config,
    };
    let coordinator = std::thread::Builder::new()
        .name("outbox-coordinator".into())
        .spawn(move || coordinator.run())?;
    Ok(Workers {
        notifier,
        coordinator: Some(coordinator),
    })
}

impl Workers {
    /// Stops claiming, lets each sender finish the attempt it is making, records those,
    /// releases the claims that were never sent, and returns when every thread has ended.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(coordinator) = self.coordinator.take() {
            self.notifier.set_stopping(true);
            if coordinator.join().is_err() {
                log::error!("outbox coordinator thread panicked");
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Sends `event`; a panic in the sender becomes an attempt to retry, so the event is never
/// left held by this process with nobody sending it.
fn send_catching_panics(sender: &Sender, event: &Claimed) -> Attempt {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sender.send(event))) {
        Ok(attempt) => attempt,
        Err(_) => {
            log::error!("outbox: sending event {} panicked", event.id);
            Attempt {
                event_id: event.id.clone(),
                claim: event.claim,
                url: event.url.clone(),
                started_at: crate::clock::now_ms(),
                duration_ms: 0,
                http_status: None,
                error: Some("internal error while sending".into()),
                response_excerpt: None,
                verdict: store::Verdict::Retry { retry_after: None },
            }
        }
    }
}

/// How long a claim holds an event: longer than one attempt can take, with room for a
/// busy database, and short enough that after a crash the events go out again soon.
fn lease_for(request_timeout: Duration) -> Duration {
    request_timeout + (request_timeout / 2).max(Duration::from_secs(2))
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

/// An event claimed by this process and not yet recorded.
struct Held {
    buyer_id: String,
    claim: i64,
    lease_end: i64,
    /// The request that caused the event, named by the lines logged about it.
    request_id: Option<RequestId>,
}

struct Coordinator {
    db: Db,
    notifier: Notifier,
    queue: Arc<Queue>,
    senders: Vec<JoinHandle<()>>,
    in_flight: HashMap<String, Held>,
    /// The most events in flight here (queued or being sent).
    capacity: usize,
    /// The most events of one buyer in flight here, so a slow buyer's backlog leaves half
    /// the queue to the others.
    per_buyer_in_flight: usize,
    lease: Duration,
    config: WorkerConfig,
}

/// What one round asks the database to do.
struct Round {
    finished: Vec<Attempt>,
    renew: Vec<(String, i64)>,
    /// Places to fill with claims; 0 for none.
    claim: usize,
}

impl Coordinator {
    fn run(mut self) {
        static LOOKUP_FAILED: Repeated = Repeated::new();
        static ROUND_FAILED: Repeated = Repeated::new();
        let mut carried: Vec<Attempt> = Vec::new();
        // Look for due events at once: there may be some from before a restart.
        let mut want_claim = true;
        let mut next_poll = Instant::now();
        // After a failed round, no new one before this; the wait doubles with each failure.
        let mut backoff: Option<(Instant, Duration)> = None;
        loop {
            let mut deadline = next_poll.min(self.next_renewal());
            if let Some((until, _)) = backoff {
                deadline = deadline.max(until);
            }
            let inbox = self.notifier.wait(deadline);
            if inbox.stopping {
                carried.extend(inbox.finished);
                break;
            }
            carried.extend(inbox.finished);
            if inbox.woken {
                want_claim = true;
            }
            if backoff.is_some_and(|(until, _)| Instant::now() < until) {
                continue;
            }
            if Instant::now() >= next_poll {
                next_poll = Instant::now() + self.config.poll_interval;
                match self
                    .db
                    .read_blocking(|conn| store::next_due(conn).map_err(DbError::from))
                {
                    Ok(Some(due)) => {
                        let wait = (due - crate::clock::now_ms()).max(0);
                        if wait == 0 {
                            want_claim = true;
                        } else {
                            let wait = Duration::from_millis(wait as u64);
                            next_poll = next_poll.min(Instant::now() + wait);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        if let Some(repeats) = LOOKUP_FAILED.admit() {
                            log::warn!("outbox: looking for due events failed: {e}{repeats}");
                        }
                    }
                }
            }
            let free = self.capacity.saturating_sub(self.in_flight.len());
            let round = Round {
                finished: std::mem::take(&mut carried),
                renew: self.due_renewals(),
                claim: if want_claim { free } else { 0 },
            };
            if round.finished.is_empty() && round.renew.is_empty() && round.claim == 0 {
                continue;
            }
            match self.write_round(&round) {
                Ok((claim, rescheduled)) => {
                    backoff = None;
                    if rescheduled {
                        // Look up when the rescheduled events fall due, rather than finding
                        // out at the next poll.
                        next_poll = Instant::now();
                    }
                    // Due events left behind (no place, or their buyer at its limit) are
                    // claimed in the next round, which the next finished attempt starts; a
                    // wish to claim with no free place waits for a round with one.
                    if round.claim > 0 {
                        want_claim = claim.more_due;
                    }
                    self.queue.push(claim.events);
                }
                Err(e) => {
                    let wait = match backoff {
                        Some((_, wait)) => (wait * 2).min(MAX_ERROR_BACKOFF),
                        None => self.config.poll_interval.min(MAX_ERROR_BACKOFF),
                    };
                    if let Some(repeats) = ROUND_FAILED.admit() {
                        log::warn!(
                            "outbox: recording and claiming failed, trying again in {}: {e}{repeats}",
                            crate::duration::format(wait)
                        );
                    }
                    backoff = Some((Instant::now() + wait, wait));
                    carried = round.finished;
                    next_poll = Instant::now() + self.config.poll_interval;
                    want_claim = true;
                }
            }
        }
        self.shut_down(carried);
    }

    /// When the next lease renewal falls due: half-way through the earliest lease.
    fn next_renewal(&self) -> Instant {
        let half = millis(self.lease) / 2;
        match self.in_flight.values().map(|held| held.lease_end).min() {
            Some(end) => {
                let wait = (end - half - crate::clock::now_ms()).max(0);
                Instant::now() + Duration::from_millis(wait as u64)
            }
            None => Instant::now() + Duration::from_secs(3600),
        }
    }

    fn due_renewals(&self) -> Vec<(String, i64)> {
        let horizon = crate::clock::now_ms() + millis(self.lease) / 2;
        self.in_flight
            .iter()
            .filter(|(_, held)| held.lease_end <= horizon)
            .map(|(id, held)| (id.clone(), held.claim))
            .collect()
    }

    /// Runs one round as one write job and updates what is in flight here.
    /// Returns the claim and whether an event was rescheduled.
    fn write_round(&mut self, round: &Round) -> Result<(store::Claim, bool), DbError> {
        let finished = round.finished.clone();
        let renew = round.renew.clone();
        let claim = round.claim;
        let schedule = self.config.retry_schedule.clone();
        let lease = millis(self.lease);
        let per_buyer = self.per_buyer_in_flight;
        let held_ids: HashSet<String> = self.in_flight.keys().cloned().collect();
        let mut per_buyer_count: HashMap<String, usize> = HashMap::new();
        for held in self.in_flight.values() {
            *per_buyer_count.entry(held.buyer_id.clone()).or_default() += 1;
        }
        for attempt in &finished {
            // A finished attempt frees its place in this very round.
            if let Some(held) = self.in_flight.get(&attempt.event_id)
                && let Some(count) = per_buyer_count.get_mut(&held.buyer_id)
            {
                *count = count.saturating_sub(1);
            }
        }
        let (outcomes, claimed, now) = self.db.write_blocking(move |conn| {
            let now = crate::clock::now_ms();
            let mut outcomes = Vec::with_capacity(finished.len());
            for attempt in &finished {
                outcomes.push(store::record(conn, attempt, &schedule, now)?);
            }
            store::renew(conn, &renew, now + lease)?;
            let claimed = if claim > 0 {
                store::claim(conn, now, now + lease, claim, |id, buyer| {
                    if held_ids.contains(id) {
                        return Admit::Skip;
                    }
                    let count = per_buyer_count.entry(buyer.to_string()).or_default();
                    if *count >= per_buyer {
                        return Admit::SkipBuyer;
                    }
                    *count += 1;
                    Admit::Take
                })?
            } else {
                store::Claim::default()
            };
            Ok::<_, DbError>((outcomes, claimed, now))
        })?;
        let rescheduled = outcomes.contains(&Some(Outcome::Retry));
        for (attempt, outcome) in round.finished.iter().zip(outcomes) {
            if let Some(outcome) = outcome {
                self.notifier.count(outcome);
                if outcome != Outcome::Delivered {
                    let request_id = self
                        .in_flight
                        .get(&attempt.event_id)
                        .and_then(|held| held.request_id.clone());
                    crate::request_id::on_thread(request_id.as_ref(), || {
                        log::info!(
                            "outbox: event {} attempt {}: {}",
                            attempt.event_id,
                            outcome.as_str(),
                            attempt
                                .error
                                .clone()
                                .or_else(|| attempt.http_status.map(|s| format!("HTTP {s}")))
                                .unwrap_or_default()
                        )
                    });
                }
            }
            // Only the claim that sent it frees the place; an older claim's late answer
            // must not release a newer one.
            if self
                .in_flight
                .get(&attempt.event_id)
                .is_some_and(|held| held.claim == attempt.claim)
            {
                self.in_flight.remove(&attempt.event_id);
            }
        }
        for (id, _) in &round.renew {
            if let Some(held) = self.in_flight.get_mut(id) {
                held.lease_end = now + lease;
            }
        }
        for event in &claimed.events {
            self.in_flight.insert(
                event.id.clone(),
                Held {
                    buyer_id: event.buyer_id.clone(),
                    claim: event.claim,
                    lease_end: now + lease,
                    request_id: event.request_id.as_deref().map(RequestId::from),
                },
            );
        }
        Ok((claimed, rescheduled))
    }

    /// Lets the senders finish their current attempts, records them, and releases the
    /// claims that were never sent so the next start sends them at once.
    fn shut_down(mut self, mut finished: Vec<Attempt>) {
        let unsent = self.queue.close();
        for sender in std::mem::take(&mut self.senders) {
            if sender.join().is_err() {
                log::error!("an outbox sender thread panicked");
            }
        }
        finished.extend(self.notifier.wait(Instant::now()).finished);
        let release: Vec<(String, i64)> = unsent.iter().map(|e| (e.id.clone(), e.claim)).collect();
        let schedule = self.config.retry_schedule.clone();
        let recorded = self.db.write_blocking(move |conn| {
            let now = crate::clock::now_ms();
            let mut outcomes = Vec::with_capacity(finished.len());
            for attempt in &finished {
                outcomes.push(store::record(conn, attempt, &schedule, now)?);
            }
            store::release(conn, &release)?;
            Ok::<_, DbError>(outcomes)
        });
        match recorded {
            Ok(outcomes) => {
                for outcome in outcomes.into_iter().flatten() {
                    self.notifier.count(outcome);
                }
            }
            // The leases run out and the events are sent again: at least once still holds.
            Err(e) => log::warn!("outbox: recording the last attempts at shutdown failed: {e}"),
        }
        log::debug!("outbox workers stopped");
    }
}

/// Claimed events waiting for a sender, and how many of each buyer's are being sent.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    changed: Condvar,
}

#[derive(Default)]
struct QueueState {
    waiting: VecDeque<Claimed>,
    sending: HashMap<String, usize>,
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // Plain data that a panicking holder cannot leave half-changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, events: Vec<Claimed>) {
        if events.is_empty() {
            return;
        }
        self.lock().waiting.extend(events);
        self.changed.notify_all();
    }

    /// The oldest waiting event whose buyer has fewer than `per_buyer` being sent; blocks
    /// until there is one. `None` once the queue is closed.
    fn take(&self, per_buyer: usize) -> Option<Claimed> {
        let mut state = self.lock();
        loop {
            if state.closed {
                return None;
            }
            let position = state.waiting.iter().position(|event| {
                state.sending.get(&event.buyer_id).copied().unwrap_or(0) < per_buyer
            });
            if let Some(position) = position {
                let event = state
                    .waiting
                    .remove(position)
                    .expect("the position was just found in the queue");
                *state.sending.entry(event.buyer_id.clone()).or_default() += 1;
                return Some(event);
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn done(&self, buyer_id: &str) {
        let mut state = self.lock();
        if let Some(count) = state.sending.get_mut(buyer_id) {
            *count -= 1;
            if *count == 0 {
                state.sending.remove(buyer_id);
            }
        }
        drop(state);
        // Another sender may have been waiting for this buyer's turn.
        self.changed.notify_all();
    }

    /// Closes the queue and returns the events that no sender took.
    fn close(&self) -> Vec<Claimed> {
        let mut state = self.lock();
        state.closed = true;
        let unsent = state.waiting.drain(..).collect();
        drop(state);
        self.changed.notify_all();
        unsent
    }
}
