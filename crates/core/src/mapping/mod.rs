//! Partner-native mappings: a JSON document per source that turns a partner's own JSON into
//! the native ingest shapes of SPEC.md section 2.4 (DESIGN.md section 9).
//!
//! Owns the mapping language ([`document`]: parsing and checking a document, with a JSON
//! pointer into the document for every problem), applying it to a body ([`engine`]: problems
//! point into the partner's body), the draft/publish records on `sources` ([`store`]), and
//! an example partner body that a document turns into a given native lead ([`sample`]).
//! It does not own what happens to the native body afterwards: shape detection, validation
//! and the rest of the pipeline belong to `ingest`, which calls [`apply_published`] between
//! parsing the JSON and detecting the shape.

pub mod document;
pub mod engine;
pub(crate) mod pointer;
pub mod sample;
pub mod store;

#[cfg(test)]
mod tests;

use leadrelay_rules::problem::ErrorBody;
use serde::Serialize;
use serde_json::Value;

pub use document::MappingDocument;
pub use engine::transform;

use crate::config::source::Source;
use crate::db::DbError;

/// At most this many problems are reported for one document or body, so that a body of
/// thousands of bad items still gets a short answer.
pub const MAX_PROBLEMS: usize = 100;

/// One problem with a mapping document or with a body the mapping cannot transform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MappingProblem {
    /// A JSON pointer: into the mapping document for a bad document, into the partner's
    /// body for a body that cannot be transformed.
    pub path: String,
    /// A stable code, e.g. `unknown_target` or `not_a_boolean`.
    pub code: &'static str,
    pub message: String,
}

impl MappingProblem {
    pub fn new(path: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        MappingProblem {
            path: path.into(),
            code,
            message: message.into(),
        }
    }
}

/// Problems found so far, capped at [`MAX_PROBLEMS`].
#[derive(Debug, Default)]
pub struct Problems {
    pub list: Vec<MappingProblem>,
    /// How many were found beyond the cap.
    pub dropped: usize,
}

impl Problems {
    pub fn push(&mut self, problem: MappingProblem) {
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(problem);
        } else {
            self.dropped += 1;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// How many problems were found, listed or not.
    pub fn total(&self) -> usize {
        self.list.len() + self.dropped
    }
}

/// Summarises a list of problems in one line: "2 problems" or "120 problems (first 100
/// listed)".
pub fn count_text(shown: usize, total: usize) -> String {
    let noun = if total == 1 { "problem" } else { "problems" };
    if total > shown {
        format!("{total} {noun} (first {shown} listed)")
    } else {
        format!("{total} {noun}")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    /// The mapping document breaks the language; paths point into the document.
    #[error(
        "the mapping document is not valid: {}",
        count_text(.problems.len(), *.total)
    )]
    InvalidDocument {
        problems: Vec<MappingProblem>,
        total: usize,
    },
    /// The body does not fit the mapping; paths point into the partner's body.
    #[error("the body does not fit {mapping}: {}", count_text(.problems.len(), *.total))]
    Transform {
        /// Which mapping, for the message: "the published mapping (version 3)".
        mapping: String,
        problems: Vec<MappingProblem>,
        total: usize,
    },
    /// A stored document no longer parses (written by another version, or edited by hand).
    #[error("the stored mapping of source '{source_id}' is not valid: {why}")]
    Stored {
        source_id: crate::ids::SourceId,
        why: String,
    },
    #[error("unknown source '{0}'")]
    SourceNotFound(crate::ids::SourceId),
    #[error("source '{0}' has no draft mapping; store one with mapping set")]
    NoDraft(crate::ids::SourceId),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for MappingError {
    fn from(e: rusqlite::Error) -> Self {
        MappingError::Db(DbError::Sqlite(e))
    }
}

impl MappingError {
    /// A body that does not fit `mapping` (named for the message).
    pub fn transform(mapping: String, problems: Problems) -> MappingError {
        MappingError::Transform {
            mapping,
            total: problems.total(),
            problems: problems.list,
        }
    }

    /// The problems of a bad document or body, with their paths; empty for other errors.
    pub fn problems(&self) -> &[MappingProblem] {
        match self {
            MappingError::InvalidDocument { problems, .. }
            | MappingError::Transform { problems, .. } => problems,
            _ => &[],
        }
    }

    /// The error as JSON, in the form of the HTTP interface's error bodies (the ingest
    /// endpoints answer a [`MappingError::Transform`] with it; `--json` prints it):
    /// `{"error": {"code", "message", "details"?}}`.
    pub fn to_json(&self) -> Value {
        let code = match self {
            MappingError::InvalidDocument { .. } => "invalid_mapping",
            MappingError::Transform { .. } => "mapping_error",
            MappingError::Stored { .. } | MappingError::Db(_) => "internal_error",
            MappingError::SourceNotFound(_) => "not_found",
            MappingError::NoDraft(_) => "no_draft",
        };
        let details = matches!(
            self,
            MappingError::InvalidDocument { .. } | MappingError::Transform { .. }
        )
        .then(|| self.problems());
        ErrorBody::new(code, self.to_string(), details).to_json()
    }
}

/// The ingest seam: when `source` has a published mapping, transforms the partner's
/// `body` into a native body; otherwise returns `body` unchanged, so the native shapes are
/// required. A body that does not fit gives [`MappingError::Transform`] (which the HTTP
/// layer answers 400 `mapping_error`, with a path into the body for each problem).
pub fn apply_published(source: &Source, body: Value) -> Result<Value, MappingError> {
    let Some(text) = source.mapping_published.as_deref() else {
        return Ok(body);
    };
    let document = MappingDocument::from_stored(text).map_err(|why| MappingError::Stored {
        source_id: source.id.clone(),
        why,
    })?;
    engine::transform(&document, &body).map_err(|problems| {
        MappingError::transform(
            format!(
                "the published mapping (version {}) of source '{}'",
                source.mapping_version, source.id
            ),
            problems,
        )
    })
}
