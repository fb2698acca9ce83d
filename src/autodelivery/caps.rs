//! Daily and monthly caps of subscriptions: the calendar windows they count in and the count
//! of a buyer's deliveries inside them.
//!
//! A cap counts the buyer's live transactions (not `rejected`, not `cancelled`) for the
//! product created in the current local day or month of the workspace's time zone. A
//! rejected or cancelled lead gives its place back, as a returned lead does in the trade:
//! the cap limits how many leads the buyer keeps, and a manual `leadrelay deliver` counts
//! like an automated one. It does not own whether a cap blocks a delivery (`eligibility`).

use jiff::Timestamp;
use jiff::tz::TimeZone;
use rusqlite::Connection;

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

/// How many live transactions of `buyer_id` for `product_id` fall in today's and this
/// month's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub today: i64,
    pub this_month: i64,
}

pub fn usage(
    conn: &Connection,
    buyer_id: &str,
    product_id: &str,
    windows: &Windows,
) -> rusqlite::Result<Usage> {
    // One pass over the month's rows of this buyer and product (covering index
    // `transactions_buyer_product_created`) answers both counts.
    let mut stmt = conn.prepare_cached(
        "SELECT count(*) FILTER (WHERE created_at >= ?3 AND created_at < ?4), count(*)
         FROM transactions
         WHERE buyer_id = ?1 AND product_id = ?2 AND created_at >= ?5 AND created_at < ?6
           AND status NOT IN ('rejected', 'cancelled')",
    )?;
    stmt.query_row(
        rusqlite::params![
            buyer_id,
            product_id,
            windows.day.0,
            windows.day.1,
            windows.month.0,
            windows.month.1
        ],
        |row| {
            Ok(Usage {
                today: row.get(0)?,
                this_month: row.get(1)?,
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>()
            .expect("test instants are valid RFC 3339")
            .as_millisecond()
    }

    fn tz(name: &str) -> TimeZone {
        TimeZone::get(name).expect("the bundled database knows the zone")
    }

    #[test]
    fn days_and_months_start_at_local_midnight() {
        let windows = Windows::at(ms("2025-01-15T23:30:00Z"), &tz("Europe/Berlin"));
        // 00:30 on the 16th in Berlin (UTC+1).
        assert_eq!(
            windows.day,
            (ms("2025-01-15T23:00:00Z"), ms("2025-01-16T23:00:00Z"))
        );
        assert_eq!(
            windows.month,
            (ms("2024-12-31T23:00:00Z"), ms("2025-01-31T23:00:00Z"))
        );
        let utc = Windows::at(ms("2025-01-15T23:30:00Z"), &TimeZone::UTC);
        assert_eq!(
            utc.day,
            (ms("2025-01-15T00:00:00Z"), ms("2025-01-16T00:00:00Z"))
        );
    }

    #[test]
    fn daylight_saving_days_are_23_and_25_hours_long() {
        let berlin = tz("Europe/Berlin");
        let spring = Windows::at(ms("2025-03-30T12:00:00Z"), &berlin);
        assert_eq!(spring.day.1 - spring.day.0, 23 * 3_600_000);
        let autumn = Windows::at(ms("2025-10-26T12:00:00Z"), &berlin);
        assert_eq!(autumn.day.1 - autumn.day.0, 25 * 3_600_000);
        // March in Berlin: 31 days minus the lost hour.
        assert_eq!(spring.month.1 - spring.month.0, 31 * 86_400_000 - 3_600_000);
        assert_eq!(spring.month.0, ms("2025-02-28T23:00:00Z"));
        assert_eq!(
            spring.month.1,
            ms("2025-03-31T22:00:00Z"),
            "UTC+2 from April"
        );
    }

    #[test]
    fn a_new_year_in_a_western_zone_is_still_the_old_year_in_utc() {
        let windows = Windows::at(ms("2025-01-01T03:00:00Z"), &tz("America/New_York"));
        // 22:00 on 31 December in New York (UTC-5).
        assert_eq!(windows.month.0, ms("2024-12-01T05:00:00Z"));
        assert_eq!(windows.month.1, ms("2025-01-01T05:00:00Z"));
    }
}
