//! Third-party check steps (DESIGN.md section 22): a request to an outside service (a
//! consent certificate's claim, a phone or email validation, a fraud score) made for each
//! lead during ingest, before it is stored, and what its answer decides.
//!
//! Owns the step document (`document`, reusing the integration document of section 18 for
//! the request and the pass rule), the stored steps and their secrets (`store`:
//! `check_steps`, `check_step_secrets`), and running them (`run`: the requests sent through
//! a `Checker` the edge implements over HTTP, the outcomes, the answer cache). Where the
//! outcomes go is ingest's (`leads.checks`, the quality reasons, refusals) and
//! auto-delivery's (`--require-check`, `check.NAME.KEY` filters).

pub mod document;
pub mod run;
pub mod store;

use leadrelay_rules::problem::ErrorBody;
use serde_json::Value;

pub use document::CheckDocument;
pub use run::{CheckClient, CheckRecord, Outcome};

use crate::db::DbError;
use crate::mapping::{MappingProblem, count_text};

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The document breaks the rules; paths point into it.
    #[error(
        "the check step document is not valid: {}",
        count_text(.problems.len(), *.total)
    )]
    InvalidDocument {
        problems: Vec<MappingProblem>,
        total: usize,
    },
    #[error("the check step file is not JSON: {0}")]
    NotJson(String),
    #[error("'{0}' is not a check step name: 1 to 64 letters, digits, '-' or '_'")]
    InvalidName(String),
    #[error("unknown check step '{0}'")]
    NotFound(String),
    #[error("unknown workspace '{0}'")]
    WorkspaceNotFound(String),
    #[error("check step '{name}' belongs to workspace '{workspace_id}'")]
    OtherWorkspace { name: String, workspace_id: String },
    #[error("{0}")]
    InvalidSecret(String),
    #[error("the lead file is not a JSON object: {0}")]
    InvalidLead(String),
    /// A stored document no longer parses (written by another version, or by hand).
    #[error("the stored check step '{name}' is not valid: {why}")]
    Stored { name: String, why: String },
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for CheckError {
    fn from(e: rusqlite::Error) -> Self {
        CheckError::Db(DbError::Sqlite(e))
    }
}

impl CheckError {
    pub(crate) fn code(&self) -> &'static str {
        match self {
            CheckError::InvalidDocument { .. } => "invalid_check_step",
            CheckError::NotJson(_) | CheckError::InvalidLead(_) => "invalid_json",
            CheckError::InvalidName(_) => "invalid_name",
            CheckError::NotFound(_) | CheckError::WorkspaceNotFound(_) => "not_found",
            CheckError::OtherWorkspace { .. } => "conflict",
            CheckError::InvalidSecret(_) => "invalid_secret",
            CheckError::Stored { .. } | CheckError::Db(_) => "internal_error",
        }
    }

    /// `{"error": {"code", "message", "details"?}}`, the form of every `--json` error.
    pub fn to_json(&self) -> Value {
        let details = match self {
            CheckError::InvalidDocument { problems, .. } => Some(problems),
            _ => None,
        };
        ErrorBody::new(self.code(), self.to_string(), details).to_json()
    }
}
