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

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use super::job::StoreOutcome;
use crate::autodelivery::decision::{self, AutoDelivery, Replayed, RequestDecision};
use crate::config::source::{ResultDetail, Source};
use crate::ingest::problem::Problem;
use crate::ingest::store::{IngestFacts, StoredFacts};
use crate::ingest::view::ContainerId;

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
    pub lead_id: Option<crate::ids::LeadId>,
    pub external_id: Option<String>,
    pub request_ids: Vec<crate::ids::LeadRequestId>,
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
                ResultDetail::Full => map.serialize_entry("duplicateMatch", &found.view())?,
                ResultDetail::Summary => map.serialize_entry(
                    "duplicateMatch",
                    &DuplicateMatchSummary {
                        field: found.matched_on,
                    },
                )?,
            }
        }
        map.end()
    }
}

/// The `summary` form of an `autoDelivery` object (DESIGN.md section 5): its version, the
/// count delivered and, per request, only `requestId`, `outcome` and `reason`; here of a
/// replay's full object, whose values it takes.
#[derive(Debug, Serialize)]
struct AutoDeliverySummaryOf {
    version: &'static str,
    delivered: usize,
    requests: Vec<RequestSummaryOf>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestSummaryOf {
    request_id: Value,
    outcome: Value,
    reason: Value,
}

impl AutoDeliverySummaryOf {
    fn of(full: Replayed) -> AutoDeliverySummaryOf {
        AutoDeliverySummaryOf {
            version: full.version,
            delivered: full.delivered,
            requests: full
                .requests
                .into_iter()
                .map(|mut request| RequestSummaryOf {
                    request_id: request["requestId"].take(),
                    outcome: request["outcome"].take(),
                    reason: request["reason"].take(),
                })
                .collect(),
        }
    }
}

/// [`AutoDeliverySummaryOf`] of a fresh answer, written straight from the decisions: the
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
#[derive(Debug, Serialize)]
struct DuplicateMatchSummary<T> {
    field: T,
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
    Replay(Box<ReplayItem>),
}

impl Answer {
    /// The answer with `warnings` added (nothing done when there are none).
    pub fn with_warnings(mut self, warnings: Vec<Problem>) -> Answer {
        if warnings.is_empty() {
            return self;
        }
        match &mut self {
            Answer::Fresh(facts) => facts.warnings = warnings,
            Answer::Replay(item) => item.warnings = warnings,
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
            StoreOutcome::Replay(stored) => Answer::Replay(Box::new(replay_item(source, stored))),
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
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayItem {
    status: &'static str,
    lead_id: crate::ids::LeadId,
    #[serde(flatten)]
    container: ContainerId<String>,
    source_id: crate::ids::SourceId,
    external_id: String,
    idempotent_replay: bool,
    request_ids: Vec<crate::ids::LeadRequestId>,
    ingest: ReplayIngest,
    #[serde(skip_serializing_if = "Option::is_none")]
    auto_delivery: Option<ReplayAutoDelivery>,
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "serialize_problems"
    )]
    warnings: Vec<Problem>,
}

/// The `ingest` object of a replay, from the stored columns.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplayIngest {
    quality_status: String,
    quality_reasons: Value,
    duplicate_status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicate_match: Option<ReplayDuplicateMatch>,
}

/// A replay's `duplicateMatch`: the stored one, or its summary.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ReplayDuplicateMatch {
    Full(Value),
    Summary(DuplicateMatchSummary<Value>),
}

/// A replay's `autoDelivery`: the partner's view of each stored decision, or its summary.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ReplayAutoDelivery {
    Full(Replayed),
    Summary(AutoDeliverySummaryOf),
}

fn serialize_problems<S: Serializer>(
    problems: &[Problem],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    ProblemsJson(problems).serialize(serializer)
}

/// The [`ReplayItem`] of `stored`. Auto-delivery's part is the partner's view of each
/// stored decision; both it and the duplicate match are cut to the source's current
/// detail, as a fresh answer is.
fn replay_item(source: &Source, stored: StoredFacts) -> ReplayItem {
    let json_column = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    let detail = source.result_detail;
    let duplicate_match = stored.duplicate_match.as_deref().map(|found| {
        let mut found = json_column(found);
        match detail {
            ResultDetail::Summary if found.is_object() => {
                ReplayDuplicateMatch::Summary(DuplicateMatchSummary {
                    field: found["matchedOn"].take(),
                })
            }
            _ => ReplayDuplicateMatch::Full(found),
        }
    });
    let auto_delivery = stored
        .requests
        .iter()
        .any(|r| r.trigger_auto_delivery)
        .then(|| {
            let decisions: Vec<Value> = stored
                .requests
                .iter()
                .filter(|r| r.trigger_auto_delivery)
                .filter_map(|r| r.decision.as_deref())
                .map(json_column)
                .collect();
            let full = crate::autodelivery::decision::replayed(&decisions);
            match detail {
                ResultDetail::Full => ReplayAutoDelivery::Full(full),
                ResultDetail::Summary => {
                    ReplayAutoDelivery::Summary(AutoDeliverySummaryOf::of(full))
                }
            }
        });
    ReplayItem {
        status: Status::IdempotentReplay.as_str(),
        lead_id: stored.lead_id,
        container: ContainerId(source.container_kind, source.container_id.clone()),
        source_id: source.id.clone(),
        external_id: stored.external_id,
        idempotent_replay: true,
        request_ids: stored.requests.into_iter().map(|r| r.id).collect(),
        ingest: ReplayIngest {
            quality_status: stored.quality_status,
            quality_reasons: json_column(&stored.quality_reasons),
            duplicate_status: stored.duplicate_status,
            duplicate_match,
        },
        auto_delivery,
        warnings: Vec::new(),
    }
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
            Answer::Replay(item) => {
                #[derive(Serialize)]
                struct Indexed<'a> {
                    #[serde(skip_serializing_if = "Option::is_none")]
                    index: Option<usize>,
                    #[serde(flatten)]
                    item: &'a ReplayItem,
                }
                Indexed {
                    index: self.index,
                    item,
                }
                .serialize(serializer)
            }
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
    /// The batch's `summary`: how many leads it had, and of each status.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Summary {
        received: usize,
        accepted: usize,
        duplicate: usize,
        idempotent_replay: usize,
        rejected: usize,
    }
    impl Serialize for Body<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let counts = &self.summary;
            let mut map = serializer.serialize_map(Some(2))?;
            map.serialize_entry(
                "summary",
                &Summary {
                    received: self.answers.len(),
                    accepted: counts[Status::Accepted as usize],
                    duplicate: counts[Status::Duplicate as usize],
                    idempotent_replay: counts[Status::IdempotentReplay as usize],
                    rejected: counts[Status::Rejected as usize],
                },
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

    fn decided(delivered: bool) -> RequestDecision {
        RequestDecision {
            request_id: decision::Subject::Request(crate::ids::LeadRequestId::generate()),
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
            requests: vec![decided(true), decided(false)],
        };
        // The replay reads the operator's views the job stored.
        let stored: Vec<Value> = auto
            .requests
            .iter()
            .map(|r| serde_json::from_str(&r.operator_text(decision::Stored::Request)).unwrap())
            .collect();
        let full = decision::replayed(&stored);
        let summary = serde_json::to_value(AutoDeliverySummaryOf::of(full)).unwrap();
        assert_eq!(
            serde_json::to_string(&AutoDeliverySummary(&auto)).unwrap(),
            summary.to_string(),
            "same keys, same order, same values"
        );
        assert_eq!(summary["requests"][1]["outcome"], "not_delivered");
    }
}
