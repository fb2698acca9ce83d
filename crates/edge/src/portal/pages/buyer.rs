//! The buyer's pages (DESIGN.md section 20): overview, leads (search, status, CSV), one lead
//! as delivered with its history and the return form, the account with its monthly
//! statement, and delivery (webhook URL, health, last attempts, pause, resume, test event).
//!
//! Reads go through `leadrelay_core::portal::buyer`, narrowed by the session's buyer; the
//! actions go through `crate::audited` as the CLI's and the console's do (`request_return`
//! as `transaction return request`, `set_buyer_paused` as `buyer pause` and `buyer
//! resume`), each recorded in the audit log as `buyer-user:<id>` in the change's job.

use hyper::StatusCode;
use maud::{Markup, html};
use serde_json::Value;

use leadrelay_core::portal::buyer::{self as read, LeadRow, Me};
use leadrelay_core::portal::{LIST_LIMIT, chosen_month};

use super::super::Portal;
use super::super::layout::{self, csrf_field, money, when};
use super::super::session::Current;
use super::{csv_response, query_value};
use crate::audit::Actor;
use crate::caps::Windows;
use crate::db::{Db, DbError};
use crate::delivery::transaction::Status;
use crate::http::Response;
use crate::http::error::{Error, Form, error_to_http_response};
use crate::report::csv::{Cell, Writer};

/// The buyer and what `read` reads, in one trip.
async fn with_me<T: Send + 'static>(
    db: &Db,
    id: &crate::ids::BuyerId,
    read: impl FnOnce(&rusqlite::Connection, &Me) -> rusqlite::Result<T> + Send + 'static,
) -> Result<Option<(Me, T)>, Error> {
    super::with_party(db, id, read::me, read).await
}

fn gone() -> Response {
    super::super::session::to_login()
}

pub(crate) async fn overview(
    db: &Db,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let Some((me, overview)) = with_me(db, buyer_id, move |conn, me| {
        read::overview(conn, &me.buyer.id, &Windows::at(now, &me.tz))
    })
    .await?
    else {
        return Ok(gone());
    };
    let buyer = &me.buyer;
    let tally = |label: &str, t: &read::Tally| {
        html! {
            tr { th { (label) } td class="num" { (t.received) } td class="num" { (t.returned) }
                 td class="num" { (money(t.spend_cents)) } }
        }
    };
    let body = html! {
        section {
            table class="list" id="figures" {
                thead { tr { th {} th { "Leads received" } th { "Returned" } th { "Spend" } } }
                tbody { (tally("Today", &overview.today)) (tally("This month", &overview.month)) }
            }
        }
        section {
            h2 { "Account" }
            dl {
                dt { "Balance" } dd id="balance" { (money(buyer.balance_cents)) }
                dt { "Credit limit" } dd { (money(buyer.credit_limit_cents)) }
                dt { "Deliveries" } dd { @if buyer.paused { "paused" } @else { "active" } }
            }
        }
        section {
            h2 { "Caps" }
            table class="list" id="caps" {
                thead { tr { th { "Product" } th { "Today" } th { "Daily cap" } th { "This month" } th { "Monthly cap" } } }
                tbody {
                    @for cap in &overview.caps {
                        tr {
                            td { (cap.product_name) }
                            td class="num" { (cap.day_used) }
                            td class="num" { (cap.daily_cap.map(|c| c.to_string()).unwrap_or_else(|| "none".into())) }
                            td class="num" { (cap.month_used) }
                            td class="num" { (cap.monthly_cap.map(|c| c.to_string()).unwrap_or_else(|| "none".into())) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout::page(
        StatusCode::OK,
        "Overview",
        "/",
        current,
        &me.tz,
        body,
    ))
}

/// `q` and `status` of a leads query; an unknown status is no status.
fn lead_filters(query: &str) -> (String, Option<Status>) {
    let q = query_value(query, "q").unwrap_or_default();
    let status = query_value(query, "status").and_then(|s| Status::parse(&s));
    (q, status)
}

async fn find_leads(
    db: &Db,
    buyer_id: &crate::ids::BuyerId,
    query: &str,
) -> Result<Option<(Me, (String, Option<Status>, Vec<LeadRow>))>, Error> {
    let (q, status) = lead_filters(query);
    with_me(db, buyer_id, move |conn, me| {
        let rows = read::leads(conn, &me.buyer.id, &q, status, LIST_LIMIT)?;
        Ok((q, status, rows))
    })
    .await
}

pub(crate) async fn leads(
    db: &Db,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
    query: &str,
) -> Result<Response, Error> {
    let Some((me, (q, status, rows))) = find_leads(db, buyer_id, query).await? else {
        return Ok(gone());
    };
    let csv_link = format!(
        "/leads.csv?{}",
        form_urlencoded::Serializer::new(String::new())
            .append_pair("q", &q)
            .append_pair("status", status.map(|s| s.as_str()).unwrap_or(""))
            .finish()
    );
    let body = html! {
        form class="search" method="get" action="/leads" role="search" {
            label for="q" { "Name, email, phone or transaction id" }
            input id="q" name="q" type="search" value=(q) autocomplete="off";
            label for="status" { "Status" }
            select id="status" name="status" {
                option value="" { "any" }
                @for s in Status::ALL {
                    option value=(s.as_str()) selected[status == Some(*s)] { (s.as_str()) }
                }
            }
            button type="submit" { "Search" }
        }
        p class="note" {
            "The newest " (LIST_LIMIT) " at most; a name is looked for among your newest "
            (read::NAME_SEARCH_WINDOW) " transactions. " a href=(csv_link) { "Download CSV" }
        }
        div class="scroll" {
            table class="list" id="leads" {
                thead { tr { th { "Transaction" } th { "Received" } th { "Name" } th { "Email" }
                    th { "Phone" } th { "Product" } th { "Price" } th { "Status" } } }
                tbody {
                    @for row in &rows {
                        tr class=[row.erased_at.map(|_| "erased")] {
                            td { a href={ "/leads/" (row.transaction_id) } { (row.transaction_id) } }
                            td { (when(&me.tz, row.created_at)) }
                            @if let Some(erased_at) = row.erased_at {
                                td colspan="3" class="erased" { "Erased " (when(&me.tz, erased_at)) }
                            } @else {
                                td { (row.first_name) " " (row.last_name) }
                                td { (row.email.as_deref().unwrap_or("")) }
                                td { (row.phone.as_deref().unwrap_or("")) }
                            }
                            td { (row.product_name) }
                            td class="num" { (money(row.buyer_price_cents)) }
                            td { (row.status.as_str()) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout::page(
        StatusCode::OK,
        "Leads",
        "/leads",
        current,
        &me.tz,
        body,
    ))
}

pub(crate) async fn leads_csv(
    db: &Db,
    buyer_id: &crate::ids::BuyerId,
    query: &str,
) -> Result<Response, Error> {
    let Some((me, (_, _, rows))) = find_leads(db, buyer_id, query).await? else {
        return Ok(gone());
    };
    let mut out = Writer::new(Vec::new());
    let write = |out: &mut Writer<Vec<u8>>| -> csv::Result<()> {
        out.header([
            "transactionId",
            "receivedAt",
            "firstName",
            "lastName",
            "email",
            "phone",
            "product",
            "buyerPrice",
            "status",
            "erasedAt",
        ])?;
        for row in &rows {
            let erased = row.erased_at.is_some();
            out.record([
                Cell::text(row.transaction_id.as_str()),
                Cell::text(crate::clock::iso(row.created_at)),
                Cell::text(if erased { "" } else { row.first_name.as_str() }),
                Cell::text(if erased { "" } else { row.last_name.as_str() }),
                Cell::text(if erased {
                    ""
                } else {
                    row.email.as_deref().unwrap_or("")
                }),
                Cell::text(if erased {
                    ""
                } else {
                    row.phone.as_deref().unwrap_or("")
                }),
                Cell::text(row.product_name.as_str()),
                Cell::number(money(row.buyer_price_cents)),
                Cell::text(row.status.as_str()),
                Cell::text(row.erased_at.map(crate::clock::iso).unwrap_or_default()),
            ])?;
        }
        Ok(())
    };
    write(&mut out).expect("writing CSV into memory cannot fail");
    let _ = me;
    Ok(csv_response(out, "leads.csv"))
}

/// A JSON value as one line of text.
fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A JSON object as a definition list, nested objects as nested lists.
fn fields(value: &Value) -> Markup {
    html! {
        @if let Value::Object(map) = value {
            dl {
                @for (key, value) in map {
                    dt { (key) }
                    dd { @if value.is_object() { (fields(value)) } @else { (text(value)) } }
                }
            }
        } @else {
            p { (text(value)) }
        }
    }
}

pub(crate) async fn lead(
    db: &Db,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
    id: String,
    notice: Option<Markup>,
) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let Some((me, found)) = with_me(db, buyer_id, move |conn, me| {
        read::lead(conn, &me.buyer, &id, now)
    })
    .await?
    else {
        return Ok(gone());
    };
    let Some(page) = found else {
        return Ok(layout::not_found(current, &me.tz, "/leads"));
    };
    let t = &page.transaction;
    let body = html! {
        @if let Some(notice) = notice { (notice) }
        dl id="transaction" {
            dt { "Transaction" } dd { (t.id) }
            dt { "Received" } dd { (when(&me.tz, t.created_at)) }
            dt { "Product" } dd { (page.product_name) }
            dt { "Price" } dd { (money(t.buyer_price_cents)) }
            dt { "Status" } dd id="status" { (t.status.as_str()) }
        }
        section id="delivered" {
            h2 { "The lead as delivered" }
            @if let Some(erased_at) = page.erased_at {
                p class="erased" { "Erased " (when(&me.tz, erased_at)) ": the person's data was removed." }
            } @else if let Some(delivered) = &page.delivered {
                h3 { "Lead" } (fields(&delivered.lead))
                h3 { "Answers" } (fields(&delivered.field_values))
                h3 { "Product" } (fields(&delivered.product))
                h3 { "Price" } p { (text(&delivered.buyer_price)) }
            } @else {
                p class="empty" { "The delivery is not written yet." }
            }
        }
        section {
            h2 { "History" }
            table class="list" id="history" {
                thead { tr { th { "At" } th { "From" } th { "To" } th { "Reason" } } }
                tbody {
                    @for entry in &page.history {
                        tr {
                            td { (when(&me.tz, entry.at)) }
                            td { (entry.from.map(|s| s.as_str()).unwrap_or("")) }
                            td { (entry.to.as_str()) }
                            td { (entry.reason.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
        section id="return" {
            h2 { "Return" }
            @if let Some(filed) = &page.filed {
                p { "Return " (filed.status.as_str()) " (" (filed.reason_code) "), requested "
                    (when(&me.tz, filed.requested_at)) "." }
                @if let Some(note) = &filed.note { p { "Note: " (note) } }
            } @else if page.may_return {
                form method="post" action={ "/leads/" (t.id) "/return" } {
                    (csrf_field(current))
                    label for="reasonCode" { "Reason" }
                    select id="reasonCode" name="reasonCode" required {
                        @for reason in &page.reasons {
                            option value=(reason.code) { (reason.label) }
                        }
                    }
                    label for="note" { "Note" }
                    textarea id="note" name="note" maxlength="1000" {}
                    button type="submit" { "Return this lead" }
                }
            } @else {
                p { "This lead can no longer be returned." }
            }
        }
    };
    let title = format!("Lead {}", t.id);
    Ok(layout::page(
        StatusCode::OK,
        &title,
        "/leads",
        current,
        &me.tz,
        body,
    ))
}

/// `POST /leads/{transactionId}/return`: files the return through
/// `audited::request_return` (section 19's rules, and the audit entry) and shows the lead with the outcome;
/// a refusal is shown as the error page with its status.
pub(crate) async fn file_return(
    portal: &Portal,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
    id: String,
    form: &crate::web::Form,
) -> Result<Response, Error> {
    let pick = |name: &str| {
        form.get(name)
            .filter(|value| !value.is_empty())
            .map(str::to_string)
    };
    let reason_code = pick("reasonCode").unwrap_or_default();
    let note: Option<String> = pick("note").map(|n| n.chars().take(1000).collect());
    let (owner, txn) = (buyer_id.clone(), id.clone());
    let owned = portal
        .db
        .read(move |conn| Ok::<_, DbError>(read::owns(conn, &owner, &txn)?))
        .await?;
    if !owned {
        // The same page as any id that is not this buyer's.
        return lead(&portal.db, current, buyer_id, id, None).await;
    }
    let history_actor = format!("portal:{}", current.session.user_id);
    let actor = Actor::BuyerUser(current.session.user_id.clone());
    let (txn, now) = (
        crate::ids::TransactionId::from(id.as_str()),
        crate::clock::now_ms(),
    );
    let filed = portal
        .db
        .write(move |conn| {
            crate::audited::request_return(
                conn,
                &actor,
                &history_actor,
                &txn,
                &reason_code,
                note.as_deref(),
                now,
            )
        })
        .await;
    match filed {
        Ok(filed) => {
            let shown = filed.to_json();
            let outcome = if shown["alreadyApplied"] == true {
                "This lead was returned already."
            } else if shown["outcome"] == "pending_review" {
                "Your return was filed and waits for review."
            } else {
                "Your return was accepted: the lead is cancelled."
            };
            let notice = html! { p class="notice" role="status" { (outcome) } };
            lead(&portal.db, current, buyer_id, id, Some(notice)).await
        }
        Err(e) => Ok(error_to_http_response(e.into(), Form::Html)),
    }
}

pub(crate) async fn account(
    db: &Db,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
    query: &str,
) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let month = query_value(query, "month");
    let Some((me, (month, entries))) = with_me(db, buyer_id, move |conn, me| {
        let (month, range) = chosen_month(month.as_deref(), now, &me.tz);
        Ok((month, read::ledger(conn, &me.buyer.id, range)?))
    })
    .await?
    else {
        return Ok(gone());
    };
    let buyer = &me.buyer;
    let body = html! {
        dl {
            dt { "Balance" } dd id="balance" { (money(buyer.balance_cents)) }
            dt { "Credit limit" } dd { (money(buyer.credit_limit_cents)) }
            dt { "Plan" } dd { (buyer.plan.as_str()) }
        }
        h2 { "Ledger of " (month) }
        form class="search" method="get" action="/account" {
            label for="month" { "Month" }
            input id="month" name="month" type="month" value=(month);
            button type="submit" { "Show" }
        }
        p { a href={ "/statement.csv?month=" (month) } { "Statement (CSV)" } }
        (ledger_table(&entries, &me.tz))
    };
    Ok(layout::page(
        StatusCode::OK,
        "Account",
        "/account",
        current,
        &me.tz,
        body,
    ))
}

pub(super) fn ledger_table(
    entries: &[crate::ledger::query::Entry],
    tz: &jiff::tz::TimeZone,
) -> Markup {
    html! {
        table class="list" id="ledger" {
            thead { tr { th { "At" } th { "Kind" } th { "Transaction" } th { "Amount" } th { "Reason" } } }
            tbody {
                @for entry in entries {
                    tr {
                        td { (when(tz, entry.at)) }
                        td { (entry.kind.as_str()) }
                        td { (entry.transaction_id.as_ref().map_or("", |id| id.as_str())) }
                        td class="num" { (money(entry.amount_cents)) }
                        td { (entry.reason.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    }
}

/// `/statement.csv?month=YYYY-MM` (this month without one): the month's ledger rows.
pub(crate) async fn statement_csv(
    db: &Db,
    buyer_id: &crate::ids::BuyerId,
    query: &str,
) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let month = query_value(query, "month");
    let Some((_, entries)) = with_me(db, buyer_id, move |conn, me| {
        let (_, range) = chosen_month(month.as_deref(), now, &me.tz);
        read::ledger(conn, &me.buyer.id, range)
    })
    .await?
    else {
        return Ok(gone());
    };
    Ok(super::statement(&entries))
}

pub(crate) async fn delivery(
    portal: &Portal,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
    notice: Option<Markup>,
) -> Result<Response, Error> {
    let Some((me, (health, attempts))) = with_me(&portal.db, buyer_id, move |conn, me| {
        Ok((
            read::health(conn, &me.buyer.id)?,
            read::attempts(conn, &me.buyer.id, 50)?,
        ))
    })
    .await?
    else {
        return Ok(gone());
    };
    let buyer = &me.buyer;
    let body = html! {
        @if let Some(notice) = notice { (notice) }
        dl {
            dt { "Webhook URL" } dd id="webhook" { (buyer.webhook_url) }
            dt { "Deliveries" } dd id="paused" { @if buyer.paused { "paused" } @else { "active" } }
            dt { "Endpoint" } dd id="health" { (health.state.as_str()) }
            dt { "Failures in a row" } dd { (health.consecutive_failures) }
            dt { "Last success" } dd { (health.last_success_at.map(|at| when(&me.tz, at)).unwrap_or_default()) }
            dt { "Last error" } dd { (health.last_error.as_deref().unwrap_or("")) }
        }
        div class="actions" {
            @if buyer.paused {
                form method="post" action="/delivery/resume" {
                    (csrf_field(current)) button type="submit" { "Resume deliveries" }
                }
            } @else {
                form method="post" action="/delivery/pause" {
                    (csrf_field(current)) button type="submit" { "Pause deliveries" }
                }
            }
            form method="post" action="/delivery/test" {
                (csrf_field(current)) button type="submit" { "Send a test event" }
            }
        }
        h2 { "The last 50 attempts" }
        div class="scroll" {
            table class="list" id="attempts" {
                thead { tr { th { "At" } th { "Event" } th { "Transaction" } th { "Status" }
                    th { "Latency" } th { "Outcome" } th { "Error" } } }
                tbody {
                    @for a in &attempts {
                        tr {
                            td { (when(&me.tz, a.started_at)) }
                            td { (a.kind) }
                            td { @if let Some(t) = &a.transaction_id { a href={ "/leads/" (t) } { (t) } } }
                            td class="num" { (a.http_status.map(|s| s.to_string()).unwrap_or_default()) }
                            td class="num" { (a.duration_ms) " ms" }
                            td { (a.outcome) }
                            td { (a.error.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout::page(
        StatusCode::OK,
        "Delivery",
        "/delivery",
        current,
        &me.tz,
        body,
    ))
}

/// `POST /delivery/pause` and `/delivery/resume`: `audited::set_buyer_paused` (recorded as
/// the signed-in user), then 303 to the delivery page.
pub(crate) async fn set_paused(
    portal: &Portal,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
    paused: bool,
) -> Result<Response, Error> {
    let actor = Actor::BuyerUser(current.session.user_id.clone());
    let (id, now) = (buyer_id.clone(), crate::clock::now_ms());
    let changed = crate::audited::set_buyer_paused_job(&portal.db, actor, id, paused, now).await;
    if let Err(e) = changed {
        log::warn!("portal: pausing buyer {buyer_id}: {e}");
        return Ok(error_to_http_response(
            DbError::Io(std::io::Error::other(e.to_string())).into(),
            Form::Html,
        ));
    }
    Ok(super::super::session::see_other("/delivery".to_string()))
}

/// `POST /delivery/test`: sends a signed `lead.test` to the buyer's webhook URL and shows
/// the answer on the delivery page.
pub(crate) async fn send_test(
    portal: &Portal,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
) -> Result<Response, Error> {
    let id = buyer_id.clone();
    let buyer = portal
        .db
        .read(move |conn| Ok::<_, DbError>(crate::config::buyer::find(conn, &id)?))
        .await?;
    let Some(buyer) = buyer else {
        return Ok(gone());
    };
    let answer = crate::outbox::test_event::send(
        &buyer.id,
        &buyer.webhook_url,
        &buyer.signing_secret,
        portal.config.reach,
    )
    .await;
    let notice = html! {
        section class="notice" id="test-answer" role="status" {
            h2 { "Test event" }
            @if let Some(status) = answer.http_status {
                p { "Your endpoint answered HTTP " (status) " in " (answer.duration_ms) " ms." }
                @if !answer.excerpt.is_empty() { pre { (answer.excerpt) } }
            } @else {
                p { "Not delivered: " (answer.error.as_deref().unwrap_or("")) }
            }
        }
    };
    delivery(portal, current, buyer_id, Some(notice)).await
}
