//! `LifecycleError`: everything a lifecycle call (buyer or supplier) or `lead cancel` can
//! refuse, and its one mapping to an HTTP answer.
//!
//! Every lifecycle error body has the structured partner form of SPEC.md section 7 and keeps
//! the `error` object of DESIGN.md section 7 beside it, so callers of either habit find what
//! they look for: `{"accepted": false, "code", "message", "error": {"code", "message", …}}`.

use hyper::StatusCode;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use serde_json::{Map, Value, json};

use super::state::{Move, Status};
use crate::db::DbError;
use crate::http::ApiError;

/// Problems in a body are the same `{path, code, message}` details ingest answers with.
pub use crate::ingest::problem::Problem;

#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// The body is not what the endpoint takes; every problem is named.
    #[error("invalid request body: {}", problem_list(.0))]
    Validation(Vec<Problem>),
    /// No credential was presented in either header.
    #[error("missing secret: send X-Service-Webhook-Secret or Authorization: Bearer")]
    MissingCredential,
    /// The presented credential is not the one of the transaction's buyer (or of any
    /// supplier).
    #[error("invalid secret")]
    InvalidCredential,
    #[error("transaction not found")]
    TransactionNotFound,
    /// Several transactions match the external id and the presented secret does not narrow
    /// them down to one.
    #[error(
        "{matches} transactions match this external id; resend with buyerAccountId, or with transactionId"
    )]
    AmbiguousExternalId { matches: usize },
    /// The transaction's buyer has no inbound secret, so nobody may act for it.
    #[error("the buyer of this transaction has no webhook secret configured")]
    BuyerSecretNotConfigured,
    #[error("the buyer of this transaction lacks the '{capability}' capability")]
    CapabilityDenied { capability: &'static str },
    #[error(
        "cannot move a transaction from '{}' to '{}'",
        .current.as_str(),
        .requested.target().as_str()
    )]
    TransitionNotAllowed { current: Status, requested: Move },
    #[error(
        "the cancellation window of {window_secs} seconds after delivery at {} has elapsed",
        crate::clock::iso(*.delivered_at)
    )]
    CancellationWindowElapsed { delivered_at: i64, window_secs: i64 },
    /// A prepaid buyer's new price would take the balance below its credit limit.
    #[error(
        "the price increase needs {} but only {} of balance and credit is available",
        crate::money::display(*.required_cents),
        crate::money::display(*.available_cents)
    )]
    InsufficientBalance {
        required_cents: i64,
        available_cents: i64,
    },
    /// A lead that does not exist or, for a supplier, is not theirs: one answer for both,
    /// so that nothing leaks about other suppliers' leads.
    #[error("lead not found")]
    LeadNotFound,
    #[error("no cancellation was requested for this lead")]
    NoCancellationRequested,
    /// The supplier gives the opposite answer to a cancellation it resolved already.
    #[error("the cancellation of this lead was already resolved as '{status}'")]
    CancellationAlreadyResolved { status: String },
    /// `lead cancel`: the lead's source has no supplier to claw back from.
    #[error("the lead's source has no supplier to cancel with")]
    NoSupplier,
    /// `lead cancel`: the lead already has a supplier cancellation.
    #[error("the lead already has a supplier cancellation (status '{status}')")]
    CancellationExists { status: String },
    #[error(transparent)]
    Db(#[from] DbError),
}

/// `path: message` of each problem, joined for the one-line message.
fn problem_list(problems: &[Problem]) -> String {
    let each: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.path, p.message))
        .collect();
    each.join("; ")
}

impl From<rusqlite::Error> for LifecycleError {
    fn from(e: rusqlite::Error) -> Self {
        LifecycleError::Db(DbError::Sqlite(e))
    }
}

impl LifecycleError {
    pub fn code(&self) -> &'static str {
        match self {
            LifecycleError::Validation(_) => "validation_failed",
            LifecycleError::MissingCredential | LifecycleError::InvalidCredential => "unauthorized",
            LifecycleError::TransactionNotFound => "transaction_not_found",
            LifecycleError::AmbiguousExternalId { .. } => "ambiguous_external_id",
            LifecycleError::BuyerSecretNotConfigured => "buyer_secret_not_configured",
            LifecycleError::CapabilityDenied { .. } => "capability_denied",
            LifecycleError::TransitionNotAllowed { .. } => "transition_not_allowed",
            LifecycleError::CancellationWindowElapsed { .. } => "cancellation_window_elapsed",
            LifecycleError::InsufficientBalance { .. } => "insufficient_balance",
            LifecycleError::LeadNotFound => "lead_not_found",
            LifecycleError::NoCancellationRequested => "no_cancellation_requested",
            LifecycleError::CancellationAlreadyResolved { .. } => "cancellation_already_resolved",
            LifecycleError::NoSupplier => "no_supplier",
            LifecycleError::CancellationExists { .. } => "cancellation_exists",
            LifecycleError::Db(_) => "internal_error",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            LifecycleError::MissingCredential | LifecycleError::InvalidCredential => {
                StatusCode::UNAUTHORIZED
            }
            LifecycleError::TransactionNotFound => StatusCode::NOT_FOUND,
            LifecycleError::AmbiguousExternalId { .. } => StatusCode::CONFLICT,
            LifecycleError::BuyerSecretNotConfigured | LifecycleError::CapabilityDenied { .. } => {
                StatusCode::FORBIDDEN
            }
            // `lead cancel` errors never reach HTTP; 400 keeps the mapping total.
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The `error` object of the body: code and message, plus what the caller needs to act.
    fn error_object(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), json!(self.code()));
        error.insert("message".into(), json!(self.to_string()));
        match self {
            LifecycleError::Validation(problems) => {
                error.insert("details".into(), crate::ingest::problem::details(problems));
            }
            LifecycleError::TransitionNotAllowed { current, requested } => {
                error.insert("currentState".into(), json!(current.as_str()));
                error.insert("requestedState".into(), json!(requested.target().as_str()));
            }
            LifecycleError::CancellationWindowElapsed {
                delivered_at,
                window_secs,
            } => {
                error.insert("class".into(), json!("PartnerCancellationWindowError"));
                error.insert(
                    "deliveredAt".into(),
                    json!(crate::clock::iso(*delivered_at)),
                );
                error.insert("windowSeconds".into(), json!(window_secs));
                error.insert(
                    "windowEndedAt".into(),
                    json!(crate::clock::iso(
                        delivered_at.saturating_add(window_secs.saturating_mul(1000))
                    )),
                );
            }
            LifecycleError::CapabilityDenied { capability } => {
                error.insert("capability".into(), json!(capability));
            }
            LifecycleError::InsufficientBalance {
                required_cents,
                available_cents,
            } => {
                error.insert("required".into(), crate::money::to_json(*required_cents));
                error.insert("available".into(), crate::money::to_json(*available_cents));
            }
            LifecycleError::CancellationAlreadyResolved { status } => {
                error.insert("status".into(), json!(status));
            }
            _ => {}
        }
        Value::Object(error)
    }
}

impl From<LifecycleError> for ApiError {
    fn from(e: LifecycleError) -> ApiError {
        if let LifecycleError::Db(db) = e {
            return partner_form(ApiError::from(db));
        }
        let mut body = json!({
            "accepted": false,
            "code": e.code(),
            "message": e.to_string(),
            "error": e.error_object(),
        });
        if let LifecycleError::TransitionNotAllowed { current, .. } = &e {
            body["currentState"] = json!(current.as_str());
        }
        let api = ApiError::with_body(e.status(), body);
        if e.status() == StatusCode::UNAUTHORIZED {
            api.header(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))
        } else {
            api
        }
    }
}

/// Gives an error from outside this module (body reading, the database) the partner form:
/// `accepted: false` with the `code` and `message` of its `error` object at the top level.
pub fn partner_form(mut e: ApiError) -> ApiError {
    let code = e.body["error"]["code"].clone();
    let message = e.body["error"]["message"].clone();
    if let Some(body) = e.body.as_object_mut()
        && !body.contains_key("accepted")
    {
        body.insert("accepted".into(), json!(false));
        body.insert("code".into(), code);
        body.insert("message".into(), message);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_the_partner_form_and_the_error_object() {
        let e = ApiError::from(LifecycleError::TransitionNotAllowed {
            current: Status::Paid,
            requested: Move::Cancel,
        });
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.body["accepted"], false);
        assert_eq!(e.body["code"], "transition_not_allowed");
        assert_eq!(e.body["currentState"], "paid");
        assert_eq!(e.body["error"]["currentState"], "paid");
        assert_eq!(e.body["error"]["requestedState"], "cancelled");

        let e = ApiError::from(LifecycleError::CancellationWindowElapsed {
            delivered_at: 0,
            window_secs: 60,
        });
        assert_eq!(e.body["error"]["class"], "PartnerCancellationWindowError");
        assert_eq!(e.body["error"]["windowEndedAt"], "1970-01-01T00:01:00.000Z");

        let e = ApiError::from(LifecycleError::MissingCredential);
        assert_eq!(e.status, StatusCode::UNAUTHORIZED);
        assert_eq!(e.headers[0].0, WWW_AUTHENTICATE);
    }

    #[test]
    fn foreign_errors_get_the_partner_form() {
        let e = partner_form(ApiError::bad_request("invalid_json", "not json"));
        assert_eq!(e.body["accepted"], false);
        assert_eq!(e.body["code"], "invalid_json");
        assert_eq!(e.body["error"]["message"], "not json");
    }
}
