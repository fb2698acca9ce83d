//! The states of stored leads and lead requests, and every write to them after ingest.
//!
//! Ingest owns the `leads` and `lead_requests` tables: `store` inserts them,
//! and this module makes every later change. A lead's lifecycle status (`active`,
//! `cancellation_pending`, `cancelled`) is moved by the supplier clawback
//! (`lifecycle::clawback`, `lifecycle::supplier`); a request's status (`open`, `delivered`,
//! `not_delivered`) by a delivery, by auto-delivery's decision and by the operator's void. Those modules decide;
//! they call this one to write.

use crate::db::PrepareKept;
use rusqlite::{Connection, params};

use crate::db::stored::stored_enum;

stored_enum! {
    /// Where a lead stands with its supplier (DESIGN.md section 1).
    pub enum LeadStatus as "lead status" {
        Active = "active",
        /// A supplier cancellation is open.
        CancellationPending = "cancellation_pending",
        /// The supplier confirmed the cancellation.
        Cancelled = "cancelled",
    }
}

stored_enum! {
    /// Whether a lead request (an interest) went to a buyer.
    pub(crate) enum RequestStatus as "lead request status" {
        Open = "open",
        Delivered = "delivered",
        NotDelivered = "not_delivered",
    }
}

/// Moves the lead's lifecycle status.
pub(crate) fn set_lead_status(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
    status: LeadStatus,
) -> rusqlite::Result<()> {
    conn.prepare_kept("UPDATE leads SET status = ?2 WHERE id = ?1")?
        .execute(params![lead_id, status])?;
    Ok(())
}

/// Marks a request delivered (a transaction was written for it).
pub(crate) fn mark_request_delivered(
    conn: &Connection,
    request_id: crate::ids::LeadRequestId,
) -> rusqlite::Result<()> {
    conn.prepare_kept("UPDATE lead_requests SET status = ?2 WHERE id = ?1")?
        .execute(params![request_id, RequestStatus::Delivered])?;
    Ok(())
}

/// Opens a request again: its last live transaction was voided, so it can be delivered
/// again (by hand or `lead reroute`).
pub(crate) fn reopen_request(
    conn: &Connection,
    request_id: crate::ids::LeadRequestId,
) -> rusqlite::Result<()> {
    conn.prepare_kept("UPDATE lead_requests SET status = ?2 WHERE id = ?1")?
        .execute(params![request_id, RequestStatus::Open])?;
    Ok(())
}

/// Stores auto-delivery's decision (JSON, the operator's view) on the request with the
/// status it led to, compressed (`trace`).
pub(crate) fn record_decision(
    conn: &Connection,
    request_id: crate::ids::LeadRequestId,
    decision: &str,
    status: RequestStatus,
) -> rusqlite::Result<()> {
    conn.prepare_kept("UPDATE lead_requests SET decision = ?2, status = ?3 WHERE id = ?1")?
        .execute(params![
            request_id,
            super::trace::encode(decision, &request_id.to_string()),
            status
        ])?;
    Ok(())
}
