//! Daily and monthly caps of subscriptions: the calendar windows they count in, the
//! counters of what each buyer uses of them, and the rule "cap reached".
//!
//! A cap counts the buyer's live transactions (not `rejected`, not `cancelled`) for the
//! product created in the current local day or month of the workspace's time zone, plus
//! what reservations hold (`held`: a ping/post bid that won holds its place until its lead
//! is posted or the reservation ends). A rejected, cancelled or voided lead gives its place
//! back, as a returned lead does in the trade: the cap limits how many leads the buyer
//! keeps, and a manual `leadrelay deliver` counts like an automated one. Whether the rule
//! is asked before a delivery is `eligibility`'s business (a manual delivery is not capped).
//!
//! Owns the `cap_usage` table: one row per buyer and product with the count and the held
//! places of the current day and month, each window named by its start. Cap use is read
//! from it, never counted from transactions, so routing costs the same with a million
//! transactions in the file as with none. The counters are moved by the one module that
//! creates and moves transactions (`delivery::transaction`: [`count`] on a delivery,
//! [`uncount`] when a live transaction is rejected, cancelled or voided), in the same
//! writer job, so they cannot drift from the transactions; [`rebuild`] recounts them from
//! the transactions (the migration that introduced them, a workspace's new time zone).
//! [`usage_now`] is the one read of "cap use of buyer × product now" for every caller.
//!
//! Moving the counters costs an auto-delivered lead's writer job 22,000 of its 717,000
//! instructions (3%) with twenty capped buyers (callgrind of `examples/autodelivery_cost` with `ONLY=5 LEADS=1000`, the 20-buyer
//! scenario, counting only the writer jobs; 65cd4d4); counting
//! instead would read each capped buyer's transactions of the day and the month for every
//! lead, a cost that grows with the caps (5,000 a day, 50,000 a month in that scenario).

use crate::db::PrepareKept;
use jiff::tz::TimeZone;
use rusqlite::{Connection, OptionalExtension};

pub use leadrelay_rules::windows::Windows;

/// What a buyer uses of its caps for a product in today's and this month's window:
/// live transactions plus held places.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub today: i64,
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

/// One `cap_usage` row as stored: the counts of the window each names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub day_start: i64,
    pub day_count: i64,
    pub day_held: i64,
    pub month_start: i64,
    pub month_count: i64,
    pub month_held: i64,
}

impl Counters {
    /// The use in `windows`: a counter of a window that has passed counts as 0.
    pub(crate) fn usage(&self, windows: &Windows) -> Usage {
        Usage {
            today: if self.day_start == windows.day.0 {
                self.day_count + self.day_held
            } else {
                0
            },
            this_month: if self.month_start == windows.month.0 {
                self.month_count + self.month_held
            } else {
                0
            },
        }
    }
}

/// The columns of a `cap_usage` row in [`Counters`] order, for readers that join it
/// (eligibility reads every candidate's caps in the query that finds them).
pub(crate) const COUNTER_COLUMNS: &str = "u.day_start, u.day_count, u.day_held, \
    u.month_start, u.month_count, u.month_held";

/// Reads [`COUNTER_COLUMNS`] from `row` starting at column `first`; a missing row (the
/// buyer never used the product's caps) is all zeros.
pub(crate) fn counters_from_row(row: &rusqlite::Row, first: usize) -> rusqlite::Result<Counters> {
    Counters::from_values(|n| row.get(first + n))
}

impl Counters {
    /// The counters from the six values of [`COUNTER_COLUMNS`], `value(n)` the n-th; a NULL
    /// (no row) is 0.
    pub(crate) fn from_values(
        value: impl Fn(usize) -> rusqlite::Result<Option<i64>>,
    ) -> rusqlite::Result<Counters> {
        let get = |n: usize| Ok::<_, rusqlite::Error>(value(n)?.unwrap_or(0));
        Ok(Counters {
            day_start: get(0)?,
            day_count: get(1)?,
            day_held: get(2)?,
            month_start: get(3)?,
            month_count: get(4)?,
            month_held: get(5)?,
        })
    }
}

/// The workspace's time zone (UTC when the workspace is missing or names a zone the
/// bundled database no longer knows).
pub fn timezone_of(conn: &Connection, workspace_id: &str) -> rusqlite::Result<TimeZone> {
    let zone: Option<String> = conn
        .prepare_kept("SELECT timezone FROM workspaces WHERE id = ?1")?
        .query_row([workspace_id], |row| row.get(0))
        .optional()?;
    Ok(zone
        .and_then(|zone| TimeZone::get(&zone).ok())
        .unwrap_or(TimeZone::UTC))
}

/// Cap use of a buyer for a product now: the one read for `buyer terms`, auto-delivery
/// and ping reservations. `windows` are the current ones in the workspace's time zone
/// ([`Windows::at`] with [`timezone_of`]).
pub fn usage_now(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product_id: &str,
    windows: &Windows,
) -> rusqlite::Result<Usage> {
    let counters = conn
        .prepare_cached(&format!(
            "SELECT {COUNTER_COLUMNS} FROM cap_usage u WHERE u.buyer_id = ?1 AND u.product_id = ?2"
        ))?
        .query_row(rusqlite::params![buyer_id, product_id], |row| {
            counters_from_row(row, 0)
        })
        .optional()?
        .unwrap_or_default();
    Ok(counters.usage(windows))
}

/// Which counter a change moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Count,
    Held,
}

/// The statement that adds `?5` to counter `moved` (`count` or `held`) of buyer `?1` and
/// product `?2` in the day starting at `?3` and the month starting at `?4`. Per window: the
/// same as the row's → `moved` adds the change; a newer window → both counters start over
/// (`moved` at the change, `other` at 0); an older one (a clock that went back) → the row
/// stays. Never below 0.
fn upsert(moved: &str, other: &str) -> String {
    format!(
        "INSERT INTO cap_usage (buyer_id, product_id, day_start, day_{moved}, month_start,
            month_{moved})
         VALUES (?1, ?2, ?3, max(?5, 0), ?4, max(?5, 0))
         ON CONFLICT (buyer_id, product_id) DO UPDATE SET
            day_{moved} = CASE WHEN day_start = excluded.day_start THEN max(day_{moved} + ?5, 0)
                               WHEN day_start < excluded.day_start THEN max(?5, 0)
                               ELSE day_{moved} END,
            day_{other} = CASE WHEN day_start < excluded.day_start THEN 0 ELSE day_{other} END,
            month_{moved} = CASE WHEN month_start = excluded.month_start
                                     THEN max(month_{moved} + ?5, 0)
                                 WHEN month_start < excluded.month_start THEN max(?5, 0)
                                 ELSE month_{moved} END,
            month_{other} = CASE WHEN month_start < excluded.month_start THEN 0
                                 ELSE month_{other} END,
            day_start = max(day_start, excluded.day_start),
            month_start = max(month_start, excluded.month_start)"
    )
}

/// Adds `delta` to the buyer's count or held places for the product in `windows`. A row
/// whose windows have passed starts the new ones from 0; a change for windows older than
/// the row's (a clock that went back) leaves the row's alone. Never below 0.
fn change(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product_id: &str,
    windows: &Windows,
    column: Column,
    delta: i64,
) -> rusqlite::Result<()> {
    static STATEMENTS: std::sync::LazyLock<[String; 2]> =
        std::sync::LazyLock::new(|| [upsert("count", "held"), upsert("held", "count")]);
    let sql = match column {
        Column::Count => &STATEMENTS[0],
        Column::Held => &STATEMENTS[1],
    };
    conn.prepare_kept(sql)?.execute(rusqlite::params![
        buyer_id,
        product_id,
        windows.day.0,
        windows.month.0,
        delta
    ])?;
    Ok(())
}

/// Counts a new live transaction created at `at` in `windows` (the windows of `at`).
pub(crate) fn count(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product_id: &str,
    windows: &Windows,
) -> rusqlite::Result<()> {
    change(conn, buyer_id, product_id, windows, Column::Count, 1)
}

/// Gives back the place of a transaction created at `created_at` that stopped being live
/// (rejected, cancelled, voided). It matters only while its day or month is current.
pub(crate) fn uncount(
    conn: &Connection,
    workspace_id: &str,
    buyer_id: &crate::ids::BuyerId,
    product_id: &str,
    created_at: i64,
) -> rusqlite::Result<()> {
    let windows = Windows::at(created_at, &timezone_of(conn, workspace_id)?);
    // Only the windows the row holds now are moved: a place in a passed window is moot.
    conn.prepare_kept(
        "UPDATE cap_usage SET
            day_count = CASE WHEN day_start = ?3 THEN max(day_count - 1, 0) ELSE day_count END,
            month_count = CASE WHEN month_start = ?4 THEN max(month_count - 1, 0)
                               ELSE month_count END
         WHERE buyer_id = ?1 AND product_id = ?2",
    )?
    .execute(rusqlite::params![
        buyer_id,
        product_id,
        windows.day.0,
        windows.month.0
    ])?;
    Ok(())
}

/// Holds a place of the buyer's caps for the product in `windows` (a reservation: ping/post
/// counts a won bid against the caps until its lead is posted or it expires).
pub(crate) fn hold(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product_id: &str,
    windows: &Windows,
) -> rusqlite::Result<()> {
    change(conn, buyer_id, product_id, windows, Column::Held, 1)
}

/// Gives back a place [`hold`] took in `windows` (the windows of when it was taken; a
/// place of a passed window is moot).
pub(crate) fn release(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product_id: &str,
    windows: &Windows,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "UPDATE cap_usage SET
            day_held = CASE WHEN day_start = ?3 THEN max(day_held - 1, 0) ELSE day_held END,
            month_held = CASE WHEN month_start = ?4 THEN max(month_held - 1, 0) ELSE month_held END
         WHERE buyer_id = ?1 AND product_id = ?2",
    )?
    .execute(rusqlite::params![
        buyer_id,
        product_id,
        windows.day.0,
        windows.month.0
    ])?;
    Ok(())
}

/// Recounts the counters of every buyer of `workspace_id` (every workspace when `None`)
/// from the live transactions in the windows current at `now`. Held places are kept: they
/// are not in the transactions. Reads the month's transactions once per workspace.
pub(crate) fn rebuild(
    conn: &Connection,
    workspace_id: Option<&str>,
    now: i64,
) -> rusqlite::Result<()> {
    let workspaces: Vec<(String, String)> = conn
        .prepare("SELECT id, timezone FROM workspaces WHERE ?1 IS NULL OR id = ?1")?
        .query_map([workspace_id], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (workspace, zone) in workspaces {
        let tz = TimeZone::get(&zone).unwrap_or(TimeZone::UTC);
        let windows = Windows::at(now, &tz);
        conn.execute(
            "UPDATE cap_usage SET day_start = ?2, day_count = 0, month_start = ?3, month_count = 0,
                day_held = CASE WHEN day_start = ?2 THEN day_held ELSE 0 END,
                month_held = CASE WHEN month_start = ?3 THEN month_held ELSE 0 END
             WHERE buyer_id IN (SELECT id FROM buyers WHERE workspace_id = ?1)",
            rusqlite::params![workspace, windows.day.0, windows.month.0],
        )?;
        conn.execute(
            "INSERT INTO cap_usage (buyer_id, product_id, day_start, day_count, month_start,
                month_count)
             SELECT buyer_id, product_id, ?2,
                    count(*) FILTER (WHERE created_at >= ?2 AND created_at < ?3), ?4, count(*)
             FROM transactions
             WHERE workspace_id = ?1 AND created_at >= ?4 AND created_at < ?5
               AND status NOT IN ('rejected', 'cancelled')
             GROUP BY buyer_id, product_id
             ON CONFLICT (buyer_id, product_id) DO UPDATE SET
                day_count = excluded.day_count, month_count = excluded.month_count",
            rusqlite::params![
                workspace,
                windows.day.0,
                windows.day.1,
                windows.month.0,
                windows.month.1
            ],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::autodelivery::testing::{BuyerFixture, add_buyer, add_transaction, database};

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
    fn counters_follow_the_live_transactions_of_the_buyer_and_product_in_the_windows() {
        let conn = database();
        add_buyer(&conn, "b", &BuyerFixture::default());
        add_buyer(&conn, "other", &BuyerFixture::default());
        let now = ms("2025-01-15T10:00:00Z");
        let windows = Windows::at(now, &TimeZone::UTC);
        let add = |buyer: &str, product: &str, status: &str, at: &str| {
            add_transaction(
                &conn,
                crate::autodelivery::testing::old_request_id(),
                buyer,
                product,
                status,
                ms(at),
            )
        };
        add("b", "solar", "delivered", "2025-01-15T09:00:00Z");
        add("b", "solar", "paid", "2025-01-15T08:00:00Z");
        add("b", "solar", "rejected", "2025-01-15T09:30:00Z");
        add("b", "solar", "cancelled", "2025-01-15T09:30:00Z");
        add("b", "heat", "delivered", "2025-01-15T09:30:00Z");
        add("other", "solar", "delivered", "2025-01-15T09:30:00Z");
        // Earlier this month, and last month (a day and a month that have passed).
        add("b", "solar", "acknowledged", "2025-01-03T12:00:00Z");
        add("b", "solar", "delivered", "2024-12-31T23:00:00Z");
        let usage = |conn: &Connection| {
            usage_now(conn, &crate::ids::BuyerId::from("b"), "solar", &windows).unwrap()
        };
        let expected = Usage {
            today: 2,
            this_month: 3,
        };
        assert_eq!(usage(&conn), expected, "live only, this buyer and product");
        rebuild(&conn, None, now).unwrap();
        assert_eq!(
            usage(&conn),
            expected,
            "a recount from the transactions agrees"
        );

        let paid: crate::ids::TransactionId = conn
            .query_row(
                "SELECT id FROM transactions WHERE status = 'paid'",
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
            now,
        )
        .unwrap();
        let after = Usage {
            today: 1,
            this_month: 2,
        };
        assert_eq!(usage(&conn), after, "a rejection gives the place back");
        rebuild(&conn, Some("ws"), now).unwrap();
        assert_eq!(usage(&conn), after);

        let tomorrow = Windows::at(ms("2025-01-16T00:00:00Z"), &TimeZone::UTC);
        assert_eq!(
            usage_now(&conn, &crate::ids::BuyerId::from("b"), "solar", &tomorrow).unwrap(),
            Usage {
                today: 0,
                this_month: 2
            },
            "a new day starts at 0"
        );
        let february = Windows::at(ms("2025-02-01T00:00:00Z"), &TimeZone::UTC);
        assert_eq!(
            usage_now(&conn, &crate::ids::BuyerId::from("b"), "solar", &february).unwrap(),
            Usage::default()
        );
    }

    #[test]
    fn held_places_count_until_released_and_a_new_window_starts_afresh() {
        let conn = database();
        add_buyer(&conn, "b", &BuyerFixture::default());
        let today = Windows::at(ms("2025-01-15T10:00:00Z"), &TimeZone::UTC);
        let tomorrow = Windows::at(ms("2025-01-16T10:00:00Z"), &TimeZone::UTC);
        hold(&conn, &crate::ids::BuyerId::from("b"), "solar", &today).unwrap();
        hold(&conn, &crate::ids::BuyerId::from("b"), "solar", &today).unwrap();
        count(&conn, &crate::ids::BuyerId::from("b"), "solar", &today).unwrap();
        let usage = |windows: &Windows| {
            usage_now(&conn, &crate::ids::BuyerId::from("b"), "solar", windows).unwrap()
        };
        assert_eq!(
            usage(&today),
            Usage {
                today: 3,
                this_month: 3
            }
        );
        release(&conn, &crate::ids::BuyerId::from("b"), "solar", &today).unwrap();
        assert_eq!(
            usage(&today),
            Usage {
                today: 2,
                this_month: 2
            }
        );
        // The next day: the day's counters start over, the month's go on.
        count(&conn, &crate::ids::BuyerId::from("b"), "solar", &tomorrow).unwrap();
        assert_eq!(
            usage(&tomorrow),
            Usage {
                today: 1,
                this_month: 3
            }
        );
        // Yesterday's hold given back now moves nothing of today's.
        release(&conn, &crate::ids::BuyerId::from("b"), "solar", &today).unwrap();
        assert_eq!(
            usage(&tomorrow),
            Usage {
                today: 1,
                this_month: 2
            }
        );
        // A change for a passed day (a clock that went back) leaves today alone.
        count(&conn, &crate::ids::BuyerId::from("b"), "solar", &today).unwrap();
        assert_eq!(
            usage(&tomorrow),
            Usage {
                today: 1,
                this_month: 3
            }
        );
        for _ in 0..5 {
            release(&conn, &crate::ids::BuyerId::from("b"), "solar", &tomorrow).unwrap();
        }
        assert_eq!(
            usage(&tomorrow),
            Usage {
                today: 1,
                this_month: 3
            },
            "never below 0"
        );
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
