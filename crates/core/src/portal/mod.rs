//! What a signed-in portal user may read (DESIGN.md section 20): the read model of the buyer
//! and supplier portal, one module per side.
//!
//! Isolation lives here, in the queries: every statement is narrowed by the session's own
//! buyer or supplier (`WHERE t.buyer_id = ?`, a lead's source's `supplier_id = ?`), so a
//! record of another party is never loaded and answers exactly as an id that does not
//! exist (`None`). Nothing here writes: the portal's actions call their owners
//! (`lifecycle::returns::request`, `config::buyer::set_paused`).
//!
//! A supplier's view never holds a buyer's name or id, a buyer price or a score: the
//! supplier's structs have no field for them.

pub mod buyer;
pub mod supplier;

use jiff::tz::TimeZone;

/// `[start, end)` in ms of month `month` (`YYYY-MM`) in `tz`, or `None` when it is not a
/// month.
pub fn month_range(month: &str, tz: &TimeZone) -> Option<(i64, i64)> {
    let date: jiff::civil::Date = format!("{month}-01").parse().ok()?;
    if month.len() != 7 {
        return None;
    }
    let next = date.checked_add(jiff::Span::new().months(1)).ok()?;
    let start = date.to_zoned(tz.clone()).ok()?.timestamp().as_millisecond();
    let end = next.to_zoned(tz.clone()).ok()?.timestamp().as_millisecond();
    Some((start, end))
}

/// The month of `ms` in `tz` as `YYYY-MM`.
pub fn month_of(ms: i64, tz: &TimeZone) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|at| at.to_zoned(tz.clone()).strftime("%Y-%m").to_string())
        .unwrap_or_default()
}

/// The month a page or a statement shows: `asked` (`?month=YYYY-MM`) when it is a month,
/// else the month of `now`; with its `[start, end)` in `tz`.
pub fn chosen_month(asked: Option<&str>, now: i64, tz: &TimeZone) -> (String, (i64, i64)) {
    let month = asked
        .filter(|m| month_range(m, tz).is_some())
        .map_or_else(|| month_of(now, tz), str::to_string);
    let range = month_range(&month, tz).expect("the month was checked, or is the current one");
    (month, range)
}

/// How many rows a list page shows at most.
pub const LIST_LIMIT: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_parsed_strictly() {
        let (start, end) = month_range("2026-02", &TimeZone::UTC).unwrap();
        assert_eq!(crate::clock::iso(start), "2026-02-01T00:00:00.000Z");
        assert_eq!(crate::clock::iso(end), "2026-03-01T00:00:00.000Z");
        for bad in ["2026-2", "2026-13", "x", "2026-02-01", ""] {
            assert!(month_range(bad, &TimeZone::UTC).is_none(), "{bad}");
        }
        assert_eq!(month_of(start, &TimeZone::UTC), "2026-02");
    }

    #[test]
    fn a_page_shows_the_asked_month_or_the_current_one() {
        let now = month_range("2026-05", &TimeZone::UTC).unwrap().0 + 3_600_000;
        let (month, range) = chosen_month(Some("2026-02"), now, &TimeZone::UTC);
        assert_eq!(
            (month.as_str(), range),
            ("2026-02", month_range("2026-02", &TimeZone::UTC).unwrap())
        );
        for asked in [None, Some("2026-13"), Some("<script>")] {
            let (month, range) = chosen_month(asked, now, &TimeZone::UTC);
            assert_eq!(month, "2026-05", "{asked:?}");
            assert!(range.0 <= now && now < range.1);
        }
    }
}
