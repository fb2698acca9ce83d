//! The lock-free building blocks of [`super::Metrics`]: a labelled counter and a histogram,
//! both plain atomics so that recording costs a few nanoseconds on the request path.
//!
//! Owns counting only. Names, help texts and the text format belong to [`super::text`] and
//! [`super::Metrics::render`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with one label whose expected values are known up front (ingest statuses,
/// delivery outcomes). Known values are atomics and always rendered, zero included, so a
/// dashboard's `rate()` works from the first scrape; a value nobody declared still counts,
/// in a small locked map, rather than being lost.
pub(crate) struct LabelledCounter {
    known: Vec<(&'static str, AtomicU64)>,
    other: Mutex<BTreeMap<String, u64>>,
}

impl LabelledCounter {
    pub(crate) fn new(known: &[&'static str]) -> LabelledCounter {
        LabelledCounter {
            known: known.iter().map(|&l| (l, AtomicU64::new(0))).collect(),
            other: Mutex::new(BTreeMap::new()),
        }
    }

    pub(crate) fn add(&self, label: &str, n: u64) {
        if let Some((_, count)) = self.known.iter().find(|(known, _)| *known == label) {
            count.fetch_add(n, Ordering::Relaxed);
            return;
        }
        let mut other = self
            .other
            .lock()
            .expect("the counter map lock is never held across a panic");
        *other.entry(label.to_string()).or_insert(0) += n;
    }

    /// Every label with its count: the known ones in declaration order, then the others.
    pub(crate) fn values(&self) -> Vec<(String, u64)> {
        let mut values: Vec<(String, u64)> = self
            .known
            .iter()
            .map(|(label, count)| (label.to_string(), count.load(Ordering::Relaxed)))
            .collect();
        let other = self
            .other
            .lock()
            .expect("the counter map lock is never held across a panic");
        values.extend(other.iter().map(|(label, count)| (label.clone(), *count)));
        values
    }
}

/// A histogram of integer observations (microseconds, jobs) over fixed upper bounds.
/// Buckets are stored non-cumulative and summed when read, so one observation is two
/// atomic additions.
pub(crate) struct Histogram {
    bounds: &'static [u64],
    /// One slot per bound plus the overflow (+Inf) slot.
    buckets: Vec<AtomicU64>,
    sum: AtomicU64,
}

/// A consistent-enough reading of a [`Histogram`]: cumulative counts per bound, then the
/// total (the +Inf bucket), and the sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramReading {
    pub bounds: &'static [u64],
    pub cumulative: Vec<u64>,
    pub count: u64,
    pub sum: u64,
}

impl Histogram {
    pub(crate) fn new(bounds: &'static [u64]) -> Histogram {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bounds ascend");
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    pub(crate) fn observe(&self, value: u64) {
        // Few bounds: a linear scan beats a binary search here.
        let slot = self
            .bounds
            .iter()
            .position(|&bound| value <= bound)
            .unwrap_or(self.bounds.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    pub(crate) fn read(&self) -> HistogramReading {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        HistogramReading::from_counts(self.bounds, &counts, self.sum.load(Ordering::Relaxed))
    }
}

impl HistogramReading {
    /// Builds a reading from non-cumulative `counts` (one per bound, then overflow). The
    /// count is the sum of the buckets, so `_count` always equals the `+Inf` bucket even
    /// while other threads record.
    pub fn from_counts(bounds: &'static [u64], counts: &[u64], sum: u64) -> HistogramReading {
        let mut running = 0;
        let mut cumulative = Vec::with_capacity(bounds.len());
        for (index, count) in counts.iter().enumerate() {
            running += count;
            if index < bounds.len() {
                cumulative.push(running);
            }
        }
        HistogramReading {
            bounds,
            cumulative,
            count: running,
            sum,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_inclusive() {
        static BOUNDS: [u64; 3] = [1, 10, 100];
        let histogram = Histogram::new(&BOUNDS);
        for value in [0, 1, 2, 10, 11, 100, 101, 5000] {
            histogram.observe(value);
        }
        let reading = histogram.read();
        assert_eq!(reading.cumulative, vec![2, 4, 6]);
        assert_eq!(reading.count, 8);
        assert_eq!(reading.sum, 5225);
    }

    #[test]
    fn labelled_counter_keeps_known_order_and_unknown_labels() {
        let counter = LabelledCounter::new(&["accepted", "rejected"]);
        counter.add("rejected", 2);
        counter.add("surprise", 1);
        counter.add("accepted", 1);
        counter.add("surprise", 1);
        assert_eq!(
            counter.values(),
            vec![
                ("accepted".to_string(), 1),
                ("rejected".to_string(), 2),
                ("surprise".to_string(), 2)
            ]
        );
    }
}
