//! When a failed delivery is tried again: the retry schedule with its jitter, and the
//! buyer's `Retry-After`.
//!
//! Owns the arithmetic only; the outbox store applies it when it records an attempt.

use std::time::{Duration, SystemTime};

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

    /// Parses `1,2,5` (seconds; `ms` suffix for milliseconds, e.g. `200ms,1`). An empty
    /// list means no retries.
    pub fn parse(text: &str) -> Result<RetrySchedule, String> {
        let text = text.trim();
        if text.is_empty() || text == "none" {
            return Ok(RetrySchedule { steps: Vec::new() });
        }
        let steps = text
            .split(',')
            .map(parse_duration)
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

/// Parses a duration in whole seconds (`5`, `5s`) or milliseconds (`200ms`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let parsed = match text.strip_suffix("ms") {
        Some(ms) => ms.parse().map(Duration::from_millis),
        None => text
            .strip_suffix('s')
            .unwrap_or(text)
            .parse()
            .map(Duration::from_secs),
    };
    parsed
        .map_err(|_| format!("invalid duration '{text}': use whole seconds like 5 or 5s, or 200ms"))
}

/// A `Retry-After` header value: seconds, or an HTTP date (RFC 9110 section 10.2.3).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A uniformly random number in [0, 1) for the jitter.
pub fn random_fraction() -> f64 {
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
        assert!(RetrySchedule::parse("none").unwrap().steps().is_empty());
        assert!(RetrySchedule::parse("1,x").is_err());
        assert!(RetrySchedule::parse("-1").is_err());
    }

    #[test]
    fn parses_retry_after_as_seconds_or_http_date() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
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
        assert_eq!(parse_retry_after("soon", now), None);
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
