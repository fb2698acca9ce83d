//! The ingest answer: the per-lead result item, the single-lead wrapper and the batch
//! summary (SPEC.md 2.5, DESIGN.md section 2).
//!
//! Owns the JSON of results and the status codes that go with them. It decides nothing
//! about leads; it reports what `store` did.

use hyper::StatusCode;
use serde_json::{Map, Value, json};

use super::dedupe::{DuplicateMatch, DuplicateStatus};
use super::problem::{Problem, details};
use super::quality::Quality;
use super::store::{Outcome, Target};

pub const ACCEPTED: &str = "accepted";
pub const DUPLICATE: &str = "duplicate";
pub const IDEMPOTENT_REPLAY: &str = "idempotent_replay";
pub const REJECTED: &str = "rejected";

/// What ingest found out about a lead, shown as the item's `ingest` object.
pub struct IngestFacts<'a> {
    pub quality: &'a Quality,
    pub duplicate_status: DuplicateStatus,
    pub duplicate_match: Option<&'a DuplicateMatch>,
}

impl IngestFacts<'_> {
    fn to_json(&self) -> Value {
        let mut ingest = json!({
            "qualityStatus": self.quality.status.as_str(),
            "qualityReasons": self.quality.reasons,
            "duplicateStatus": self.duplicate_status.as_str(),
        });
        if let Some(found) = self.duplicate_match {
            ingest["duplicateMatch"] = found.to_json();
        }
        ingest
    }
}

/// The result item of one lead. `ingest` is null only for a lead that failed validation.
pub fn item(
    target: &Target,
    status: &str,
    lead_id: Option<&str>,
    external_id: Option<&str>,
    request_ids: &[String],
    facts: Option<IngestFacts>,
) -> Value {
    let mut item = Map::with_capacity(8);
    item.insert("status".into(), status.into());
    item.insert("leadId".into(), lead_id.into());
    item.insert(
        target.container_kind.id_key().into(),
        target.container_id.as_str().into(),
    );
    item.insert("sourceId".into(), target.source_id.as_str().into());
    item.insert("externalId".into(), external_id.into());
    item.insert(
        "idempotentReplay".into(),
        (status == IDEMPOTENT_REPLAY).into(),
    );
    item.insert("requestIds".into(), request_ids.into());
    item.insert(
        "ingest".into(),
        facts.as_ref().map_or(Value::Null, IngestFacts::to_json),
    );
    Value::Object(item)
}

/// The item of a lead that failed validation: nothing was stored.
pub fn invalid_item(target: &Target, external_id: Option<&str>, problems: &[Problem]) -> Value {
    let mut item = item(target, REJECTED, None, external_id, &[], None);
    item["errors"] = details(problems);
    item
}

/// The item of an idempotent replay: the stored lead's first answer, marked as a replay.
fn replay_item(target: &Target, lead_id: &str, stored: Option<&str>) -> Value {
    let mut item = stored
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .filter(Value::is_object)
        // A lead stored without its answer (not written by ingest) still names itself.
        .unwrap_or_else(|| item(target, IDEMPOTENT_REPLAY, Some(lead_id), None, &[], None));
    item["status"] = IDEMPOTENT_REPLAY.into();
    item["idempotentReplay"] = true.into();
    item
}

impl Outcome {
    /// The answer item of this outcome.
    pub fn into_item(self, target: &Target) -> Value {
        match self {
            Outcome::Created { item, .. } | Outcome::DuplicateRejected { item } => item,
            Outcome::Replay { lead_id, result } => replay_item(target, &lead_id, result.as_deref()),
        }
    }

    /// Whether a lead was created.
    pub fn created(&self) -> bool {
        matches!(self, Outcome::Created { .. })
    }
}

/// The answer to a single lead: `{"item": …}`, 201 when a lead was created, else 200.
pub fn single(item: Value, created: bool) -> (StatusCode, Value) {
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, json!({ "item": item }))
}

/// Builds a batch answer item by item.
#[derive(Default)]
pub struct BatchAnswer {
    items: Vec<Value>,
    accepted: usize,
    duplicate: usize,
    replay: usize,
    rejected: usize,
}

impl BatchAnswer {
    pub fn with_capacity(capacity: usize) -> BatchAnswer {
        BatchAnswer {
            items: Vec::with_capacity(capacity),
            ..BatchAnswer::default()
        }
    }

    /// Adds the item of the lead at `index` in `leads`.
    pub fn push(&mut self, index: usize, item: Value) {
        match item.get("status").and_then(Value::as_str) {
            Some(ACCEPTED) => self.accepted += 1,
            Some(DUPLICATE) => self.duplicate += 1,
            Some(IDEMPOTENT_REPLAY) => self.replay += 1,
            _ => self.rejected += 1,
        }
        // `index` goes first, so a reader sees at once which lead an item is about.
        let mut indexed = Map::new();
        indexed.insert("index".into(), index.into());
        if let Value::Object(fields) = item {
            indexed.extend(fields);
        }
        self.items.push(Value::Object(indexed));
    }

    /// The answer: 201 when at least one lead was created, else 200.
    pub fn finish(self) -> (StatusCode, Value) {
        let created = self.accepted + self.duplicate > 0;
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        let body = json!({
            "summary": {
                "received": self.items.len(),
                "accepted": self.accepted,
                "duplicate": self.duplicate,
                "idempotentReplay": self.replay,
                "rejected": self.rejected,
            },
            "items": self.items,
        });
        (status, body)
    }
}
