//! The ingest answer: the per-lead result item, the single-lead wrapper and the batch
//! summary (SPEC.md 2.5, DESIGN.md section 2), and whether they created a lead (which the
//! HTTP layer answers 201 rather than 200).
//!
//! Owns the JSON of results. Items are serialised straight from [`ItemFacts`] (no
//! intermediate `serde_json::Value`), because the writer stores each new lead's item in
//! `leads.result` and every microsecond on the writer thread is one all requests wait for.
//! It decides nothing about leads; it reports what `store` did.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use super::dedupe::{DuplicateMatch, DuplicateStatus};
use super::problem::Problem;
use super::quality::Quality;
use super::store::StoreOutcome;
use crate::config::source::Source;

/// The per-lead outcome of SPEC.md 2.5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Accepted,
    Duplicate,
    IdempotentReplay,
    Rejected,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Accepted => "accepted",
            Status::Duplicate => "duplicate",
            Status::IdempotentReplay => "idempotent_replay",
            Status::Rejected => "rejected",
        }
    }
}

/// What ingest found out about a lead: the item's `ingest` object.
#[derive(Debug, Clone)]
pub struct IngestFacts {
    pub quality: Quality,
    pub duplicate_status: DuplicateStatus,
    pub duplicate_match: Option<DuplicateMatch>,
}

/// Everything a result item says about one lead, apart from where it was sent (the
/// [`Source`], added when serialising).
#[derive(Debug, Clone)]
pub struct ItemFacts {
    pub status: Status,
    pub lead_id: Option<String>,
    pub external_id: Option<String>,
    pub request_ids: Vec<String>,
    /// `None` only for a lead that failed validation.
    pub ingest: Option<IngestFacts>,
    /// The validation problems of a rejected batch item.
    pub errors: Vec<Problem>,
    /// The automated delivery result (DESIGN.md section 5), when one was requested.
    pub auto_delivery: Option<Value>,
}

impl ItemFacts {
    /// The item of a lead that failed validation: nothing was stored.
    pub fn invalid(external_id: Option<String>, errors: Vec<Problem>) -> ItemFacts {
        ItemFacts {
            status: Status::Rejected,
            lead_id: None,
            external_id,
            request_ids: Vec::new(),
            ingest: None,
            errors,
            auto_delivery: None,
        }
    }

    /// The item as JSON text, as stored in `leads.result`.
    pub fn to_text(&self, source: &Source) -> String {
        let item = ItemJson {
            source,
            facts: self,
            index: None,
        };
        serde_json::to_string(&item).expect("a result item always serialises")
    }
}

/// An item ready to be serialised: facts, source and (in a batch) the position.
struct ItemJson<'a> {
    source: &'a Source,
    facts: &'a ItemFacts,
    index: Option<usize>,
}

impl Serialize for ItemJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let facts = self.facts;
        let mut map = serializer.serialize_map(None)?;
        if let Some(index) = self.index {
            map.serialize_entry("index", &index)?;
        }
        map.serialize_entry("status", facts.status.as_str())?;
        map.serialize_entry("leadId", &facts.lead_id)?;
        map.serialize_entry(
            self.source.container_kind.id_key(),
            &self.source.container_id,
        )?;
        map.serialize_entry("sourceId", &self.source.id)?;
        map.serialize_entry("externalId", &facts.external_id)?;
        map.serialize_entry(
            "idempotentReplay",
            &(facts.status == Status::IdempotentReplay),
        )?;
        map.serialize_entry("requestIds", &facts.request_ids)?;
        map.serialize_entry("ingest", &facts.ingest.as_ref().map(IngestJson))?;
        if let Some(auto_delivery) = &facts.auto_delivery {
            map.serialize_entry("autoDelivery", auto_delivery)?;
        }
        if !facts.errors.is_empty() {
            map.serialize_entry("errors", &ProblemsJson(&facts.errors))?;
        }
        map.end()
    }
}

struct IngestJson<'a>(&'a IngestFacts);

impl Serialize for IngestJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let facts = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("qualityStatus", facts.quality.status.as_str())?;
        map.serialize_entry("qualityReasons", &facts.quality.reasons)?;
        map.serialize_entry("duplicateStatus", facts.duplicate_status.as_str())?;
        if let Some(found) = &facts.duplicate_match {
            map.serialize_entry("duplicateMatch", &found.to_json())?;
        }
        map.end()
    }
}

struct ProblemsJson<'a>(&'a [Problem]);

impl Serialize for ProblemsJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(Problem::to_json))
    }
}

/// The answer about one lead: new facts, or the stored item of an idempotent replay.
#[derive(Debug)]
pub enum Answer {
    Fresh(Box<ItemFacts>),
    Replay(Value),
}

impl Answer {
    /// The per-lead status this answer reports.
    pub fn status(&self) -> Status {
        match self {
            Answer::Fresh(facts) => facts.status,
            Answer::Replay(_) => Status::IdempotentReplay,
        }
    }
}

impl StoreOutcome {
    pub fn into_answer(self, source: &Source) -> Answer {
        match self {
            StoreOutcome::Created { item, .. } | StoreOutcome::DuplicateRejected { item } => {
                Answer::Fresh(Box::new(item))
            }
            StoreOutcome::Replay { lead_id, result } => {
                Answer::Replay(replay_item(source, &lead_id, result.as_deref()))
            }
            StoreOutcome::PingRefused {
                external_id,
                refusal,
            } => Answer::Fresh(Box::new(ItemFacts::invalid(
                external_id,
                vec![Problem::new("/pingId", refusal.code, refusal.message)],
            ))),
        }
    }

    /// Whether a lead was created.
    pub fn created(&self) -> bool {
        matches!(self, StoreOutcome::Created { .. })
    }
}

/// The item of an idempotent replay: the stored lead's first answer, marked as a replay.
fn replay_item(source: &Source, lead_id: &str, stored: Option<&str>) -> Value {
    let mut item = stored
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| {
            // A lead stored without its answer (not written by ingest) still names itself.
            let facts = ItemFacts {
                lead_id: Some(lead_id.to_string()),
                ..ItemFacts::invalid(None, Vec::new())
            };
            serde_json::from_str(&facts.to_text(source)).expect("an item is valid JSON")
        });
    item["status"] = Status::IdempotentReplay.as_str().into();
    item["idempotentReplay"] = true.into();
    item
}

struct AnswerJson<'a> {
    source: &'a Source,
    answer: &'a Answer,
    index: Option<usize>,
}

impl Serialize for AnswerJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.answer {
            Answer::Fresh(facts) => ItemJson {
                source: self.source,
                facts,
                index: self.index,
            }
            .serialize(serializer),
            Answer::Replay(Value::Object(fields)) => {
                let mut map = serializer.serialize_map(None)?;
                if let Some(index) = self.index {
                    map.serialize_entry("index", &index)?;
                }
                for (key, value) in fields {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            Answer::Replay(other) => other.serialize(serializer),
        }
    }
}

/// A whole answer, serialised, and whether it created a lead (201) or not (200).
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) created: bool,
    pub(crate) body: Vec<u8>,
}

/// The answer to a single lead: `{"item": …}`, 201 when a lead was created, else 200.
pub(crate) fn single(source: &Source, answer: &Answer, created: bool) -> Reply {
    struct Body<'a>(AnswerJson<'a>);
    impl Serialize for Body<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut map = serializer.serialize_map(Some(1))?;
            map.serialize_entry("item", &self.0)?;
            map.end()
        }
    }
    let body = Body(AnswerJson {
        source,
        answer,
        index: None,
    });
    Reply {
        created,
        body: serde_json::to_vec(&body).expect("a result always serialises"),
    }
}

/// The answer to a batch: a summary and one item per lead, in order. 201 when at least one
/// lead was created, else 200.
pub(crate) fn batch(source: &Source, answers: &[Answer]) -> Reply {
    let mut summary = [0usize; 4];
    for answer in answers {
        let status = match answer {
            Answer::Fresh(facts) => facts.status,
            Answer::Replay(_) => Status::IdempotentReplay,
        };
        summary[status as usize] += 1;
    }
    struct Body<'a> {
        source: &'a Source,
        answers: &'a [Answer],
        summary: [usize; 4],
    }
    impl Serialize for Body<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let counts = &self.summary;
            let mut map = serializer.serialize_map(Some(2))?;
            map.serialize_entry(
                "summary",
                &serde_json::json!({
                    "received": self.answers.len(),
                    "accepted": counts[Status::Accepted as usize],
                    "duplicate": counts[Status::Duplicate as usize],
                    "idempotentReplay": counts[Status::IdempotentReplay as usize],
                    "rejected": counts[Status::Rejected as usize],
                }),
            )?;
            map.serialize_entry(
                "items",
                &ItemsJson {
                    source: self.source,
                    answers: self.answers,
                },
            )?;
            map.end()
        }
    }
    struct ItemsJson<'a> {
        source: &'a Source,
        answers: &'a [Answer],
    }
    impl Serialize for ItemsJson<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_seq(self.answers.iter().enumerate().map(|(index, answer)| {
                AnswerJson {
                    source: self.source,
                    answer,
                    index: Some(index),
                }
            }))
        }
    }
    let created = summary[Status::Accepted as usize] + summary[Status::Duplicate as usize] > 0;
    let body = Body {
        source,
        answers,
        summary,
    };
    Reply {
        created,
        body: serde_json::to_vec(&body).expect("a result always serialises"),
    }
}
