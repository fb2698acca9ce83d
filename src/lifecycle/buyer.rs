//! The buyer lifecycle endpoints (SPEC.md sections 4.4 to 4.7): partner-confirmation,
//! partner-payout-pending, partner-payout and partner-cancellation.
//!
//! Owns the HTTP side of a buyer call: reading the body, the order of the checks and the
//! response bodies. Order: body (413, 415, 400 `invalid_json`) → a credential in either
//! header (401) → body shape (400 `validation_failed`) → lookup and authorisation on a read
//! connection, so that calls with a wrong secret never queue at the writer → the whole call
//! again (lookup, authorisation, move, money, history, clawback) in ONE writer job, so that
//! two concurrent calls on one transaction are serialised.

use hyper::StatusCode;
use serde_json::{Value, json};

use super::apply::{self, Applied};
use super::error::LifecycleError;
use super::input::{self, BuyerCall};
use super::lookup;
use super::state::Move;
use crate::http::{ApiError, AppState, Request, Response, response};

/// Which buyer endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Confirmation,
    PayoutPending,
    Payout,
    Cancellation,
}

impl Endpoint {
    fn parse(self, body: &Value) -> Result<BuyerCall, LifecycleError> {
        match self {
            Endpoint::Confirmation => input::confirmation(body),
            Endpoint::PayoutPending => input::transaction_move(body, Move::MarkPayoutPending),
            Endpoint::Payout => input::transaction_move(body, Move::CompletePayout),
            Endpoint::Cancellation => input::transaction_move(body, Move::Cancel),
        }
    }

    /// The 200 body: DESIGN.md section 4 gives one shape for the confirmation and one for
    /// the other three.
    fn body(self, applied: &Applied) -> Value {
        match self {
            Endpoint::Confirmation => json!({
                "item": applied.item,
                "autoStatusChangedTo": applied.auto_status_changed_to.map(|s| s.as_str()),
                "alreadyApplied": applied.already_applied,
                "economicsApplied": applied.economics_applied,
            }),
            _ => json!({
                "accepted": true,
                "code": applied.state.as_str(),
                "alreadyApplied": applied.already_applied,
                "economicsApplied": applied.economics_applied,
                "item": applied.item,
            }),
        }
    }
}

pub async fn handle(
    state: &AppState,
    request: Request,
    endpoint: Endpoint,
) -> Result<Response, ApiError> {
    let received = super::request::receive(state, request).await?;
    let call = endpoint.parse(&received.body)?;

    let (address, capability, secrets) = (
        call.address.clone(),
        call.requested.capability(),
        received.presented.clone(),
    );
    state
        .db
        .read(move |conn| {
            let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
            lookup::authorize(conn, &address, &refs, capability).map(|_| ())
        })
        .await?;

    let applied = state
        .db
        .write(move |conn| {
            apply::buyer_call(conn, &call, &received.presented(), crate::clock::now_ms())
        })
        .await?;
    Ok(response::json(StatusCode::OK, &endpoint.body(&applied)))
}
