//! Lead ingest: the owner of leads and lead requests (SPEC.md 2, 4.2, 4.3), and each step
//! from a partner's body to a stored lead, and reading stored leads back.
//!
//! The steps (DESIGN.md section 2): [`handler`] (source lookup and secret, products,
//! suppression, check steps) → [`shape`] (Lead, person wrapper or batch) → [`validate`]
//! (every problem with a JSON pointer, [`problem`]) with products from [`catalog`] →
//! [`normalize`] and [`quality`] → in the writer job, [`store`] (idempotency, [`dedupe`],
//! the inserts, each returning its facts). [`model`] has the typed lead at each stage;
//! [`view`] reads stored leads for the CLI and the `deliver` command (a lead the writer job
//! has just stored is handed on by that job, not read back); [`status`] makes every later
//! write to them (lead and request states, the decision).
//!
//! Ingest does not own the order of the steps, the writer job or the answer (`accept`,
//! which composes ingest with ping/post, the bids and auto-delivery), the source, product
//! or container records (`config`), partner-native mappings, or what happens to a lead
//! after it is stored (auto-delivery, delivery, lifecycle).

pub(crate) mod body;
pub mod catalog;
pub mod dedupe;
pub(crate) mod erase;
pub mod handler;
pub mod kept;
mod lz4_block;
pub mod model;
pub use leadrelay_rules::normalize;
pub use leadrelay_rules::problem;
pub mod quality;
pub mod shape;
pub mod status;
pub mod store;
pub(crate) mod trace;
pub mod validate;
pub mod view;
mod zframe;

use crate::db::DbError;
use crate::mapping::MappingError;
use problem::Problem;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Unknown or disabled source, or one that is not in the path's channel or table.
    #[error("no such source")]
    SourceNotFound,
    /// The source has a secret and the request presented none.
    #[error("this source requires its ingest secret")]
    SecretMissing,
    /// The source has a secret and the request presented a different one.
    #[error("the ingest secret is not valid")]
    SecretInvalid,
    /// The body, or its one lead, is not valid: every problem found.
    #[error("{message}")]
    Invalid {
        message: String,
        problems: Vec<Problem>,
    },
    /// A post's ping was refused (DESIGN.md section 14): `ping_unknown`, `ping_used`,
    /// `ping_expired` or `ping_mismatch`. Nothing was stored.
    #[error("{message}")]
    Ping { code: &'static str, message: String },
    /// The source's published mapping refused the body, or could not be read.
    #[error(transparent)]
    Mapping(#[from] MappingError),
    /// The source or its workspace's rules changed while the request was handled on a
    /// kept copy of them (`kept::StampCheck`); nothing was written. The request runs
    /// again on them as read then, so a partner never sees this.
    #[error("the source changed while the request was handled; retry")]
    Stale,
    /// Something that cannot happen did; the request was not applied.
    #[error("internal error: {0}")]
    Internal(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl IngestError {
    /// Problems of the body as a whole (its shape, the batch size).
    pub fn body_invalid(problems: Vec<Problem>) -> IngestError {
        IngestError::Invalid {
            message: "the request body is not a valid lead, person wrapper or batch".into(),
            problems,
        }
    }

    /// Problems of a single lead.
    pub fn lead_invalid(problems: Vec<Problem>) -> IngestError {
        let count = problems.len();
        IngestError::Invalid {
            message: format!(
                "the lead is not valid: {count} problem{}",
                if count == 1 { "" } else { "s" }
            ),
            problems,
        }
    }
}

impl From<rusqlite::Error> for IngestError {
    fn from(e: rusqlite::Error) -> Self {
        IngestError::Db(DbError::Sqlite(e))
    }
}
