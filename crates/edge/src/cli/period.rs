//! `--from` / `--to` of the listing and export commands: a local date of the workspace's
//! time zone (`2026-11-23`; `--to` takes the whole day) or an instant (`2026-11-23T10:00:00Z`;
//! `--to` is then exclusive), turned into a `[from, to)` range of stored times (ms UTC).
//!
//! Owns only that conversion; the zone is the workspace's (of the record narrowed by, or the
//! only workspace), UTC when the file has several and the command names none.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use rusqlite::{Connection, OptionalExtension};

/// One end of a period as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A local date of the workspace's zone.
    Date(Date),
    /// An instant, ms UTC.
    At(i64),
}

/// `--from`'s and `--to`'s value parser.
pub(crate) fn bound(text: &str) -> Result<Bound, String> {
    if let Ok(date) = text.parse::<Date>() {
        return Ok(Bound::Date(date));
    }
    crate::clock::parse_iso(text).map(Bound::At).ok_or_else(|| {
        format!("expected a date like 2026-11-23 or a time like 2026-11-23T10:00:00Z, not '{text}'")
    })
}

/// The time zone dates are read in: workspace `workspace_id`'s, or with none the only
/// workspace's; UTC when there are several (or none).
pub(crate) fn zone(conn: &Connection, workspace_id: Option<&str>) -> rusqlite::Result<TimeZone> {
    if let Some(id) = workspace_id {
        return crate::caps::timezone_of(conn, id);
    }
    let only: Option<String> = conn
        .prepare_cached(
            "SELECT min(id) FROM workspaces WHERE archived_at IS NULL HAVING count(*) = 1",
        )?
        .query_row([], |row| row.get(0))
        .optional()?;
    match only {
        Some(id) => crate::caps::timezone_of(conn, &id),
        None => Ok(TimeZone::UTC),
    }
}

/// `--from` and `--to` that leave nothing between them.
#[derive(Debug, thiserror::Error)]
#[error("--from must be before --to: the period from {from} to {to} is empty")]
pub(crate) struct EmptyPeriod {
    from: String,
    to: String,
}

/// `[from, to)` in ms UTC: a date starts at its local midnight, and a `to` date ends at the
/// next one. A `from` at or after the end of `to` is refused: an operator who swapped the
/// two would otherwise read an empty list as "nothing happened".
pub(crate) fn range(
    tz: &TimeZone,
    from: Option<Bound>,
    to: Option<Bound>,
) -> Result<(Option<i64>, Option<i64>), EmptyPeriod> {
    let (given_from, given_to) = (from, to);
    let start = |date: Date| {
        date.to_zoned(tz.clone())
            .map(|z| z.timestamp().as_millisecond())
            // Only the last dates jiff knows fail: nothing is stored after them.
            .unwrap_or(i64::MAX)
    };
    let from = from.map(|b| match b {
        Bound::Date(date) => start(date),
        Bound::At(ms) => ms,
    });
    let to = to.map(|b| match b {
        Bound::Date(date) => date.tomorrow().map_or(i64::MAX, start),
        Bound::At(ms) => ms,
    });
    match (from, to) {
        (Some(start), Some(end)) if start >= end => Err(EmptyPeriod {
            from: shown(given_from),
            to: shown(given_to),
        }),
        _ => Ok((from, to)),
    }
}

/// A bound as the operator wrote it (near enough: an instant in ISO form).
fn shown(bound: Option<Bound>) -> String {
    match bound {
        Some(Bound::Date(date)) => date.to_string(),
        Some(Bound::At(ms)) => crate::clock::iso(ms),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_local_days_and_instants_are_exact() {
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let (from, to) = range(
            &tz,
            Some(bound("2026-11-23").unwrap()),
            Some(bound("2026-11-23").unwrap()),
        )
        .unwrap();
        assert_eq!(from, crate::clock::parse_iso("2026-11-22T23:00:00Z"));
        assert_eq!(to, crate::clock::parse_iso("2026-11-23T23:00:00Z"));
        let (from, to) = range(&tz, None, Some(bound("2026-11-23T10:00:00Z").unwrap())).unwrap();
        assert_eq!(from, None);
        assert_eq!(to, crate::clock::parse_iso("2026-11-23T10:00:00Z"));
        assert!(bound("23.11.2026").unwrap_err().contains("expected a date"));
    }

    #[test]
    fn a_from_after_the_to_is_refused() {
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let day = |text| Some(bound(text).unwrap());
        let refused = range(&tz, day("2026-11-24"), day("2026-11-23")).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "--from must be before --to: the period from 2026-11-24 to 2026-11-23 is empty"
        );
        // One instant is an empty period too; one date is a whole day.
        let at = day("2026-11-23T10:00:00Z");
        assert!(range(&tz, at, at).is_err());
        assert!(range(&tz, day("2026-11-23"), day("2026-11-23")).is_ok());
    }
}
