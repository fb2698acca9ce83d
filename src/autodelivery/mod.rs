//! Automated delivery, Delivery 1.0 (DESIGN.md section 5): for each interest of a new lead
//! that asks for it (`triggerAutoDelivery`), decide whether and to whom the lead goes, and
//! deliver it, inside the ingest writer job that stores the lead.
//!
//! The steps, each ending the evaluation with its reason code when it fails: routing ready,
//! accepted and not a duplicate under review, quality not invalid, auto-delivery on in the
//! container, the evaluator's score reaching the container's threshold (`evaluator`,
//! `features`), eligible buyers (`eligibility` with `filters`, `schedule`, `caps`), and the
//! selection (`select`), which calls `delivery::deliver` for each buyer taken. The decision
//! (`decision`) is returned for the ingest result and stored on the lead request.
//!
//! Owns choosing buyers and explaining the choice. It does not own the delivery itself
//! (`delivery`: transaction, charge, event), storing the lead (`ingest`) or sending the
//! event (`outbox`).

pub mod caps;
pub mod decision;
pub mod eligibility;
pub mod evaluator;
pub mod features;
pub mod filters;
pub mod lead;
pub mod schedule;
pub mod select;

use crate::db::DbError;
use crate::http::ApiError;

/// Errors that stop auto-delivery, and with it the ingest job it runs in. A buyer who is not
/// eligible, or a delivery that is refused, is a decision, not an error.
#[derive(Debug)]
pub enum AutoDeliveryError {
    /// A record the lead refers to is missing: `kind` names it. Ingest has just written
    /// the lead, so this means the data changed under us or a bug; the job rolls back.
    Missing {
        kind: &'static str,
        id: String,
    },
    Db(DbError),
}

impl std::fmt::Display for AutoDeliveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AutoDeliveryError::Missing { kind, id } => {
                write!(f, "auto-delivery: {kind} '{id}' not found")
            }
            AutoDeliveryError::Db(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AutoDeliveryError {}

impl From<DbError> for AutoDeliveryError {
    fn from(e: DbError) -> Self {
        AutoDeliveryError::Db(e)
    }
}

impl From<rusqlite::Error> for AutoDeliveryError {
    fn from(e: rusqlite::Error) -> Self {
        AutoDeliveryError::Db(DbError::Sqlite(e))
    }
}

impl From<AutoDeliveryError> for ApiError {
    fn from(e: AutoDeliveryError) -> ApiError {
        match e {
            AutoDeliveryError::Db(db) => ApiError::from(db),
            missing @ AutoDeliveryError::Missing { .. } => {
                log::error!("{missing}");
                ApiError::internal()
            }
        }
    }
}
