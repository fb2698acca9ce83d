//! When a failed delivery is tried again: the retry schedule with its jitter, and the
//! buyer's `Retry-After`.
//!
//! Owns the arithmetic only; the outbox store applies it when it records an attempt.

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use jiff::fmt::rfc2822;
use jiff::tz::TimeZone;

use crate::duration::{self, DurationError};

/// How far each wait may stray from its step, either way (DESIGN.md section 3: ±20%), so
/// that events that failed together do not all come back at the same instant.
const JITTER: f64 = 0.2;

/// The waits between attempts: the first after the first attempt, and so on. When they
/// are used up the event has failed.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrySchedule {
    steps: Vec<Duration>,
}

impl Default for RetrySchedule {
    /// 5s, 5m, 30m, 2h, 5h, 10h, 10h: eight attempts over about a day and a half.
    fn default() -> Self {
        RetrySchedule::from_secs(&[5, 300, 1800, 7200, 18_000, 36_000, 36_000])
    }
}

impl RetrySchedule {
    pub fn from_secs(steps: &[u64]) -> RetrySchedule {
        RetrySchedule {
            steps: steps.iter().map(|s| Duration::from_secs(*s)).collect(),
        }
    }

    /// Parses `5s,5m,2h` (the duration syntax of every flag; a bare number is seconds, so
    /// 0.1.0's `1,2,5` still works). An empty list or `none` means no retries.
    pub fn parse(text: &str) -> Result<RetrySchedule, DurationError> {
        let text = text.trim();
        if text.is_empty() || text == "none" {
            return Ok(RetrySchedule { steps: Vec::new() });
        }
        let steps = text
            .split(',')
            .map(duration::parse_or_seconds)
            .collect::<Result<_, _>>()?;
        Ok(RetrySchedule { steps })
    }

    pub fn steps(&self) -> &[Duration] {
        &self.steps
    }

    /// The wait before the next attempt once `failed` attempts in a row have failed with a
    /// retryable outcome, or `None` when the schedule is used up.
    ///
    /// `random` is a number in [0, 1) that places the wait within the jitter band. A
    /// `Retry-After` from the buyer is honoured (never retry sooner than it asks) up to
    /// twice the step, so a buyer cannot park an event for longer than the schedule means.
    pub fn delay(
        &self,
        failed: u32,
        retry_after: Option<Duration>,
        random: f64,
    ) -> Option<Duration> {
        let step = *self.steps.get((failed as usize).checked_sub(1)?)?;
        let factor = 1.0 - JITTER + 2.0 * JITTER * random.clamp(0.0, 1.0);
        let jittered = step.mul_f64(factor);
        Some(match retry_after {
            Some(asked) => jittered.max(asked.min(step * 2)),
            None => jittered,
        })
    }
}

/// Printed as it is parsed (`5s,5m,30m`, `none`), so `serve --help` shows the default.
impl fmt::Display for RetrySchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.steps.is_empty() {
            return f.write_str("none");
        }
        for (n, step) in self.steps.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            f.write_str(&duration::format(*step))?;
        }
        Ok(())
    }
}

/// A `Retry-After` header value: seconds, or an HTTP date (RFC 9110 section 10.2.3).
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let wait = parse_http_date(value)?.duration_since(now);
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

/// An HTTP date (RFC 9110 section 5.6.7) in any of its three forms: the IMF-fixdate
/// `Sun, 06 Nov 1994 08:49:37 GMT` (an RFC 2822 date), and the obsolete RFC 850
/// `Sunday, 06-Nov-94 08:49:37 GMT` and asctime `Sun Nov  6 08:49:37 1994`, which a
/// recipient must still accept.
fn parse_http_date(value: &str) -> Option<Timestamp> {
    if let Ok(at) = rfc2822::DateTimeParser::new().parse_timestamp(value) {
        return Some(at);
    }
    ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
        .into_iter()
        .find_map(|format| jiff::fmt::strtime::parse(format, value).ok())
        .and_then(|parsed| parsed.to_datetime().ok())
        .and_then(|civil| civil.to_zoned(TimeZone::UTC).ok())
        .map(|zoned| zoned.timestamp())
}

/// A uniformly random number in [0, 1) for the jitter.
pub(crate) fn random_fraction() -> f64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source is available");
    // The top 53 bits give every double in [0, 1) with a 2^-53 spacing.
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_schedule_has_seven_waits_with_jitter() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.steps().len(), 7);
        assert_eq!(schedule.delay(1, None, 0.5), Some(Duration::from_secs(5)));
        assert_eq!(schedule.delay(1, None, 0.0), Some(Duration::from_secs(4)));
        assert_eq!(
            schedule.delay(2, None, 0.999_999_9).map(|d| d.as_secs()),
            Some(359)
        );
        assert_eq!(
            schedule.delay(7, None, 0.5),
            Some(Duration::from_secs(36_000))
        );
        assert_eq!(
            schedule.delay(8, None, 0.5),
            None,
            "used up after 8 attempts"
        );
        assert_eq!(schedule.delay(0, None, 0.5), None);
    }

    #[test]
    fn retry_after_is_honoured_up_to_twice_the_step() {
        let schedule = RetrySchedule::from_secs(&[10]);
        let asked = |s| Some(Duration::from_secs(s));
        assert_eq!(schedule.delay(1, asked(15), 0.5), asked(15));
        assert_eq!(schedule.delay(1, asked(500), 0.5), asked(20));
        assert_eq!(
            schedule.delay(1, asked(1), 0.5),
            asked(10),
            "never sooner than the step"
        );
    }

    #[test]
    fn parses_schedules() {
        assert_eq!(
            RetrySchedule::parse("1,2,5").unwrap(),
            RetrySchedule::from_secs(&[1, 2, 5])
        );
        assert_eq!(
            RetrySchedule::parse("200ms, 1s").unwrap().steps(),
            [Duration::from_millis(200), Duration::from_secs(1)]
        );
        assert_eq!(
            RetrySchedule::parse("5m,1h,2d").unwrap().steps(),
            [
                Duration::from_secs(300),
                Duration::from_secs(3600),
                Duration::from_secs(172_800)
            ]
        );
        assert!(RetrySchedule::parse("none").unwrap().steps().is_empty());
        assert!(RetrySchedule::parse("1,x").is_err());
        assert!(RetrySchedule::parse("-1").is_err());
        assert!(RetrySchedule::parse("5w").is_err());
    }

    #[test]
    fn prints_as_it_parses() {
        assert_eq!(
            RetrySchedule::default().to_string(),
            "5s,5m,30m,2h,5h,10h,10h"
        );
        assert_eq!(
            RetrySchedule::parse(&RetrySchedule::default().to_string()).unwrap(),
            RetrySchedule::default()
        );
        assert_eq!(
            RetrySchedule::parse("200ms, 1").unwrap().to_string(),
            "200ms,1s"
        );
        assert_eq!(RetrySchedule::parse("none").unwrap().to_string(), "none");
    }

    #[test]
    fn parses_retry_after_as_seconds_or_http_date() {
        let now: Timestamp = "1994-11-06T08:49:37Z".parse().unwrap();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:50:07 GMT", now),
            Some(Duration::from_secs(30)),
            "the obsolete RFC 850 form"
        );
        assert_eq!(
            parse_retry_after("Sun Nov  6 08:50:07 1994", now),
            Some(Duration::from_secs(30)),
            "the obsolete asctime form"
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 25:00:00 GMT", now),
            None
        );
        assert_eq!(parse_retry_after("-5", now), None);
    }

    #[test]
    fn random_fractions_stay_in_range() {
        for _ in 0..1000 {
            let r = random_fraction();
            assert!((0.0..1.0).contains(&r), "{r}");
        }
    }
}
