//! `POST /api/webhooks/supplier-cancellation-confirmation`: a supplier answers a lead
//! cancellation (SPEC.md section 4.8, DESIGN.md section 6).
//!
//! Owns the supplier's credential check and what an answer does. `acknowledged` confirms
//! it: the cancellation is resolved `acknowledged`, the lead becomes `cancelled`, and its
//! supplier cost is reversed (every transaction of the lead that carried a supplier cost
//! gets a cost of 0 and a margin equal to its buyer price, with a history entry saying what
//! was reversed). `rejected` disputes it: the cancellation is resolved `rejected` and the
//! lead goes back to `active` (it stays bought from the supplier). Opening cancellations is
//! `clawback`'s business.

use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

use super::clawback::{self, CancellationStatus, SupplierCancellation, SupplierCancellationView};
use super::error::LifecycleError;
use super::input::{self, SupplierAnswer};
use crate::config::supplier::{self, Supplier};
use crate::db::Db;
use crate::delivery::transaction;
use crate::ledger;

/// What an answer did.
#[derive(Debug, Clone)]
pub struct Answered {
    pub cancellation: SupplierCancellation,
    pub already_applied: bool,
}

impl Answered {
    pub(crate) fn code(&self) -> &'static str {
        match self.cancellation.status {
            CancellationStatus::Rejected => "cancellation_rejected",
            _ => "cancellation_confirmed",
        }
    }

    pub(crate) fn outcome(&self) -> &'static str {
        match self.cancellation.status {
            CancellationStatus::Rejected => "cancellation_disputed",
            _ => "lead_cancelled",
        }
    }

    pub fn view(&self) -> AnsweredView<'_> {
        AnsweredView {
            accepted: true,
            code: self.code(),
            lead_id: self.cancellation.lead_id,
            already_applied: self.already_applied,
            outcome: self.outcome(),
            cancellation: self.cancellation.view(),
        }
    }

    /// [`Answered::view`] as a JSON value, for callers that answer with one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// The 200 body of a supplier's answer to a cancellation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnsweredView<'a> {
    accepted: bool,
    code: &'static str,
    lead_id: crate::ids::LeadId,
    already_applied: bool,
    outcome: &'static str,
    cancellation: SupplierCancellationView<'a>,
}

/// The supplier whose key was presented in either header. Keys are looked up by their hash,
/// so the lookup's timing says nothing about the key.
pub(crate) fn authenticate(
    conn: &Connection,
    presented: &[&str],
) -> Result<Supplier, LifecycleError> {
    if presented.is_empty() {
        return Err(LifecycleError::MissingCredential);
    }
    let now = crate::clock::now_ms();
    for key in presented {
        if let Some(found) = supplier::find_by_key_hash(conn, &crate::secrets::hash(key), now)? {
            return Ok(found);
        }
    }
    Err(LifecycleError::InvalidCredential)
}

/// Records `answer` from `supplier` at time `now`.
pub(crate) fn answer(
    conn: &Connection,
    supplier: &Supplier,
    answer: &SupplierAnswer,
    now: i64,
) -> Result<Answered, LifecycleError> {
    // Text that is not one of our lead ids names no lead.
    let lead_id = crate::ids::LeadId::parse(&answer.lead_id).ok_or(LifecycleError::LeadNotFound)?;
    let Some(cancellation) = clawback::of_lead(conn, lead_id)? else {
        // A lead of this supplier without a cancellation, or not this supplier's lead (or
        // no lead at all): the second answer is the same as the third, so a supplier learns
        // nothing about other suppliers' leads.
        let supply = clawback::lead_supply(conn, lead_id)?;
        return match supply {
            Some(s) if s.supplier_id.as_ref() == Some(&supplier.id) => {
                Err(LifecycleError::NoCancellationRequested)
            }
            _ => Err(LifecycleError::LeadNotFound),
        };
    };
    if cancellation.supplier_id != supplier.id {
        return Err(LifecycleError::LeadNotFound);
    }
    let wanted = if answer.acknowledged {
        CancellationStatus::Acknowledged
    } else {
        CancellationStatus::Rejected
    };
    match cancellation.status {
        CancellationStatus::Pending => {}
        status if status == wanted => {
            return Ok(Answered {
                cancellation,
                already_applied: true,
            });
        }
        status => {
            return Err(LifecycleError::CancellationAlreadyResolved {
                status: status.as_str().to_string(),
            });
        }
    }
    clawback::resolve(conn, &cancellation, wanted, answer.reason.as_deref(), now)?;
    if answer.acknowledged {
        reverse_supplier_cost(conn, lead_id, &supplier.id, now)?;
    }
    let cancellation = clawback::of_lead(conn, lead_id)?
        .expect("the cancellation was read in this job and nothing deletes it");
    let changes = crate::audit::Changes::new().set(
        "cancellation",
        CancellationStatus::Pending.as_str(),
        wanted.as_str(),
    );
    crate::audit::record(
        conn,
        &crate::audit::Actor::ApiSupplier(supplier.id.clone()),
        "lead.supplier_cancellation_answer",
        &answer.lead_id,
        &changes,
        now,
    )?;
    Ok(Answered {
        cancellation,
        already_applied: false,
    })
}

/// Reverses the lead's supplier cost: each of its transactions that carries one gets a cost
/// of 0 and a margin equal to its buyer price, with a history entry saying what was reversed
/// (an entry that keeps the state: from and to are the same); and the supplier money still
/// held on the lead's transactions goes back, one `supplier_reversal` row per transaction.
fn reverse_supplier_cost(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
    supplier_id: &crate::ids::SupplierId,
    now: i64,
) -> rusqlite::Result<()> {
    let actor = format!("supplier:{supplier_id}");
    const WHY: &str = "the supplier confirmed the lead cancellation";
    // Newest first: the reports count a cost on the earliest transaction that carries it,
    // so the later ones are reversed while it still does.
    for carrying in transaction::of_lead(conn, lead_id)?
        .into_iter()
        .rev()
        .filter(|t| t.supplier_cost_cents != 0)
    {
        let reason = format!(
            "supplier cost {} reversed: {WHY}",
            crate::money::display(carrying.supplier_cost_cents)
        );
        transaction::reverse_supplier_cost(conn, &carrying, &actor, &reason, now)?;
    }
    for held in ledger::query::supplier_holdings_of_lead(conn, lead_id)? {
        ledger::post(
            conn,
            &ledger::Posting {
                workspace_id: &held.workspace_id,
                party: ledger::Party::Supplier(&held.supplier_id),
                transaction_id: Some(&held.transaction_id),
                kind: ledger::Kind::SupplierReversal,
                amount_cents: -held.amount_cents,
                reason: Some(WHY),
                actor: &actor,
                at: now,
            },
        )?;
    }
    Ok(())
}

/// A supplier's answer in `body`, by whoever holds one of the `presented` keys. Order
/// (after the HTTP layer has read the body: 413, 415, 400 `invalid_json`): credential (401)
/// → body shape (400 `validation_failed`) → the answer, in one writer job.
pub async fn call(
    db: &Db,
    presented: Vec<String>,
    body: &Value,
) -> Result<Answered, LifecycleError> {
    if presented.is_empty() {
        return Err(LifecycleError::MissingCredential);
    }
    let supplier = db
        .read(move |conn| {
            let refs: Vec<&str> = presented.iter().map(String::as_str).collect();
            authenticate(conn, &refs)
        })
        .await?;
    let parsed = input::supplier_answer(body)?;
    db.write(move |conn| answer(conn, &supplier, &parsed, crate::clock::now_ms()))
        .await
}
