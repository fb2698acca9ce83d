//! `/sources`: each source's volume over the last 30 days and today, its duplicates, the
//! leads validation refused and its quality mix (ok, suspect, invalid), with its
//! container, supplier and whether it is on.
//!
//! What a source sent (received, duplicates, refused by validation, today and in the
//! window) is read from the report aggregate (DESIGN.md section 11): the refused leads are
//! never stored, so only the aggregate knows them. The whole UTC days of the window are
//! `report_days` rows, its edges `report_buckets` quarter hours (`report::buckets::spans`). The quality mix is of the stored leads:
//! a sum of ranges of the `leads_source_mix` index (migration 9), one per source, quality
//! and kept duplicate status, so no lead is read and nothing is sorted.

use std::collections::HashMap;

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::{Connection, params};

use crate::console::layout::{self, Zone, rate};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::quality::QualityStatus;

const WINDOW_DAYS: i64 = 30;

#[derive(Default)]
struct Volume {
    /// Every lead the source sent in the window (stored, duplicates, refused).
    received: i64,
    today: i64,
    /// Matched an earlier lead: kept for review or dropped under a `reject` rule.
    duplicates: i64,
    /// Refused by validation (not stored).
    rejected: i64,
    /// The stored leads of the window by quality.
    ok: i64,
    suspect: i64,
    invalid: i64,
}

struct SourceRow {
    id: crate::ids::SourceId,
    name: String,
    container: String,
    supplier: Option<crate::ids::SupplierId>,
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
    // On a quarter hour, so the aggregate's buckets and the stored leads cover one window.
    let since = crate::report::buckets::bucket_of(now - WINDOW_DAYS * 86_400_000).min(today);
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
    // What each source sent: lead counts are the aggregate's rows without a buyer.
    let mut by_source: HashMap<crate::ids::SourceId, (i64, i64, i64, i64)> = HashMap::new();
    for (from, is_today) in [(since, false), (today, true)] {
        for span in crate::report::buckets::spans(from, i64::MAX) {
            let (table, time) = span.grain.table();
            // The table and column names are constants of `Grain::table`.
            let mut sent = conn.prepare_cached(&format!(
                "SELECT source_id, sum(received), sum(duplicates), sum(rejected)
                 FROM {table}
                 WHERE workspace_id IN (SELECT id FROM workspaces) AND {time} >= ?1
                   AND {time} < ?2 AND buyer_id = ''
                 GROUP BY source_id"
            ))?;
            let mut found = sent.query(params![span.from, span.to])?;
            while let Some(row) = found.next()? {
                let sums = by_source.entry(row.get(0)?).or_default();
                if is_today {
                    sums.3 += row.get::<_, i64>(1)?;
                } else {
                    sums.0 += row.get::<_, i64>(1)?;
                    sums.1 += row.get::<_, i64>(2)?;
                    sums.2 += row.get::<_, i64>(3)?;
                }
            }
        }
    }
    // One range of `leads_source_mix` per source, quality and kept duplicate status: no
    // filter per row and no sort by source.
    let mut counted = conn.prepare_cached(
        "SELECT count(*) FROM leads
         WHERE source_id = ?1 AND quality_status = ?2 AND duplicate_status = ?3
           AND created_at >= ?4",
    )?;
    for row in &mut rows {
        let v = &mut row.volume;
        (v.received, v.duplicates, v.rejected, v.today) =
            by_source.remove(&row.id).unwrap_or_default();
        for quality in QualityStatus::ALL {
            // A duplicate the rule rejects is not stored.
            for duplicate in [DuplicateStatus::Unique, DuplicateStatus::Review] {
                let stored: i64 =
                    counted.query_row(params![row.id, quality, duplicate, since], |r| r.get(0))?;
                match quality {
                    QualityStatus::Ok => v.ok += stored,
                    QualityStatus::Suspect => v.suspect += stored,
                    QualityStatus::Invalid => v.invalid += stored,
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
                    th { "Refused by validation" } th { "Quality ok · suspect · invalid" }
                } }
                tbody {
                    @for row in rows {
                        @let v = &row.volume;
                        tr class="source" id={ "source-" (row.id) } {
                            td { strong { (row.name) } br; span class="id" { (row.id) } }
                            td { (row.container) }
                            td { (row.supplier.as_ref().map_or("", |id| id.as_str())) }
                            td { @if row.enabled { "yes" } @else { "no" } }
                            td { (v.today) }
                            td { (v.received) }
                            td { (v.duplicates) " (" (rate(v.duplicates, v.received)) ")" }
                            td { (v.rejected) " (" (rate(v.rejected, v.received)) ")" }
                            td class="mix" {
                                @let stored = v.ok + v.suspect + v.invalid;
                                (v.ok) " · " (v.suspect) " · " (v.invalid)
                                @if stored > 0 {
                                    " (" (rate(v.ok, stored)) " ok)"
                                }
                            }
                        }
                    }
                }
            }
        }
        p class="note" {
            "Leads each source sent in the last " (WINDOW_DAYS) " days. Duplicates: matched "
            "an earlier lead under the source's duplicate rule (held for review or dropped). "
            "Refused by validation: not stored. Quality: of the stored leads."
        }
    }
}
