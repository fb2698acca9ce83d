//! The coordinator thread: everything the outbox asks of the database, in rounds, and the
//! fair share of sends among buyers.
//!
//! Each round is one write job: it records the attempts the senders finished (the event
//! and its transaction through `attempt::record_all`, the buyer's breaker), renews the
//! leases of events still in flight, claims due events for the free places and, every few
//! seconds, reports the per-buyer figures and a heartbeat for `buyer health`. Batching the
//! writes keeps the database cost per event a fraction of a commit, and the senders never
//! wait for a commit. Between rounds it sleeps until a sender finishes, a [`Notifier`]
//! wakes it, the next event falls due, or the poll interval passes.
//!
//! Fairness: at most `concurrency` events are in flight in all and `per_buyer` of one
//! buyer's; free places are dealt round-robin over the buyers with due events (each gets
//! an equal share, what one cannot use goes to the others), not taken oldest-first from one
//! queue, so a buyer with a backlog or a hanging endpoint never holds more than its own
//! places. An unhealthy buyer (`health`) gets no place but one probe at a time when its
//! probe falls due.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::health::{self, BreakerConfig, Figures, Transition};
use super::pool::Pool;
use super::store::{self, Attempt, Claimed, DueBuyer, Outcome};
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
    coordinator: Option<std::thread::JoinHandle<()>>,
}

/// Starts the coordinator on `db` and the sender thread. Each recorded attempt is counted
/// on `notifier`.
pub fn start(db: Db, config: WorkerConfig, notifier: Notifier) -> std::io::Result<Workers> {
    notifier.set_stopping(false);
    let concurrency = config.concurrency.max(1);
    let per_buyer = config.per_buyer.clamp(1, concurrency);
    let pool = Pool::start(
        config.request_timeout,
        per_buyer,
        crate::outbound_url::Reach::public_only(config.public_outbound_only),
        notifier.clone(),
    )?;
    let coordinator = Coordinator {
        db,
        notifier: notifier.clone(),
        pool,
        in_flight: HashMap::new(),
        concurrency,
        per_buyer,
        lease: lease_for(config.request_timeout),
        rotation: 0,
        started_at: crate::clock::now_ms(),
        reported: HashMap::new(),
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

/// How long a claim holds an event: longer than one attempt can take, with room for a
/// busy database, and short enough that after a crash the events go out again soon.
fn lease_for(request_timeout: Duration) -> Duration {
    request_timeout + (request_timeout / 2).max(Duration::from_secs(2))
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

/// An `Instant` for the clock time `at_ms` (now when it has passed).
fn instant_at(at_ms: i64) -> Instant {
    let wait = (at_ms - crate::clock::now_ms()).max(0);
    Instant::now() + Duration::from_millis(wait as u64)
}

/// An event claimed by this process and not yet recorded.
struct Held {
    buyer_id: crate::ids::BuyerId,
    claim: i64,
    lease_end: i64,
    /// The request that caused the event, named by the lines logged about it.
    request_id: Option<RequestId>,
}

struct Coordinator {
    db: Db,
    notifier: Notifier,
    pool: Pool,
    in_flight: HashMap<crate::ids::EventId, Held>,
    concurrency: usize,
    per_buyer: usize,
    lease: Duration,
    /// Turns the round-robin: each claim round starts with the next buyer.
    rotation: usize,
    started_at: i64,
    /// The figures last reported per buyer, so unchanged ones are not written again.
    reported: HashMap<crate::ids::BuyerId, Figures>,
    config: WorkerConfig,
}

/// What one round asks the database to do.
struct Round {
    finished: Vec<Attempt>,
    renew: Vec<(crate::ids::EventId, i64)>,
    /// Places to fill with claims; 0 for none.
    claim: usize,
    /// Places each buyer holds once `finished` are recorded.
    held: HashMap<crate::ids::BuyerId, usize>,
    /// Per-buyer figures to report, with the heartbeat; `None` when not due.
    report: Option<Vec<(crate::ids::BuyerId, Figures)>>,
}

/// What a round did.
struct Done {
    outcomes: Vec<Option<Outcome>>,
    /// New deliveries the waterfall made after refusals: their events are due now.
    rerouted: usize,
    transitions: Vec<(crate::ids::BuyerId, Transition, health::Breaker)>,
    claimed: Vec<Claimed>,
    /// Due events left unclaimed because every free place was taken.
    more_due: bool,
    /// When the next event that nothing else will wake us for falls due.
    next_due: Option<i64>,
    unhealthy: Vec<(crate::ids::BuyerId, bool)>,
    now: i64,
}

impl Coordinator {
    fn run(mut self) {
        static LOOKUP_FAILED: Repeated = Repeated::new();
        static ROUND_FAILED: Repeated = Repeated::new();
        let mut carried: Vec<Attempt> = Vec::new();
        // Look for due events at once: there may be some from before a restart.
        let mut want_claim = true;
        let mut next_check = Instant::now();
        let mut next_report = Instant::now();
        // After a failed round, no new one before this; the wait doubles with each failure.
        let mut backoff: Option<(Instant, Duration)> = None;
        loop {
            let mut deadline = next_check.min(self.next_renewal()).min(next_report);
            if let Some((until, _)) = backoff {
                deadline = deadline.max(until);
            }
            let inbox = self.notifier.wait(deadline);
            carried.extend(inbox.finished);
            if inbox.stopping {
                break;
            }
            if inbox.woken {
                want_claim = true;
            }
            if backoff.is_some_and(|(until, _)| Instant::now() < until) {
                continue;
            }
            let now = Instant::now();
            let mut timer_only = false;
            if now >= next_check {
                next_check = now + self.config.poll_interval;
                timer_only = !want_claim;
                want_claim = true;
            }
            // The finished attempts free their places in this very round: claiming them only
            // in the next would leave them idle for a whole round (a commit and a wake-up).
            let held = self.held_after(&carried);
            let free = self
                .concurrency
                .saturating_sub(held.values().sum::<usize>());
            let report = (now >= next_report).then(|| self.figures_to_report());
            let claim = if free > 0 && (want_claim || !carried.is_empty()) {
                free
            } else {
                0
            };
            let renew = self.due_renewals();
            if carried.is_empty() && renew.is_empty() && report.is_none() {
                if claim == 0 {
                    continue;
                }
                // Woken by the clock alone: look before taking the writer.
                if timer_only && carried.is_empty() {
                    match self.look() {
                        Ok((claimable, next_due)) => {
                            if let Some(due) = next_due {
                                next_check = next_check.min(instant_at(due));
                            }
                            if !claimable {
                                want_claim = false;
                                continue;
                            }
                        }
                        Err(e) => {
                            if let Some(repeats) = LOOKUP_FAILED.admit() {
                                log::warn!("outbox: looking for due events failed: {e}{repeats}");
                            }
                        }
                    }
                }
            }
            let round = Round {
                finished: std::mem::take(&mut carried),
                renew,
                claim,
                held,
                report,
            };
            let writing = Instant::now();
            match self.write_round(&round) {
                Ok(done) => {
                    log::trace!(
                        "outbox round: {} recorded, {} claimed of {} free, {} in flight before, \
                         written in {:?}",
                        round.finished.len(),
                        done.claimed.len(),
                        round.claim,
                        self.in_flight.len(),
                        writing.elapsed()
                    );
                    backoff = None;
                    if round.report.is_some() {
                        next_report = Instant::now() + self.config.report_interval;
                    }
                    if round.claim > 0 {
                        want_claim = done.more_due;
                    }
                    if done.rerouted > 0 {
                        want_claim = true;
                    }
                    if let Some(due) = done.next_due {
                        next_check = next_check.min(instant_at(due));
                    }
                    self.apply(&round, done);
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
                    next_check = Instant::now() + self.config.poll_interval;
                    want_claim = true;
                }
            }
        }
        self.shut_down(carried);
    }

    /// The places each buyer holds once `finished` are recorded: only the claim that sent
    /// an event frees its place (an older claim's late answer must not release a newer one).
    fn held_after(&self, finished: &[Attempt]) -> HashMap<crate::ids::BuyerId, usize> {
        let mut counts = self.per_buyer_counts();
        for attempt in finished {
            if let Some(held) = self.in_flight.get(&attempt.event_id)
                && held.claim == attempt.claim
                && let Some(count) = counts.get_mut(&held.buyer_id)
            {
                *count = count.saturating_sub(1);
            }
        }
        counts
    }

    /// In-flight counts per buyer.
    fn per_buyer_counts(&self) -> HashMap<crate::ids::BuyerId, usize> {
        let mut counts: HashMap<crate::ids::BuyerId, usize> = HashMap::new();
        for held in self.in_flight.values() {
            *counts.entry(held.buyer_id.clone()).or_default() += 1;
        }
        counts
    }

    /// Reads (through the pool) whether anything can be claimed now, and when the next
    /// event falls due.
    fn look(&self) -> Result<(bool, Option<i64>), DbError> {
        let due = self
            .db
            .read_blocking(|conn| store::due_buyers(conn).map_err(DbError::from))?;
        let plan = plan(
            &due,
            &self.per_buyer_counts(),
            self.per_buyer,
            crate::clock::now_ms(),
        );
        Ok((!plan.slots.is_empty(), plan.next_due))
    }

    /// When the next lease renewal falls due: half-way through the earliest lease.
    fn next_renewal(&self) -> Instant {
        let half = millis(self.lease) / 2;
        match self.in_flight.values().map(|held| held.lease_end).min() {
            Some(end) => instant_at(end - half),
            None => Instant::now() + Duration::from_secs(3600),
        }
    }

    fn due_renewals(&self) -> Vec<(crate::ids::EventId, i64)> {
        let horizon = crate::clock::now_ms() + millis(self.lease) / 2;
        self.in_flight
            .iter()
            .filter(|(_, held)| held.lease_end <= horizon)
            .map(|(id, held)| (id.clone(), held.claim))
            .collect()
    }

    /// The figures of buyers that changed since they were last reported, or that were
    /// never reported by this process.
    fn figures_to_report(&self) -> Vec<(crate::ids::BuyerId, Figures)> {
        let counts = self.per_buyer_counts();
        self.notifier
            .buyer_figures()
            .into_iter()
            .map(|f| {
                let figures = Figures {
                    in_flight: counts.get(&f.buyer_id).copied().unwrap_or(0) as i64,
                    p50_ms: f.p50_ms,
                    p99_ms: f.p99_ms,
                };
                (f.buyer_id, figures)
            })
            .filter(|(buyer, figures)| self.reported.get(buyer) != Some(figures))
            .collect()
    }

    /// Runs one round as one write job.
    fn write_round(&mut self, round: &Round) -> Result<Done, DbError> {
        let finished = round.finished.clone();
        let renew = round.renew.clone();
        let free = round.claim;
        let report = round.report.clone();
        let schedule = self.config.retry_schedule.clone();
        let breaker = self.config.breaker;
        let lease = millis(self.lease);
        let per_buyer = self.per_buyer;
        let started_at = self.started_at;
        let rotation = self.rotation;
        let counts = round.held.clone();
        if free > 0 {
            self.rotation = self.rotation.wrapping_add(1);
        }
        self.db.write_blocking(move |conn| {
            let now = crate::clock::now_ms();
            let recorded = crate::attempt::record_all(conn, &finished, &schedule, now)?;
            let transitions = observe_all(conn, &finished, &breaker, now)?;
            store::renew(conn, &renew, now + lease)?;
            let mut done = Done {
                outcomes: recorded.outcomes,
                rerouted: recorded.rerouted,
                transitions,
                claimed: Vec::new(),
                more_due: false,
                next_due: None,
                unhealthy: Vec::new(),
                now,
            };
            if free > 0 {
                let due = store::due_buyers(conn)?;
                done.unhealthy = due
                    .iter()
                    .map(|b| (b.buyer_id.clone(), b.unhealthy))
                    .collect();
                let plan = plan(&due, &counts, per_buyer, now);
                done.next_due = plan.next_due;
                let (claimed, more_due) =
                    claim_fairly(conn, plan.slots, rotation, free, now, now + lease)?;
                done.claimed = claimed;
                done.more_due = more_due;
            }
            if let Some(report) = &report {
                health::heartbeat(conn, started_at, now)?;
                for (buyer_id, figures) in report {
                    health::report(conn, buyer_id, figures, now)?;
                }
            }
            Ok::<_, DbError>(done)
        })
    }

    /// Updates what is in flight here and the figures after a round.
    fn apply(&mut self, round: &Round, done: Done) {
        for (attempt, outcome) in round.finished.iter().zip(&done.outcomes) {
            if let Some(outcome) = *outcome {
                self.notifier.count(outcome);
                self.notifier
                    .stats()
                    .attempt(&attempt.buyer_id, outcome, attempt.duration_ms);
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
        for (buyer_id, transition, breaker) in &done.transitions {
            match transition {
                Transition::BecameUnhealthy => log::warn!(
                    "outbox: buyer {buyer_id}'s endpoint is unhealthy after {} failed attempts \
                     (last: {}); its events wait, one probe at a time",
                    breaker.consecutive_failures,
                    breaker.last_error.as_deref().unwrap_or("-")
                ),
                Transition::Recovered => {
                    log::info!("outbox: buyer {buyer_id}'s endpoint answers again")
                }
            }
            self.notifier
                .stats()
                .set_unhealthy(buyer_id, *transition == Transition::BecameUnhealthy);
        }
        for (buyer_id, unhealthy) in &done.unhealthy {
            self.notifier.stats().set_unhealthy(buyer_id, *unhealthy);
        }
        for (id, _) in &round.renew {
            if let Some(held) = self.in_flight.get_mut(id) {
                held.lease_end = done.now + millis(self.lease);
            }
        }
        for event in &done.claimed {
            self.in_flight.insert(
                event.id.clone(),
                Held {
                    buyer_id: event.buyer_id.clone(),
                    claim: event.claim,
                    lease_end: done.now + millis(self.lease),
                    request_id: event.request_id.as_deref().map(RequestId::from),
                },
            );
        }
        if let Some(report) = &round.report {
            for (buyer_id, figures) in report {
                self.reported.insert(buyer_id.clone(), *figures);
            }
        }
        self.publish_in_flight();
        self.pool.push(done.claimed);
    }

    /// Tells the figures how many sends each buyer has in flight.
    fn publish_in_flight(&self) {
        let counts = self.per_buyer_counts();
        let stats = self.notifier.stats();
        for figures in self.notifier.buyer_figures() {
            let now = counts.get(&figures.buyer_id).copied().unwrap_or(0);
            if figures.in_flight != now {
                stats.set_in_flight(&figures.buyer_id, now);
            }
        }
        for (buyer_id, count) in counts {
            stats.set_in_flight(&buyer_id, count);
        }
    }

    /// Lets the senders finish their current attempts, records them, releases the claims
    /// that were never sent so the next start sends them at once, and says that nothing is
    /// in flight any more.
    fn shut_down(self, mut finished: Vec<Attempt>) {
        let unsent = self.pool.close();
        finished.extend(self.notifier.wait(Instant::now()).finished);
        let release: Vec<(crate::ids::EventId, i64)> =
            unsent.iter().map(|e| (e.id.clone(), e.claim)).collect();
        let schedule = self.config.retry_schedule.clone();
        let breaker = self.config.breaker;
        let recorded = self.db.write_blocking(move |conn| {
            let now = crate::clock::now_ms();
            let recorded = crate::attempt::record_all(conn, &finished, &schedule, now)?;
            observe_all(conn, &finished, &breaker, now)?;
            store::release(conn, &release, now)?;
            health::stopped(conn)?;
            Ok::<_, DbError>(recorded.outcomes)
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

/// Feeds each attempt to its buyer's breaker, one load and one save per buyer, in order;
/// a buyer that recovered has its waiting events made due at once. Returns the changes of
/// state.
fn observe_all(
    conn: &rusqlite::Connection,
    attempts: &[Attempt],
    config: &BreakerConfig,
    now: i64,
) -> rusqlite::Result<Vec<(crate::ids::BuyerId, Transition, health::Breaker)>> {
    let mut transitions: Vec<(crate::ids::BuyerId, Transition, health::Breaker)> = Vec::new();
    let mut seen: HashSet<&crate::ids::BuyerId> = HashSet::new();
    for attempt in attempts {
        if !seen.insert(&attempt.buyer_id) {
            continue;
        }
        let mut breaker = health::load(conn, &attempt.buyer_id)?;
        for same in attempts.iter().filter(|a| a.buyer_id == attempt.buyer_id) {
            let error = same
                .error
                .clone()
                .or_else(|| same.http_status.map(|s| format!("HTTP {s}")));
            let at = same.started_at + same.duration_ms;
            if let Some(transition) = breaker.observe(
                same.observation,
                error.as_deref(),
                same.probe,
                at.min(now),
                config,
            ) {
                transitions.push((attempt.buyer_id.clone(), transition, breaker.clone()));
            }
        }
        health::save(conn, &breaker)?;
    }
    for (buyer_id, transition, _) in &transitions {
        if *transition == Transition::Recovered {
            store::due_now(conn, buyer_id, now)?;
        }
    }
    Ok(transitions)
}

/// Places a buyer may take in this round.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    buyer_id: crate::ids::BuyerId,
    capacity: usize,
    probe: bool,
}

/// Who may be sent to now, and when the next event that only the clock will wake us for
/// falls due.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    slots: Vec<Slot>,
    next_due: Option<i64>,
}

/// The buyers with due events and their free places at `now`: a healthy buyer up to
/// `per_buyer` in flight; an unhealthy one (any pending event) a single probe once its
/// probe falls due and nothing of its is in flight. A buyer at its limit is not waited for here: its attempts
/// finishing start the next round.
fn plan(
    due: &[DueBuyer],
    in_flight: &HashMap<crate::ids::BuyerId, usize>,
    per_buyer: usize,
    now: i64,
) -> Plan {
    let mut plan = Plan::default();
    let mut wake = |at: i64| {
        plan.next_due = Some(plan.next_due.map_or(at, |next: i64| next.min(at)));
    };
    let mut slots = Vec::new();
    for buyer in due {
        let held = in_flight.get(&buyer.buyer_id).copied().unwrap_or(0);
        if buyer.unhealthy {
            if held > 0 {
                continue;
            }
            // Its events wait for the probe, whatever their own schedules say.
            let ready = buyer.next_probe_at.unwrap_or(i64::MIN);
            if ready <= now {
                slots.push(Slot {
                    buyer_id: buyer.buyer_id.clone(),
                    capacity: 1,
                    probe: true,
                });
            } else {
                wake(ready);
            }
        } else if buyer.next_due > now {
            wake(buyer.next_due);
        } else if held < per_buyer {
            slots.push(Slot {
                buyer_id: buyer.buyer_id.clone(),
                capacity: per_buyer - held,
                probe: false,
            });
        }
    }
    plan.slots = slots;
    plan
}

/// Deals `free` places round-robin over `slots`, starting with slot `rotation` (modulo
/// their number): each pass gives every buyer still wanting places an equal share, and a
/// buyer that had fewer due events than its share leaves the rest to the others. Returns
/// the claimed events and whether places ran out before every buyer was served.
fn claim_fairly(
    conn: &rusqlite::Connection,
    slots: Vec<Slot>,
    rotation: usize,
    free: usize,
    now: i64,
    lease_until: i64,
) -> rusqlite::Result<(Vec<Claimed>, bool)> {
    deal(slots, rotation, free, |slot, take| {
        store::claim_for_buyer(conn, &slot.buyer_id, now, lease_until, take, slot.probe)
    })
}

/// The dealing of [`claim_fairly`], with `claim(slot, n)` taking up to `n` of a buyer's
/// due events.
fn deal<T>(
    mut slots: Vec<Slot>,
    rotation: usize,
    free: usize,
    mut claim: impl FnMut(&Slot, usize) -> rusqlite::Result<Vec<T>>,
) -> rusqlite::Result<(Vec<T>, bool)> {
    let mut taken = Vec::new();
    if slots.is_empty() {
        return Ok((taken, false));
    }
    let start = rotation % slots.len();
    slots.rotate_left(start);
    let mut left = free;
    while left > 0 && !slots.is_empty() {
        let share = (left / slots.len()).max(1);
        let mut still = Vec::with_capacity(slots.len());
        for mut slot in slots {
            if left == 0 {
                still.push(slot);
                continue;
            }
            let want = share.min(slot.capacity).min(left);
            let got = claim(&slot, want)?;
            let full = got.len() == want;
            left -= got.len();
            slot.capacity -= got.len();
            taken.extend(got);
            if full && slot.capacity > 0 {
                still.push(slot);
            }
        }
        slots = still;
    }
    Ok((taken, !slots.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(buyer: &str, next_due: i64, unhealthy: bool, probe: Option<i64>) -> DueBuyer {
        DueBuyer {
            buyer_id: buyer.into(),
            next_due,
            unhealthy,
            next_probe_at: probe,
        }
    }

    #[test]
    fn the_plan_gives_healthy_buyers_their_free_places_and_unhealthy_ones_a_probe() {
        let in_flight: HashMap<crate::ids::BuyerId, usize> = [
            ("busy".into(), 16),
            ("half".into(), 10),
            ("sick_busy".into(), 1),
        ]
        .into_iter()
        .collect();
        let buyers = [
            due("idle", 100, false, None),
            due("half", 50, false, None),
            due("busy", 10, false, None),
            due("later", 500, false, None),
            due("sick", 5_000, true, Some(100)),
            due("sick_later", 10, true, Some(300)),
            due("sick_busy", 10, true, Some(0)),
        ];
        let plan = plan(&buyers, &in_flight, 16, 100);
        let slots: Vec<(&str, usize, bool)> = plan
            .slots
            .iter()
            .map(|s| (s.buyer_id.as_str(), s.capacity, s.probe))
            .collect();
        assert_eq!(
            slots,
            [("idle", 16, false), ("half", 6, false), ("sick", 1, true)]
        );
        assert_eq!(
            plan.next_due,
            Some(300),
            "the earlier of 'later' and the next probe"
        );
    }

    /// Buyers each with `backlog` due events; returns how many each got.
    fn dealt(
        backlog: &[(&str, usize)],
        capacity: usize,
        free: usize,
        rotation: usize,
    ) -> (Vec<usize>, bool) {
        let slots = backlog
            .iter()
            .map(|(buyer, _)| Slot {
                buyer_id: (*buyer).into(),
                capacity,
                probe: false,
            })
            .collect();
        let mut left: HashMap<crate::ids::BuyerId, usize> =
            backlog.iter().map(|(b, n)| ((*b).into(), *n)).collect();
        let (taken, more) = deal(slots, rotation, free, |slot, want| {
            let have = left.get_mut(&slot.buyer_id).unwrap();
            let n = want.min(*have);
            *have -= n;
            Ok(vec![slot.buyer_id.clone(); n])
        })
        .unwrap();
        let counts = backlog
            .iter()
            .map(|(b, _)| taken.iter().filter(|t| t.as_str() == *b).count())
            .collect();
        (counts, more)
    }

    #[test]
    fn places_are_dealt_evenly_and_unused_shares_go_to_the_others() {
        // Twenty buyers with long backlogs share 256 places: 12 or 13 each, never 16.
        let many: Vec<(String, usize)> = (0..20).map(|n| (format!("b{n:02}"), 1000)).collect();
        let many: Vec<(&str, usize)> = many.iter().map(|(b, n)| (b.as_str(), *n)).collect();
        let (counts, more) = dealt(&many, 16, 256, 0);
        assert_eq!(counts.iter().sum::<usize>(), 256);
        assert!(counts.iter().all(|&c| c == 12 || c == 13), "{counts:?}");
        assert!(more);
        // One buyer with a huge backlog cannot take the places of one with a single event.
        let (counts, more) = dealt(&[("backlog", 100_000), ("one", 1)], 16, 256, 0);
        assert_eq!(counts, [16, 1]);
        assert!(!more);
        // A buyer with few events leaves its share to the others.
        let (counts, _) = dealt(&[("a", 2), ("b", 100), ("c", 100)], 100, 60, 0);
        assert_eq!(counts, [2, 29, 29]);
    }

    #[test]
    fn with_fewer_places_than_buyers_the_rotation_decides_who_goes_first() {
        let buyers = [("a", 10), ("b", 10), ("c", 10)];
        assert_eq!(dealt(&buyers, 16, 1, 0).0, [1, 0, 0]);
        assert_eq!(dealt(&buyers, 16, 1, 1).0, [0, 1, 0]);
        assert_eq!(dealt(&buyers, 16, 2, 2).0, [1, 0, 1]);
        assert!(dealt(&buyers, 16, 2, 2).1, "places ran out");
    }
}
