//! A buyer's API refusing a lead (DESIGN.md section 18): the outbox judged a mapped
//! integration's answer a refusal ("duplicate", "outside area"), so the sale did not
//! happen.
//!
//! The transaction moves to `rejected` (actor `buyer-api`, the buyer's reason in its
//! history), a prepaid charge goes back to the buyer, its place of the caps is given back
//! and the request is open again, exactly as the operator's void takes a sale back
//! (`void::take_back`); no supplier clawback, since the lead is about to be offered to the
//! next buyer (`autodelivery::waterfall`). Runs in the outbox's writer job that records
//! the refusal.

use rusqlite::Connection;

use super::LifecycleError;
use crate::delivery::transaction::{self, Status, Transaction};

/// Who refuses, in the history and the ledger.
pub(crate) const ACTOR: &str = "buyer-api";

/// A refusal that took a sale back.
#[derive(Debug, Clone)]
pub struct Refused {
    pub transaction: Transaction,
    pub refunded: bool,
}

/// Applies the refusal of transaction `transaction_id` with the buyer's `reason` at `now`.
/// `None` when there is nothing to take back: the transaction ended already (voided
/// meanwhile) or was paid.
pub fn refuse(
    conn: &Connection,
    transaction_id: &crate::ids::TransactionId,
    reason: &str,
    now: i64,
) -> Result<Option<Refused>, LifecycleError> {
    let Some(current) = transaction::find(conn, transaction_id)? else {
        return Ok(None);
    };
    // A transaction waiting for a return decision is the operator's to decide: its
    // approval ends the sale with the refund.
    if !current.status.is_live()
        || current.status == Status::Paid
        || current.status == Status::ReturnRequested
    {
        return Ok(None);
    }
    let (refunded, _, _) = super::void::take_back(
        conn,
        &current,
        Status::Rejected,
        ACTOR,
        reason,
        &format!("refused by the buyer: {reason}"),
        now,
    )?;
    let transaction = transaction::find(conn, transaction_id)?
        .expect("the transaction was read in this job and nothing deletes transactions");
    Ok(Some(Refused {
        transaction,
        refunded,
    }))
}
