//! Per-buyer figures of this process's outbox workers: attempts by outcome, a latency
//! histogram, the durations of recent attempts (for p50/p99), sends in flight and the
//! breaker's state. `GET /metrics` reads them through the [`Notifier`](super::Notifier);
//! the workers persist a summary for `buyer health` (`health::report`).
//!
//! Owns keeping these figures; the series' names are `metrics`'. One entry per buyer the
//! workers have dealt with, so the label cardinality is bounded by the number of buyers.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::store::Outcome;
use crate::metrics::{Histogram, HistogramReading};

/// Bucket bounds of the attempt duration histogram, in milliseconds: from a buyer on the
/// same network to one that times out.
pub(crate) const DURATION_BOUNDS_MS: &[u64] = &[
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 15_000, 30_000,
];

/// How many recent attempts per buyer p50 and p99 are taken over.
const RECENT: usize = 1024;

struct Entry {
    unhealthy: bool,
    in_flight: usize,
    /// Delivered, retry, failed.
    attempts: [u64; 3],
    latency: Histogram,
    recent: VecDeque<u32>,
}

impl Entry {
    fn new() -> Entry {
        Entry {
            unhealthy: false,
            in_flight: 0,
            attempts: [0; 3],
            latency: Histogram::new(DURATION_BOUNDS_MS),
            recent: VecDeque::with_capacity(RECENT),
        }
    }
}

/// One buyer's figures at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuyerFigures {
    pub buyer_id: crate::ids::BuyerId,
    pub unhealthy: bool,
    pub in_flight: usize,
    pub delivered: u64,
    pub retried: u64,
    pub failed: u64,
    /// Attempt durations in milliseconds.
    pub latency: HistogramReading,
    pub p50_ms: Option<i64>,
    pub p99_ms: Option<i64>,
}

#[derive(Default)]
pub struct Stats {
    buyers: Mutex<HashMap<crate::ids::BuyerId, Entry>>,
}

impl Stats {
    fn with<R>(&self, buyer_id: &crate::ids::BuyerId, f: impl FnOnce(&mut Entry) -> R) -> R {
        // Plain figures that a panicking holder cannot leave half-changed.
        let mut buyers = self
            .buyers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = match buyers.get_mut(buyer_id) {
            Some(entry) => entry,
            None => buyers.entry(buyer_id.clone()).or_insert_with(Entry::new),
        };
        f(entry)
    }

    /// Counts a recorded attempt and its duration.
    pub fn attempt(&self, buyer_id: &crate::ids::BuyerId, outcome: Outcome, duration_ms: i64) {
        self.with(buyer_id, |entry| {
            let slot = match outcome {
                Outcome::Delivered => 0,
                Outcome::Retry => 1,
                Outcome::Failed | Outcome::Refused => 2,
            };
            entry.attempts[slot] += 1;
            let ms = u32::try_from(duration_ms.max(0)).unwrap_or(u32::MAX);
            entry.latency.observe(u64::from(ms));
            if entry.recent.len() == RECENT {
                entry.recent.pop_front();
            }
            entry.recent.push_back(ms);
        });
    }

    pub fn set_in_flight(&self, buyer_id: &crate::ids::BuyerId, in_flight: usize) {
        self.with(buyer_id, |entry| entry.in_flight = in_flight);
    }

    pub fn set_unhealthy(&self, buyer_id: &crate::ids::BuyerId, unhealthy: bool) {
        self.with(buyer_id, |entry| entry.unhealthy = unhealthy);
    }

    /// Every buyer's figures, by buyer id.
    pub(crate) fn read(&self) -> Vec<BuyerFigures> {
        let buyers = self
            .buyers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut figures: Vec<BuyerFigures> = buyers
            .iter()
            .map(|(buyer_id, entry)| {
                let (p50_ms, p99_ms) = percentiles(&entry.recent);
                BuyerFigures {
                    buyer_id: buyer_id.clone(),
                    unhealthy: entry.unhealthy,
                    in_flight: entry.in_flight,
                    delivered: entry.attempts[0],
                    retried: entry.attempts[1],
                    failed: entry.attempts[2],
                    latency: entry.latency.read(),
                    p50_ms,
                    p99_ms,
                }
            })
            .collect();
        figures.sort_by(|a, b| a.buyer_id.cmp(&b.buyer_id));
        figures
    }
}

/// The median and 99th percentile (nearest rank) of `recent`; `None` when empty.
fn percentiles(recent: &VecDeque<u32>) -> (Option<i64>, Option<i64>) {
    if recent.is_empty() {
        return (None, None);
    }
    let mut sorted: Vec<u32> = recent.iter().copied().collect();
    sorted.sort_unstable();
    let rank = |p: f64| {
        let index = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
        i64::from(sorted[index])
    };
    (Some(rank(0.5)), Some(rank(0.99)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_taken_over_the_recent_attempts_only() {
        let stats = Stats::default();
        assert_eq!(stats.read(), Vec::new());
        for ms in 1..=100 {
            stats.attempt(&crate::ids::BuyerId::from("b"), Outcome::Delivered, ms);
        }
        let figures = &stats.read()[0];
        assert_eq!((figures.p50_ms, figures.p99_ms), (Some(50), Some(99)));
        assert_eq!(figures.delivered, 100);
        assert_eq!(figures.latency.count, 100);
        for _ in 0..RECENT {
            stats.attempt(&crate::ids::BuyerId::from("b"), Outcome::Retry, 15_000);
        }
        let figures = &stats.read()[0];
        assert_eq!(
            (figures.p50_ms, figures.p99_ms),
            (Some(15_000), Some(15_000))
        );
        assert_eq!((figures.delivered, figures.retried), (100, RECENT as u64));
    }
}
