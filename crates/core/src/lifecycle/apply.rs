//! Applying a buyer call to its transaction: the verdict of the state machine, then the
//! rules around it (DESIGN.md section 4): the cancellation window, a new `buyerPrice` on
//! acknowledge, refunds of prepaid charges on rejection and cancellation, the buyer's
//! `autoPayoutPending`, the history entry of every move, and the supplier clawback when the
//! lead's last live transaction ends. A cancellation is a return (DESIGN.md section 19):
//! `returns::file` checks and records it, and under the buyer's manual review the
//! transaction waits in `return_requested` instead of ending; ending a sale is one
//! function ([`end_sale`]) for a rejection, a cancellation and an approved return.
//!
//! Everything here runs inside one writer job, so two calls on the same transaction are
//! serialised and can never both refund or both charge. It does not find or authorise the
//! transaction (`lookup` does, in the same job) and knows nothing of HTTP.

use rusqlite::Connection;

use super::error::LifecycleError;
use super::input::BuyerCall;
use super::state::{self, Move, Status, Transition};
use super::{lookup, returns};
use crate::config::buyer::{Buyer, Plan};
use crate::delivery::transaction::{self, Transaction};
use crate::ledger;

/// The actor of moves the service makes by itself on a buyer's setting.
pub(crate) const SYSTEM_ACTOR: &str = "system";

/// What a buyer call did.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    /// The transaction after the call.
    pub item: Transaction,
    /// The state the transaction is in after the call.
    pub state: Status,
    pub already_applied: bool,
    /// Whether the call changed an amount (price, margin) or a balance.
    pub economics_applied: bool,
    /// A state the service moved to on its own after the requested move.
    pub auto_status_changed_to: Option<Status>,
}

/// Finds, authorises and applies `call` as `presented` credentials allow, at time `now`.
pub(crate) fn buyer_call(
    conn: &Connection,
    call: &BuyerCall,
    presented: &[&str],
    now: i64,
) -> Result<Applied, LifecycleError> {
    let authorized =
        lookup::authorize(conn, &call.address, presented, call.requested.capability())?;
    let current = transaction::find(conn, &authorized.transaction_id)?
        .ok_or(LifecycleError::TransactionNotFound)?;
    let actor = format!("buyer:{}", authorized.buyer.id);
    let before = current.to_json();
    let applied = apply(conn, current, &authorized.buyer, call, &actor, now)?;
    if !applied.already_applied {
        let action = match call.requested {
            Move::Acknowledge => "transaction.acknowledge",
            Move::Reject => "transaction.reject",
            Move::MarkPayoutPending => "transaction.payout_pending",
            Move::CompletePayout => "transaction.payout",
            Move::Cancel => "transaction.cancel",
        };
        crate::audit::record_diff(
            conn,
            &crate::audit::Actor::ApiBuyer(authorized.buyer.id.clone()),
            action,
            authorized.transaction_id.as_str(),
            &before,
            &applied.item.to_json(),
            now,
        )?;
    }
    Ok(applied)
}

/// Applies `call` to `current`, a transaction of `buyer`, as `actor`: the buyer's own calls
/// and the operator's return filed for a buyer (`transaction return request`) take this
/// one path.
pub(super) fn apply(
    conn: &Connection,
    current: Transaction,
    buyer: &Buyer,
    call: &BuyerCall,
    actor: &str,
    now: i64,
) -> Result<Applied, LifecycleError> {
    let next = match state::decide(current.status, call.requested) {
        Transition::NotAllowed => {
            return Err(LifecycleError::TransitionNotAllowed {
                current: current.status,
                requested: call.requested,
            });
        }
        Transition::AwaitingReturn => return Err(LifecycleError::ReturnPending),
        Transition::AlreadyApplied => {
            return Ok(Applied {
                state: current.status,
                item: current,
                already_applied: true,
                economics_applied: false,
                auto_status_changed_to: None,
            });
        }
        Transition::Apply(next) => next,
    };
    if call.requested == Move::Cancel {
        check_cancellation_window(&current, buyer, now)?;
        let claim = returns::Claim {
            reason_code: call.reason_code.as_deref(),
            reason: call.reason.as_deref(),
            actor,
        };
        if returns::file(conn, &current, buyer, &claim, now)? == returns::Review::Pending {
            transaction::move_to(
                conn,
                &current.id,
                current.status,
                Status::ReturnRequested,
                actor,
                call.reason.as_deref(),
                now,
            )?;
            return Ok(Applied {
                item: reread(conn, &current.id)?,
                state: Status::ReturnRequested,
                already_applied: false,
                economics_applied: false,
                auto_status_changed_to: None,
            });
        }
    }
    let economics_applied = if state::is_void(next) {
        end_sale(conn, &current, next, actor, call.reason.as_deref(), now)?
    } else {
        let repriced = match (call.requested, call.buyer_price_cents) {
            (Move::Acknowledge, Some(price)) => Money {
                conn,
                current: &current,
                actor,
                now,
            }
            .reprice(buyer, price)?,
            _ => false,
        };
        transaction::move_to(
            conn,
            &current.id,
            current.status,
            next,
            actor,
            call.reason.as_deref(),
            now,
        )?;
        repriced
    };

    let mut auto_status_changed_to = None;
    if call.requested == Move::Acknowledge
        && buyer.auto_payout_pending
        && let Transition::Apply(after) = state::decide(next, Move::MarkPayoutPending)
    {
        transaction::move_to(
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
    let updated = reread(conn, &current.id)?;
    Ok(Applied {
        state: updated.status,
        item: updated,
        already_applied: false,
        economics_applied,
        auto_status_changed_to,
    })
}

/// The transaction `id` again, after a write of this job.
fn reread(conn: &Connection, id: &crate::ids::TransactionId) -> rusqlite::Result<Transaction> {
    Ok(transaction::find(conn, id)?
        .expect("the transaction was read in this job and nothing deletes transactions"))
}

/// Ends the sale of `current` as a buyer's rejection or cancellation does, and an approved
/// return: the move to `to` (rejected or cancelled) with `reason` in its history, which
/// gives the buyer's cap place back; the refund of a prepaid charge; its `lead.delivered`
/// voided when never tried; and the supplier clawback once the lead's last live
/// transaction has ended. Returns whether a charge was
/// refunded.
pub(super) fn end_sale(
    conn: &Connection,
    current: &Transaction,
    to: Status,
    actor: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<bool, LifecycleError> {
    let refunded = Money {
        conn,
        current,
        actor,
        now,
    }
    .refund(to, reason)?;
    transaction::move_to(conn, &current.id, current.status, to, actor, reason, now)?;
    // The person's data is not sent for a sale that ended before its first attempt; an
    // event in flight is not recalled.
    let voided = format!("voided: the transaction was {to} before its first attempt");
    if crate::outbox::store::void_unsent(conn, &current.id, &voided, now)? > 0 {
        transaction::set_delivery_status(
            conn,
            &current.id,
            transaction::DeliveryStatus::Failed,
            None,
        )?;
    }
    super::clawback::open_when_all_void(conn, current.lead_id, now)?;
    Ok(refunded)
}

/// Refuses a cancellation once the buyer's cancellation window has closed
/// ([`state::cancellation_window_open`]).
fn check_cancellation_window(
    current: &Transaction,
    buyer: &Buyer,
    now: i64,
) -> Result<(), LifecycleError> {
    if !state::cancellation_window_open(current.created_at, buyer.cancellation_window_secs, now) {
        return Err(LifecycleError::CancellationWindowElapsed {
            delivered_at: current.created_at,
            window_secs: buyer.cancellation_window_secs,
        });
    }
    Ok(())
}

/// The money a call moves on its transaction: the transaction's amounts through its owner
/// (`delivery::transaction`), the buyer's balance through the ledger.
pub(super) struct Money<'a> {
    pub(super) conn: &'a Connection,
    pub(super) current: &'a Transaction,
    pub(super) actor: &'a str,
    pub(super) now: i64,
}

impl Money<'_> {
    fn post(&self, kind: ledger::Kind, amount_cents: i64, reason: &str) -> rusqlite::Result<()> {
        ledger::post(
            self.conn,
            &ledger::Posting {
                workspace_id: &self.current.workspace_id,
                party: ledger::Party::Buyer(&self.current.buyer_id),
                transaction_id: Some(&self.current.id),
                kind,
                amount_cents,
                reason: Some(reason),
                actor: self.actor,
                at: self.now,
            },
        )?;
        Ok(())
    }

    /// Sets the buyer price of an acknowledged transaction and recomputes its margin. A
    /// prepaid buyer's charge follows the price: the difference is charged or refunded, and
    /// a charge beyond balance plus credit limit is refused (nothing changes). Returns
    /// whether anything changed.
    fn reprice(&self, buyer: &Buyer, price_cents: i64) -> Result<bool, LifecycleError> {
        let current = self.current;
        let charged_cents = if buyer.plan == Plan::Prepaid {
            price_cents
        } else {
            current.charged_cents
        };
        let extra_charge = charged_cents - current.charged_cents;
        // The buyer was read in this writer job, so its balance is the current one.
        if extra_charge > 0
            && let Err(short) =
                ledger::covers(buyer.balance_cents, buyer.credit_limit_cents, extra_charge)
        {
            return Err(LifecycleError::InsufficientBalance {
                required_cents: extra_charge,
                available_cents: short.available_cents,
            });
        }
        if price_cents == current.buyer_price_cents && extra_charge == 0 {
            return Ok(false);
        }
        transaction::set_price(self.conn, &current.id, price_cents, charged_cents)?;
        if extra_charge != 0 {
            let reason = format!(
                "buyer price {} -> {} on acknowledge",
                crate::money::display(current.buyer_price_cents),
                crate::money::display(price_cents)
            );
            self.post(ledger::Kind::PriceChange, -extra_charge, &reason)?;
        }
        Ok(true)
    }

    /// Returns a prepaid charge to the buyer's balance as the transaction moves to `to`
    /// (rejected or cancelled). Returns whether there was one.
    pub(super) fn refund(&self, to: Status, why: Option<&str>) -> Result<bool, LifecycleError> {
        let charged_cents = self.current.charged_cents;
        if charged_cents == 0 {
            return Ok(false);
        }
        transaction::clear_charge(self.conn, &self.current.id)?;
        let reason = match why {
            Some(why) => format!("{to}: {why}"),
            None => to.to_string(),
        };
        self.post(ledger::Kind::Refund, charged_cents, &reason)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::container::DeliveryMode;
    use crate::delivery::transaction::DeliveryStatus;

    fn delivered_at(created_at: i64) -> Transaction {
        Transaction {
            bid: None,
            id: "txn_1".into(),
            lead_request_id: crate::ids::LeadRequestId::generate(),
            lead_id: crate::ids::LeadId::generate(),
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
            secret: Default::default(),
            signing_secret: "whsec_x".into(),
            previous_signing_secret: None,
            capabilities: vec!["cancel".into()],
            cancellation_window_secs: secs,
            auto_payout_pending: false,
            plan: Plan::Postpaid,
            balance_cents: 0,
            credit_limit_cents: 0,
            paused: false,
            last_served_at: None,
            created_at: 0,
            archived_at: None,
            return_cap_bp: None,
            return_review: crate::config::buyer::ReturnReview::Auto,
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
