//! `/`: the business at a glance. Today and yesterday (received, sold, revenue, margin,
//! return rate), the outbox, unhealthy buyers (`outbox::health`'s circuit breaker) and
//! buyers whose events failed, leads per hour over 48 hours and revenue per day over 30
//! days.
//!
//! Every figure over time is read from the report aggregate (`report_buckets`, DESIGN.md
//! section 11, the writer keeps it current): one range of its primary key per workspace,
//! summed per quarter hour in SQLite, then added up into local days and hours (every
//! zone's days and hours start on a quarter hour). So the page reads a row per quarter
//! hour, source and buyer, not a row per lead or sale, and its figures are the report's:
//! received counts every lead a source sent (also those validation refused), revenue and
//! margin the sales neither rejected nor cancelled (margin: revenue less supplier cost).

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::{Connection, params};

use crate::console::chart::{self, Point};
use crate::console::layout::{self, Zone, money, rate};
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;
use crate::operators::Session;

const HOUR_MS: i64 = 3_600_000;
const DAYS: i64 = 30;
const HOURS: i64 = 48;

/// One local day's figures.
#[derive(Debug, Default, Clone)]
struct Day {
    start: i64,
    sold: i64,
    revenue: i64,
    margin: i64,
    returned: i64,
    received: i64,
}

struct Overview {
    zone: Zone,
    /// Oldest first; the last is today.
    days: Vec<Day>,
    /// Oldest first; the last is the current hour: (start, leads).
    hours: Vec<(i64, i64)>,
    outbox: crate::outbox::store::Figures,
    failing_buyers: Vec<(String, String, i64)>,
    /// Buyers whose endpoint's circuit breaker is open: (id, failures in a row, since).
    unhealthy: Vec<(String, i64, Option<i64>)>,
    now: i64,
}

pub(crate) async fn get(db: &Db, operator: &Session) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let overview = db.read(move |conn| load(conn, now)).await?;
    Ok(layout::page(
        StatusCode::OK,
        "Overview",
        "/",
        operator,
        &overview.zone,
        render(&overview),
    ))
}

fn load(conn: &Connection, now: i64) -> Result<Overview, DbError> {
    let zone = Zone::of(conn)?;
    let mut days: Vec<Day> = (0..DAYS)
        .rev()
        .map(|back| Day {
            start: zone.day_start(now, back),
            ..Day::default()
        })
        .collect();
    let this_hour = hour_start(&zone, now);
    let first_hour = this_hour - (HOURS - 1) * HOUR_MS;
    let mut hours: Vec<(i64, i64)> = (0..HOURS).map(|h| (first_hour + h * HOUR_MS, 0)).collect();
    let start = days[0].start.min(first_hour);
    let end = zone.day_start(now, -1).max(this_hour + HOUR_MS);
    // `workspace_id IN (…)`: one range of the primary key per workspace, in bucket order.
    let mut buckets = conn.prepare_cached(
        "SELECT bucket, sum(received), sum(sold), sum(returned), sum(revenue_cents),
                sum(supplier_cost_cents)
         FROM report_buckets
         WHERE workspace_id IN (SELECT id FROM workspaces) AND bucket >= ?1 AND bucket < ?2
         GROUP BY bucket",
    )?;
    let mut rows = buckets.query(params![start, end])?;
    while let Some(row) = rows.next()? {
        let bucket: i64 = row.get(0)?;
        let received: i64 = row.get(1)?;
        // The last day that starts at or before the bucket.
        let at = days.partition_point(|d| d.start <= bucket);
        if at > 0 && bucket < end {
            let day = &mut days[at - 1];
            let (revenue, cost): (i64, i64) = (row.get(4)?, row.get(5)?);
            day.received += received;
            day.sold += row.get::<_, i64>(2)?;
            day.returned += row.get::<_, i64>(3)?;
            day.revenue += revenue;
            day.margin += revenue - cost;
        }
        if bucket >= first_hour {
            let hour = ((bucket - first_hour) / HOUR_MS) as usize;
            if let Some((_, count)) = hours.get_mut(hour) {
                *count += received;
            }
        }
    }
    drop(rows);

    let outbox = crate::outbox::store::figures(conn)?;
    let mut failing = conn.prepare_cached(
        "SELECT e.buyer_id, b.name, count(*) FROM outbox_events e
         JOIN buyers b ON b.id = e.buyer_id
         WHERE e.status = 'failed' GROUP BY e.buyer_id ORDER BY 3 DESC LIMIT 20",
    )?;
    let failing_buyers = failing
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let unhealthy = crate::outbox::health::read(conn, None, now)?
        .into_iter()
        .filter(|h| h.breaker.state == crate::outbox::health::State::Unhealthy)
        .map(|h| {
            let b = h.breaker;
            (b.buyer_id, b.consecutive_failures, b.unhealthy_since)
        })
        .collect();
    Ok(Overview {
        zone,
        days,
        hours,
        outbox,
        failing_buyers,
        unhealthy,
        now,
    })
}

/// The start of the local hour `now` is in.
fn hour_start(zone: &Zone, now: i64) -> i64 {
    let at = jiff::Timestamp::from_millisecond(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let zoned = at.to_zoned(zone.tz.clone());
    let into_hour = i64::from(zoned.minute()) * 60_000
        + i64::from(zoned.second()) * 1000
        + i64::from(zoned.millisecond());
    now - into_hour
}

fn render(o: &Overview) -> Markup {
    let today = o.days.last().cloned().unwrap_or_default();
    let yesterday = o.days.iter().rev().nth(1).cloned().unwrap_or_default();
    let hour_points: Vec<Point> = o
        .hours
        .iter()
        .map(|(start, count)| Point {
            label: format!("{} {}h", o.zone.month_day(*start), o.zone.hour(*start)),
            value: *count as f64,
            shown: format!("{count} leads"),
        })
        .collect();
    let day_points: Vec<Point> = o
        .days
        .iter()
        .map(|day| Point {
            label: o.zone.month_day(day.start),
            value: day.revenue as f64 / 100.0,
            shown: money(day.revenue),
        })
        .collect();
    let oldest = o
        .outbox
        .oldest_pending_ms
        .map(|created| ((o.now - created).max(0) / 1000).to_string());
    html! {
        section class="figures" {
            table id="today" {
                thead { tr { th { "" } th { "Received" } th { "Sold" } th { "Revenue" }
                    th { "Margin" } th { "Return rate" } } }
                tbody {
                    (day_row("Today", &today))
                    (day_row("Yesterday", &yesterday))
                }
            }
        }
        section class="cards" {
            div class="card" id="outbox-figures" {
                h2 { "Outbox" }
                p { a href="/outbox" { span class="big" { (o.outbox.pending) } " pending" } }
                p { a href="/outbox" { span class="big" { (o.outbox.failed) } " failed" } }
                @if let Some(seconds) = oldest {
                    p class="note" { "Oldest pending: " (seconds) " s" }
                }
            }
            div class="card" id="unhealthy-buyers" {
                h2 { "Unhealthy buyers" }
                @if o.unhealthy.is_empty() {
                    (layout::none_yet("None: every endpoint answers."))
                } @else {
                    ul {
                        @for (id, failures, since) in &o.unhealthy {
                            li {
                                a href={ "/buyers#buyer-" (id) } { (id) } ": " (failures) " failures in a row"
                                @if let Some(since) = since { ", since " (o.zone.when(*since)) }
                            }
                        }
                    }
                }
            }
            div class="card" id="failing-buyers" {
                h2 { "Buyers with failed events" }
                @if o.failing_buyers.is_empty() {
                    (layout::none_yet("None."))
                } @else {
                    ul {
                        @for (id, name, count) in &o.failing_buyers {
                            li { a href="/buyers" { (name) } " (" (id) "): " (count) " failed" }
                        }
                    }
                }
            }
        }
        (chart::bars("leads-per-hour", "Leads per hour, last 48 hours", &hour_points, 6))
        (chart::bars("revenue-per-day", "Revenue per day, last 30 days", &day_points, 5))
    }
}

fn day_row(name: &str, day: &Day) -> Markup {
    html! {
        tr {
            th scope="row" { (name) }
            td { (day.received) }
            td { (day.sold) }
            td { (money(day.revenue)) }
            td { (money(day.margin)) }
            td { (rate(day.returned, day.sold)) }
        }
    }
}
