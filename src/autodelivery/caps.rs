//! Daily and monthly caps of subscriptions: the calendar windows they count in and the count
//! of a buyer's deliveries inside them.
//!
//! A cap counts the buyer's live transactions (not `rejected`, not `cancelled`) for the
//! product created in the current local day or month of the workspace's time zone. A
//! rejected or cancelled lead gives its place back, as a returned lead does in the trade:
//! the cap limits how many leads the buyer keeps, and a manual `leadrelay deliver` counts
//! like an automated one. Owns the rule "cap reached" ([`Limits::reached`]); whether that
//! rule is asked before a delivery is `eligibility`'s business (a manual delivery is not
//! capped).
//!
//! Counting reads an index, never a counter: a counter would have to be kept right by every
//! module that creates or ends a transaction, while SQLite keeps the partial index of live
//! transactions right by itself.

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

/// Live transactions of a buyer for a product in today's and this month's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub today: i64,
    /// Only counted when asked for (a monthly cap); 0 otherwise.
    pub this_month: i64,
}

/// A subscription's caps; `None` is no cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub daily: Option<i64>,
    pub monthly: Option<i64>,
}

/// Which window a reached cap counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Day,
    Month,
}

/// A cap that is reached, with the count that reached it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reached {
    pub period: Period,
    pub cap: i64,
    pub count: i64,
}

impl Limits {
    /// The rule "cap reached": a cap is reached when the buyer already has as many live
    /// transactions in its window as the cap allows, so one more would exceed it. The
    /// daily cap is asked first.
    pub(crate) fn reached(&self, usage: &Usage) -> Option<Reached> {
        let reached = |period, cap: Option<i64>, count: i64| {
            cap.filter(|cap| count >= *cap)
                .map(|cap| Reached { period, cap, count })
        };
        reached(Period::Day, self.daily, usage.today)
            .or_else(|| reached(Period::Month, self.monthly, usage.this_month))
    }
}

/// Counts the live transactions of `buyer_id` for `product_id` in today's window, and in
/// this month's when `with_month` (one pass over the month answers both).
///
/// A range scan of the partial covering index `transactions_live_by_buyer_product`, which
/// holds live transactions only. Its cost grows with the count, and the count stays near
/// the cap: auto-delivery stops at the cap, so only manual deliveries go beyond it.
pub fn usage(
    conn: &Connection,
    buyer_id: &str,
    product_id: &str,
    windows: &Windows,
    with_month: bool,
) -> rusqlite::Result<Usage> {
    let range = if with_month {
        windows.month
    } else {
        windows.day
    };
    // The status condition repeats the index's own, which lets SQLite use it.
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
            range.0,
            range.1
        ],
        |row| {
            Ok(Usage {
                today: row.get(0)?,
                this_month: if with_month { row.get(1)? } else { 0 },
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::{BuyerFixture, add_buyer, add_transaction, database};
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
    fn counts_live_transactions_of_the_buyer_and_product_in_the_windows() {
        let conn = database();
        add_buyer(&conn, "b", &BuyerFixture::default());
        add_buyer(&conn, "other", &BuyerFixture::default());
        let add = |buyer: &str, product: &str, status: &str, at: i64| {
            add_transaction(&conn, "lreq_old", buyer, product, status, at)
        };
        add("b", "solar", "delivered", 100);
        add("b", "solar", "paid", 150);
        add("b", "solar", "rejected", 150);
        add("b", "solar", "cancelled", 150);
        add("b", "heat", "delivered", 150);
        add("other", "solar", "delivered", 150);
        add("b", "solar", "acknowledged", 200);
        add("b", "solar", "delivered", 99);
        add("b", "solar", "payout_pending", 299);
        add("b", "solar", "delivered", 300);
        let windows = Windows {
            day: (150, 200),
            month: (100, 300),
        };
        let usage = |with_month| usage(&conn, "b", "solar", &windows, with_month).unwrap();
        assert_eq!(
            usage(true),
            Usage {
                today: 1,
                this_month: 4
            },
            "live only, this buyer and product, start in and end out"
        );
        assert_eq!(
            usage(false),
            Usage {
                today: 1,
                this_month: 0
            }
        );
        let paid: String = conn
            .query_row(
                "SELECT id FROM transactions WHERE created_at = 150 AND status = 'paid'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        crate::delivery::transaction::move_to(
            &conn,
            &paid,
            crate::delivery::transaction::Status::Paid,
            crate::delivery::transaction::Status::Rejected,
            "test",
            None,
            150,
        )
        .unwrap();
        assert_eq!(usage(true).today, 0, "a rejection gives the place back");
    }

    #[test]
    fn a_cap_is_reached_when_the_count_has_come_up_to_it() {
        let usage = |today, this_month| Usage { today, this_month };
        let limits = Limits {
            daily: Some(2),
            monthly: Some(10),
        };
        assert_eq!(limits.reached(&usage(1, 9)), None);
        assert_eq!(
            limits.reached(&usage(2, 9)),
            Some(Reached {
                period: Period::Day,
                cap: 2,
                count: 2
            })
        );
        assert_eq!(
            limits.reached(&usage(3, 10)),
            Some(Reached {
                period: Period::Day,
                cap: 2,
                count: 3
            }),
            "the daily cap is named first"
        );
        assert_eq!(
            limits.reached(&usage(0, 10)).map(|r| r.period),
            Some(Period::Month)
        );
        let none = Limits {
            daily: None,
            monthly: None,
        };
        assert_eq!(none.reached(&usage(1_000, 1_000)), None);
        let zero = Limits {
            daily: Some(0),
            monthly: None,
        };
        assert!(
            zero.reached(&usage(0, 0)).is_some(),
            "a cap of 0 takes nothing"
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
