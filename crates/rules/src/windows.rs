//! The calendar windows caps count in: the local day and month an instant falls in, in a
//! workspace's time zone (`caps` in the domain crate owns the counters).

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Half-open `[start, end)` intervals in milliseconds UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub day: (i64, i64),
    pub month: (i64, i64),
}

impl Windows {
    /// The local day and month that `now_ms` falls in, in `tz`. Days are 23 or 25 hours
    /// long on daylight-saving changes, and a day that starts in a gap starts when the
    /// clocks allow: the time zone database decides, never a fixed 24 hours.
    pub fn at(now_ms: i64, tz: &TimeZone) -> Windows {
        let now = Timestamp::from_millisecond(now_ms).unwrap_or(Timestamp::UNIX_EPOCH);
        let date = now.to_zoned(tz.clone()).date();
        let start_of = |date: jiff::civil::Date| -> i64 {
            date.to_zoned(tz.clone())
                .map(|z| z.timestamp().as_millisecond())
                // Only dates near the end of jiff's range fail; no stored time is there.
                .unwrap_or(i64::MAX)
        };
        let tomorrow = date.tomorrow().unwrap_or(date);
        let first = date.first_of_month();
        let next_month = first
            .checked_add(jiff::Span::new().months(1))
            .unwrap_or(first);
        Windows {
            day: (start_of(date), start_of(tomorrow)),
            month: (start_of(first), start_of(next_month)),
        }
    }
}

impl Windows {
    /// Whether `at` falls in these windows' day.
    pub fn contains(&self, at: i64) -> bool {
        (self.day.0..self.day.1).contains(&at)
    }
}
