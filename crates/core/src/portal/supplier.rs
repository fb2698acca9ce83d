//! The supplier portal's reads: the overview, the supplier's leads (outcome, quality and
//! reasons, sold, returned), one lead, the payouts ledger and the supplier's sources. Every
//! statement is narrowed by the session's supplier through its sources
//! (`sources.supplier_id`). The structs here have no field for a buyer, a buyer price or a
//! score, so no page can show one.

use crate::db::PrepareKept;
use jiff::tz::TimeZone;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value};

use crate::caps::Windows;
use crate::ids::SupplierId;
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::model::StoredLead;
use crate::ingest::quality::QualityStatus;
use crate::ledger::query::Entry;

/// What the portal knows of its supplier.
pub struct Me {
    pub supplier_id: SupplierId,
    pub name: String,
    pub tz: TimeZone,
}

/// The supplier `supplier_id` with its workspace's time zone (`None` once it is gone).
pub fn me(conn: &Connection, supplier_id: &SupplierId) -> rusqlite::Result<Option<Me>> {
    let Some(supplier) = crate::config::supplier::find(conn, supplier_id)? else {
        return Ok(None);
    };
    let tz = crate::caps::timezone_of(conn, &supplier.workspace_id)?;
    Ok(Some(Me {
        supplier_id: supplier.id,
        name: supplier.name,
        tz,
    }))
}

/// A supplier's figures of one window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    pub sent: i64,
    pub accepted: i64,
    pub duplicates: i64,
    pub rejected: i64,
    pub sold: i64,
    pub returned: i64,
}

pub struct Overview {
    pub today: Tally,
    pub month: Tally,
    /// What the supplier is owed: the sum of its ledger rows (costs less clawbacks).
    pub owed_cents: i64,
}

/// The supplier's figures of today and this month, from the report aggregate of its
/// sources: each window's whole UTC days from `report_days`, its edges from
/// `report_buckets` (`report::buckets::spans`; quarter hours, so a window's bounds fall on
/// bucket starts in every zone whose offset is a multiple of 15 minutes). Each range is read
/// by the tables' primary key (workspace, time); the `+` keeps SQLite from walking the
/// source index instead, which holds every bucket of a supplier owning all sources.
pub fn overview(
    conn: &Connection,
    supplier_id: &SupplierId,
    windows: &Windows,
) -> rusqlite::Result<Overview> {
    let tally = |(from, to): (i64, i64)| -> rusqlite::Result<Tally> {
        let mut tally = Tally::default();
        for span in crate::report::buckets::spans(from, to) {
            let (table, column) = span.grain.table();
            let part = conn
                .prepare_cached(&format!(
                    "SELECT coalesce(sum(b.received), 0), coalesce(sum(b.accepted), 0),
                            coalesce(sum(b.duplicates), 0), coalesce(sum(b.rejected), 0),
                            coalesce(sum(b.sold), 0), coalesce(sum(b.returned), 0)
                     FROM {table} b
                     WHERE b.workspace_id = (SELECT workspace_id FROM suppliers WHERE id = ?1)
                       AND b.{column} >= ?2 AND b.{column} < ?3
                       AND +b.source_id IN (SELECT id FROM sources WHERE supplier_id = ?1)"
                ))?
                .query_row(params![supplier_id, span.from, span.to], |row| {
                    Ok(Tally {
                        sent: row.get(0)?,
                        accepted: row.get(1)?,
                        duplicates: row.get(2)?,
                        rejected: row.get(3)?,
                        sold: row.get(4)?,
                        returned: row.get(5)?,
                    })
                })?;
            tally.sent += part.sent;
            tally.accepted += part.accepted;
            tally.duplicates += part.duplicates;
            tally.rejected += part.rejected;
            tally.sold += part.sold;
            tally.returned += part.returned;
        }
        Ok(tally)
    };
    let owed_cents = conn
        .prepare_kept(
            "SELECT coalesce(sum(amount_cents), 0) FROM ledger_entries WHERE supplier_id = ?1",
        )?
        .query_row([supplier_id], |row| row.get(0))?;
    Ok(Overview {
        today: tally(windows.day)?,
        month: tally(windows.month)?,
        owed_cents,
    })
}

/// What became of a lead at ingest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    Duplicate,
    Rejected,
}

impl Outcome {
    fn of(quality: QualityStatus, duplicate: DuplicateStatus) -> Outcome {
        if quality == QualityStatus::Invalid || duplicate == DuplicateStatus::Rejected {
            Outcome::Rejected
        } else if duplicate == DuplicateStatus::Review {
            Outcome::Duplicate
        } else {
            Outcome::Accepted
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Duplicate => "duplicate",
            Outcome::Rejected => "rejected",
        }
    }
}

/// A lead as the supplier sees it.
pub struct LeadRow {
    pub id: crate::ids::LeadId,
    pub created_at: i64,
    pub source_id: crate::ids::SourceId,
    pub external_id: Option<String>,
    pub name: String,
    pub outcome: Outcome,
    pub quality: String,
    pub quality_reasons: Vec<String>,
    pub sold: bool,
    pub returned: bool,
    pub erased_at: Option<i64>,
}

/// Whether the lead was sold, and whether a sale of it was returned (cancelled, or a return
/// waiting for review).
fn sale_of(conn: &Connection, lead_id: crate::ids::LeadId) -> rusqlite::Result<(bool, bool)> {
    conn.prepare_kept(
        "SELECT count(*) > 0, coalesce(sum(status = 'cancelled' OR status = 'return_requested'), 0) > 0
         FROM transactions WHERE lead_id = ?1",
    )?
    .query_row([lead_id], |row| Ok((row.get(0)?, row.get(1)?)))
}

fn row_of(conn: &Connection, lead: &StoredLead) -> rusqlite::Result<LeadRow> {
    let (sold, returned) = sale_of(conn, lead.id)?;
    let person = &lead.fields.person;
    Ok(LeadRow {
        id: lead.id,
        created_at: lead.created_at,
        source_id: lead.source_id.clone(),
        external_id: lead.fields.external_id.clone(),
        name: format!("{} {}", person.first_name, person.last_name),
        outcome: Outcome::of(lead.quality_status, lead.duplicate_status),
        quality: lead.quality_status.as_str().to_string(),
        quality_reasons: lead.quality_reasons.clone(),
        sold,
        returned,
        erased_at: lead.erased_at,
    })
}

/// The supplier's source ids.
fn source_ids(
    conn: &Connection,
    supplier_id: &SupplierId,
) -> rusqlite::Result<Vec<crate::ids::SourceId>> {
    conn.prepare_kept("SELECT id FROM sources WHERE supplier_id = ?1 ORDER BY id")?
        .query_map([supplier_id], |row| row.get(0))?
        .collect()
}

/// The supplier's newest leads, at most `limit`. Each of its sources' six ranges of
/// `leads_source_mix` (one per stored quality and duplicate status, `ingest::view`) gives
/// its newest `limit` (time and rowid only: the index covers them); the newest `limit` of
/// those are then read whole.
pub fn leads(
    conn: &Connection,
    supplier_id: &SupplierId,
    limit: usize,
) -> rusqlite::Result<Vec<LeadRow>> {
    let limit_sql = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut newest: Vec<(i64, i64)> = Vec::new();
    let mut range = conn.prepare_kept(
        "SELECT created_at, rowid FROM leads
         WHERE source_id = ?1 AND quality_status = ?2 AND duplicate_status = ?3
         ORDER BY created_at DESC, rowid DESC LIMIT ?4",
    )?;
    for source_id in source_ids(conn, supplier_id)? {
        for (quality, duplicate) in crate::ingest::view::stored_statuses() {
            let rows = range.query_map(
                params![source_id, quality.as_str(), duplicate.as_str(), limit_sql],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            for row in rows {
                newest.push(row?);
            }
        }
    }
    newest.sort_unstable_by(|a, b| b.cmp(a));
    newest.truncate(limit);
    let mut id_of = conn.prepare_kept("SELECT id FROM leads WHERE rowid = ?1")?;
    let mut rows = Vec::with_capacity(newest.len());
    for (_, rowid) in newest {
        let id: crate::ids::LeadId = id_of.query_row([rowid], |row| row.get(0))?;
        if let Some(lead) = crate::ingest::view::find(conn, id)? {
            rows.push(row_of(conn, &lead)?);
        }
    }
    Ok(rows)
}

/// One lead of the supplier as its page shows it.
pub struct LeadPage {
    pub row: LeadRow,
    /// The person and consent as the supplier sent them, by the interface's field names.
    pub person: Vec<(&'static str, Option<String>)>,
    pub duplicate_status: String,
    pub status: String,
    /// Each product the lead asked for, with its answers.
    pub interests: Vec<(String, Map<String, Value>)>,
}

/// Lead `id` of supplier `supplier_id`, or `None` when it does not exist or came from
/// another supplier's source (one answer for both).
pub fn lead(
    conn: &Connection,
    supplier_id: &SupplierId,
    id: crate::ids::LeadId,
) -> rusqlite::Result<Option<LeadPage>> {
    let own = conn
        .prepare_kept(
            "SELECT 1 FROM leads l JOIN sources s ON s.id = l.source_id
             WHERE l.id = ?1 AND s.supplier_id = ?2",
        )?
        .query_row(params![id, supplier_id], |_| Ok(()))
        .optional()?;
    if own.is_none() {
        return Ok(None);
    }
    let Some(lead) = crate::ingest::view::find(conn, id)? else {
        return Ok(None);
    };
    let fields = &lead.fields;
    let mut person = vec![
        ("firstName", Some(fields.person.first_name.clone())),
        ("lastName", Some(fields.person.last_name.clone())),
    ];
    person.extend(
        fields
            .person_pairs()
            .into_iter()
            .map(|(key, value)| (key, value.clone())),
    );
    let interests = lead
        .requests
        .iter()
        .map(|request| {
            (
                request.interest.product_name.clone(),
                request.interest.field_values.clone(),
            )
        })
        .collect();
    Ok(Some(LeadPage {
        row: row_of(conn, &lead)?,
        person,
        duplicate_status: lead.duplicate_status.as_str().to_string(),
        status: lead.status.as_str().to_string(),
        interests,
    }))
}

/// The supplier's ledger rows of `[from, to)`, oldest first: costs of its leads and their
/// clawbacks.
pub fn payouts(
    conn: &Connection,
    supplier_id: &SupplierId,
    (from, to): (i64, i64),
) -> rusqlite::Result<Vec<Entry>> {
    crate::ledger::query::list(
        conn,
        &crate::ledger::query::ListFilter {
            supplier_id: Some(supplier_id.clone()),
            from_ms: Some(from),
            to_ms: Some(to),
            limit: i64::MAX,
            ..Default::default()
        },
    )
}

/// A source as its supplier sees it.
pub struct SourceRow {
    pub id: crate::ids::SourceId,
    pub name: String,
    pub enabled: bool,
    pub archived: bool,
    pub has_secret: bool,
    pub mapped: bool,
}

/// The supplier's sources, by id.
pub fn sources(conn: &Connection, supplier_id: &SupplierId) -> rusqlite::Result<Vec<SourceRow>> {
    conn.prepare_kept(
        "SELECT id, name, enabled, archived_at IS NOT NULL, secret_hash IS NOT NULL,
                mapping_published IS NOT NULL
         FROM sources WHERE supplier_id = ?1 ORDER BY id",
    )?
    .query_map([supplier_id], |row| {
        Ok(SourceRow {
            id: row.get(0)?,
            name: row.get(1)?,
            enabled: row.get(2)?,
            archived: row.get(3)?,
            has_secret: row.get(4)?,
            mapped: row.get(5)?,
        })
    })?
    .collect()
}

/// Whether source `source_id` is supplier `supplier_id`'s.
pub fn owns_source(
    conn: &Connection,
    supplier_id: &SupplierId,
    source_id: &crate::ids::SourceId,
) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_kept("SELECT 1 FROM sources WHERE id = ?1 AND supplier_id = ?2")?
        .query_row(params![source_id, supplier_id], |_| Ok(()))
        .optional()?
        .is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing;
    use crate::report::{Received, leads_received};

    fn at(text: &str) -> i64 {
        crate::clock::parse_iso(text).expect("a valid time")
    }

    /// The overview sums whole days from `report_days` and the edges of each window from
    /// `report_buckets`: a count just inside and just outside local midnight (Kolkata,
    /// UTC+5:30, so the window's bounds are not UTC days) and at the month's edges.
    #[test]
    fn overview_counts_exactly_the_local_day_and_month() {
        let (_dir, conn) = testing::migrated();
        testing::workspace(&conn, "Asia/Kolkata");
        testing::channel(
            &conn,
            testing::Channel {
                auto_delivery: false,
                mode: crate::config::container::DeliveryMode::Multi,
                max_buyers: 1,
                score_threshold: 0,
            },
            None,
        );
        conn.execute_batch(
            "INSERT INTO suppliers (id, workspace_id, name, key_hash, created_at)
             VALUES ('sup', 'ws', 'S', 'h', 0);
             UPDATE sources SET supplier_id = 'sup' WHERE id = 'src';",
        )
        .expect("the supplier owns the source");
        for (when, count) in [
            ("2026-10-31T18:29:00Z", 1),  // 31 October, local
            ("2026-10-31T18:30:00Z", 10), // 1 November, local
            ("2026-11-10T12:00:00Z", 100),
            ("2026-11-21T18:29:00Z", 1000),   // 21 November, local
            ("2026-11-21T18:30:00Z", 10_000), // 22 November, local: today
            ("2026-11-22T18:29:59Z", 100_000),
            ("2026-11-22T18:30:00Z", 1_000_000), // 23 November, local
        ] {
            leads_received(
                &conn,
                "ws",
                &"src".into(),
                None,
                Received::Accepted,
                count,
                at(when),
            )
            .expect("the count is written");
        }
        let tz = crate::caps::timezone_of(&conn, "ws").expect("the zone");
        let windows = Windows::at(at("2026-11-22T06:00:00Z"), &tz);
        let own = overview(&conn, &"sup".into(), &windows).expect("the overview is read");
        assert_eq!(own.today.sent, 110_000);
        assert_eq!(own.month.sent, 1_111_110);
        assert_eq!(own.month.accepted, 1_111_110);
        let other = overview(&conn, &"nobody".into(), &windows).expect("the overview is read");
        assert_eq!(other.month.sent, 0);
    }
}
