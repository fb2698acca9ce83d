//! `/sources`: each source's volume over the last 30 days and today, its duplicates and its
//! quality mix (ok, suspect, invalid), with its container, supplier and whether it is on.
//!
//! Reads the `leads_created` index (migration 3), which holds each lead's source, quality
//! and duplicate status beside its time, so the 30 days are one range of the index.
//! Leads refused by validation are not stored, so their count waits for the report's
//! aggregate (DESIGN.md section 11).

use std::collections::HashMap;

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::{Connection, params};

use crate::console::layout::{self, Zone, rate};
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;
use crate::operators::Session;

const WINDOW_DAYS: i64 = 30;

#[derive(Default)]
struct Volume {
    received: i64,
    today: i64,
    duplicates: i64,
    ok: i64,
    suspect: i64,
    invalid: i64,
}

struct SourceRow {
    id: String,
    name: String,
    container: String,
    supplier: Option<String>,
    enabled: bool,
    volume: Volume,
}

pub(crate) async fn get(db: &Db, operator: &Session) -> Result<Response, Error> {
    let now = crate::clock::now_ms();
    let (zone, rows) = db
        .read(move |conn| {
            let zone = Zone::of(conn)?;
            let rows = load(conn, now, zone.day_start(now, 0))?;
            Ok::<_, DbError>((zone, rows))
        })
        .await?;
    Ok(layout::page(
        StatusCode::OK,
        "Sources",
        "/sources",
        operator,
        &zone,
        render(&rows),
    ))
}

fn load(conn: &Connection, now: i64, today: i64) -> Result<Vec<SourceRow>, DbError> {
    let since = now - WINDOW_DAYS * 86_400_000;
    let mut volumes: HashMap<String, Volume> = HashMap::new();
    let mut counted = conn.prepare_cached(
        "SELECT source_id, count(*),
                count(*) FILTER (WHERE created_at >= ?2),
                count(*) FILTER (WHERE duplicate_status = 'review'),
                count(*) FILTER (WHERE quality_status = 'ok'),
                count(*) FILTER (WHERE quality_status = 'suspect'),
                count(*) FILTER (WHERE quality_status = 'invalid')
         FROM leads WHERE created_at >= ?1 GROUP BY source_id",
    )?;
    let found = counted.query_map(params![since.min(today), today], |row| {
        Ok((
            row.get::<_, String>(0)?,
            Volume {
                received: row.get(1)?,
                today: row.get(2)?,
                duplicates: row.get(3)?,
                ok: row.get(4)?,
                suspect: row.get(5)?,
                invalid: row.get(6)?,
            },
        ))
    })?;
    for found in found {
        let (source, volume) = found?;
        volumes.insert(source, volume);
    }
    let mut sources = conn.prepare_cached(
        "SELECT s.id, s.name, c.kind || ' ' || c.name, s.supplier_id, s.enabled
         FROM sources s JOIN containers c ON c.id = s.container_id
         WHERE s.archived_at IS NULL ORDER BY s.created_at, s.id",
    )?;
    let rows = sources
        .query_map([], |row| {
            Ok(SourceRow {
                id: row.get(0)?,
                name: row.get(1)?,
                container: row.get(2)?,
                supplier: row.get(3)?,
                enabled: row.get(4)?,
                volume: Volume::default(),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows
        .into_iter()
        .map(|mut row| {
            row.volume = volumes.remove(&row.id).unwrap_or_default();
            row
        })
        .collect())
}

fn render(rows: &[SourceRow]) -> Markup {
    html! {
        @if rows.is_empty() { (layout::none_yet("No sources yet: leadrelay source create adds one.")) }
        div class="scroll" {
            table class="list" id="sources" {
                thead { tr {
                    th { "Source" } th { "Container" } th { "Supplier" } th { "On" }
                    th { "Today" } th { "30 days" } th { "Duplicates" }
                    th { "Quality ok · suspect · invalid" }
                } }
                tbody {
                    @for row in rows {
                        @let v = &row.volume;
                        tr class="source" id={ "source-" (row.id) } {
                            td { strong { (row.name) } br; span class="id" { (row.id) } }
                            td { (row.container) }
                            td { (row.supplier.as_deref().unwrap_or("")) }
                            td { @if row.enabled { "yes" } @else { "no" } }
                            td { (v.today) }
                            td { (v.received) }
                            td { (v.duplicates) " (" (rate(v.duplicates, v.received)) ")" }
                            td class="mix" {
                                (v.ok) " · " (v.suspect) " · " (v.invalid)
                                @if v.received > 0 {
                                    " (" (rate(v.ok, v.received)) " ok)"
                                }
                            }
                        }
                    }
                }
            }
        }
        p class="note" {
            "Leads stored in the last " (WINDOW_DAYS) " days. Duplicates: held for review by the "
            "source's duplicate rule."
        }
    }
}
