//! The mapping columns of `sources`: storing a checked draft, publishing it, withdrawing
//! the published mapping, and reading both versions for display.
//!
//! Every function is one short statement sequence on a `Connection`, run by the caller
//! through the writer (changes) or the read pool (display). A document is checked before
//! it is stored, so a stored document is always valid; ingest reads the published one
//! from the `Source` record it loads anyway. This module does not apply documents.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::{MappingDocument, MappingError};
use crate::ids::SourceId;

/// Both versions of a source's mapping.
#[derive(Debug, Clone)]
pub struct MappingState {
    pub source_id: SourceId,
    pub draft: Option<StoredDocument>,
    pub published: Option<StoredDocument>,
    /// How many times a mapping of this source was published; the published document
    /// carries this number.
    pub version: i64,
}

#[derive(Debug, Clone)]
pub struct StoredDocument {
    pub text: String,
    /// When the draft was stored or the published version published (ms UTC).
    pub at: i64,
}

impl MappingState {
    /// Whether publishing now would change what ingest uses.
    pub(crate) fn has_unpublished_changes(&self) -> bool {
        match (&self.draft, &self.published) {
            (Some(draft), Some(published)) => draft.text != published.text,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    pub fn view(&self) -> MappingStateView<'_> {
        MappingStateView {
            source_id: &self.source_id,
            version: self.version,
            draft: self.draft.as_ref().map(|d| DraftView {
                document: document_value(&d.text),
                updated_at: crate::clock::iso(d.at),
            }),
            published: self.published.as_ref().map(|p| PublishedView {
                document: document_value(&p.text),
                version: self.version,
                published_at: crate::clock::iso(p.at),
            }),
            unpublished_changes: self.has_unpublished_changes(),
        }
    }

    /// [`MappingState::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// `source mapping show --json`: both versions of a source's mapping.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MappingStateView<'a> {
    source_id: &'a SourceId,
    version: i64,
    draft: Option<DraftView>,
    published: Option<PublishedView>,
    unpublished_changes: bool,
}

/// The draft: the operator's document as stored.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraftView {
    document: Value,
    updated_at: String,
}

/// The published version: the operator's document as published.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedView {
    document: Value,
    version: i64,
    published_at: String,
}

/// A stored document as JSON; stored text is always JSON written by [`set_draft`].
fn document_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Checks `document` and converts its problems into [`MappingError::InvalidDocument`].
pub(crate) fn check(document: &Value) -> Result<MappingDocument, MappingError> {
    MappingDocument::parse(document).map_err(|problems| MappingError::InvalidDocument {
        total: problems.total(),
        problems: problems.list,
    })
}

pub fn state(conn: &Connection, source_id: &SourceId) -> Result<MappingState, MappingError> {
    conn.query_row(
        "SELECT mapping_draft, mapping_draft_at, mapping_published, mapping_published_at,
                mapping_version
         FROM sources WHERE id = ?1",
        [source_id],
        |row| {
            let stored = |text: Option<String>, at: Option<i64>| {
                text.map(|text| StoredDocument {
                    text,
                    at: at.unwrap_or(0),
                })
            };
            Ok(MappingState {
                source_id: source_id.clone(),
                draft: stored(row.get(0)?, row.get(1)?),
                published: stored(row.get(2)?, row.get(3)?),
                version: row.get(4)?,
            })
        },
    )
    .optional()?
    .ok_or_else(|| MappingError::SourceNotFound(source_id.clone()))
}

/// Checks `document` and stores it as the source's draft; what ingest uses is unchanged.
pub fn set_draft(
    conn: &Connection,
    source_id: &SourceId,
    document: &Value,
) -> Result<MappingState, MappingError> {
    check(document)?;
    let text = serde_json::to_string(document).expect("a Value always serialises");
    let changed = conn.execute(
        "UPDATE sources SET mapping_draft = ?2, mapping_draft_at = ?3 WHERE id = ?1",
        params![source_id, text, crate::clock::now_ms()],
    )?;
    if changed == 0 {
        return Err(MappingError::SourceNotFound(source_id.clone()));
    }
    state(conn, source_id)
}

/// Makes the draft the published mapping, from the next ingest request on, and counts a
/// new version. Publishing a draft that equals the published mapping changes nothing;
/// the flag says whether anything changed.
pub fn publish(
    conn: &Connection,
    source_id: &SourceId,
) -> Result<(MappingState, bool), MappingError> {
    let current = state(conn, source_id)?;
    let Some(draft) = &current.draft else {
        return Err(MappingError::NoDraft(source_id.clone()));
    };
    if !current.has_unpublished_changes() {
        return Ok((current, false));
    }
    // The draft was checked when it was stored; checking again guards against a document
    // stored by an older version whose rules were looser.
    let value: Value = serde_json::from_str(&draft.text).map_err(|e| MappingError::Stored {
        source_id: source_id.clone(),
        why: format!("the draft is not valid JSON: {e}"),
    })?;
    check(&value)?;
    conn.execute(
        "UPDATE sources SET mapping_published = mapping_draft, mapping_published_at = ?2,
                mapping_version = mapping_version + 1
         WHERE id = ?1",
        params![source_id, crate::clock::now_ms()],
    )?;
    Ok((state(conn, source_id)?, true))
}

/// Withdraws the published mapping: from the next request on the source takes the native
/// shapes again. The draft stays, so publishing brings the mapping back.
pub fn unpublish(
    conn: &Connection,
    source_id: &SourceId,
) -> Result<(MappingState, bool), MappingError> {
    let current = state(conn, source_id)?;
    if current.published.is_none() {
        return Ok((current, false));
    }
    conn.execute(
        "UPDATE sources SET mapping_published = NULL, mapping_published_at = NULL WHERE id = ?1",
        [source_id],
    )?;
    Ok((state(conn, source_id)?, true))
}
