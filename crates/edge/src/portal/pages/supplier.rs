//! The supplier's pages (DESIGN.md section 20): overview, leads (outcome, quality and
//! reasons, sold, returned), one lead, payouts with the monthly statement, and sources.
//! Reads go through `leadrelay_core::portal::supplier`, narrowed by the session's supplier;
//! nothing here can show a buyer, a buyer price or a score (the read model has none).

use hyper::StatusCode;
use maud::html;

use leadrelay_core::portal::supplier::{self as read, Me};
use leadrelay_core::portal::{LIST_LIMIT, chosen_month};

use super::super::layout::{self, money, when};
use super::super::session::Current;
use super::buyer::ledger_table;
use super::query_value;
use crate::caps::Windows;
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;
use crate::ids::SupplierId;

/// The supplier and what `read` reads, in one trip.
async fn with_me<T: Send + 'static>(
    db: &Db,
    id: &SupplierId,
    read: impl FnOnce(&rusqlite::Connection, &Me) -> rusqlite::Result<T> + Send + 'static,
) -> Result<Option<(Me, T)>, Error> {
    super::with_party(db, id, read::me, read).await
}

fn gone() -> Response {
    super::super::session::to_login()
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

pub(crate) async fn overview(
    db: &Db,
    current: &Current,
    supplier_id: &SupplierId,
) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let Some((me, overview)) = with_me(db, supplier_id, move |conn, me| {
        read::overview(conn, &me.supplier_id, &Windows::at(now, &me.tz))
    })
    .await?
    else {
        return Ok(gone());
    };
    let row = |label: &str, t: &read::Tally| {
        html! {
            tr {
                th { (label) }
                td class="num" { (t.sent) } td class="num" { (t.accepted) }
                td class="num" { (t.duplicates) } td class="num" { (t.rejected) }
                td class="num" { (t.sold) } td class="num" { (t.returned) }
            }
        }
    };
    let body = html! {
        table class="list" id="figures" {
            thead { tr { th {} th { "Sent" } th { "Accepted" } th { "Duplicates" } th { "Rejected" }
                th { "Sold" } th { "Returned" } } }
            tbody { (row("Today", &overview.today)) (row("This month", &overview.month)) }
        }
        dl {
            dt { "Amount owed to you" } dd id="owed" { (money(overview.owed_cents)) }
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

pub(crate) async fn leads(
    db: &Db,
    current: &Current,
    supplier_id: &SupplierId,
) -> Result<Response, Error> {
    let Some((me, rows)) = with_me(db, supplier_id, move |conn, me| {
        read::leads(conn, &me.supplier_id, LIST_LIMIT)
    })
    .await?
    else {
        return Ok(gone());
    };
    let body = html! {
        p class="note" { "Your newest " (LIST_LIMIT) " leads at most." }
        div class="scroll" {
            table class="list" id="leads" {
                thead { tr { th { "Lead" } th { "Received" } th { "Source" } th { "External id" }
                    th { "Name" } th { "Outcome" } th { "Quality" } th { "Reasons" } th { "Sold" }
                    th { "Returned" } } }
                tbody {
                    @for row in &rows {
                        tr class=[row.erased_at.map(|_| "erased")] {
                            td { a href={ "/leads/" (row.id) } { (row.id) } }
                            td { (when(&me.tz, row.created_at)) }
                            td { (row.source_id) }
                            td { (row.external_id.as_deref().unwrap_or("")) }
                            @if let Some(erased_at) = row.erased_at {
                                td class="erased" { "Erased " (when(&me.tz, erased_at)) }
                            } @else {
                                td { (row.name) }
                            }
                            td { (row.outcome.as_str()) }
                            td { (row.quality) }
                            td { (row.quality_reasons.join(", ")) }
                            td { (yes_no(row.sold)) }
                            td { (yes_no(row.returned)) }
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

pub(crate) async fn lead(
    db: &Db,
    current: &Current,
    supplier_id: &SupplierId,
    id: String,
) -> Result<Response, Error> {
    let Some((me, found)) = with_me(db, supplier_id, move |conn, me| {
        // Text that is not one of our lead ids names no lead.
        match crate::ids::LeadId::parse(&id) {
            Some(id) => read::lead(conn, &me.supplier_id, id),
            None => Ok(None),
        }
    })
    .await?
    else {
        return Ok(gone());
    };
    let Some(page) = found else {
        return Ok(layout::not_found(current, &me.tz, "/leads"));
    };
    let row = &page.row;
    let body = html! {
        dl id="lead" {
            dt { "Received" } dd { (when(&me.tz, row.created_at)) }
            dt { "Source" } dd { (row.source_id) }
            dt { "External id" } dd { (row.external_id.as_deref().unwrap_or("")) }
            dt { "Outcome" } dd id="outcome" { (row.outcome.as_str()) }
            dt { "Quality" } dd { (row.quality) }
            dt { "Reasons" } dd { (row.quality_reasons.join(", ")) }
            dt { "Duplicate check" } dd { (page.duplicate_status) }
            dt { "Status" } dd { (page.status) }
            dt { "Sold" } dd id="sold" { (yes_no(row.sold)) }
            dt { "Returned" } dd id="returned" { (yes_no(row.returned)) }
        }
        section id="person" {
            h2 { "As you sent it" }
            @if let Some(erased_at) = row.erased_at {
                p class="erased" { "Erased " (when(&me.tz, erased_at)) ": the person's data was removed." }
            } @else {
                dl {
                    @for (key, value) in &page.person {
                        dt { (key) } dd { (value.as_deref().unwrap_or("")) }
                    }
                }
                @for (product, answers) in &page.interests {
                    h3 { (product) }
                    dl {
                        @for (key, value) in answers {
                            dt { (key) }
                            dd { (value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string())) }
                        }
                    }
                }
            }
        }
    };
    let title = format!("Lead {}", row.id);
    Ok(layout::page(
        StatusCode::OK,
        &title,
        "/leads",
        current,
        &me.tz,
        body,
    ))
}

pub(crate) async fn payouts(
    db: &Db,
    current: &Current,
    supplier_id: &SupplierId,
    query: &str,
) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let month = query_value(query, "month");
    let Some((me, (month, entries))) = with_me(db, supplier_id, move |conn, me| {
        let (month, range) = chosen_month(month.as_deref(), now, &me.tz);
        Ok((month, read::payouts(conn, &me.supplier_id, range)?))
    })
    .await?
    else {
        return Ok(gone());
    };
    let total: i64 = entries.iter().map(|e| e.amount_cents).sum();
    let body = html! {
        form class="search" method="get" action="/payouts" {
            label for="month" { "Month" }
            input id="month" name="month" type="month" value=(month);
            button type="submit" { "Show" }
        }
        p { "Total of " (month) ": " span id="total" { (money(total)) } " · "
            a href={ "/statement.csv?month=" (month) } { "Statement (CSV)" } }
        (ledger_table(&entries, &me.tz))
    };
    Ok(layout::page(
        StatusCode::OK,
        "Payouts",
        "/payouts",
        current,
        &me.tz,
        body,
    ))
}

pub(crate) async fn statement_csv(
    db: &Db,
    supplier_id: &SupplierId,
    query: &str,
) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let month = query_value(query, "month");
    let Some((_, entries)) = with_me(db, supplier_id, move |conn, me| {
        let (_, range) = chosen_month(month.as_deref(), now, &me.tz);
        read::payouts(conn, &me.supplier_id, range)
    })
    .await?
    else {
        return Ok(gone());
    };
    Ok(super::statement(&entries))
}

pub(crate) async fn sources(
    db: &Db,
    current: &Current,
    supplier_id: &SupplierId,
) -> Result<Response, Error> {
    let Some((me, rows)) = with_me(db, supplier_id, move |conn, me| {
        read::sources(conn, &me.supplier_id)
    })
    .await?
    else {
        return Ok(gone());
    };
    let body = html! {
        table class="list" id="sources" {
            thead { tr { th { "Source (posting instructions)" } th { "Name" } th { "State" } th { "Secret" } th { "Format" } } }
            tbody {
                @for row in &rows {
                    tr {
                        td { a href={ "/sources/" (row.id) "/docs" } { (row.id) } }
                        td { (row.name) }
                        td { @if row.archived { "archived" } @else if row.enabled { "enabled" } @else { "disabled" } }
                        td { @if row.has_secret { "required" } @else { "none" } }
                        td { @if row.mapped { "your own JSON (mapped)" } @else { "native" } }
                    }
                }
            }
        }
    };
    Ok(layout::page(
        StatusCode::OK,
        "Sources",
        "/sources",
        current,
        &me.tz,
        body,
    ))
}

/// Source `id`'s posting instructions (`posting::markup`), or `None` when there is no such
/// source. A configuration error other than a missing record is logged and shown as none.
fn instructions(
    conn: &rusqlite::Connection,
    id: &crate::ids::SourceId,
    base_url: &str,
) -> Result<Option<maud::Markup>, DbError> {
    match crate::posting::markup(conn, id, base_url) {
        Ok(markup) => Ok(Some(markup)),
        Err(crate::config::ConfigError::Db(e)) => Err(e),
        Err(crate::config::ConfigError::NotFound { .. }) => Ok(None),
        Err(e) => {
            log::warn!("portal: posting instructions of source {id}: {e}");
            Ok(None)
        }
    }
}

/// `/sources/{sourceId}/docs`: the posting instructions of one of the supplier's sources
/// (another supplier's source answers as one that does not exist).
pub(crate) async fn source_docs(
    portal: &super::super::Portal,
    current: &Current,
    supplier_id: &SupplierId,
    id: String,
) -> Result<Response, Error> {
    let base_url = portal.config.api_url.clone();
    let supplier = supplier_id.clone();
    let id = crate::ids::SourceId::from(id);
    let found = portal
        .db
        .read(move |conn| {
            let Some(me) = read::me(conn, &supplier)? else {
                return Ok::<_, DbError>(None);
            };
            let docs = if read::owns_source(conn, &supplier, &id)? {
                instructions(conn, &id, &base_url)?
            } else {
                None
            };
            Ok(Some((me, id, docs)))
        })
        .await?;
    let Some((me, id, docs)) = found else {
        return Ok(gone());
    };
    let Some(docs) = docs else {
        return Ok(layout::not_found(current, &me.tz, "/sources"));
    };
    let title = format!("Posting instructions: {id}");
    Ok(layout::page(
        StatusCode::OK,
        &title,
        "/sources",
        current,
        &me.tz,
        docs,
    ))
}

/// `/docs/{token}`: a shared link to a source's posting instructions, without login, until
/// `source docs --unshare` (an unknown or withdrawn token is 404).
pub(crate) async fn shared_docs(
    portal: &super::super::Portal,
    token: String,
) -> Result<Response, Error> {
    let base_url = portal.config.api_url.clone();
    let page = portal
        .db
        .read(move |conn| {
            let Some(source_id) = crate::config::source::shared_source(conn, &token)? else {
                return Ok::<_, DbError>(None);
            };
            match crate::posting::render(conn, &source_id, crate::posting::Format::Html, &base_url)
            {
                Ok(page) => Ok(Some(page)),
                Err(crate::config::ConfigError::Db(e)) => Err(e),
                Err(_) => Ok(None),
            }
        })
        .await?;
    match page {
        Some(page) => Ok(crate::http::response::html(StatusCode::OK, page)),
        None => Err(crate::http::error::HttpError::NoSuchPath {
            path: "/docs/…".to_string(),
        }
        .into()),
    }
}
