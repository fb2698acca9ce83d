//! The first steps every lifecycle endpoint takes, in the same order: take the presented
//! credentials from the headers, read the body (413, 415, 408, 400 `invalid_json`, all in
//! the partner form), then refuse a request without any credential (401).
//!
//! Owns only that order. What the body must hold is `input`'s business; whose credential it
//! is, `lookup`'s (buyers) and `supplier`'s.

use serde_json::Value;

use super::error::{LifecycleError, partner_form};
use crate::http::{ApiError, AppState, Request, auth, body};

/// A lifecycle request after the common checks: the credentials presented in either header
/// (at least one) and the parsed body.
pub struct Received {
    pub presented: Vec<String>,
    pub body: Value,
}

impl Received {
    /// The presented credentials as the `&str` list the checks take.
    pub fn presented(&self) -> Vec<&str> {
        self.presented.iter().map(String::as_str).collect()
    }
}

pub async fn receive(state: &AppState, request: Request) -> Result<Received, ApiError> {
    let presented: Vec<String> = auth::presented_secrets(request.headers())
        .into_iter()
        .map(str::to_string)
        .collect();
    let body = body::read_json(request, state.config.body_limit)
        .await
        .map_err(partner_form)?;
    if presented.is_empty() {
        return Err(LifecycleError::MissingCredential.into());
    }
    Ok(Received { presented, body })
}
