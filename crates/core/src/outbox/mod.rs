//! The outbox: outbound `lead.delivered` webhooks, sent at least once.
//!
//! The `outbox_events` table is the only queue. A delivery writes its event in the same
//! SQLite transaction as the transaction row, so an event exists exactly when its
//! transaction does. Worker threads ([`start`]) claim due events under a lease, send them
//! signed (Standard Webhooks), record every attempt, and mark an event delivered only after
//! a 2xx; retryable failures come back on the [`RetrySchedule`]. A crash loses nothing: a
//! claim whose lease ran out is taken again and the event is sent again with the same
//! `webhook-id`. Many sends are in flight at once, shared fairly among buyers, and a buyer
//! whose endpoint keeps failing is given up on for a while (its circuit breaker, `health`).
//!
//! Owns the event's life after it is written: claiming, signing, sending, retrying,
//! recording, and the operator's views of it. It does not own what an event says
//! (`delivery::event`) or when one is created (`delivery::deliver`), and writes no
//! transaction: recording an attempt or reopening an event returns facts (the
//! transaction's delivery status, a buyer API's refusal) that the use case `attempt`
//! applies in the same job. The HTTP sends themselves are the edge crate's (its `outbox`
//! module), as are those of bids, checks and alert messages.

pub mod bid;
pub mod health;
pub mod schedule;
pub mod signing;
pub mod stats;
pub mod store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use health::BreakerConfig;
pub use schedule::RetrySchedule;
pub use stats::BuyerFigures;

/// How the workers run (`serve --delivery-concurrency`, `--delivery-per-buyer`,
/// `--retry-schedule`, `--delivery-timeout`, `--public-outbound-only`).
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Sends in flight at most, over all buyers.
    pub concurrency: usize,
    /// Sends in flight at most to one buyer: what a hanging endpoint can hold.
    pub per_buyer: usize,
    pub retry_schedule: RetrySchedule,
    /// The most one attempt may take, connecting included.
    pub request_timeout: Duration,
    /// How often the workers look for due events nobody told them about: events written
    /// by another process (a CLI `deliver` while the server runs) and retries falling due.
    pub poll_interval: Duration,
    /// When a buyer's endpoint counts as unhealthy and how it is probed.
    pub breaker: BreakerConfig,
    /// How often the per-buyer figures (in flight, latency) and the heartbeat are written
    /// for `buyer health`.
    pub report_interval: Duration,
    /// Send only to public addresses: loopback and private ones are refused too, as URLs
    /// and as what a buyer's host name resolves to (link-local ones always are).
    pub public_outbound_only: bool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: 256,
            per_buyer: 16,
            retry_schedule: RetrySchedule::default(),
            request_timeout: Duration::from_secs(15),
            poll_interval: Duration::from_millis(500),
            breaker: BreakerConfig::default(),
            report_interval: Duration::from_secs(5),
            public_outbound_only: false,
        }
    }
}

/// Wakes the workers when new events were committed, and counts what they did (read by
/// `GET /metrics`).
///
/// Cheap to clone; every clone talks to the same workers. Code in the server process that
/// writes events (auto-delivery during ingest) calls [`Notifier::notify`] after its write
/// has returned, so the events go out at once instead of at the next poll.
#[derive(Clone, Default)]
pub struct Notifier {
    inner: Arc<Shared>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Shared {
    inbox: Mutex<Inbox>,
    changed: Condvar,
    delivered: AtomicU64,
    retried: AtomicU64,
    failed: AtomicU64,
    refused: AtomicU64,
    buyers: stats::Stats,
}

/// What the coordinating worker thread is told between its rounds.
#[derive(Default)]
pub struct Inbox {
    /// New events were committed.
    pub woken: bool,
    /// Attempts that senders finished, to record.
    pub finished: Vec<store::Attempt>,
    pub stopping: bool,
}

/// Attempts recorded by the workers of this notifier, by what they did to their event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryCounts {
    pub delivered: u64,
    /// Attempts after which the event was due again later.
    pub retried: u64,
    pub failed: u64,
    /// Attempts after which a buyer's API had refused the lead (a mapped integration).
    pub refused: u64,
}

impl Notifier {
    pub fn new() -> Notifier {
        Notifier::default()
    }

    /// Tells the workers that events were committed. Cheap; call it after every write
    /// that may have created events.
    pub fn notify(&self) {
        self.lock().woken = true;
        self.inner.changed.notify_all();
    }

    pub fn counts(&self) -> DeliveryCounts {
        DeliveryCounts {
            delivered: self.inner.delivered.load(Ordering::Relaxed),
            retried: self.inner.retried.load(Ordering::Relaxed),
            failed: self.inner.failed.load(Ordering::Relaxed),
            refused: self.inner.refused.load(Ordering::Relaxed),
        }
    }

    /// Per-buyer figures of the workers (`GET /metrics`), by buyer id.
    pub fn buyer_figures(&self) -> Vec<BuyerFigures> {
        self.inner.buyers.read()
    }

    pub fn stats(&self) -> &stats::Stats {
        &self.inner.buyers
    }

    fn lock(&self) -> MutexGuard<'_, Inbox> {
        // The inbox holds plain data that a panicking holder cannot leave half-changed.
        self.inner
            .inbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn finished(&self, attempt: store::Attempt) {
        self.lock().finished.push(attempt);
        self.inner.changed.notify_all();
    }

    pub fn set_stopping(&self, stopping: bool) {
        self.lock().stopping = stopping;
        self.inner.changed.notify_all();
    }

    /// Waits until something arrives or `deadline` passes, and takes what arrived.
    pub fn wait(&self, deadline: Instant) -> Inbox {
        let mut inbox = self.lock();
        while !inbox.woken && inbox.finished.is_empty() && !inbox.stopping {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            inbox = self
                .inner
                .changed
                .wait_timeout(inbox, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        Inbox {
            woken: std::mem::take(&mut inbox.woken),
            finished: std::mem::take(&mut inbox.finished),
            stopping: inbox.stopping,
        }
    }

    pub fn count(&self, outcome: store::Outcome) {
        let counter = match outcome {
            store::Outcome::Delivered => &self.inner.delivered,
            store::Outcome::Retry => &self.inner.retried,
            store::Outcome::Failed => &self.inner.failed,
            store::Outcome::Refused => &self.inner.refused,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
