//! The lock-free building blocks of [`super::Metrics`]: a labelled counter, plain atomics so
//! that recording costs a few nanoseconds on the request path (the histogram is
//! `leadrelay_rules::histogram`, which the store's writer records into too).
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

#[cfg(test)]
mod tests {
    use super::*;

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
