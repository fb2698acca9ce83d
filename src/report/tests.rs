//! The report's cut of quarter hours into the workspace's local days, weeks and months,
//! on a real file: counts written through the hooks at chosen times, read with [`run`].

use jiff::civil::date;
use rusqlite::Connection;

use super::{By, Received, ReportQuery, leads_received, run};
use crate::config::container::DeliveryMode;
use crate::config::testing;

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
    leads_received(conn, "ws", "src", None, Received::Accepted, count, at(when))
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
    for by in cases {
        let (sql, _) = super::bucket_query(by);
        let plan = crate::db::query_plan(&conn, &sql, rusqlite::params!["ws", 0, 1]);
        assert!(
            plan.iter().any(|s| s.starts_with("SEARCH report_buckets")),
            "{by:?}: one range of the key: {plan:?}"
        );
        assert!(
            plan.iter().all(|s| !s.contains("TEMP B-TREE")),
            "{by:?}: no sort: {plan:?}"
        );
    }
}
