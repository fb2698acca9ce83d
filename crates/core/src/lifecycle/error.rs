//! `LifecycleError`: everything a lifecycle call (buyer or supplier) or `lead cancel` can
//! refuse, with its stable code. Its HTTP answer (status, the partner form of SPEC.md
//! section 7) is `http::error`'s.

use super::state::{Move, Status};
use crate::db::DbError;

/// Problems in a body are the same `{path, code, message}` details ingest answers with.
pub(crate) use crate::ingest::problem::Problem;

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
    /// `reasonCode` is not on the workspace's list; `valid` is the list.
    #[error("unknown reason code '{given}'; the workspace's codes are: {}", .valid.join(", "))]
    UnknownReasonCode { given: String, valid: Vec<String> },
    /// The buyer's returns this month would pass its return cap.
    #[error(
        "the return cap of {}% is reached: {returned} of {delivered} transactions delivered this month returned",
        crate::money::display(*.cap_bp)
    )]
    ReturnCapReached {
        cap_bp: i64,
        returned: i64,
        delivered: i64,
    },
    /// The transaction waits for the operator's decision on its return.
    #[error("a return of this transaction waits for review; no other move until it is decided")]
    ReturnPending,
    /// The operator denied this transaction's return; it is not asked again.
    #[error("the return of this transaction was denied; it cannot be requested again")]
    ReturnDenied,
    /// An operator's decision on a transaction without a pending return.
    #[error("transaction '{0}' has no return waiting for review")]
    NoPendingReturn(crate::ids::TransactionId),
    /// The return was decided already (`status`: approved or denied).
    #[error("the return of this transaction was {status} already")]
    ReturnAlreadyDecided { status: String },
    /// A denial without a note: the buyer is told why.
    #[error("a denial needs a note: the buyer is told why")]
    NoteRequired,
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
            LifecycleError::UnknownReasonCode { .. } => "unknown_reason_code",
            LifecycleError::ReturnCapReached { .. } => "return_cap_reached",
            LifecycleError::ReturnPending => "return_pending",
            LifecycleError::ReturnDenied => "return_denied",
            LifecycleError::NoPendingReturn(_) => "no_pending_return",
            LifecycleError::ReturnAlreadyDecided { .. } => "return_already_decided",
            LifecycleError::NoteRequired => "note_required",
            LifecycleError::Db(_) => "internal_error",
        }
    }
}
