//! Recording the attempts a round of the outbox finished, and what follows from each in
//! the same job: the transaction's delivery status, a refusal's taking back and the
//! waterfall.

use rusqlite::Connection;

use crate::db::DbError;
use crate::delivery::transaction::{self, DeliveryStatus};
use crate::outbox::RetrySchedule;
use crate::outbox::store::{self, Attempt, DeliveryFact, Outcome, Refusal, SendState};

/// What [`record_all`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Each attempt's outcome, in order; `None` for one whose event is gone.
    pub outcomes: Vec<Option<Outcome>>,
    /// New deliveries the waterfall made after refusals: their events are due now.
    pub rerouted: usize,
}

/// Records each attempt and moves its event, and sets its transaction's delivery status.
/// A buyer API's refusal (a mapped integration) also takes the sale back
/// (`lifecycle::refusal`) and lets the waterfall offer the lead to the next buyer
/// (`waterfall`), in this same job: the refusal and what follows from it commit together
/// or not at all.
pub fn record_all(
    conn: &Connection,
    finished: &[Attempt],
    schedule: &RetrySchedule,
    now: i64,
) -> Result<Recorded, DbError> {
    let mut outcomes = Vec::with_capacity(finished.len());
    let mut rerouted = 0;
    for attempt in finished {
        let recorded = store::record_attempt(conn, attempt, schedule, now)?;
        if let Some(recorded) = &recorded {
            if let Some(fact) = &recorded.delivery {
                apply(conn, fact)?;
            }
            if let Some(refusal) = &recorded.refusal {
                rerouted += after_refusal(conn, refusal, now)?;
            }
        }
        outcomes.push(recorded.map(|recorded| recorded.outcome));
    }
    Ok(Recorded { outcomes, rerouted })
}

/// Sets the delivery status of the transaction `fact` names, through its owner.
pub(super) fn apply(conn: &Connection, fact: &DeliveryFact) -> rusqlite::Result<()> {
    let (status, partner_external_id) = match &fact.state {
        SendState::Pending => (DeliveryStatus::Pending, None),
        SendState::Sent {
            partner_external_id,
        } => (DeliveryStatus::Sent, partner_external_id.as_deref()),
        SendState::Failed => (DeliveryStatus::Failed, None),
    };
    transaction::set_delivery_status(conn, &fact.transaction_id, status, partner_external_id)
}

/// What a refusal does beyond the outbox. Database errors fail the job (and the attempt is
/// recorded again next round); anything else is logged, the refusal itself stands.
fn after_refusal(conn: &Connection, refusal: &Refusal, now: i64) -> Result<usize, DbError> {
    use crate::autodelivery::AutoDeliveryError;
    use crate::lifecycle::LifecycleError;
    let refused = match crate::lifecycle::refusal::refuse(
        conn,
        &refusal.transaction_id,
        &refusal.reason,
        now,
    ) {
        Ok(Some(refused)) => refused,
        Ok(None) => return Ok(0),
        Err(LifecycleError::Db(e)) => return Err(e),
        Err(e) => {
            log::warn!(
                "outbox: the refusal of transaction {} could not be applied: {e}",
                refusal.transaction_id
            );
            return Ok(0);
        }
    };
    log::info!(
        "outbox: buyer {} refused transaction {} (refunded: {})",
        refusal.buyer_id,
        refusal.transaction_id,
        refused.refunded
    );
    match crate::waterfall::after_refusal(
        conn,
        &refused.transaction,
        &refusal.reason,
        refusal.first_attempt,
        now,
    ) {
        Ok(delivered) => Ok(delivered),
        Err(AutoDeliveryError::Db(e)) => Err(e),
        Err(e) => {
            log::warn!(
                "outbox: the waterfall after transaction {} stopped: {e}",
                refusal.transaction_id
            );
            Ok(0)
        }
    }
}
