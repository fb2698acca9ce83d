//! `/sources`: each source's volume over the last 30 days and today, its duplicates and its
//! quality mix (ok, suspect, invalid), with its container, supplier and whether it is on.
//!
//! Every figure is a sum of ranges of the `leads_source_mix` index (migration 9), one per
//! source, quality and duplicate status, so no lead is read and nothing is sorted.
//! Leads refused by validation are not stored, so their count waits for the report's
//! aggregate (DESIGN.md section 11).

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::{Connection, params};

use crate::console::layout::{self, Zone, rate};
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::quality::QualityStatus;
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
    let since = (now - WINDOW_DAYS * 86_400_000).min(today);
    let mut sources = conn.prepare_cached(
        "SELECT s.id, s.name, c.kind || ' ' || c.name, s.supplier_id, s.enabled
         FROM sources s JOIN containers c ON c.id = s.container_id
         WHERE s.archived_at IS NULL ORDER BY s.created_at, s.id",
    )?;
    let mut rows = sources
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
    // One range of `leads_source_mix` per source, quality and duplicate status (and one more
    // for today): no filter per row and no sort by source.
    let mut counted = conn.prepare_cached(
        "SELECT count(*) FROM leads
         WHERE source_id = ?1 AND quality_status = ?2 AND duplicate_status = ?3
           AND created_at >= ?4",
    )?;
    for row in &mut rows {
        let v = &mut row.volume;
        for quality in QualityStatus::ALL {
            // A duplicate the rule rejects is not stored.
            for duplicate in [DuplicateStatus::Unique, DuplicateStatus::Review] {
                let mut count = |from: i64| -> rusqlite::Result<i64> {
                    counted.query_row(params![row.id, quality, duplicate, from], |r| r.get(0))
                };
                let window = count(since)?;
                v.today += count(today)?;
                v.received += window;
                if duplicate == DuplicateStatus::Review {
                    v.duplicates += window;
                }
                match quality {
                    QualityStatus::Ok => v.ok += window,
                    QualityStatus::Suspect => v.suspect += window,
                    QualityStatus::Invalid => v.invalid += window,
                }
            }
        }
    }
    Ok(rows)
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
