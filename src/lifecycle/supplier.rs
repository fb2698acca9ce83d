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

use rusqlite::{Connection, params};
use serde_json::{Value, json};

use super::clawback::{self, CancellationStatus, SupplierCancellation};
use super::error::LifecycleError;
use super::input::{self, SupplierAnswer};
use crate::config::supplier::{self, Supplier};
use crate::db::Db;
use crate::delivery::transaction::{self, Status};

/// What an answer did.
#[derive(Debug, Clone)]
pub struct Answered {
    pub cancellation: SupplierCancellation,
    pub already_applied: bool,
}

impl Answered {
    pub fn code(&self) -> &'static str {
        match self.cancellation.status {
            CancellationStatus::Rejected => "cancellation_rejected",
            _ => "cancellation_confirmed",
        }
    }

    pub fn outcome(&self) -> &'static str {
        match self.cancellation.status {
            CancellationStatus::Rejected => "cancellation_disputed",
            _ => "lead_cancelled",
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "accepted": true,
            "code": self.code(),
            "leadId": self.cancellation.lead_id,
            "alreadyApplied": self.already_applied,
            "outcome": self.outcome(),
            "cancellation": self.cancellation.to_json(),
        })
    }
}

/// The supplier whose key was presented in either header. Keys are looked up by their hash,
/// so the lookup's timing says nothing about the key.
pub fn authenticate(conn: &Connection, presented: &[&str]) -> Result<Supplier, LifecycleError> {
    if presented.is_empty() {
        return Err(LifecycleError::MissingCredential);
    }
    for key in presented {
        if let Some(found) = supplier::find_by_key_hash(conn, &crate::secrets::hash(key))? {
            return Ok(found);
        }
    }
    Err(LifecycleError::InvalidCredential)
}

/// Records `answer` from `supplier` at time `now`.
pub fn answer(
    conn: &Connection,
    supplier: &Supplier,
    answer: &SupplierAnswer,
    now: i64,
) -> Result<Answered, LifecycleError> {
    let Some(cancellation) = clawback::of_lead(conn, &answer.lead_id)? else {
        // A lead of this supplier without a cancellation, or not this supplier's lead (or
        // no lead at all): the second answer is the same as the third, so a supplier learns
        // nothing about other suppliers' leads.
        let supply = clawback::lead_supply(conn, &answer.lead_id)?;
        return match supply {
            Some(s) if s.supplier_id.as_deref() == Some(supplier.id.as_str()) => {
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
        reverse_supplier_cost(conn, &answer.lead_id, &supplier.id, now)?;
    }
    let cancellation = clawback::of_lead(conn, &answer.lead_id)?
        .expect("the cancellation was read in this job and nothing deletes it");
    Ok(Answered {
        cancellation,
        already_applied: false,
    })
}

/// Sets the supplier cost of each of the lead's transactions to 0 and its margin to its
/// buyer price, and notes the reversed amount in the transaction's history (an entry that
/// keeps the state: from and to are the same).
fn reverse_supplier_cost(
    conn: &Connection,
    lead_id: &str,
    supplier_id: &str,
    now: i64,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, status, supplier_cost_cents FROM transactions
         WHERE lead_id = ?1 AND supplier_cost_cents <> 0 ORDER BY id",
    )?;
    let carrying: Vec<(String, Status, i64)> = stmt
        .query_map([lead_id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let actor = format!("supplier:{supplier_id}");
    for (id, status, cost) in carrying {
        conn.execute(
            "UPDATE transactions SET supplier_cost_cents = 0, margin_cents = buyer_price_cents,
                updated_at = ?2
             WHERE id = ?1",
            params![id, now],
        )?;
        let reason = format!(
            "supplier cost {} reversed: the supplier confirmed the lead cancellation",
            crate::money::display(cost)
        );
        transaction::append_history(conn, &id, Some(status), status, &actor, Some(&reason))?;
    }
    Ok(())
}

/// A supplier's answer in `body`, by whoever holds one of the `presented` keys. Order
/// (after the HTTP layer has read the body: 413, 415, 400 `invalid_json`): credential (401)
/// → body shape (400 `validation_failed`) → the answer, in one writer job.
pub(crate) async fn call(
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
