//! The buyer lifecycle endpoints (SPEC.md sections 4.4 to 4.7): partner-confirmation,
//! partner-payout-pending, partner-payout and partner-cancellation.
//!
//! Owns the order of a buyer call's checks and its answer. Order (after the HTTP layer has
//! read the body: 413, 415, 400 `invalid_json`): a presented credential (401) → body shape
//! (400 `validation_failed`) → lookup and authorisation on a read connection, so that calls
//! with a wrong secret never queue at the writer → the whole call again (lookup,
//! authorisation, move, money, history, clawback) in ONE writer job, so that two concurrent
//! calls on one transaction are serialised.

use serde::Serialize;
use serde_json::Value;

use super::apply::{self, Applied};
use super::error::LifecycleError;
use super::input::{self, BuyerCall};
use super::lookup;
use super::state::{Move, Status};
use crate::db::Db;
use crate::delivery::transaction::TransactionView;

/// Which of the four buyer calls a request makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Confirmation,
    PayoutPending,
    Payout,
    Cancellation,
}

impl Kind {
    fn parse(self, body: &Value, price_text: Option<String>) -> Result<BuyerCall, LifecycleError> {
        match self {
            Kind::Confirmation => input::confirmation(body, price_text.as_deref()),
            Kind::PayoutPending => input::transaction_move(body, Move::MarkPayoutPending),
            Kind::Payout => input::transaction_move(body, Move::CompletePayout),
            Kind::Cancellation => input::transaction_move(body, Move::Cancel),
        }
    }

    /// The 200 body: DESIGN.md section 4 gives one shape for the confirmation and one for
    /// the other three.
    fn body(self, applied: &Applied) -> Value {
        match self {
            Kind::Confirmation => crate::to_value(Confirmed {
                item: applied.item.view(),
                auto_status_changed_to: applied.auto_status_changed_to.map(|s| s.as_str()),
                already_applied: applied.already_applied,
                economics_applied: applied.economics_applied,
            }),
            _ => crate::to_value(Moved {
                accepted: true,
                code: applied.state.as_str(),
                already_applied: applied.already_applied,
                economics_applied: applied.economics_applied,
                item: applied.item.view(),
                // A return under manual review (DESIGN.md section 19) says it waits.
                outcome: (applied.state == Status::ReturnRequested).then_some("pending_review"),
            }),
        }
    }
}

/// The 200 body of partner-confirmation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Confirmed<'a> {
    /// The transaction after the call.
    item: TransactionView<'a>,
    auto_status_changed_to: Option<&'static str>,
    already_applied: bool,
    economics_applied: bool,
}

/// The 200 body of partner-payout-pending, partner-payout and partner-cancellation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Moved<'a> {
    accepted: bool,
    code: &'static str,
    already_applied: bool,
    economics_applied: bool,
    item: TransactionView<'a>,
    /// Only a return that waits for review says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
}

/// A buyer call of `kind` with `body`, by whoever holds one of the `presented` secrets;
/// the answer's body. `price_text` is `buyerPrice` as it was sent
/// ([`input::buyer_price_text`]), read instead of the parsed number so that no float
/// rounds it.
pub async fn call(
    db: &Db,
    kind: Kind,
    presented: Vec<String>,
    body: &Value,
    price_text: Option<String>,
) -> Result<Value, LifecycleError> {
    if presented.is_empty() {
        return Err(LifecycleError::MissingCredential);
    }
    let call = kind.parse(body, price_text)?;
    let (address, capability, secrets) = (
        call.address.clone(),
        call.requested.capability(),
        presented.clone(),
    );
    db.read(move |conn| {
        let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
        lookup::authorize(conn, &address, &refs, capability).map(|_| ())
    })
    .await?;
    let applied = db
        .write(move |conn| {
            let refs: Vec<&str> = presented.iter().map(String::as_str).collect();
            apply::buyer_call(conn, &call, &refs, crate::clock::now_ms())
        })
        .await?;
    Ok(kind.body(&applied))
}
