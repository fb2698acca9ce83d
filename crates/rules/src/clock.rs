//! Wall-clock time as stored (integer milliseconds since the Unix epoch, UTC) and as shown
//! (ISO 8601 / RFC 3339 with milliseconds).

use jiff::Timestamp;

pub fn now_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

/// `ms` as `2026-11-21T18:18:18.123Z`: always three fractional digits, always `Z`.
pub fn iso(ms: i64) -> String {
    // Only times beyond the years -9999..=9999 fail; no stored time is there.
    let at = Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH);
    format!("{at:.3}")
}

/// Parses an RFC 3339 date-time into milliseconds since the epoch.
pub fn parse_iso(text: &str) -> Option<i64> {
    text.parse::<Timestamp>()
        .ok()
        .map(Timestamp::as_millisecond)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trips() {
        let ms = 1_795_000_000_123;
        let text = iso(ms);
        assert_eq!(text, "2026-11-18T11:06:40.123Z");
        assert_eq!(parse_iso(&text), Some(ms));
    }

    #[test]
    fn iso_always_prints_three_fractional_digits() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_795_000_000_100), "2026-11-18T11:06:40.100Z");
        assert_eq!(iso(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn parse_accepts_offsets_and_rejects_garbage() {
        assert_eq!(
            parse_iso("1970-01-01T01:00:00+01:00"),
            Some(0),
            "offsets are honoured"
        );
        assert_eq!(parse_iso("1970-01-01T00:00:00.5Z"), Some(500));
        assert_eq!(parse_iso("yesterday"), None);
        assert_eq!(
            parse_iso("1970-01-01T00:00:00"),
            None,
            "an offset is required"
        );
    }
}
