//! The lifecycle endpoints (SPEC.md sections 4.4 to 4.8): the four buyer calls
//! (`partner-confirmation`, `partner-payout-pending`, `partner-payout`,
//! `partner-cancellation`) and the supplier's `supplier-cancellation-confirmation`; the
//! HTTP half of `lifecycle::buyer` and `lifecycle::supplier`.
//!
//! Each takes the presented credentials from the headers and reads the body (413, 415, 408,
//! 400 `invalid_json`) before the domain checks anything; the router answers their errors
//! in the partner form.

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use crate::http::error::Error;
use crate::http::{AppState, Request, Response, auth, body, response};
use crate::lifecycle::buyer::{self, Kind};

pub(crate) async fn confirmation(state: &AppState, request: Request) -> Result<Response, Error> {
    buyer_call(state, request, Kind::Confirmation).await
}

pub(crate) async fn payout_pending(state: &AppState, request: Request) -> Result<Response, Error> {
    buyer_call(state, request, Kind::PayoutPending).await
}

pub(crate) async fn payout(state: &AppState, request: Request) -> Result<Response, Error> {
    buyer_call(state, request, Kind::Payout).await
}

pub(crate) async fn cancellation(state: &AppState, request: Request) -> Result<Response, Error> {
    buyer_call(state, request, Kind::Cancellation).await
}

pub(crate) async fn supplier_answer(state: &AppState, request: Request) -> Result<Response, Error> {
    let (_place, presented, body, _) = receive(state, request).await?;
    let answered = crate::lifecycle::supplier::call(&state.db, presented, &body).await?;
    Ok(response::json(StatusCode::OK, &answered.to_json()))
}

async fn buyer_call(state: &AppState, request: Request, kind: Kind) -> Result<Response, Error> {
    let (_place, presented, body, bytes) = receive(state, request).await?;
    let price_text = crate::lifecycle::input::buyer_price_text(&bytes);
    let answer = buyer::call(&state.db, kind, presented, &body, price_text).await?;
    Ok(response::json(StatusCode::OK, &answer))
}

/// The call's place among the write requests in progress (held until it is answered;
/// under overload the call is refused before its body is read), the credentials presented
/// in either header, and the body as JSON and as sent.
async fn receive(
    state: &AppState,
    request: Request,
) -> Result<(OwnedSemaphorePermit, Vec<String>, Value, Bytes), Error> {
    let place = match state.admit_write() {
        Ok(place) => place,
        Err(e) => {
            body::discard(request.into_body(), state.config.body_limit).await;
            return Err(e.into());
        }
    };
    let presented: Vec<String> = auth::presented_secrets(request.headers())
        .into_iter()
        .map(str::to_string)
        .collect();
    let bytes = body::read_bytes(request, state.config.body_limit).await?;
    let body = body::parse_json(&bytes)?;
    Ok((place, presented, body, bytes))
}
