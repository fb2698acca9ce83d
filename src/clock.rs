//! Wall-clock time as stored (integer milliseconds since the Unix epoch, UTC) and as shown
//! (ISO 8601 / RFC 3339 with milliseconds).

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// `ms` as `2026-11-21T18:18:18.123Z`.
pub fn iso(ms: i64) -> String {
    let at = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    at.format(&format)
        .expect("a UTC date-time always formats with a fixed description")
}

/// Parses an RFC 3339 date-time into milliseconds since the epoch.
pub fn parse_iso(text: &str) -> Option<i64> {
    OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .map(|at| (at.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trips() {
        let ms = 1_795_000_000_123;
        let text = iso(ms);
        assert!(text.ends_with(".123Z"), "{text}");
        assert_eq!(parse_iso(&text), Some(ms));
    }

    #[test]
    fn parse_accepts_offsets_and_rejects_garbage() {
        assert_eq!(
            parse_iso("1970-01-01T01:00:00+01:00"),
            Some(0),
            "offsets are honoured"
        );
        assert_eq!(parse_iso("yesterday"), None);
    }
}
