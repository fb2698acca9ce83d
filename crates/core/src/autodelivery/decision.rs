//! The Delivery 1.0 decision: what auto-delivery decided for each interest and why, as the
//! ingest result's `autoDelivery` object and as stored in `lead_requests.decision`.
//!
//! Two views of one decision. The ingest result goes back to the partner who sent the lead,
//! so its candidates carry DESIGN.md's keys (`buyerAccountId`, `eligible`, `reason`) and, for
//! `filter_mismatch`, the field in `detail`; the buyers' prices, priorities, cap counts and
//! balances are not the partner's business. The stored decision is the operator's: each
//! candidate also has `buyerPrice`, `priority`, `lastServedAt` and the full `detail`, which
//! `leadrelay lead show` prints. Owns both shapes and the write of the stored one.

use rusqlite::Connection;
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use super::eligibility::{Candidate, Reason};
use super::evaluator::Evaluation;
use crate::config::container::DeliveryMode;
use crate::ids::LeadRequestId;
use crate::ingest::status::RequestStatus;

/// The `version` of every `autoDelivery` object.
pub(crate) const VERSION: &str = "1.0";

/// Why a request's evaluation ended as it did: the request's `reason` (its `outcome` is
/// only whether anything was delivered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestReason {
    Delivered,
    NotRoutingReady,
    DuplicateReview,
    QualityInvalid,
    AutoDeliveryDisabled,
    ScoreBelowThreshold,
    NoEligibleBuyer,
    /// A ping whose email or phone hash is on the workspace's suppression list.
    Suppressed,
}

impl RequestReason {
    pub(crate) fn code(self) -> &'static str {
        match self {
            RequestReason::Delivered => "delivered",
            RequestReason::NotRoutingReady => "not_routing_ready",
            RequestReason::DuplicateReview => "duplicate_review",
            RequestReason::QualityInvalid => "quality_invalid",
            RequestReason::AutoDeliveryDisabled => "auto_delivery_disabled",
            RequestReason::ScoreBelowThreshold => "score_below_threshold",
            RequestReason::NoEligibleBuyer => "no_eligible_buyer",
            RequestReason::Suppressed => "suppressed",
        }
    }
}

/// One transaction auto-delivery created.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub transaction_id: crate::ids::TransactionId,
    pub buyer_id: crate::ids::BuyerId,
    pub price_cents: i64,
    pub mode: DeliveryMode,
}

/// What a decision is about: a stored lead request, or a ping (its lead is not stored
/// yet). Shown as the id's text (`requestId`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Request(LeadRequestId),
    Ping(String),
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Request(id) => id.fmt(f),
            Subject::Ping(id) => f.write_str(id),
        }
    }
}

impl Serialize for Subject {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Subject::Request(id) => id.serialize(serializer),
            Subject::Ping(id) => serializer.serialize_str(id),
        }
    }
}

impl PartialEq<LeadRequestId> for Subject {
    fn eq(&self, other: &LeadRequestId) -> bool {
        matches!(self, Subject::Request(id) if id == other)
    }
}

/// The decision for one interest.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestDecision {
    pub request_id: Subject,
    pub reason: RequestReason,
    /// `None` when an earlier step ended the evaluation.
    pub evaluation: Option<Evaluation>,
    pub deliveries: Vec<Delivery>,
    /// Ranked best first; empty when the evaluation ended before eligibility.
    pub candidates: Vec<Candidate>,
    pub decided_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// The ingest result, answered to the partner.
    Partner,
    /// The stored decision, shown to the operator.
    Operator,
}

impl RequestDecision {
    pub(crate) fn to_json(&self, view: View) -> Value {
        serde_json::to_value(self.shown(view, None))
            .expect("a decision's view has string keys and finite numbers")
    }

    /// The operator's view as text, written straight from the decision by `decision_text`:
    /// it is built for every routed lead (and ping) on the writer thread. `Stored::Request` is what
    /// `lead_requests.decision` holds (with its `version`); `Stored::Ping` what a ping
    /// keeps (its outcome `reserved` or `rejected`, no version).
    pub(crate) fn operator_text(&self, stored: Stored) -> String {
        let (outcome, version) = Self::stored_as(stored);
        super::decision_text::operator_text(self, outcome.unwrap_or(self.outcome()), version)
    }

    /// The outcome (when not the decision's own) and the version of the view `stored`.
    fn stored_as(stored: Stored) -> (Option<&'static str>, Option<&'static str>) {
        match stored {
            Stored::Request => (None, Some(VERSION)),
            Stored::Ping { outcome } => (Some(outcome), None),
        }
    }

    /// [`RequestDecision::operator_text`] through serde's serialisers of the same shape,
    /// which the written text must equal.
    #[cfg(test)]
    fn operator_text_by_serde(&self, stored: Stored) -> String {
        let (outcome, version) = Self::stored_as(stored);
        let mut shown = serde_json::to_value(self.shown(View::Operator, outcome))
            .expect("a decision's view has string keys");
        if let Some(version) = version {
            shown["version"] = Value::from(version);
        }
        shown.to_string()
    }

    /// The request's `outcome`: whether anything was delivered.
    pub(crate) fn outcome(&self) -> &'static str {
        if self.deliveries.is_empty() {
            "not_delivered"
        } else {
            "delivered"
        }
    }

    fn shown(&self, view: View, outcome: Option<&'static str>) -> Shown<'_> {
        Shown {
            request_id: &self.request_id,
            outcome: outcome.unwrap_or(self.outcome()),
            reason: self.reason.code(),
            evaluation: self.evaluation.as_ref(),
            deliveries: Deliveries(&self.deliveries),
            candidates: Candidates(&self.candidates, view),
            decided_at: crate::clock::iso(self.decided_at),
        }
    }
}

/// Where an operator's view is stored.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stored {
    Request,
    Ping { outcome: &'static str },
}

/// One request's decision as shown: the keys of DESIGN.md section 5 in their order (typed,
/// so that no `Value` tree is built per candidate).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown<'a> {
    request_id: &'a Subject,
    outcome: &'a str,
    reason: &'static str,
    evaluation: Option<&'a Evaluation>,
    deliveries: Deliveries<'a>,
    candidates: Candidates<'a>,
    decided_at: String,
}

struct Deliveries<'a>(&'a [Delivery]);

impl Serialize for Deliveries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Shown<'a> {
            transaction_id: &'a crate::ids::TransactionId,
            buyer_account_id: &'a str,
            buyer_price: f64,
            delivery_mode: &'static str,
        }
        serializer.collect_seq(self.0.iter().map(|d| Shown {
            transaction_id: &d.transaction_id,
            buyer_account_id: d.buyer_id.as_str(),
            buyer_price: crate::money::as_f64(d.price_cents),
            delivery_mode: d.mode.as_str(),
        }))
    }
}

struct Candidates<'a>(&'a [Candidate], View);

impl Serialize for Candidates<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|c| candidate_shown(c, self.1)))
    }
}

/// A candidate as shown: to the partner only the buyer, its verdict and of a
/// `filter_mismatch` the field; to the operator also the full detail, price, priority and
/// when the buyer was last served.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CandidateShown<'a> {
    buyer_account_id: &'a str,
    eligible: bool,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<Detail<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    buyer_price: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<i64>,
    /// `Some(None)` shows `null`: the operator sees the key for a buyer never served.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_served_at: Option<Option<String>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Detail<'a> {
    Full(&'a super::eligibility::Detail),
    Field { field: &'a str },
}

fn candidate_shown(candidate: &Candidate, view: View) -> CandidateShown<'_> {
    let mut shown = CandidateShown {
        buyer_account_id: candidate.buyer_id.as_str(),
        eligible: candidate.reason.is_eligible(),
        reason: candidate.reason.code(),
        detail: None,
        buyer_price: None,
        priority: None,
        last_served_at: None,
    };
    match view {
        View::Partner => {
            if candidate.reason == Reason::FilterMismatch {
                shown.detail = candidate
                    .detail
                    .as_ref()
                    .and_then(super::eligibility::Detail::filter_field)
                    .map(|field| Detail::Field { field });
            }
        }
        View::Operator => {
            shown.detail = candidate.detail.as_ref().map(Detail::Full);
            shown.buyer_price = Some(crate::money::as_f64(candidate.price_cents));
            shown.priority = Some(candidate.priority);
            shown.last_served_at = Some(candidate.last_served_at.map(crate::clock::iso));
        }
    }
    shown
}

/// Every evaluated interest of one lead: the ingest result's `autoDelivery`.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoDelivery {
    pub requests: Vec<RequestDecision>,
}

impl AutoDelivery {
    /// How many transactions were created, over all interests.
    pub(crate) fn delivered(&self) -> usize {
        self.requests.iter().map(|r| r.deliveries.len()).sum()
    }

    /// The `autoDelivery` object of the ingest result (the partner's view), serialised
    /// straight from the typed decisions when the answer is written, after the writer job:
    /// built there as a `Value` tree per candidate it cost the writer a tenth of an
    /// auto-delivered lead.
    pub(crate) fn partner_view(&self) -> impl Serialize + '_ {
        self.view(View::Partner)
    }

    fn view(&self, view: View) -> AutoDeliveryView<'_> {
        AutoDeliveryView {
            version: VERSION,
            delivered: self.delivered(),
            requests: Requests(&self.requests, view),
        }
    }

    /// [`AutoDelivery::partner_view`] as a `Value`, for the tests that compare it.
    #[cfg(test)]
    pub(crate) fn to_json(&self) -> Value {
        serde_json::to_value(self.partner_view()).expect("a decision's view has string keys")
    }
}

/// An `autoDelivery` object: `version`, `delivered` and each request in the partner's or
/// the operator's view.
#[derive(Serialize)]
struct AutoDeliveryView<'a> {
    version: &'static str,
    delivered: usize,
    requests: Requests<'a>,
}

struct Requests<'a>(&'a [RequestDecision], View);

impl Serialize for Requests<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|r| r.shown(self.1, None)))
    }
}

impl AutoDelivery {
    /// The operator's view (`lead reroute`): every candidate with its price and detail.
    pub fn to_operator_json(&self) -> Value {
        serde_json::to_value(self.view(View::Operator))
            .expect("a decision's view has string keys and finite numbers")
    }
}

/// The `autoDelivery` object of an idempotent replay: each stored decision as the partner
/// first got it (free-form: read back from the stored text).
#[derive(Debug, Serialize)]
pub(crate) struct Replayed {
    pub(crate) version: &'static str,
    pub(crate) delivered: usize,
    pub(crate) requests: Vec<Value>,
}

/// The [`Replayed`] `autoDelivery` of the decisions stored on a lead's requests (the
/// operator's views).
pub(crate) fn replayed(stored: &[Value]) -> Replayed {
    let requests: Vec<Value> = stored.iter().map(partner_view_of_stored).collect();
    let delivered: usize = requests
        .iter()
        .map(|r| r["deliveries"].as_array().map_or(0, Vec::len))
        .sum();
    Replayed {
        version: VERSION,
        delivered,
        requests,
    }
}

/// What [`RequestDecision::to_json`] gave the partner, from the operator's view that
/// [`store`] kept: the request's `version` and each candidate's operator-only keys
/// dropped, and of a `filter_mismatch` detail only the field.
fn partner_view_of_stored(stored: &Value) -> Value {
    let mut shown = stored.clone();
    let Some(request) = shown.as_object_mut() else {
        return shown;
    };
    request.remove("version");
    if let Some(candidates) = request.get_mut("candidates").and_then(Value::as_array_mut) {
        for candidate in candidates.iter_mut().filter_map(Value::as_object_mut) {
            let detail = candidate.remove("detail");
            for key in ["buyerPrice", "priority", "lastServedAt"] {
                candidate.remove(key);
            }
            if candidate.get("reason").and_then(Value::as_str)
                == Some(Reason::FilterMismatch.code())
                && let Some(field) = detail.as_ref().and_then(|d| d.get("field"))
            {
                candidate.insert("detail".into(), json!({"field": field}));
            }
        }
    }
    shown
}

/// Stores the operator's view of `decision` on its lead request and sets the request's
/// status to `delivered` or `not_delivered`.
pub(crate) fn store(conn: &Connection, decision: &RequestDecision) -> rusqlite::Result<()> {
    write(conn, decision, &decision.operator_text(Stored::Request))
}

/// [`store`], with `annotate` adding to the operator's view first: a post names its ping,
/// the waterfall keeps its steps so far (`lead show` traces every step).
pub(crate) fn store_with(
    conn: &Connection,
    decision: &RequestDecision,
    annotate: impl FnOnce(&mut Value),
) -> rusqlite::Result<()> {
    let mut stored = decision.to_json(View::Operator);
    stored["version"] = Value::from(VERSION);
    annotate(&mut stored);
    write(conn, decision, &stored.to_string())
}

/// Stores `text`, the operator's view of `decision`, on its lead request with the
/// request's status.
fn write(conn: &Connection, decision: &RequestDecision, text: &str) -> rusqlite::Result<()> {
    let status = if decision.deliveries.is_empty() {
        RequestStatus::NotDelivered
    } else {
        RequestStatus::Delivered
    };
    match &decision.request_id {
        Subject::Request(id) => crate::ingest::status::record_decision(conn, *id, text, status),
        // A ping's decision is stored with the ping (`ping::store`).
        Subject::Ping(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::eligibility::Detail;
    use super::super::evaluator::{DEFAULT_WEIGHTS, evaluate};
    use super::super::features::Features;
    use super::*;

    fn candidate(id: &str, reason: Reason, detail: Option<Detail>) -> Candidate {
        Candidate {
            buyer_id: id.into(),
            price_cents: 2500,
            priority: 3,
            last_served_at: None,
            created_at: 0,
            reason,
            detail,
        }
    }

    /// A `prefix` filter on `field` with `values`, which did not match.
    fn filter_failed(field: &str, values: &[&str]) -> Detail {
        let filter = crate::config::subscription::Filter {
            field: field.into(),
            op: crate::config::subscription::FilterOp::Prefix,
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        Detail::Filter {
            filters: std::sync::Arc::new(vec![filter]),
            index: 0,
        }
    }

    const LREQ_1: &str = "lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9";

    fn decision() -> RequestDecision {
        RequestDecision {
            request_id: Subject::Request(LREQ_1.parse().unwrap()),
            reason: RequestReason::Delivered,
            evaluation: Some(evaluate(
                &Features {
                    values: [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
                    categories: Vec::new(),
                },
                &DEFAULT_WEIGHTS,
                50,
            )),
            deliveries: vec![Delivery {
                transaction_id: "txn_1".into(),
                buyer_id: "sunco".into(),
                price_cents: 2500,
                mode: DeliveryMode::Exclusive,
            }],
            candidates: vec![
                candidate("sunco", Reason::Selected, None),
                candidate(
                    "north",
                    Reason::FilterMismatch,
                    Some(filter_failed("postalCode", &["80"])),
                ),
                candidate(
                    "broke",
                    Reason::InsufficientBalance,
                    Some(Detail::Short {
                        buyer_price: 25.0,
                        available: 3.0,
                    }),
                ),
            ],
            decided_at: 0,
        }
    }

    #[test]
    fn the_partner_view_has_the_designed_keys() {
        let auto = AutoDelivery {
            requests: vec![decision()],
        };
        let shown = auto.to_json();
        assert_eq!(shown["version"], "1.0");
        assert_eq!(shown["delivered"], 1);
        let request = &shown["requests"][0];
        assert_eq!(request["outcome"], "delivered");
        assert_eq!(request["reason"], "delivered");
        assert_eq!(request["evaluation"]["score"], 97, "one soft flag");
        assert_eq!(request["evaluation"]["passed"], true);
        assert_eq!(request["evaluation"]["factors"][1]["name"], "validEmail");
        assert_eq!(
            request["deliveries"][0],
            json!({"transactionId": "txn_1", "buyerAccountId": "sunco", "buyerPrice": 25.0,
                   "deliveryMode": "exclusive"})
        );
        assert_eq!(
            request["candidates"],
            json!([
                {"buyerAccountId": "sunco", "eligible": true, "reason": "selected"},
                {"buyerAccountId": "north", "eligible": false, "reason": "filter_mismatch",
                 "detail": {"field": "postalCode"}},
                {"buyerAccountId": "broke", "eligible": false, "reason": "insufficient_balance"},
            ])
        );
    }

    #[test]
    fn the_operator_view_keeps_every_detail() {
        let shown = decision().to_json(View::Operator);
        let broke = &shown["candidates"][2];
        assert_eq!(broke["detail"]["available"], 3.0);
        assert_eq!(broke["buyerPrice"], 25.0);
        assert_eq!(broke["priority"], 3);
        assert_eq!(shown["candidates"][1]["detail"]["op"], "prefix");
    }

    #[test]
    fn the_stored_text_keeps_the_shape_and_key_order() {
        let mut decided = decision();
        decided.evaluation = None;
        decided.candidates[0].last_served_at = Some(0);
        assert_eq!(
            decided.operator_text(Stored::Request),
            r#"{"requestId":"lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9","outcome":"delivered","reason":"delivered","evaluation":null,"#
                .to_owned()
                + r#""deliveries":[{"transactionId":"txn_1","buyerAccountId":"sunco","buyerPrice":25.0,"deliveryMode":"exclusive"}],"#
                + r#""candidates":[{"buyerAccountId":"sunco","eligible":true,"reason":"selected","buyerPrice":25.0,"priority":3,"lastServedAt":"1970-01-01T00:00:00.000Z"},"#
                + r#"{"buyerAccountId":"north","eligible":false,"reason":"filter_mismatch","detail":{"field":"postalCode","op":"prefix","values":["80"]},"buyerPrice":25.0,"priority":3,"lastServedAt":null},"#
                + r#"{"buyerAccountId":"broke","eligible":false,"reason":"insufficient_balance","detail":{"buyerPrice":25.0,"available":3.0},"buyerPrice":25.0,"priority":3,"lastServedAt":null}],"#
                + r#""decidedAt":"1970-01-01T00:00:00.000Z","version":"1.0"}"#
        );
        let full = decision();
        let mut through_values = full.to_json(View::Operator);
        through_values["version"] = json!(VERSION);
        assert_eq!(
            full.operator_text(Stored::Request),
            through_values.to_string(),
            "the evaluation's factors too"
        );
        let ping = full.operator_text(Stored::Ping {
            outcome: "reserved",
        });
        let ping: Value = serde_json::from_str(&ping).unwrap();
        assert_eq!(ping["outcome"], "reserved");
        assert!(ping.get("version").is_none());
    }

    #[test]
    fn the_written_text_is_what_serde_writes_for_every_shape() {
        let full = decision();
        let mut stopped = decision();
        stopped.evaluation = None;
        stopped.deliveries.clear();
        stopped.candidates.clear();
        stopped.reason = RequestReason::NoEligibleBuyer;
        // Strings that need escaping, non-ASCII text, numbers serde writes as `null`, a
        // second delivery, negative and large amounts, a time before 1970.
        let mut odd = decision();
        odd.request_id = Subject::Ping("png_\"quoted\"\n\u{1}é".into());
        if let Some(evaluation) = odd.evaluation.as_mut() {
            evaluation.factors[0].name = "category:roof=\"tile\"\\ü".to_owned().into();
            evaluation.factors[1].value = f64::NAN;
            evaluation.factors[2].weight = f64::INFINITY;
            evaluation.factors[3].contribution = -0.1 + 0.2;
            evaluation.factors[4].value = 1e300;
            // Each character that needs escaping alone in a string.
            evaluation.factors[5].name = "back\\slash".into();
            evaluation.factors[6].name = "tab\there".into();
            evaluation.factors[7].name = "quo\"te".into();
        }
        odd.deliveries.push(Delivery {
            transaction_id: "txn_2".into(),
            buyer_id: "b.2-x_y".into(),
            price_cents: -1,
            mode: DeliveryMode::Multi,
        });
        odd.candidates[0].price_cents = i64::MAX;
        odd.candidates[1].priority = i64::MIN;
        odd.candidates[1].last_served_at = Some(-86_400_001);
        odd.candidates[2].detail = Some(filter_failed("note", &["a\"b\u{7f}\t"]));
        odd.decided_at = 1_800_000_000_123;
        for (name, decided) in [("full", &full), ("stopped", &stopped), ("odd", &odd)] {
            for stored in [
                Stored::Request,
                Stored::Ping {
                    outcome: "reserved",
                },
            ] {
                let written = decided.operator_text(stored);
                assert_eq!(written, decided.operator_text_by_serde(stored), "{name}");
                let _: Value = serde_json::from_str(&written).expect("valid JSON");
            }
        }
    }

    #[test]
    fn an_early_stop_has_no_evaluation_and_no_candidates() {
        let stopped = RequestDecision {
            request_id: Subject::Request(LREQ_1.parse().unwrap()),
            reason: RequestReason::NotRoutingReady,
            evaluation: None,
            deliveries: Vec::new(),
            candidates: Vec::new(),
            decided_at: 0,
        };
        let shown = stopped.to_json(View::Partner);
        assert_eq!(shown["outcome"], "not_delivered");
        assert_eq!(shown["reason"], "not_routing_ready");
        assert_eq!(shown["evaluation"], Value::Null);
        assert_eq!(shown["candidates"], json!([]));
    }

    #[test]
    fn a_replay_gives_the_partner_what_the_first_answer_did() {
        let stopped = RequestDecision {
            request_id: Subject::Request(LREQ_1.parse().unwrap()),
            reason: RequestReason::NotRoutingReady,
            evaluation: None,
            deliveries: Vec::new(),
            candidates: Vec::new(),
            decided_at: 7,
        };
        let auto = AutoDelivery {
            requests: vec![decision(), stopped],
        };
        let stored: Vec<Value> = auto
            .requests
            .iter()
            .map(|d| {
                let mut stored = d.to_json(View::Operator);
                stored["version"] = json!(VERSION);
                // Through its text, as the column holds it.
                serde_json::from_str(&stored.to_string()).unwrap()
            })
            .collect();
        assert_eq!(
            serde_json::to_string(&replayed(&stored)).unwrap(),
            auto.to_json().to_string(),
            "same keys, same order, same values"
        );
    }
}
