//! The report's cut of quarter hours into the workspace's local days, weeks and months,
//! on a real file: counts written through the hooks at chosen times, read with [`run`].

use jiff::civil::date;
use rusqlite::Connection;

use super::buckets::Grain;
use super::{By, Counted, Received, ReportQuery, leads_received, run, transaction_changed};
use crate::config::container::DeliveryMode;
use crate::config::testing;
use crate::db::Undo;

/// A migrated file with workspace `ws` in `timezone` and its source `src`.
fn database(timezone: &str) -> (tempfile::TempDir, Connection) {
    let (dir, conn) = testing::migrated();
    testing::workspace(&conn, timezone);
    let channel = testing::Channel {
        auto_delivery: false,
        mode: DeliveryMode::Multi,
        max_buyers: 1,
        score_threshold: 0,
    };
    testing::channel(&conn, channel, None);
    (dir, conn)
}

fn at(text: &str) -> i64 {
    crate::clock::parse_iso(text).expect("a valid time")
}

fn received(conn: &Connection, when: &str, count: i64) {
    let source = crate::ids::SourceId::from("src");
    leads_received(
        conn,
        "ws",
        &source,
        None,
        Received::Accepted,
        count,
        at(when),
    )
    .expect("the count is written");
}

fn query(from: jiff::civil::Date, to: jiff::civil::Date, by: &[By]) -> ReportQuery {
    ReportQuery {
        workspace_id: "ws".into(),
        from,
        to,
        by: by.to_vec(),
    }
}

/// (key of the first dimension, received) of each row.
fn cut(conn: &Connection, q: &ReportQuery) -> Vec<(String, i64)> {
    run(conn, q)
        .expect("the report is made")
        .rows
        .into_iter()
        .map(|r| (r.keys[0].clone().unwrap_or_default(), r.figures.received))
        .collect()
}

#[test]
fn days_are_cut_at_local_midnight_also_at_a_half_hour_offset() {
    // Asia/Kolkata is UTC+5:30: local midnight of 23 November is 18:30 UTC on the 22nd.
    let (_dir, conn) = database("Asia/Kolkata");
    received(&conn, "2026-11-22T18:29:59.999Z", 1);
    received(&conn, "2026-11-22T18:30:00Z", 10);
    received(&conn, "2026-11-23T18:29:00Z", 100);
    received(&conn, "2026-11-23T18:30:00Z", 1000);
    let q = query(date(2026, 11, 22), date(2026, 11, 24), &[By::Day]);
    assert_eq!(
        cut(&conn, &q),
        [
            ("2026-11-22".to_string(), 1),
            ("2026-11-23".to_string(), 110),
            ("2026-11-24".to_string(), 1000),
        ]
    );
    // Outside the range: not counted, also in the totals.
    let q = query(date(2026, 11, 23), date(2026, 11, 23), &[]);
    let report = run(&conn, &q).unwrap();
    assert_eq!(report.totals.received, 110);
    assert_eq!(report.rows.len(), 1);
}

#[test]
fn a_day_of_a_daylight_saving_change_has_its_own_length() {
    // Europe/Berlin leaves summer time on 25 October 2026: that day has 25 hours.
    let (_dir, conn) = database("Europe/Berlin");
    received(&conn, "2026-10-24T21:59:00Z", 1); // 23:59 on the 24th (CEST)
    received(&conn, "2026-10-24T22:00:00Z", 10); // 00:00 on the 25th
    received(&conn, "2026-10-25T22:59:00Z", 100); // 23:59 on the 25th (CET)
    received(&conn, "2026-10-25T23:00:00Z", 1000); // 00:00 on the 26th
    let q = query(date(2026, 10, 24), date(2026, 10, 26), &[By::Day]);
    assert_eq!(
        cut(&conn, &q),
        [
            ("2026-10-24".to_string(), 1),
            ("2026-10-25".to_string(), 110),
            ("2026-10-26".to_string(), 1000),
        ]
    );
}

#[test]
fn weeks_start_on_monday_and_months_on_the_first() {
    let (_dir, conn) = database("UTC");
    received(&conn, "2026-11-29T12:00:00Z", 1); // a Sunday
    received(&conn, "2026-11-30T12:00:00Z", 10); // Monday
    received(&conn, "2026-12-01T12:00:00Z", 100);
    let q = query(date(2026, 11, 29), date(2026, 12, 1), &[By::Week]);
    assert_eq!(
        cut(&conn, &q),
        [
            ("2026-11-23".to_string(), 1),
            ("2026-11-30".to_string(), 110)
        ]
    );
    let q = query(date(2026, 11, 29), date(2026, 12, 1), &[By::Month, By::Day]);
    let report = run(&conn, &q).unwrap();
    let rows: Vec<(Vec<Option<String>>, i64)> = report
        .rows
        .into_iter()
        .map(|r| (r.keys, r.figures.received))
        .collect();
    let key = |m: &str, d: &str| vec![Some(m.to_string()), Some(d.to_string())];
    assert_eq!(
        rows,
        [
            (key("2026-11", "2026-11-29"), 1),
            (key("2026-11", "2026-11-30"), 10),
            (key("2026-12", "2026-12-01"), 100),
        ]
    );
}

#[test]
fn every_report_sums_its_period_in_key_order_without_a_sort() {
    let (_dir, conn) = database("UTC");
    let cases: [&[By]; 7] = [
        &[],
        &[By::Day],
        &[By::Buyer],
        &[By::Product],
        &[By::Source],
        &[By::Day, By::Supplier],
        &[By::Month, By::Buyer, By::Product],
    ];
    for (by, grain) in cases
        .into_iter()
        .flat_map(|by| [Grain::QuarterHour, Grain::Day].map(|grain| (by, grain)))
    {
        let (sql, _) = super::bucket_query(by, grain);
        let plan = crate::db::query_plan(&conn, &sql, rusqlite::params!["ws", 0, 1]);
        let table = grain.table().0;
        assert!(
            plan.iter()
                .any(|s| s.starts_with(&format!("SEARCH {table}"))),
            "{by:?}: one range of the key: {plan:?}"
        );
        assert!(
            plan.iter().all(|s| !s.contains("TEMP B-TREE")),
            "{by:?}: no sort: {plan:?}"
        );
    }
}

/// A deterministic spread of times: `count` of them from `first` on, some minutes to some
/// hours apart.
fn times(first: i64, count: usize) -> Vec<i64> {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut at = first;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            at += 60_000 + (state % (7 * 3_600_000)) as i64;
            at
        })
        .collect()
}

#[test]
fn reports_read_from_days_and_quarter_hours_equal_a_count_by_local_date() {
    // Local midnights of these zones lie inside UTC days (UTC+5:30, UTC-5/-4 with a
    // daylight saving change in the range, UTC+5:45), so every range starts and ends
    // mid-UTC-day: its edges come from the quarter hours, its whole UTC days from
    // `report_days`.
    for zone in ["Asia/Kolkata", "America/New_York", "Asia/Kathmandu", "UTC"] {
        let (_dir, conn) = database(zone);
        let tz = jiff::tz::TimeZone::get(zone).unwrap();
        let events = times(at("2026-10-20T00:00:00Z"), 150);
        let buyers = ["b1", "b2", "b3"];
        let source_id = crate::ids::SourceId::from("src");
        for (n, when) in events.iter().enumerate() {
            leads_received(
                &conn,
                "ws",
                &source_id,
                None,
                Received::Accepted,
                1 + n as i64 % 3,
                *when,
            )
            .unwrap();
            let sale = Counted {
                workspace_id: "ws",
                source_id: &source_id,
                buyer_id: &buyers[n % 3].into(),
                product_id: "",
                delivered_at: *when,
                standing: super::Standing::Delivered,
                buyer_price_cents: 100 + n as i64,
                supplier_cost_cents: 10,
            };
            transaction_changed(&conn, None, &sale).unwrap();
        }
        let local = |when: i64| {
            jiff::Timestamp::from_millisecond(when)
                .unwrap()
                .to_zoned(tz.clone())
                .date()
        };
        for (from, to) in [
            (date(2026, 10, 21), date(2026, 11, 2)),
            (date(2026, 10, 25), date(2026, 10, 25)),
            (date(2026, 10, 22), date(2026, 11, 5)),
        ] {
            // By day: received per local date.
            let mut expected: Vec<(String, i64)> = Vec::new();
            let mut day = from;
            while day <= to {
                let count = events
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| local(**w) == day)
                    .map(|(n, _)| 1 + n as i64 % 3)
                    .sum();
                expected.push((day.to_string(), count));
                day = day.tomorrow().unwrap();
            }
            let q = query(from, to, &[By::Day]);
            assert_eq!(cut(&conn, &q), expected, "{zone} {from}..{to} by day");
            // By week and buyer: revenue per (Monday, buyer).
            let mut expected: std::collections::BTreeMap<(String, String), i64> =
                Default::default();
            for (n, when) in events.iter().enumerate() {
                let d = local(*when);
                if d >= from && d <= to {
                    let monday = super::period_start(By::Week, d).to_string();
                    *expected
                        .entry((monday, buyers[n % 3].to_string()))
                        .or_default() += 100 + n as i64;
                }
            }
            let report = run(&conn, &query(from, to, &[By::Week, By::Buyer])).unwrap();
            let found: std::collections::BTreeMap<(String, String), i64> = report
                .rows
                .iter()
                .filter(|r| r.keys[1].is_some())
                .map(|r| {
                    (
                        (r.keys[0].clone().unwrap(), r.keys[1].clone().unwrap()),
                        r.figures.revenue_cents,
                    )
                })
                .collect();
            assert_eq!(found, expected, "{zone} {from}..{to} by week and buyer");
            // No time dimension: the totals.
            let report = run(&conn, &query(from, to, &[By::Source])).unwrap();
            let sold = events.iter().filter(|w| {
                let d = local(**w);
                d >= from && d <= to
            });
            assert_eq!(
                report.totals.sold,
                sold.count() as i64,
                "{zone} {from}..{to}"
            );
        }
    }
}

#[test]
fn the_days_read_are_whole_utc_days_inside_the_range() {
    use super::buckets::{Span, spans};
    let day = 86_400_000;
    let q = 900_000;
    // Mid-day to mid-day three days later: two edges of quarter hours, two whole days.
    assert_eq!(
        spans(day + 4 * q, 4 * day - 2 * q),
        [
            Span {
                grain: Grain::QuarterHour,
                from: day + 4 * q,
                to: 2 * day
            },
            Span {
                grain: Grain::Day,
                from: 2 * day,
                to: 3 * day
            },
            Span {
                grain: Grain::QuarterHour,
                from: 3 * day,
                to: 4 * day - 2 * q
            },
        ]
    );
    // Inside one day: only quarter hours; on midnights: only days.
    assert_eq!(
        spans(day + q, day + 2 * q),
        [Span {
            grain: Grain::QuarterHour,
            from: day + q,
            to: day + 2 * q
        }]
    );
    assert_eq!(
        spans(-day, day),
        [Span {
            grain: Grain::Day,
            from: -day,
            to: day
        }]
    );
    assert_eq!(spans(day, day), []);
}

#[test]
fn the_check_compares_stored_and_recounted_rows_in_one_pass() {
    // A FULL OUTER JOIN of the stored rows with the recount compared every row of one side
    // with every row of the other (no index on either): `check` ran for more than half an
    // hour on a million leads. One GROUP BY over both sides reads each row once.
    let (_dir, conn) = database("UTC");
    for sql in [
        super::buckets::QUARTER_HOUR_DIFFERENCES,
        super::buckets::DAY_DIFFERENCES,
    ] {
        let plan = crate::db::query_plan(&conn, sql, []);
        assert!(
            plan.iter().all(|s| !s.contains("JOIN")),
            "no join of the two sides: {plan:?}"
        );
        assert_eq!(
            plan.iter()
                .filter(|s| s.starts_with("SCAN report_"))
                .count(),
            if sql == super::buckets::DAY_DIFFERENCES {
                2
            } else {
                1
            },
            "each stored table read once: {plan:?}"
        );
    }
}

/// Sums of `received` in the quarter hours and in the days, as a reader sees them.
fn received_sums(conn: &Connection) -> (i64, i64) {
    let sum = |table: &str| {
        conn.query_row(
            &format!("SELECT coalesce(sum(received), 0) FROM {table}"),
            [],
            |row| row.get(0),
        )
        .expect("the sum reads")
    };
    (sum("report_buckets"), sum("report_days"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_writes_what_its_kept_jobs_counted_once_and_before_a_job_that_does_not_defer() {
    let (dir, conn) = database("UTC");
    let db = crate::db::Db::open(dir.path().join("test.db")).expect("the file opens");
    let now = crate::clock::now_ms();
    let count = move |conn: &Connection, n: i64| {
        leads_received(conn, "ws", &"src".into(), None, Received::Accepted, n, now)
    };
    // The writer is held in a job while the others queue, so they run as one group.
    let (started, writer_busy) = std::sync::mpsc::channel::<()>();
    let (release, hold) = std::sync::mpsc::channel::<()>();
    let blocker = tokio::spawn({
        let db = db.clone();
        async move {
            db.write(move |_| {
                started.send(()).expect("the test waits for the writer");
                hold.recv().expect("the test releases the writer");
                Ok::<(), crate::db::DbError>(())
            })
            .await
        }
    });
    tokio::task::spawn_blocking(move || writer_busy.recv().expect("the blocker runs"))
        .await
        .expect("the wait ends");
    let groups_before = db.writer_stats().groups;
    let kept = db.write_deferring(&super::buckets::ROLLUP, Undo::Savepoint, move |c| {
        count(c, 3).map_err(crate::db::DbError::from)
    });
    let failed = db.write_deferring(
        &super::buckets::ROLLUP,
        Undo::Savepoint,
        move |c| -> Result<(), crate::db::DbError> {
            count(c, 2)?;
            Err(crate::db::DbError::JobPanicked)
        },
    );
    // A job that does not defer reads what the kept job before it counted.
    let seen = db.write(|c| Ok::<_, crate::db::DbError>(received_sums(c)));
    let later = db.write_deferring(&super::buckets::ROLLUP, Undo::Savepoint, move |c| {
        count(c, 1).map_err(crate::db::DbError::from)
    });
    let (kept, failed, seen, later, ()) = tokio::join!(kept, failed, seen, later, async {
        release.send(()).expect("the blocker waits")
    });
    blocker
        .await
        .expect("the blocker ends")
        .expect("the blocker commits");
    kept.expect("the kept job commits");
    assert!(failed.is_err());
    later.expect("the later job commits");
    assert_eq!(seen.expect("the reading job commits"), (3, 3));
    assert_eq!(
        db.writer_stats().groups - groups_before,
        1,
        "the four jobs ran as one group"
    );
    assert_eq!(received_sums(&conn), (4, 4));
    db.close();
}
