//! A histogram of integer observations (microseconds, jobs, sizes) over fixed upper bounds,
//! lock-free: recording is two atomic additions, cheap enough for the request path and the
//! database writer's thread. Rendering (names, units, the text format) belongs to the
//! metrics that read it.

use std::sync::atomic::{AtomicU64, Ordering};

/// A histogram of integer observations (microseconds, jobs) over fixed upper bounds.
/// Buckets are stored non-cumulative and summed when read, so one observation is two
/// atomic additions.
pub struct Histogram {
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
    /// An empty histogram over `bounds`, ascending and inclusive.
    pub fn new(bounds: &'static [u64]) -> Histogram {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bounds ascend");
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Counts `value` in the first bucket whose bound it does not exceed (else the
    /// overflow), and adds it to the sum.
    pub fn observe(&self, value: u64) {
        // Few bounds: a linear scan beats a binary search here.
        let slot = self
            .bounds
            .iter()
            .position(|&bound| value <= bound)
            .unwrap_or(self.bounds.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// The counts and sum so far.
    pub fn read(&self) -> HistogramReading {
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
}
