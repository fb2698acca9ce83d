//! `/`: the business at a glance. Today and yesterday (received, sold, revenue, margin,
//! return rate), the outbox, unhealthy buyers (`outbox::health`'s circuit breaker) and
//! buyers whose events failed, leads per hour over 48 hours and revenue per day over 30
//! days, and the open alerts (`alerts::store::open`).
//!
//! Sales, returns, revenue and margin per local day are the report's (the report aggregate,
//! DESIGN.md section 11, read by `report::totals_between`: each day's whole UTC days from
//! `report_days` and the quarter hours at its edges from `report_buckets`), so the margin
//! is the report's money: a returned lead's supplier cost counts until its clawback is
//! confirmed. Leads received (today, yesterday, per hour) are the stored leads, one range
//! of `leads_created` each (migration 9).

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::{Connection, params};

use crate::console::chart::{self, Point};
use crate::console::layout::{self, Zone, money, rate};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;

const HOUR_MS: i64 = 3_600_000;
const DAYS: i64 = 30;
const HOURS: i64 = 48;

/// The transactions of one local day.
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
    /// The alerts firing now, oldest first.
    alerts: Vec<crate::alerts::Alert>,
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
    // The report's figures of each local day (`report::totals_between`: whole UTC days
    // and the quarter hours at the edges), so the margin is the report's money.
    let mut received = conn
        .prepare_cached("SELECT count(*) FROM leads WHERE created_at >= ?1 AND created_at < ?2")?;
    let mut days = Vec::with_capacity(DAYS as usize);
    for back in (0..DAYS).rev() {
        let start = zone.day_start(now, back);
        let end = zone.day_start(now, back - 1);
        let figures = crate::report::totals_between(conn, start, end)?;
        let mut day = Day {
            start,
            sold: figures.sold,
            revenue: figures.revenue_cents,
            margin: figures.margin_cents(),
            returned: figures.returned,
            ..Day::default()
        };
        // Leads received are shown for today and yesterday only.
        if back <= 1 {
            day.received = received.query_row(params![start, end], |row| row.get(0))?;
        }
        days.push(day);
    }

    // One range of `leads_created` per hour, which needs no sort by hour.
    let this_hour = hour_start(&zone, now);
    let first = this_hour - (HOURS - 1) * HOUR_MS;
    let mut hours = Vec::with_capacity(HOURS as usize);
    for h in 0..HOURS {
        let start = first + h * HOUR_MS;
        let count = received.query_row(params![start, start + HOUR_MS], |row| row.get(0))?;
        hours.push((start, count));
    }

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
            (
                b.buyer_id.to_string(),
                b.consecutive_failures,
                b.unhealthy_since,
            )
        })
        .collect();
    let alerts = crate::alerts::store::open(conn, None)?;
    Ok(Overview {
        zone,
        days,
        hours,
        outbox,
        failing_buyers,
        unhealthy,
        alerts,
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
            div class="card" id="open-alerts" {
                h2 { "Open alerts" }
                @if o.alerts.is_empty() {
                    (layout::none_yet("None firing."))
                } @else {
                    ul {
                        @for alert in &o.alerts {
                            li {
                                strong { (alert.rule.as_str()) } " " (alert.subject)
                                " (" (alert.workspace_id) "), since " (o.zone.when(alert.since))
                                ": " (alert.detail)
                            }
                        }
                    }
                }
            }
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
