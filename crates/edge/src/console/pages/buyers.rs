//! `/buyers`: each buyer's status, plan and balance, its webhook endpoint (events pending
//! and failed, the last errors) and the endpoint's health (the circuit breaker's state,
//! sends in flight, latency p50/p99, the last error), its caps used today per product, and
//! its acceptance and return rates over the last 30 days; and the portal users of buyers
//! and suppliers not revoked, each with its revoke form (admins only may revoke).
//!
//! The rates count ranges of the `transactions_buyer_status` index (migration 9), one per
//! buyer and status over 30 days; cap use is `caps::usage_now`, the one auto-delivery
//! applies; the endpoint's health is `outbox::health::read`, the one `buyer health` prints.

use std::collections::HashMap;

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::{Connection, params};

use crate::console::layout::{self, Zone, money, rate};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::delivery::transaction::Status;
use crate::http::Response;
use crate::http::error::Error;
use crate::outbox::health::{self, BuyerHealth, State};
use crate::partners::{PartnerUser, Party};

const WINDOW_DAYS: i64 = 30;
/// Last errors shown per buyer.
const ERRORS_SHOWN: usize = 3;

struct Cap {
    product: String,
    price_cents: i64,
    daily_cap: Option<i64>,
    monthly_cap: Option<i64>,
    used_today: i64,
}

#[derive(Default)]
struct Rates {
    sold: i64,
    accepted: i64,
    returned: i64,
}

#[derive(Default)]
struct Endpoint {
    pending: i64,
    failed: i64,
    /// Newest first: (when, event id, error).
    errors: Vec<(i64, String, String)>,
}

/// A buyer as the page shows it.
struct Buyer {
    id: String,
    name: String,
    status: String,
    plan: String,
    balance_cents: i64,
    webhook_url: String,
}

struct BuyerRow {
    buyer: Buyer,
    caps: Vec<Cap>,
    rates: Rates,
    endpoint: Endpoint,
    /// `None` for a buyer created after the read of health (none is missed otherwise:
    /// `health::read` lists every buyer).
    health: Option<BuyerHealth>,
}

pub(crate) async fn get(db: &Db, operator: &Session) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let (zone, rows, users) = db
        .read(move |conn| {
            let users = crate::partners::list_active(conn)?;
            Ok::<_, DbError>((Zone::of(conn)?, load(conn, now)?, users))
        })
        .await?;
    Ok(layout::page(
        StatusCode::OK,
        "Buyers",
        "/buyers",
        operator,
        &zone,
        html! {
            (render(&rows, &zone, operator))
            (portal_users(&users, &zone, operator))
        },
    ))
}

fn load(conn: &Connection, now: i64) -> Result<Vec<BuyerRow>, DbError> {
    let mut all = conn.prepare_cached(
        "SELECT id, name, status, plan, balance_cents, webhook_url FROM buyers
         WHERE archived_at IS NULL ORDER BY created_at, id",
    )?;
    let buyers: Vec<Buyer> = all
        .query_map([], |row| {
            Ok(Buyer {
                id: row.get(0)?,
                name: row.get(1)?,
                status: row.get(2)?,
                plan: row.get(3)?,
                balance_cents: row.get(4)?,
                webhook_url: row.get(5)?,
            })
        })?
        .collect::<Result<_, _>>()?;

    let mut caps: HashMap<String, Vec<Cap>> = HashMap::new();
    let mut subscriptions = conn.prepare_cached(
        "SELECT s.buyer_id, s.product_id, p.slug, s.price_cents, s.daily_cap, s.monthly_cap,
                w.timezone
         FROM subscriptions s
         JOIN products p ON p.id = s.product_id
         JOIN buyers b ON b.id = s.buyer_id
         JOIN workspaces w ON w.id = b.workspace_id
         ORDER BY s.buyer_id, p.slug",
    )?;
    let found = subscriptions.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, i64>(3)?,
            row.get::<_, Option<i64>>(4)?,
            row.get::<_, Option<i64>>(5)?,
            row.get::<_, String>(6)?,
        ))
    })?;
    for found in found {
        let (buyer, product_id, slug, price_cents, daily_cap, monthly_cap, timezone) = found?;
        let tz = jiff::tz::TimeZone::get(&timezone).unwrap_or(jiff::tz::TimeZone::UTC);
        let windows = crate::caps::Windows::at(now, &tz);
        let usage = crate::caps::usage_now(conn, &buyer.as_str().into(), &product_id, &windows)?;
        caps.entry(buyer).or_default().push(Cap {
            product: slug,
            price_cents,
            daily_cap,
            monthly_cap,
            used_today: usage.today,
        });
    }

    // One range of `transactions_buyer_status` per buyer and status: no filter per row and
    // no sort by buyer.
    let mut rates: HashMap<String, Rates> = HashMap::new();
    let since = now - WINDOW_DAYS * 86_400_000;
    let mut per_status = conn.prepare_cached(
        "SELECT count(*) FROM transactions
         WHERE buyer_id = ?1 AND status = ?2 AND created_at >= ?3",
    )?;
    for buyer in &buyers {
        let mut counted = Rates::default();
        for status in Status::ALL {
            let count: i64 =
                per_status.query_row(params![buyer.id, status, since], |row| row.get(0))?;
            counted.sold += count;
            match status {
                Status::Acknowledged | Status::PayoutPending | Status::Paid => {
                    counted.accepted += count;
                }
                Status::Rejected | Status::Cancelled => counted.returned += count,
                // A pending return is neither accepted nor returned until it is decided.
                Status::Delivered | Status::ReturnRequested => {}
            }
        }
        rates.insert(buyer.id.clone(), counted);
    }

    let mut endpoints: HashMap<String, Endpoint> = HashMap::new();
    let mut unsent = conn.prepare_cached(
        "SELECT buyer_id, status, count(*) FROM outbox_events
         WHERE status IN ('pending', 'failed') GROUP BY buyer_id, status",
    )?;
    let found = unsent.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })?;
    for found in found {
        let (buyer, status, count) = found?;
        let endpoint = endpoints.entry(buyer).or_default();
        if status == "failed" {
            endpoint.failed = count;
        } else {
            endpoint.pending = count;
        }
    }
    let mut errors = conn.prepare_cached(
        "SELECT buyer_id, created_at, id, last_error FROM outbox_events
         WHERE status IN ('pending', 'failed') AND last_error IS NOT NULL
         ORDER BY created_at DESC LIMIT 500",
    )?;
    let found = errors.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
        ))
    })?;
    for found in found {
        let (buyer, at, event, error) = found?;
        let endpoint = endpoints.entry(buyer).or_default();
        if endpoint.errors.len() < ERRORS_SHOWN {
            endpoint.errors.push((at, event, error));
        }
    }

    let mut health: HashMap<String, BuyerHealth> = health::read(conn, None, now)?
        .into_iter()
        .map(|h| (h.breaker.buyer_id.to_string(), h))
        .collect();

    Ok(buyers
        .into_iter()
        .map(|buyer| BuyerRow {
            caps: caps.remove(&buyer.id).unwrap_or_default(),
            rates: rates.remove(&buyer.id).unwrap_or_default(),
            endpoint: endpoints.remove(&buyer.id).unwrap_or_default(),
            health: health.remove(&buyer.id),
            buyer,
        })
        .collect())
}

fn render(rows: &[BuyerRow], zone: &Zone, operator: &Session) -> Markup {
    html! {
        @if rows.is_empty() { (layout::none_yet("No buyers yet: leadrelay buyer create adds one.")) }
        div class="scroll" {
            table class="list" id="buyers" {
                thead { tr {
                    th { "Buyer" } th { "Status" } th { "Plan · balance" } th { "Endpoint" }
                    th { "Health" } th { "Caps used today" } th { "Sold (30 d)" } th { "Accepted" }
                    th { "Returned" } th { "Last errors" }
                } }
                tbody {
                    @for row in rows { (buyer_row(row, zone, operator)) }
                }
            }
        }
        p class="note" {
            "Accepted: acknowledged, payout pending or paid. Returned: rejected or cancelled. "
            "Rates over the transactions of the last " (WINDOW_DAYS) " days. "
            "Health: an endpoint is unhealthy after repeated failed attempts (no answer, a "
            "timeout, 408, 429 or 5xx); its events then wait and one probe at a time is sent, "
            "and auto-delivery skips the buyer until an answer comes. In flight and latency "
            "are what the running server last reported ("
            code { "leadrelay buyer health" } " prints the same)."
        }
    }
}

/// The portal users not revoked, buyers' and suppliers', each with its revoke form.
fn portal_users(users: &[PartnerUser], zone: &Zone, operator: &Session) -> Markup {
    html! {
        h2 { "Portal users" }
        @if users.is_empty() {
            (layout::none_yet("No portal users: leadrelay buyer user create adds one."))
        } @else {
            table class="list" id="portal-users" {
                thead { tr { th { "User" } th { "Of" } th { "Created" } th { "Last login" } th {} } }
                tbody {
                    @for user in users {
                        tr id={ "portal-user-" (user.id) } {
                            td { strong { (user.name) } br; span class="id" { (user.id) } }
                            td {
                                @match &user.party {
                                    Party::Buyer(id) => { "buyer " (id) }
                                    Party::Supplier(id) => { "supplier " (id) }
                                }
                            }
                            td { span class="when" { (zone.when(user.created_at)) } }
                            td {
                                @if let Some(at) = user.last_login_at { span class="when" { (zone.when(at)) } }
                            }
                            td {
                                (layout::action_form(operator, &format!("/portal-users/{}/revoke", user.id), "Revoke", html! {}))
                            }
                        }
                    }
                }
            }
        }
    }
}

fn buyer_row(row: &BuyerRow, zone: &Zone, operator: &Session) -> Markup {
    let b = &row.buyer;
    let status = &b.status;
    html! {
        tr class="buyer" id={ "buyer-" (b.id) } {
            td { strong { (b.name) } br; span class="id" { (b.id) } }
            td {
                span class={ "tag " (status) } { (status) }
                @if status == "paused" {
                    (layout::action_form(operator, &format!("/buyers/{}/resume", b.id), "Resume", html! {}))
                } @else {
                    (layout::action_form(operator, &format!("/buyers/{}/pause", b.id), "Pause", html! {}))
                }
            }
            td { (b.plan) " · " (money(b.balance_cents)) }
            td class="endpoint" {
                span class="url" { (b.webhook_url) } br;
                (row.endpoint.pending) " pending · " (row.endpoint.failed) " failed"
            }
            td class="health" {
                @if let Some(h) = &row.health { (health_cell(h, zone)) }
            }
            td {
                @if row.caps.is_empty() { span class="empty" { "no subscriptions" } }
                ul class="caps" {
                    @for cap in &row.caps {
                        li {
                            (cap.product) " at " (money(cap.price_cents)) ": "
                            (cap.used_today)
                            @if let Some(daily) = cap.daily_cap { " / " (daily) } @else { " (no daily cap)" }
                            @if let Some(monthly) = cap.monthly_cap { ", monthly cap " (monthly) }
                        }
                    }
                }
            }
            td { (row.rates.sold) }
            td { (rate(row.rates.accepted, row.rates.sold)) }
            td { (rate(row.rates.returned, row.rates.sold)) }
            td class="errors" {
                @for (at, event, error) in &row.endpoint.errors {
                    div { span class="when" { (zone.when(*at)) } " " (event) ": " (error) }
                }
            }
        }
    }
}

/// The breaker's state (with its failures and next probe when unhealthy), sends in flight,
/// latency and the last error, as `buyer health` has them.
fn health_cell(h: &BuyerHealth, zone: &Zone) -> Markup {
    let b = &h.breaker;
    let state = b.state.as_str();
    html! {
        span class={ "tag " (state) } { (state) }
        @if b.state == State::Unhealthy {
            " " (b.consecutive_failures) " failures in a row"
            @if let Some(since) = b.unhealthy_since { ", since " span class="when" { (zone.when(since)) } }
            @if let Some(probe) = b.next_probe_at { br; "next probe " span class="when" { (zone.when(probe)) } }
        }
        br;
        span class="in-flight" {
            @match h.in_flight {
                Some(n) => { (n) " in flight" }
                None => { "outbox not running" }
            }
        }
        " · "
        span class="latency" {
            @match (h.latency_p50_ms, h.latency_p99_ms) {
                (Some(p50), Some(p99)) => { "p50 " (p50) " ms · p99 " (p99) " ms" }
                _ => { "no latency yet" }
            }
        }
        @if let Some(error) = &b.last_error {
            div class="last-error" {
                "last error"
                @if let Some(at) = b.last_failure_at { " " span class="when" { (zone.when(at)) } }
                ": " (error)
            }
        }
    }
}
