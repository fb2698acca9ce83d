//! Applying a buyer call to its transaction: the verdict of the state machine, then the
//! rules around it (DESIGN.md section 4): the cancellation window, a new `buyerPrice` on
//! acknowledge, refunds of prepaid charges on rejection and cancellation, the buyer's
//! `autoPayoutPending`, the history entry of every move, and the supplier clawback when the
//! lead's last live transaction ends.
//!
//! Everything here runs inside one writer job, so two calls on the same transaction are
//! serialised and can never both refund or both charge. It does not find or authorise the
//! transaction (`lookup` does, in the same job) and knows nothing of HTTP.

use rusqlite::{Connection, params};
use serde_json::Value;

use super::error::LifecycleError;
use super::input::BuyerCall;
use super::lookup;
use super::state::{self, Move, Status, Transition};
use crate::config::buyer::{Buyer, Plan};
use crate::delivery::transaction::{self, Transaction};

/// The actor of moves the service makes by itself on a buyer's setting.
pub const SYSTEM_ACTOR: &str = "system";

/// What a buyer call did.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The transaction after the call.
    pub item: Value,
    /// The state the transaction is in after the call.
    pub state: Status,
    pub already_applied: bool,
    /// Whether the call changed an amount (price, margin) or a balance.
    pub economics_applied: bool,
    /// A state the service moved to on its own after the requested move.
    pub auto_status_changed_to: Option<Status>,
}

/// Finds, authorises and applies `call` as `presented` credentials allow, at time `now`.
pub fn buyer_call(
    conn: &Connection,
    call: &BuyerCall,
    presented: &[&str],
    now: i64,
) -> Result<Applied, LifecycleError> {
    let authorized =
        lookup::authorize(conn, &call.address, presented, call.requested.capability())?;
    let current = transaction::find(conn, &authorized.transaction_id)?
        .ok_or(LifecycleError::TransactionNotFound)?;
    apply(conn, current, &authorized.buyer, call, now)
}

fn apply(
    conn: &Connection,
    current: Transaction,
    buyer: &Buyer,
    call: &BuyerCall,
    now: i64,
) -> Result<Applied, LifecycleError> {
    let next = match state::decide(current.status, call.requested) {
        Transition::NotAllowed => {
            return Err(LifecycleError::TransitionNotAllowed {
                current: current.status,
                requested: call.requested,
            });
        }
        Transition::AlreadyApplied => {
            return Ok(Applied {
                item: current.to_json(),
                state: current.status,
                already_applied: true,
                economics_applied: false,
                auto_status_changed_to: None,
            });
        }
        Transition::Apply(next) => next,
    };
    if call.requested == Move::Cancel {
        check_cancellation_window(&current, buyer, now)?;
    }
    let economics_applied = match (call.requested, call.buyer_price_cents) {
        (Move::Acknowledge, Some(price)) => reprice(conn, &current, buyer, price)?,
        (Move::Reject | Move::Cancel, _) => refund(conn, &current)?,
        _ => false,
    };
    let actor = format!("buyer:{}", buyer.id);
    move_to(
        conn,
        &current.id,
        current.status,
        next,
        &actor,
        call.reason.as_deref(),
        now,
    )?;

    let mut auto_status_changed_to = None;
    if call.requested == Move::Acknowledge
        && buyer.auto_payout_pending
        && let Transition::Apply(after) = state::decide(next, Move::MarkPayoutPending)
    {
        move_to(
            conn,
            &current.id,
            next,
            after,
            SYSTEM_ACTOR,
            Some("the buyer's autoPayoutPending setting"),
            now,
        )?;
        auto_status_changed_to = Some(after);
    }
    if state::is_void(next) {
        super::clawback::open_when_all_void(conn, &current.lead_id, now)?;
    }
    let updated = transaction::find(conn, &current.id)?
        .expect("the transaction was read in this job and nothing deletes transactions");
    Ok(Applied {
        item: updated.to_json(),
        state: updated.status,
        already_applied: false,
        economics_applied,
        auto_status_changed_to,
    })
}

/// The window is half-open: a cancellation is allowed while less than the buyer's window
/// has passed since the delivery, so a window of 0 refuses every cancellation.
fn check_cancellation_window(
    current: &Transaction,
    buyer: &Buyer,
    now: i64,
) -> Result<(), LifecycleError> {
    let window_ms = buyer.cancellation_window_secs.saturating_mul(1000);
    if now.saturating_sub(current.created_at) >= window_ms {
        return Err(LifecycleError::CancellationWindowElapsed {
            delivered_at: current.created_at,
            window_secs: buyer.cancellation_window_secs,
        });
    }
    Ok(())
}

/// Sets the buyer price of an acknowledged transaction and recomputes its margin. A prepaid
/// buyer's charge follows the price: the difference is charged or refunded, and a charge
/// beyond balance plus credit limit is refused (nothing changes). Returns whether anything
/// changed.
fn reprice(
    conn: &Connection,
    current: &Transaction,
    buyer: &Buyer,
    price_cents: i64,
) -> Result<bool, LifecycleError> {
    let charged_cents = if buyer.plan == Plan::Prepaid {
        price_cents
    } else {
        current.charged_cents
    };
    let extra_charge = charged_cents - current.charged_cents;
    // The buyer was read in this writer job, so its balance is the current one.
    let available = buyer.balance_cents + buyer.credit_limit_cents;
    if extra_charge > 0 && extra_charge > available {
        return Err(LifecycleError::InsufficientBalance {
            required_cents: extra_charge,
            available_cents: available,
        });
    }
    if price_cents == current.buyer_price_cents && extra_charge == 0 {
        return Ok(false);
    }
    conn.execute(
        "UPDATE transactions
         SET buyer_price_cents = ?2, margin_cents = ?2 - supplier_cost_cents, charged_cents = ?3
         WHERE id = ?1",
        params![current.id, price_cents, charged_cents],
    )?;
    if extra_charge != 0 {
        adjust_balance(conn, &buyer.id, -extra_charge)?;
    }
    Ok(true)
}

/// Returns a prepaid charge to the buyer's balance. Returns whether there was one.
fn refund(conn: &Connection, current: &Transaction) -> Result<bool, LifecycleError> {
    if current.charged_cents == 0 {
        return Ok(false);
    }
    conn.execute(
        "UPDATE transactions SET charged_cents = 0 WHERE id = ?1",
        [&current.id],
    )?;
    adjust_balance(conn, &current.buyer_id, current.charged_cents)?;
    Ok(true)
}

fn adjust_balance(conn: &Connection, buyer_id: &str, delta_cents: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE buyers SET balance_cents = balance_cents + ?2 WHERE id = ?1",
        params![buyer_id, delta_cents],
    )?;
    Ok(())
}

/// Moves the transaction and appends the move to its history.
fn move_to(
    conn: &Connection,
    transaction_id: &str,
    from: Status,
    to: Status,
    actor: &str,
    reason: Option<&str>,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE transactions SET status = ?2, updated_at = ?3 WHERE id = ?1",
        params![transaction_id, to.as_str(), now],
    )?;
    transaction::append_history(conn, transaction_id, Some(from), to, actor, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::container::DeliveryMode;
    use crate::delivery::transaction::DeliveryStatus;

    fn delivered_at(created_at: i64) -> Transaction {
        Transaction {
            id: "txn_1".into(),
            lead_request_id: "lreq_1".into(),
            lead_id: "lead_1".into(),
            buyer_id: "b".into(),
            product_id: "p".into(),
            workspace_id: "ws".into(),
            delivery_mode: DeliveryMode::Exclusive,
            buyer_price_cents: 2500,
            supplier_cost_cents: 400,
            margin_cents: 2100,
            charged_cents: 0,
            status: Status::Delivered,
            partner_external_id: None,
            delivery_status: DeliveryStatus::Pending,
            created_at,
            updated_at: created_at,
        }
    }

    fn buyer_with_window(secs: i64) -> Buyer {
        Buyer {
            id: "b".into(),
            workspace_id: "ws".into(),
            name: "B".into(),
            webhook_url: "http://127.0.0.1:9/".into(),
            secret_hash: None,
            signing_secret: "whsec_x".into(),
            capabilities: vec!["cancel".into()],
            cancellation_window_secs: secs,
            auto_payout_pending: false,
            plan: Plan::Postpaid,
            balance_cents: 0,
            credit_limit_cents: 0,
            paused: false,
            last_served_at: None,
            created_at: 0,
        }
    }

    #[test]
    fn the_cancellation_window_is_half_open() {
        let txn = delivered_at(1_000_000);
        let hour = buyer_with_window(3600);
        assert!(check_cancellation_window(&txn, &hour, 1_000_000).is_ok());
        assert!(check_cancellation_window(&txn, &hour, 1_000_000 + 3_599_999).is_ok());
        assert!(matches!(
            check_cancellation_window(&txn, &hour, 1_000_000 + 3_600_000),
            Err(LifecycleError::CancellationWindowElapsed {
                delivered_at: 1_000_000,
                window_secs: 3600
            })
        ));
        let closed = buyer_with_window(0);
        assert!(check_cancellation_window(&txn, &closed, 1_000_000).is_err());
    }
}
