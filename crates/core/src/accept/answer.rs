//! The ingest answer: the per-lead result item, the single-lead wrapper and the batch
//! summary (SPEC.md 2.5, DESIGN.md section 2), and whether they created a lead (which the
//! HTTP layer answers 201 rather than 200).
//!
//! Owns the JSON of results. Items are serialised straight from [`ItemFacts`] (no
//! intermediate `serde_json::Value`), after the writer job, on the request's task. An
//! idempotent replay is rebuilt from what the stored lead's columns and requests hold
//! ([`StoredFacts`]): nothing of the first answer is stored twice. It decides nothing about
//! leads; it reports what the writer job (`job`) did.
//!
//! Disclosure (DESIGN.md section 5, amended): what a partner is answered is cut to its
//! source's current [`ResultDetail`], for a fresh answer and for a replay alike, so
//! changing the setting changes every later answer and a replay never shows more than the
//! setting; `lead show` reads the whole stored decisions.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use super::job::StoreOutcome;
use crate::autodelivery::decision::{self, AutoDelivery, RequestDecision};
use crate::config::source::{ResultDetail, Source};
use crate::ingest::problem::Problem;
use crate::ingest::store::{IngestFacts, StoredFacts};

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
    /// What was accepted but looks wrong (a misspelt field kept as an additional
    /// property): `warnings`, only when there are any.
    pub warnings: Vec<Problem>,
    /// The automated delivery result (DESIGN.md section 5), when one was requested: the
    /// typed decisions, serialised in the answer's view with the item, after the job.
    pub(crate) auto_delivery: Option<AutoDelivery>,
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
            warnings: Vec::new(),
            auto_delivery: None,
        }
    }
}

/// An item ready to be serialised: facts, source and (in a batch) the position.
struct ItemJson<'a> {
    source: &'a Source,
    facts: &'a ItemFacts,
    index: Option<usize>,
    detail: ResultDetail,
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
        map.serialize_entry(
            "ingest",
            &facts
                .ingest
                .as_ref()
                .map(|facts| IngestJson(facts, self.detail)),
        )?;
        if let Some(auto_delivery) = &facts.auto_delivery {
            match self.detail {
                ResultDetail::Full => {
                    map.serialize_entry("autoDelivery", &auto_delivery.partner_view())?
                }
                ResultDetail::Summary => {
                    map.serialize_entry("autoDelivery", &AutoDeliverySummary(auto_delivery))?
                }
            }
        }
        if !facts.errors.is_empty() {
            map.serialize_entry("errors", &ProblemsJson(&facts.errors))?;
        }
        if !facts.warnings.is_empty() {
            map.serialize_entry("warnings", &ProblemsJson(&facts.warnings))?;
        }
        map.end()
    }
}

struct IngestJson<'a>(&'a IngestFacts, ResultDetail);

impl Serialize for IngestJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let facts = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("qualityStatus", facts.quality.status.as_str())?;
        map.serialize_entry("qualityReasons", &facts.quality.reasons)?;
        map.serialize_entry("duplicateStatus", facts.duplicate_status.as_str())?;
        if let Some(found) = &facts.duplicate_match {
            match self.1 {
                ResultDetail::Full => map.serialize_entry("duplicateMatch", &found.to_json())?,
                ResultDetail::Summary => map.serialize_entry(
                    "duplicateMatch",
                    &duplicate_match_summary(&Value::from(found.matched_on)),
                )?,
            }
        }
        map.end()
    }
}

/// The `summary` form of an `autoDelivery` object (DESIGN.md section 5): its version, the
/// count delivered and, per request, only `requestId`, `outcome` and `reason`.
fn auto_delivery_summary(full: &Value) -> Value {
    let requests: Vec<Value> = full["requests"]
        .as_array()
        .map(|requests| {
            requests
                .iter()
                .map(|request| {
                    serde_json::json!({
                        "requestId": request["requestId"],
                        "outcome": request["outcome"],
                        "reason": request["reason"],
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "version": full["version"],
        "delivered": full["delivered"],
        "requests": requests,
    })
}

/// [`auto_delivery_summary`] of a fresh answer, written straight from the decisions: the
/// same keys in the same order.
struct AutoDeliverySummary<'a>(&'a AutoDelivery);

impl Serialize for AutoDeliverySummary<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Request<'a>(&'a RequestDecision);
        impl Serialize for Request<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("requestId", &self.0.request_id)?;
                map.serialize_entry("outcome", self.0.outcome())?;
                map.serialize_entry("reason", self.0.reason.code())?;
                map.end()
            }
        }
        let auto = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("version", decision::VERSION)?;
        map.serialize_entry("delivered", &auto.delivered())?;
        map.serialize_entry(
            "requests",
            &auto.requests.iter().map(Request).collect::<Vec<_>>(),
        )?;
        map.end()
    }
}

/// The `summary` form of a `duplicateMatch` (DESIGN.md section 5): only the field it
/// matched on, never the other lead's id.
fn duplicate_match_summary(matched_on: &Value) -> Value {
    serde_json::json!({"field": matched_on})
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
    /// The answer with `warnings` added (nothing done when there are none).
    pub fn with_warnings(mut self, warnings: Vec<Problem>) -> Answer {
        if warnings.is_empty() {
            return self;
        }
        match &mut self {
            Answer::Fresh(facts) => facts.warnings = warnings,
            Answer::Replay(Value::Object(item)) => {
                item.insert(
                    "warnings".into(),
                    warnings.iter().map(Problem::to_json).collect(),
                );
            }
            Answer::Replay(_) => {}
        }
        self
    }

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
            StoreOutcome::Replay(stored) => Answer::Replay(replay_item(source, &stored)),
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

/// The item of an idempotent replay: the stored lead's answer rebuilt from its columns and
/// requests, in the order and shape of a first answer ([`ItemJson`]), marked as a replay.
/// Auto-delivery's part is the partner's view of each stored decision; both it and the
/// duplicate match are cut to the source's current detail, as a fresh answer is.
fn replay_item(source: &Source, stored: &StoredFacts) -> Value {
    let json_column = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    let mut ingest = serde_json::Map::new();
    ingest.insert("qualityStatus".into(), stored.quality_status.clone().into());
    ingest.insert(
        "qualityReasons".into(),
        json_column(&stored.quality_reasons),
    );
    ingest.insert(
        "duplicateStatus".into(),
        stored.duplicate_status.clone().into(),
    );
    let detail = source.result_detail;
    if let Some(found) = &stored.duplicate_match {
        let found = json_column(found);
        let shown = match detail {
            ResultDetail::Summary if found.is_object() => {
                duplicate_match_summary(&found["matchedOn"])
            }
            _ => found,
        };
        ingest.insert("duplicateMatch".into(), shown);
    }
    let mut item = serde_json::Map::new();
    item.insert("status".into(), Status::IdempotentReplay.as_str().into());
    item.insert("leadId".into(), stored.lead_id.clone().into());
    item.insert(
        source.container_kind.id_key().into(),
        source.container_id.clone().into(),
    );
    item.insert("sourceId".into(), source.id.clone().into());
    item.insert("externalId".into(), stored.external_id.clone().into());
    item.insert("idempotentReplay".into(), true.into());
    item.insert(
        "requestIds".into(),
        stored
            .requests
            .iter()
            .map(|r| Value::from(r.id.as_str()))
            .collect(),
    );
    item.insert("ingest".into(), Value::Object(ingest));
    let decisions: Vec<Value> = stored
        .requests
        .iter()
        .filter(|r| r.trigger_auto_delivery)
        .filter_map(|r| r.decision.as_deref())
        .map(json_column)
        .collect();
    if stored.requests.iter().any(|r| r.trigger_auto_delivery) {
        let full = crate::autodelivery::decision::replayed(&decisions);
        let shown = match detail {
            ResultDetail::Full => full,
            ResultDetail::Summary => auto_delivery_summary(&full),
        };
        item.insert("autoDelivery".into(), shown);
    }
    Value::Object(item)
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
                detail: self.source.result_detail,
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
pub struct Reply {
    pub created: bool,
    pub body: Vec<u8>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodelivery::decision::{Delivery, RequestReason};
    use crate::config::container::DeliveryMode;

    fn decided(id: &str, delivered: bool) -> RequestDecision {
        RequestDecision {
            request_id: id.into(),
            reason: if delivered {
                RequestReason::Delivered
            } else {
                RequestReason::NoEligibleBuyer
            },
            evaluation: None,
            deliveries: if delivered {
                vec![Delivery {
                    transaction_id: "txn_1".into(),
                    buyer_id: "sunco".into(),
                    price_cents: 2500,
                    mode: DeliveryMode::Exclusive,
                }]
            } else {
                Vec::new()
            },
            candidates: Vec::new(),
            decided_at: 0,
        }
    }

    #[test]
    fn a_fresh_summary_is_written_as_the_summary_of_the_full_view() {
        let auto = AutoDelivery {
            requests: vec![decided("lreq_1", true), decided("lreq_2", false)],
        };
        let full = serde_json::to_value(auto.partner_view()).unwrap();
        assert_eq!(
            serde_json::to_string(&AutoDeliverySummary(&auto)).unwrap(),
            auto_delivery_summary(&full).to_string(),
            "same keys, same order, same values"
        );
        assert_eq!(
            auto_delivery_summary(&full)["requests"][1]["outcome"],
            "not_delivered"
        );
    }
}
