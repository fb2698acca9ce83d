//! `/outbox`: the webhook events not delivered yet (pending, with their next attempt) and
//! those that failed for good, each with its last error, newest first. Reads the
//! `outbox_status_created` index.

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::Connection;

use crate::console::layout::{self, Zone};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;

/// Most events listed per status.
const LIMIT: i64 = 200;

struct EventRow {
    id: crate::ids::EventId,
    buyer_id: crate::ids::BuyerId,
    lead_id: Option<crate::ids::LeadId>,
    attempts: i64,
    next_attempt_at: i64,
    last_error: Option<String>,
    created_at: i64,
}

struct OutboxPage {
    figures: crate::outbox::store::Figures,
    pending: Vec<EventRow>,
    failed: Vec<EventRow>,
}

pub(crate) async fn get(db: &Db, operator: &Session) -> Result<Response, Error> {
    let (zone, page) = db
        .read(|conn| Ok::<_, DbError>((Zone::of(conn)?, load(conn)?)))
        .await?;
    let body = html! {
        p class="note" id="outbox-counts" {
            (page.figures.pending) " pending, " (page.figures.failed) " failed. "
            "Retry with the button, or " code { "leadrelay outbox retry ID" } "."
        }
        h2 { "Pending" }
        (table("pending", &page.pending, &zone, None))
        h2 { "Failed" }
        (table("failed", &page.failed, &zone, Some(operator)))
    };
    Ok(layout::page(
        StatusCode::OK,
        "Outbox",
        "/outbox",
        operator,
        &zone,
        body,
    ))
}

fn load(conn: &Connection) -> Result<OutboxPage, DbError> {
    // The limit is written into the statement, not bound: SQLite plans a bound LIMIT by
    // its value, so a cached statement with one is compiled again on every run.
    let mut statement = conn.prepare_cached(&format!(
        "SELECT e.id, e.buyer_id, t.lead_id, e.attempts, e.next_attempt_at, e.last_error,
                e.created_at
         FROM outbox_events e LEFT JOIN transactions t ON t.id = e.transaction_id
         WHERE e.status = ?1 ORDER BY e.created_at DESC LIMIT {LIMIT}"
    ))?;
    let mut of = |status: &str| -> rusqlite::Result<Vec<EventRow>> {
        statement
            .query_map([status], |row| {
                Ok(EventRow {
                    id: row.get(0)?,
                    buyer_id: row.get(1)?,
                    lead_id: row.get(2)?,
                    attempts: row.get(3)?,
                    next_attempt_at: row.get(4)?,
                    last_error: row.get(5)?,
                    created_at: row.get(6)?,
                })
            })?
            .collect()
    };
    let pending = of("pending")?;
    let failed = of("failed")?;
    Ok(OutboxPage {
        figures: crate::outbox::store::figures(conn)?,
        pending,
        failed,
    })
}

/// The events of one status; failed ones (`retry` given) each with a retry button.
fn table(id: &str, rows: &[EventRow], zone: &Zone, retry: Option<&Session>) -> Markup {
    let pending = retry.is_none();
    html! {
        @if rows.is_empty() {
            (layout::none_yet("None."))
        } @else {
            div class="scroll" {
                table class="list" id=(id) {
                    thead { tr {
                        th { "Event" } th { "Buyer" } th { "Lead" } th { "Created" }
                        th { "Attempts" }
                        @if pending { th { "Next attempt" } }
                        th { "Last error" }
                        @if !pending { th { "Retry" } }
                    } }
                    tbody {
                        @for row in rows {
                            tr {
                                td { (row.id) }
                                td { (row.buyer_id) }
                                td {
                                    @if let Some(lead) = &row.lead_id {
                                        a href={ "/leads/" (lead) } { (lead) }
                                    }
                                }
                                td { (zone.when(row.created_at)) }
                                td { (row.attempts) }
                                @if pending { td { (zone.when(row.next_attempt_at)) } }
                                td class="excerpt" { (row.last_error.as_deref().unwrap_or("")) }
                                @if let Some(operator) = retry {
                                    td { (layout::action_form(operator, &format!("/outbox/{}/retry", row.id), "Retry", html! {})) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
