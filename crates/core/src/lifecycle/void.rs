//! The operator's void of a sale (`transaction void ID --reason R`, DESIGN.md section 13):
//! a lead sold to a buyer who cannot take it (an endpoint down for hours) is taken back so
//! it can be sold again.
//!
//! A transaction that is not `paid` moves to `cancelled` (actor `operator`, the reason in
//! its history), a prepaid charge goes back to the buyer (ledger), its place of the buyer's
//! caps is given back (by the transaction's owner), a webhook event not yet delivered is
//! given up, and the request is open again once no live transaction holds it. Unlike a
//! buyer's cancellation it opens no supplier clawback: the lead itself is fine and is about
//! to be sold again (`lead reroute`). Runs as one writer job. It decides; the tables are
//! written by their owners.

use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

use super::LifecycleError;
use super::apply::Money;
use crate::db::DbError;
use crate::delivery::transaction::{self, DeliveryStatus, Status, Transaction, TransactionView};

/// Who voids, in the history and the ledger.
pub(crate) const ACTOR: &str = "operator";

/// Why a void was refused.
#[derive(Debug, thiserror::Error)]
pub enum VoidError {
    #[error("unknown transaction '{0}'")]
    NotFound(crate::ids::TransactionId),
    #[error("transaction '{0}' is paid and cannot be voided")]
    Paid(crate::ids::TransactionId),
    #[error("transaction '{id}' is {status} already; there is nothing to void")]
    Ended {
        id: crate::ids::TransactionId,
        status: Status,
    },
    #[error("a reason is needed: say why the sale is voided")]
    NoReason,
    /// Moving the money failed (only on the database).
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for VoidError {
    fn from(e: rusqlite::Error) -> Self {
        VoidError::Db(DbError::Sqlite(e))
    }
}

/// What a void did.
#[derive(Debug, Clone)]
pub struct Voided {
    /// The transaction after the void.
    pub item: Transaction,
    /// Whether a prepaid charge went back to the buyer.
    pub refunded: bool,
    /// Whether a webhook event not yet delivered was given up.
    pub event_cancelled: bool,
    /// Whether the request is open again (no other live transaction holds it).
    pub request_open: bool,
}

impl Voided {
    pub fn view(&self) -> VoidedView<'_> {
        VoidedView {
            item: self.item.view(),
            refunded: self.refunded,
            event_cancelled: self.event_cancelled,
            request_open: self.request_open,
        }
    }

    /// [`Voided::view`] as a JSON value, for callers that print one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// `transaction void --json`: the transaction after the void and what it undid.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VoidedView<'a> {
    item: TransactionView<'a>,
    refunded: bool,
    event_cancelled: bool,
    request_open: bool,
}

/// Takes a live sale back: moves `current` to `to` (rejected or cancelled) as `actor` with
/// `reason` in its history, refunds a prepaid charge, gives up a webhook event not yet
/// delivered (with `event_note` as its last error), and opens the request again when no
/// live transaction holds it. No supplier
/// clawback: the lead is about to be sold again. Returns (refunded, event cancelled,
/// request open). Shared by the operator's void and a buyer API's refusal
/// (`super::refusal`).
pub(super) fn take_back(
    conn: &Connection,
    current: &crate::delivery::transaction::Transaction,
    to: Status,
    actor: &str,
    reason: &str,
    event_note: &str,
    now: i64,
) -> Result<(bool, bool, bool), LifecycleError> {
    let money = Money {
        conn,
        current,
        actor,
        now,
    };
    let refunded = money.refund(to, Some(reason))?;
    transaction::move_to(
        conn,
        &current.id,
        current.status,
        to,
        actor,
        Some(reason),
        now,
    )?;
    let event_cancelled = crate::outbox::store::cancel_pending(conn, &current.id, event_note)? > 0;
    if event_cancelled {
        transaction::set_delivery_status(conn, &current.id, DeliveryStatus::Failed, None)?;
    }
    let request_open = !transaction::of_request(conn, current.lead_request_id)?
        .iter()
        .any(|t| t.status.is_live());
    if request_open {
        crate::ingest::status::reopen_request(conn, current.lead_request_id)?;
    }
    Ok((refunded, event_cancelled, request_open))
}

/// Voids transaction `id` for `reason` at `now`.
pub fn void(
    conn: &Connection,
    id: &crate::ids::TransactionId,
    reason: &str,
    now: i64,
) -> Result<Voided, VoidError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(VoidError::NoReason);
    }
    let current = transaction::find(conn, id)?.ok_or_else(|| VoidError::NotFound(id.clone()))?;
    match current.status {
        Status::Paid => return Err(VoidError::Paid(current.id)),
        Status::Rejected | Status::Cancelled => {
            return Err(VoidError::Ended {
                id: current.id,
                status: current.status,
            });
        }
        // Its return is decided first: approving it ends the sale with the refund.
        Status::ReturnRequested => return Err(LifecycleError::ReturnPending.into()),
        Status::Delivered | Status::Acknowledged | Status::PayoutPending => {}
    }
    let (refunded, event_cancelled, request_open) = take_back(
        conn,
        &current,
        Status::Cancelled,
        ACTOR,
        reason,
        &format!("voided: {reason}"),
        now,
    )?;
    let updated = transaction::find(conn, &current.id)?
        .expect("the transaction was read in this job and nothing deletes transactions");
    Ok(Voided {
        item: updated,
        refunded,
        event_cancelled,
        request_open,
    })
}
