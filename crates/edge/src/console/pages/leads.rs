//! `/leads?q=`: find leads by lead id (or a request's or transaction's id), email, phone
//! or external id; without `q`, the newest leads.
//!
//! Email and phone are normalised as the duplicate rule normalises them
//! (`ingest::normalize`), so `  Ana@Example.COM ` and `+49 (30) 123-4567` find what was
//! stored. Every branch is an index lookup: the primary keys, `leads_email` and
//! `leads_phone` (by the key's hash, through `ingest::view`), and `leads_source_external`
//! once per source for an external id.

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::{Connection, params};

use crate::console::layout::{self, Zone};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;

/// Most leads one page lists.
const LIMIT: i64 = 100;

/// A lead as the list shows it.
pub(super) struct Row {
    pub id: crate::ids::LeadId,
    pub created_at: i64,
    pub name: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub source_id: crate::ids::SourceId,
    pub external_id: Option<String>,
    pub quality: String,
    pub duplicate: String,
    pub status: String,
    /// When the person was erased (or the lead purged): the row says so instead of
    /// showing the blanks the erasure left.
    pub erased_at: Option<i64>,
}

const COLUMNS: &str = "id, created_at, first_name || ' ' || last_name, email, phone, source_id, \
                       external_id, quality_status, duplicate_status, status, erased_at";

fn from_row(row: &rusqlite::Row) -> rusqlite::Result<Row> {
    Ok(Row {
        id: row.get(0)?,
        created_at: row.get(1)?,
        name: row.get(2)?,
        email: row.get(3)?,
        phone: row.get(4)?,
        source_id: row.get(5)?,
        external_id: row.get(6)?,
        quality: row.get(7)?,
        duplicate: row.get(8)?,
        status: row.get(9)?,
        erased_at: row.get(10)?,
    })
}

pub(crate) async fn get(db: &Db, operator: &Session, query: &str) -> Result<Response, Error> {
    let q = form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "q")
        .map(|(_, value)| value.trim().to_string())
        .unwrap_or_default();
    let search = q.clone();
    let (zone, rows) = db
        .read(move |conn| Ok::<_, DbError>((Zone::of(conn)?, find(conn, &search)?)))
        .await?;
    let body = html! {
        form class="search" method="get" action="/leads" role="search" {
            label for="q" { "Lead id, email, phone or external id" }
            input id="q" name="q" type="search" value=(q) autocomplete="off";
            button type="submit" { "Search" }
        }
        @if q.is_empty() {
            p class="note" { "The newest " (LIMIT) " leads." }
        } @else {
            p class="note" { (rows.len()) " found for “" (q) "”." }
        }
        (table(&rows, &zone))
    };
    Ok(layout::page(
        StatusCode::OK,
        "Leads",
        "/leads",
        operator,
        &zone,
        body,
    ))
}

/// The leads `q` names, newest first; the newest leads for an empty `q`. The limit is
/// written into the statements, not bound: SQLite plans a bound LIMIT by its value, so a
/// cached statement with one is compiled again on every run.
fn find(conn: &Connection, q: &str) -> rusqlite::Result<Vec<Row>> {
    if q.is_empty() {
        let mut statement = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM leads ORDER BY created_at DESC LIMIT {LIMIT}"
        ))?;
        return statement.query_map([], from_row)?.collect();
    }
    // By email or phone: the leads whose stored contact has the key (found by the key's
    // hash on `leads_email` / `leads_phone`, each confirmed), as a JSON array of their
    // stored ids: the 16 bytes in hex.
    let mut contacts = Vec::new();
    if let Some(key) = crate::ingest::normalize::email_key(q) {
        contacts.extend(crate::ingest::view::with_email(conn, &key, LIMIT as usize)?);
    }
    if let Some(key) = crate::ingest::normalize::phone_key(q) {
        contacts.extend(crate::ingest::view::with_phone(conn, &key, LIMIT as usize)?);
    }
    let blobs: Vec<String> = contacts
        .iter()
        .map(|id| id.to_bytes().iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    let blobs = serde_json::Value::from(blobs).to_string();
    // `source_id IN (SELECT id FROM sources)` lets SQLite use the (source, external id)
    // index once per source instead of scanning every lead.
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM leads WHERE id IN (
             SELECT ?2
             UNION SELECT lead_id FROM lead_requests WHERE id = ?3
             UNION SELECT lead_id FROM transactions WHERE id = ?1
             UNION SELECT unhex(value) FROM json_each(?4)
             UNION SELECT id FROM leads
                   WHERE source_id IN (SELECT id FROM sources) AND external_id = ?1)
         ORDER BY created_at DESC LIMIT {LIMIT}"
    ))?;
    statement
        .query_map(
            params![
                q,
                crate::ids::LeadId::parse(q),
                crate::ids::LeadRequestId::parse(q),
                blobs
            ],
            from_row,
        )?
        .collect()
}

pub(super) fn table(rows: &[Row], zone: &Zone) -> Markup {
    html! {
        div class="scroll" {
            table class="list" id="leads" {
                thead { tr {
                    th { "Lead" } th { "Received" } th { "Name" } th { "Email" } th { "Phone" }
                    th { "Source" } th { "External id" } th { "Quality" } th { "Duplicate" }
                    th { "Status" }
                } }
                tbody {
                    @for row in rows {
                        tr class=[row.erased_at.map(|_| "erased")] {
                            td { a href={ "/leads/" (row.id) } { (row.id) } }
                            td { (zone.when(row.created_at)) }
                            @if let Some(erased_at) = row.erased_at {
                                td colspan="3" class="erased" {
                                    "Erased " (zone.when(erased_at))
                                }
                            } @else {
                                td { (row.name) }
                                td { (row.email.as_deref().unwrap_or("")) }
                                td { (row.phone.as_deref().unwrap_or("")) }
                            }
                            td { (row.source_id) }
                            td { (row.external_id.as_deref().unwrap_or("")) }
                            td { span class={ "tag " (row.quality) } { (row.quality) } }
                            td { (row.duplicate) }
                            td { @if row.erased_at.is_some() { "erased" } @else { (row.status) } }
                        }
                    }
                }
            }
        }
    }
}
