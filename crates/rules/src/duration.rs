//! The one duration syntax of every flag and setting (DESIGN.md section 12): a whole number
//! and a unit, `500ms`, `30s`, `5m`, `2h`, `7d`, parsed and printed back the same way.
//!
//! Owns the syntax only; what a duration means (a retry wait, a cancellation window, a
//! timeout) belongs to the flag's owner. A bare `0` is zero in any unit and always
//! accepted. A bare non-zero number has no unit, so [`parse`] refuses it (`--older-than
//! 180` must not purge everything older than three minutes); [`parse_or_seconds`] reads
//! it as seconds, for the flags that took bare seconds in 0.1.0 (`--retry-schedule 1,2,5`,
//! `--cancellation-window`, `--delivery-timeout`).
//!
//! Hand-written rather than jiff's "friendly" duration format: that format also takes
//! `1y`, `2 weeks ago`, `1.5h` and `01:02:03`, which would need as many lines of refusals
//! as this whole grammar.

use std::time::Duration;

/// What every message names, so an operator sees the accepted forms at once.
const FORMS: &str = "500ms, 30s, 5m, 2h or 7d";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("invalid duration '{0}': use a whole number with a unit: {FORMS}")]
    Invalid(String),
    #[error("duration '{0}' has no unit: use a whole number with a unit: {FORMS}")]
    NoUnit(String),
    #[error("duration '{0}' is too long")]
    TooLong(String),
    #[error("duration '{0}' must be whole seconds")]
    NotWholeSeconds(String),
}

/// Parses `500ms`, `30s`, `5m`, `2h`, `7d` or `0`.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number
        .parse()
        .map_err(|_| DurationError::Invalid(text.to_string()))?;
    let millis_per_unit: u64 = match unit {
        "" if number == 0 => 0,
        "" => return Err(DurationError::NoUnit(text.to_string())),
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(DurationError::Invalid(text.to_string())),
    };
    number
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| DurationError::TooLong(text.to_string()))
}

/// Like [`parse`], and a bare number is that many seconds (the flags of 0.1.0 took those).
pub fn parse_or_seconds(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    match trimmed.parse::<u64>() {
        Ok(seconds) => Ok(Duration::from_secs(seconds)),
        Err(_) => parse(trimmed),
    }
}

/// [`parse_or_seconds`] for a setting stored in whole seconds (`--cancellation-window`).
pub fn parse_whole_seconds(text: &str) -> Result<i64, DurationError> {
    let duration = parse_or_seconds(text)?;
    if duration.subsec_nanos() != 0 {
        return Err(DurationError::NotWholeSeconds(text.trim().to_string()));
    }
    i64::try_from(duration.as_secs()).map_err(|_| DurationError::TooLong(text.trim().to_string()))
}

/// `duration` in the largest unit that states it exactly: `5m`, not `300s`; `1500ms`.
/// Below a millisecond it is truncated to whole milliseconds (no flag takes less).
pub fn format(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        return "0s".to_string();
    }
    let (count, unit) = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ]
    .into_iter()
    .find(|(per_unit, _)| millis.is_multiple_of(*per_unit))
    .map_or((millis, "ms"), |(per_unit, unit)| (millis / per_unit, unit));
    format!("{count}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse("500ms"), Ok(ms(500)));
        assert_eq!(parse("30s"), Ok(ms(30_000)));
        assert_eq!(parse("5m"), Ok(ms(300_000)));
        assert_eq!(parse("2h"), Ok(ms(7_200_000)));
        assert_eq!(parse("7d"), Ok(ms(604_800_000)));
        assert_eq!(parse(" 72h "), Ok(ms(259_200_000)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("0m"), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_anything_else_naming_the_forms() {
        for text in [
            "", "h", "5w", "5 m", "5M", "1.5h", "-5m", "5m30s", "soon", "+5s",
        ] {
            let error = parse(text).expect_err(text);
            assert!(
                error.to_string().contains("500ms, 30s, 5m, 2h or 7d"),
                "{text}: {error}"
            );
        }
        assert_eq!(parse("180"), Err(DurationError::NoUnit("180".into())));
        assert_eq!(
            parse("99999999999999999999d"),
            Err(DurationError::Invalid("99999999999999999999d".into()))
        );
        assert_eq!(
            parse("999999999999999999d"),
            Err(DurationError::TooLong("999999999999999999d".into()))
        );
    }

    #[test]
    fn bare_numbers_are_seconds_where_0_1_0_took_them() {
        assert_eq!(parse_or_seconds("5"), Ok(ms(5_000)));
        assert_eq!(parse_or_seconds(" 2 "), Ok(ms(2_000)));
        assert_eq!(parse_or_seconds("200ms"), Ok(ms(200)));
        assert_eq!(parse_or_seconds("5m"), Ok(ms(300_000)));
        assert!(parse_or_seconds("-1").is_err());
        assert!(parse_or_seconds("x").is_err());
    }

    #[test]
    fn whole_seconds() {
        assert_eq!(parse_whole_seconds("72h"), Ok(259_200));
        assert_eq!(parse_whole_seconds("3d"), Ok(259_200));
        assert_eq!(parse_whole_seconds("0"), Ok(0));
        assert_eq!(parse_whole_seconds("90"), Ok(90));
        assert_eq!(parse_whole_seconds("2000ms"), Ok(2));
        assert_eq!(
            parse_whole_seconds("1500ms"),
            Err(DurationError::NotWholeSeconds("1500ms".into()))
        );
        assert!(parse_whole_seconds("h").is_err());
        assert!(parse_whole_seconds("5w").is_err());
    }

    #[test]
    fn formats_in_the_largest_exact_unit_and_round_trips() {
        let cases = [
            (0, "0s"),
            (200, "200ms"),
            (1_500, "1500ms"),
            (5_000, "5s"),
            (90_000, "90s"),
            (300_000, "5m"),
            (5_400_000, "90m"),
            (36_000_000, "10h"),
            (259_200_000, "3d"),
        ];
        for (millis, text) in cases {
            assert_eq!(format(ms(millis)), text);
            assert_eq!(parse(text), Ok(ms(millis)), "{text}");
        }
        assert_eq!(format(Duration::from_micros(1_500)), "1ms");
    }
}
