//! Supplier cancellations (clawback): asking the supplier of a lead to take it back.
//!
//! Owns the `supplier_cancellations` SQL and decides the lead's lifecycle status (`active`,
//! `cancellation_pending`, `cancelled`; written through `ingest::status`, which owns the
//! `leads` table). A cancellation opens by itself when every
//! transaction of a lead has ended rejected or cancelled and the lead's source has a
//! supplier ([`open_when_all_void`], called in the writer job of the move that ended the
//! last one), or by hand with `leadrelay lead cancel` ([`open_by_operator`]). A lead has at
//! most one supplier cancellation, ever (a unique index holds this). The supplier's answer is
//! `supplier`'s business.

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::error::LifecycleError;
use crate::db::stored::stored_enum;
use crate::ingest::status::{self, LeadStatus};

stored_enum! {
    /// Who opened a supplier cancellation.
    pub enum Origin as "supplier cancellation origin" {
        /// Opened by the service when the lead's last transaction ended.
        Auto = "auto",
        /// Opened by the operator with `leadrelay lead cancel`.
        Operator = "operator",
    }
}

stored_enum! {
    /// Where a supplier cancellation stands: `pending` until the supplier answers, then
    /// `acknowledged` (the lead is cancelled) or `rejected` (the supplier disputes it).
    pub enum CancellationStatus as "supplier cancellation status" {
        Pending = "pending",
        Acknowledged = "acknowledged",
        Rejected = "rejected",
    }
}

#[derive(Debug, Clone)]
pub struct SupplierCancellation {
    pub id: String,
    pub lead_id: crate::ids::LeadId,
    pub supplier_id: crate::ids::SupplierId,
    pub status: CancellationStatus,
    pub origin: Origin,
    pub reason: Option<String>,
    pub response_reason: Option<String>,
    pub created_at: i64,
    pub resolved_at: Option<i64>,
}

impl SupplierCancellation {
    pub fn view(&self) -> SupplierCancellationView<'_> {
        SupplierCancellationView {
            id: &self.id,
            lead_id: self.lead_id,
            supplier_id: &self.supplier_id,
            status: self.status.as_str(),
            origin: self.origin.as_str(),
            reason: self.reason.as_deref(),
            response_reason: self.response_reason.as_deref(),
            created_at: crate::clock::iso(self.created_at),
            resolved_at: self.resolved_at.map(crate::clock::iso),
        }
    }

    /// [`SupplierCancellation::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// A supplier cancellation as the supplier's API and `clawback list --json` show it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SupplierCancellationView<'a> {
    id: &'a str,
    lead_id: crate::ids::LeadId,
    supplier_id: &'a crate::ids::SupplierId,
    status: &'static str,
    origin: &'static str,
    reason: Option<&'a str>,
    response_reason: Option<&'a str>,
    created_at: String,
    resolved_at: Option<String>,
}

const COLUMNS: &str =
    "id, lead_id, supplier_id, status, origin, reason, response_reason, created_at, resolved_at";

fn from_row(row: &Row) -> rusqlite::Result<SupplierCancellation> {
    Ok(SupplierCancellation {
        id: row.get(0)?,
        lead_id: row.get(1)?,
        supplier_id: row.get(2)?,
        status: row.get(3)?,
        origin: row.get(4)?,
        reason: row.get(5)?,
        response_reason: row.get(6)?,
        created_at: row.get(7)?,
        resolved_at: row.get(8)?,
    })
}

/// The supplier cancellation of a lead, if one was ever opened.
pub(crate) fn of_lead(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
) -> rusqlite::Result<Option<SupplierCancellation>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM supplier_cancellations WHERE lead_id = ?1"
    ))?
    .query_row([lead_id], from_row)
    .optional()
}

/// A lead as clawback sees it: its lifecycle status and its source's supplier.
pub(crate) struct LeadSupply {
    pub status: LeadStatus,
    pub supplier_id: Option<crate::ids::SupplierId>,
}

pub(crate) fn lead_supply(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
) -> rusqlite::Result<Option<LeadSupply>> {
    conn.prepare_kept(
        "SELECT l.status, s.supplier_id FROM leads l JOIN sources s ON s.id = l.source_id
         WHERE l.id = ?1",
    )?
    .query_row([lead_id], |row| {
        Ok(LeadSupply {
            status: row.get(0)?,
            supplier_id: row.get(1)?,
        })
    })
    .optional()
}

fn open(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
    supplier_id: &crate::ids::SupplierId,
    origin: Origin,
    reason: &str,
    now: i64,
) -> rusqlite::Result<SupplierCancellation> {
    let id = crate::ids::new("scan");
    conn.prepare_kept(
        "INSERT INTO supplier_cancellations (id, lead_id, supplier_id, status, origin, reason,
            created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        id,
        lead_id,
        supplier_id,
        CancellationStatus::Pending,
        origin,
        reason,
        now
    ])?;
    status::set_lead_status(conn, lead_id, LeadStatus::CancellationPending)?;
    Ok(SupplierCancellation {
        id,
        lead_id,
        supplier_id: supplier_id.clone(),
        status: CancellationStatus::Pending,
        origin,
        reason: Some(reason.to_string()),
        response_reason: None,
        created_at: now,
        resolved_at: None,
    })
}

/// Opens a supplier cancellation for `lead_id` when every one of its transactions (at least
/// one) has ended rejected or cancelled, its source has a supplier, and it has none yet.
/// Returns the cancellation it opened.
pub(crate) fn open_when_all_void(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
    now: i64,
) -> rusqlite::Result<Option<SupplierCancellation>> {
    let (total, void) = crate::delivery::transaction::void_tally(conn, lead_id)?;
    if total == 0 || void < total {
        return Ok(None);
    }
    let Some(LeadSupply {
        status,
        supplier_id: Some(supplier_id),
    }) = lead_supply(conn, lead_id)?
    else {
        return Ok(None);
    };
    if status != LeadStatus::Active || of_lead(conn, lead_id)?.is_some() {
        return Ok(None);
    }
    let reason = format!("all {total} transaction(s) of the lead were rejected or cancelled");
    open(conn, lead_id, &supplier_id, Origin::Auto, &reason, now).map(Some)
}

/// Resolves a pending cancellation with the supplier's answer (`acknowledged` or
/// `rejected`) and moves the lead: `cancelled` after an acknowledgement, `active` again
/// after a dispute.
pub(crate) fn resolve(
    conn: &Connection,
    cancellation: &SupplierCancellation,
    answer: CancellationStatus,
    response_reason: Option<&str>,
    now: i64,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "UPDATE supplier_cancellations SET status = ?2, response_reason = ?3, resolved_at = ?4
         WHERE id = ?1",
    )?
    .execute(params![cancellation.id, answer, response_reason, now])?;
    let lead_status = match answer {
        CancellationStatus::Acknowledged => LeadStatus::Cancelled,
        CancellationStatus::Rejected | CancellationStatus::Pending => LeadStatus::Active,
    };
    status::set_lead_status(conn, cancellation.lead_id, lead_status)
}

/// Removes the free-text reasons (the operator's and the supplier's) of lead `lead_id`'s
/// cancellation for an erasure; its status and times stay.
pub(crate) fn erase_reasons(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
) -> rusqlite::Result<u64> {
    let changed = conn
        .prepare_kept(
            "UPDATE supplier_cancellations SET reason = NULL, response_reason = NULL
             WHERE lead_id = ?1 AND (reason IS NOT NULL OR response_reason IS NOT NULL)",
        )?
        .execute([lead_id])?;
    Ok(changed as u64)
}

/// `leadrelay lead cancel ID --reason R`: opens a supplier cancellation by hand.
pub fn open_by_operator(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
    reason: &str,
    now: i64,
) -> Result<SupplierCancellation, LifecycleError> {
    if reason.trim().is_empty() {
        return Err(LifecycleError::Validation(vec![
            super::error::Problem::new("/reason", "min_length", "reason must not be empty"),
        ]));
    }
    let supply = lead_supply(conn, lead_id)?.ok_or(LifecycleError::LeadNotFound)?;
    let supplier_id = supply.supplier_id.ok_or(LifecycleError::NoSupplier)?;
    if let Some(existing) = of_lead(conn, lead_id)? {
        return Err(LifecycleError::CancellationExists {
            status: existing.status.as_str().to_string(),
        });
    }
    Ok(open(
        conn,
        lead_id,
        &supplier_id,
        Origin::Operator,
        reason,
        now,
    )?)
}
