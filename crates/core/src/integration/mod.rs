//! Buyer-native delivery (DESIGN.md section 18): a buyer's integration is `generic` (the
//! signed `lead.delivered` webhook of section 3) or `mapped`, a document that says how the
//! lead is posted into the buyer's own API and how its answer is read.
//!
//! Owns the integration document (`document`: checked, every problem with a path), building
//! a mapped request from the `lead.delivered` event (`request`, with secrets masked for
//! preview and attempt records), judging the buyer's answer (`answer`), and the stored
//! documents and named secrets (`store`: `buyers.integration`,
//! `buyer_integration_secrets`). It does not send anything: the outbox's one sender path
//! asks it for the request and the verdict of a mapped buyer. What a refusal does to the
//! transaction is `lifecycle::refusal`'s, and the waterfall `autodelivery::waterfall`'s.

pub mod answer;
pub(crate) mod document;
pub mod request;
pub mod store;

use leadrelay_rules::problem::ErrorBody;
use serde_json::Value;

pub use document::IntegrationDocument;

use crate::db::DbError;
use crate::mapping::{MappingProblem, count_text};

#[derive(Debug, thiserror::Error)]
pub enum IntegrationError {
    /// The document breaks the rules; paths point into it.
    #[error(
        "the integration document is not valid: {}",
        count_text(.problems.len(), *.total)
    )]
    InvalidDocument {
        problems: Vec<MappingProblem>,
        total: usize,
    },
    #[error("the integration file is not JSON: {0}")]
    NotJson(String),
    #[error("unknown buyer '{0}'")]
    BuyerNotFound(crate::ids::BuyerId),
    #[error("buyer '{0}' is archived; an archived record cannot change")]
    BuyerArchived(crate::ids::BuyerId),
    #[error("unknown lead '{0}'")]
    LeadNotFound(String),
    #[error("{0}")]
    InvalidSecret(String),
    /// A stored document no longer parses (written by another version, or by hand).
    #[error("the stored integration of buyer '{buyer_id}' is not valid: {why}")]
    Stored {
        buyer_id: crate::ids::BuyerId,
        why: String,
    },
    /// The event cannot be turned into the buyer's request (a preview).
    #[error(transparent)]
    Build(#[from] request::BuildError),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for IntegrationError {
    fn from(e: rusqlite::Error) -> Self {
        IntegrationError::Db(DbError::Sqlite(e))
    }
}

impl IntegrationError {
    pub(crate) fn code(&self) -> &'static str {
        match self {
            IntegrationError::InvalidDocument { .. } => "invalid_integration",
            IntegrationError::NotJson(_) => "invalid_json",
            IntegrationError::BuyerNotFound(_) | IntegrationError::LeadNotFound(_) => "not_found",
            IntegrationError::BuyerArchived(_) => "archived",
            IntegrationError::InvalidSecret(_) => "invalid_secret",
            IntegrationError::Build(request::BuildError::MissingSecret(_)) => "missing_secret",
            IntegrationError::Build(_) => "mapping_error",
            IntegrationError::Stored { .. } | IntegrationError::Db(_) => "internal_error",
        }
    }

    /// `{"error": {"code", "message", "details"?}}`, the form of every `--json` error.
    pub fn to_json(&self) -> Value {
        let details = match self {
            IntegrationError::InvalidDocument { problems, .. } => Some(problems),
            _ => None,
        };
        ErrorBody::new(self.code(), self.to_string(), details).to_json()
    }
}
