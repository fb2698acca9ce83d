//! The operator's view of a decision as JSON text, written straight into one buffer.
//!
//! Every routed lead's decision is stored as this text (`lead_requests.decision`), on the
//! writer thread. Through serde's derived serialisers it cost a tenth of an auto-delivered
//! lead's writer job: about 270 keys and short values per decision with twenty candidates,
//! each escaped and framed one call at a time. Here the keys and punctuation are literal
//! text, and only values go through an escape check. The text is the one serde writes for
//! `decision`'s `Shown`, byte for byte (the key order, `null`s, number forms): the tests
//! compare the two on every shape a decision takes, so neither can drift.
//!
//! Owns nothing but the writing; the shape is `decision`'s.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;

use super::decision::{Delivery, RequestDecision, Subject};
use super::eligibility::Candidate;
use super::evaluator::Evaluation;
use crate::ids::BuyerId;

/// `decision` as the operator sees it, with `outcome` as the request's outcome and
/// `version` last when given.
pub(super) fn operator_text(
    decision: &RequestDecision,
    outcome: &str,
    version: Option<&str>,
) -> String {
    let mut out = Vec::with_capacity(256 + 160 * decision.candidates.len());
    out.extend_from_slice(b"{\"requestId\":");
    match &decision.request_id {
        Subject::Request(id) => text(&mut out, &id.to_string()),
        Subject::Ping(id) => text(&mut out, id),
    }
    out.extend_from_slice(b",\"outcome\":");
    text(&mut out, outcome);
    out.extend_from_slice(b",\"reason\":");
    text(&mut out, decision.reason.code());
    out.extend_from_slice(b",\"evaluation\":");
    match &decision.evaluation {
        Some(evaluation) => write_evaluation(&mut out, evaluation),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"deliveries\":");
    array(&mut out, &decision.deliveries, write_delivery);
    out.extend_from_slice(b",\"candidates\":");
    array(&mut out, &decision.candidates, write_candidate_again);
    out.extend_from_slice(b",\"decidedAt\":");
    text(&mut out, &crate::clock::iso(decision.decided_at));
    if let Some(version) = version {
        out.extend_from_slice(b",\"version\":");
        text(&mut out, version);
    }
    out.push(b'}');
    String::from_utf8(out).expect("JSON text built from strings is UTF-8")
}

fn write_evaluation(out: &mut Vec<u8>, evaluation: &Evaluation) {
    out.extend_from_slice(b"{\"model\":");
    text(out, evaluation.model);
    out.extend_from_slice(b",\"score\":");
    integer(out, evaluation.score);
    out.extend_from_slice(b",\"threshold\":");
    integer(out, evaluation.threshold);
    out.extend_from_slice(b",\"passed\":");
    boolean(out, evaluation.passed);
    out.extend_from_slice(b",\"factors\":");
    array(out, &evaluation.factors, |out, factor| {
        out.extend_from_slice(b"{\"name\":");
        text(out, &factor.name);
        out.extend_from_slice(b",\"value\":");
        number(out, factor.value);
        out.extend_from_slice(b",\"weight\":");
        number(out, factor.weight);
        out.extend_from_slice(b",\"contribution\":");
        number(out, factor.contribution);
        out.push(b'}');
    });
    out.push(b'}');
}

fn write_delivery(out: &mut Vec<u8>, delivery: &Delivery) {
    out.extend_from_slice(b"{\"transactionId\":");
    text(out, &delivery.transaction_id.to_string());
    out.extend_from_slice(b",\"buyerAccountId\":");
    text(out, delivery.buyer_id.as_str());
    out.extend_from_slice(b",\"buyerPrice\":");
    number(out, crate::money::as_f64(delivery.price_cents));
    out.extend_from_slice(b",\"deliveryMode\":");
    text(out, delivery.mode.as_str());
    out.push(b'}');
}

/// The most candidates whose text [`write_candidate_again`] keeps on a thread; past it
/// the kept texts are dropped (more buyers than any product has).
const MOST_KEPT: usize = 4096;

thread_local! {
    /// Each buyer's candidate as last written on this thread, with its text.
    static WRITTEN: RefCell<HashMap<BuyerId, (Candidate, Vec<u8>)>> =
        RefCell::new(HashMap::new());
}

/// [`write_candidate`], from the text kept for the same candidate when the buyer's last one
/// written on this thread was equal. Consecutive leads mostly see every buyer with the same
/// verdict, price, priority and last service (all but the one served last), and a
/// candidate's text is a function of its fields alone. With twenty candidates the whole
/// text cost 44,000 instructions of an auto-delivered lead's writer job written anew and
/// 30,600 with the kept texts (callgrind of `examples/autodelivery_cost`, `LEADS=1000
/// ONLY=5`).
fn write_candidate_again(out: &mut Vec<u8>, candidate: &Candidate) {
    WRITTEN.with(|written| {
        let mut written = written.borrow_mut();
        if let Some((seen, text)) = written.get(&candidate.buyer_id)
            && seen == candidate
        {
            out.extend_from_slice(text);
            return;
        }
        let start = out.len();
        write_candidate(out, candidate);
        if written.len() >= MOST_KEPT {
            written.clear();
        }
        written.insert(
            candidate.buyer_id.clone(),
            (candidate.clone(), out[start..].to_vec()),
        );
    });
}

fn write_candidate(out: &mut Vec<u8>, candidate: &Candidate) {
    out.extend_from_slice(b"{\"buyerAccountId\":");
    text(out, candidate.buyer_id.as_str());
    out.extend_from_slice(b",\"eligible\":");
    boolean(out, candidate.reason.is_eligible());
    out.extend_from_slice(b",\"reason\":");
    text(out, candidate.reason.code());
    if let Some(detail) = &candidate.detail {
        out.extend_from_slice(b",\"detail\":");
        serde_json::to_writer(&mut *out, detail).expect("a JSON value writes to a Vec");
    }
    out.extend_from_slice(b",\"buyerPrice\":");
    number(out, crate::money::as_f64(candidate.price_cents));
    out.extend_from_slice(b",\"priority\":");
    integer(out, candidate.priority);
    out.extend_from_slice(b",\"lastServedAt\":");
    match candidate.last_served_at {
        Some(at) => text(out, &crate::clock::iso(at)),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

/// A JSON array of `items`, each written by `write`.
fn array<T>(out: &mut Vec<u8>, items: &[T], write: impl Fn(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write(out, item);
    }
    out.push(b']');
}

/// A JSON string: as is when nothing in it needs escaping (no control character, quote or
/// backslash: serde_json's rule), else escaped by serde_json.
fn text(out: &mut Vec<u8>, value: &str) {
    if value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, value).expect("a string writes to a Vec");
    }
}

/// A float as serde_json writes it (`null` when not finite).
fn number(out: &mut Vec<u8>, value: f64) {
    serde_json::to_writer(&mut *out, &value).expect("a number writes to a Vec");
}

fn integer(out: &mut Vec<u8>, value: i64) {
    write!(out, "{value}").expect("an integer writes to a Vec");
}

fn boolean(out: &mut Vec<u8>, value: bool) {
    out.extend_from_slice(if value { b"true" } else { b"false" });
}
