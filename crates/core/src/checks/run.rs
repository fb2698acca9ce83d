//! Running check steps during ingest (DESIGN.md section 22): the requests of every step for
//! every lead of an ingest request, sent at once through a [`Checker`] (the edge crate's
//! `outbox::check` implements it over HTTP; the domain names no HTTP client), each waited
//! for until its own timeout counted from the request's arrival; their answers judged into
//! outcomes, and answers kept for `cacheTtl`.
//!
//! The cache is what the step's document asks for: a service is paid per call, and a second
//! identical request within `cacheTtl` (the same method, URL, headers and body) costs no
//! call (`checks::a_repeated_request_is_answered_from_the_cache`). It is bounded
//! ([`CACHE_BYTES`], [`CACHE_ENTRIES`]); only answers that decided (not errors) are kept,
//! under the SHA-256 of the request. Nothing here waits inside a writer job.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::document::{Action, CheckDocument};
use crate::integration::answer::{Judged, judge};
use crate::integration::request::{self, Built};
use crate::mapping::engine::scalar_text;

/// The most answer bytes the cache holds, and the most answers.
const CACHE_BYTES: usize = 32 * 1024 * 1024;
const CACHE_ENTRIES: usize = 100_000;
/// The longest text kept from an answer value.
const KEPT_TEXT_MAX: usize = 256;

/// One request to a check service, ready to send.
#[derive(Debug, Clone)]
pub struct CheckCall {
    pub method: &'static str,
    pub url: String,
    pub content_type: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Counted from the arrival of the ingest request (`CheckClient::run`).
    pub timeout: Duration,
}

/// What a call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    Answered {
        status: u16,
        body: Vec<u8>,
    },
    Timeout,
    /// Not sent, or no answer: a refused address, a connection error, an answer too long.
    Failed(String),
}

/// What a [`Checker`] answers: each call's result and latency in ms, in the calls' order.
pub type Sending<'a> = Pin<Box<dyn Future<Output = Vec<(Sent, i64)>> + Send + 'a>>;

/// Sends check requests: every call at once, each waited for until its own timeout counted
/// from `arrived`.
pub trait Checker: Send + Sync {
    fn send_all(&self, calls: Vec<CheckCall>, arrived: Instant) -> Sending<'_>;
}

/// A step's outcome for one lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    Failed,
    /// A timeout, a 5xx, an answer that does not read.
    Error,
    /// `when` not met.
    Skipped,
}

/// A step's outcome as stored on the lead and shown by `lead show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    pub name: String,
    pub outcome: Outcome,
    #[serde(rename = "latencyMs")]
    pub latency_ms: i64,
    /// The answer's values the step keeps, by name.
    #[serde(default)]
    pub kept: Map<String, Value>,
    /// Why an error is one (a timeout, `HTTP 503`), or the service's refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl CheckRecord {
    /// Whether step `name` passed for the lead whose records these are.
    pub(crate) fn passed(records: &[CheckRecord], name: &str) -> bool {
        records
            .iter()
            .any(|r| r.name == name && r.outcome == Outcome::Passed)
    }

    /// Value `key` kept by step `name`, as text.
    pub(crate) fn kept_text(records: &[CheckRecord], name: &str, key: &str) -> Option<String> {
        let record = records.iter().find(|r| r.name == name)?;
        scalar_text(record.kept.get(key)?)
    }
}

/// A step of a workspace with its secrets' values, as ingest runs it.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub document: CheckDocument,
    pub secrets: Vec<(String, String)>,
}

/// What a lead's steps decide.
#[derive(Debug, Default)]
pub struct Verdict {
    pub records: Vec<CheckRecord>,
    /// The first step whose action is `reject`: the lead is refused.
    pub rejected_by: Option<String>,
    /// `check_failed:NAME` and `check_error:NAME` of the steps whose action is `flag`.
    pub flags: Vec<String>,
}

impl Verdict {
    fn of(steps: &[Step], records: Vec<CheckRecord>) -> Verdict {
        let mut verdict = Verdict::default();
        for (step, record) in steps.iter().zip(&records) {
            let (action, prefix) = match record.outcome {
                Outcome::Failed => (step.document.on_fail, "check_failed"),
                Outcome::Error => (step.document.on_error, "check_error"),
                Outcome::Passed | Outcome::Skipped => continue,
            };
            match action {
                Action::Reject if verdict.rejected_by.is_none() => {
                    verdict.rejected_by = Some(step.name.clone())
                }
                Action::Reject | Action::Pass => {}
                Action::Flag => verdict.flags.push(format!("{prefix}:{}", step.name)),
            }
        }
        verdict.records = records;
        verdict
    }
}

struct Cached {
    status: u16,
    body: Vec<u8>,
    until: Instant,
}

#[derive(Default)]
struct Cache {
    answers: HashMap<[u8; 32], Cached>,
    bytes: usize,
}

impl Cache {
    fn get(&mut self, key: &[u8; 32], now: Instant) -> Option<(u16, Vec<u8>)> {
        match self.answers.get(key) {
            Some(cached) if cached.until > now => Some((cached.status, cached.body.clone())),
            Some(_) => {
                self.remove(key);
                None
            }
            None => None,
        }
    }

    fn remove(&mut self, key: &[u8; 32]) {
        if let Some(gone) = self.answers.remove(key) {
            self.bytes -= gone.body.len();
        }
    }

    /// Keeps an answer; past a bound the expired answers go first, then any.
    fn put(&mut self, key: [u8; 32], status: u16, body: Vec<u8>, until: Instant, now: Instant) {
        if body.len() > CACHE_BYTES / 16 {
            return;
        }
        self.remove(&key);
        if self.bytes + body.len() > CACHE_BYTES || self.answers.len() >= CACHE_ENTRIES {
            let before = self.answers.len();
            self.answers.retain(|_, cached| cached.until > now);
            if self.answers.len() == before {
                self.answers.clear();
            }
            self.bytes = self.answers.values().map(|c| c.body.len()).sum();
        }
        self.bytes += body.len();
        self.answers.insert(
            key,
            Cached {
                status,
                body,
                until,
            },
        );
    }
}

/// The check client of one service: the [`Checker`] and the answers kept.
#[derive(Clone)]
pub struct CheckClient {
    checker: Arc<dyn Checker>,
    cache: Arc<Mutex<Cache>>,
}

impl std::fmt::Debug for CheckClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CheckClient")
    }
}

/// One (lead, step) of a run: decided already, or waiting for call `call`.
enum Pending {
    Done(CheckRecord),
    Call { call: usize, key: Option<[u8; 32]> },
}

impl CheckClient {
    /// A client that sends through `checker`.
    pub fn new(checker: impl Checker + 'static) -> CheckClient {
        CheckClient {
            checker: Arc::new(checker),
            cache: Arc::default(),
        }
    }

    /// Runs every step of `steps` for every lead of `leads` (each the lead as stored, as
    /// JSON), all at once, each waited for until its timeout counted from `arrived`; the
    /// verdicts in the leads' order. Must run on a tokio runtime.
    pub async fn run(&self, steps: &[Step], leads: &[Value], arrived: Instant) -> Vec<Verdict> {
        let now = Instant::now();
        let mut calls = Vec::new();
        let mut pending: Vec<Vec<Pending>> = Vec::with_capacity(leads.len());
        for lead in leads {
            let mut of_lead = Vec::with_capacity(steps.len());
            for step in steps {
                of_lead.push(self.prepare(step, lead, now, &mut calls));
            }
            pending.push(of_lead);
        }
        let timeouts: Vec<Duration> = calls.iter().map(|c: &CheckCall| c.timeout).collect();
        let sent = if calls.is_empty() {
            Vec::new()
        } else {
            self.checker.send_all(calls, arrived).await
        };
        let mut sent: Vec<Option<(Sent, i64)>> = sent.into_iter().map(Some).collect();
        let done = Instant::now();
        pending
            .into_iter()
            .map(|of_lead| {
                let records =
                    of_lead
                        .into_iter()
                        .zip(steps)
                        .map(|(pending, step)| match pending {
                            Pending::Done(record) => record,
                            Pending::Call { call, key } => {
                                let (result, latency_ms) =
                                    sent.get_mut(call).and_then(Option::take).unwrap_or_else(
                                        || (Sent::Failed("the call was not answered".into()), 0),
                                    );
                                self.decide(step, result, latency_ms, key, timeouts[call], done)
                            }
                        })
                        .collect();
                Verdict::of(steps, records)
            })
            .collect()
    }

    /// The record of a step that needs no call (skipped, cached, not buildable), or the
    /// call it makes, appended to `calls`.
    fn prepare(
        &self,
        step: &Step,
        lead: &Value,
        now: Instant,
        calls: &mut Vec<CheckCall>,
    ) -> Pending {
        let document = &step.document;
        let record = |outcome, reason: Option<String>| CheckRecord {
            name: step.name.clone(),
            outcome,
            latency_ms: 0,
            kept: Map::new(),
            reason,
        };
        if let Some(when) = &document.when {
            let met = match when.lookup(lead) {
                None | Some(Value::Null) => false,
                Some(Value::String(text)) => !text.trim().is_empty(),
                Some(_) => true,
            };
            if !met {
                return Pending::Done(record(Outcome::Skipped, None));
            }
        }
        let built = match build(step, lead) {
            Ok(built) => built,
            Err(why) => return Pending::Done(record(Outcome::Error, Some(why))),
        };
        let key = (!document.cache_ttl.is_zero()).then(|| cache_key(&built));
        if let Some(key) = &key {
            let hit = self
                .cache
                .lock()
                .expect("the cache's lock is never held across a panic")
                .get(key, now);
            if let Some((status, body)) = hit {
                let (outcome, kept, reason) = judged(document, status, &body);
                return Pending::Done(CheckRecord {
                    kept,
                    reason,
                    ..record(outcome, None)
                });
            }
        }
        calls.push(CheckCall {
            method: built.method,
            url: built.url,
            content_type: built.content_type,
            headers: built
                .headers
                .into_iter()
                .map(|header| (header.name, header.value))
                .collect(),
            body: built.body,
            timeout: document.timeout,
        });
        Pending::Call {
            call: calls.len() - 1,
            key,
        }
    }

    fn decide(
        &self,
        step: &Step,
        result: Sent,
        latency_ms: i64,
        key: Option<[u8; 32]>,
        timeout: Duration,
        now: Instant,
    ) -> CheckRecord {
        let (outcome, kept, reason) = match result {
            Sent::Timeout => (
                Outcome::Error,
                Map::new(),
                Some(format!("no answer within {} ms", timeout.as_millis())),
            ),
            Sent::Failed(why) => (Outcome::Error, Map::new(), Some(why)),
            Sent::Answered { status, body } => {
                let judged = judged(&step.document, status, &body);
                if let (Some(key), Outcome::Passed | Outcome::Failed) = (key, judged.0) {
                    self.cache
                        .lock()
                        .expect("the cache's lock is never held across a panic")
                        .put(key, status, body, now + step.document.cache_ttl, now);
                }
                judged
            }
        };
        CheckRecord {
            name: step.name.clone(),
            outcome,
            latency_ms,
            kept,
            reason,
        }
    }
}

/// The request of `step` for `lead`, through the integration engine.
pub fn build(step: &Step, lead: &Value) -> Result<Built, String> {
    let secret = |name: &str| {
        step.secrets
            .iter()
            .find(|(stored, _)| stored == name)
            .map(|(_, value)| value.clone())
    };
    request::build(&step.document.request, lead, &step.document.url, secret).map_err(|e| match e {
        request::BuildError::MissingSecret(name) => format!(
            "the step sends secret '{name}', which is not set; store it with \
             `check-step secret {} {name} --value -`",
            step.name
        ),
        other => other.to_string(),
    })
}

/// The SHA-256 of what the request sends: its method, URL, headers and body.
fn cache_key(built: &Built) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in [built.method.as_bytes(), built.url.as_bytes()] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    for header in &built.headers {
        for part in [header.name.as_bytes(), header.value.as_bytes()] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
    }
    hash.update((built.body.len() as u64).to_le_bytes());
    hash.update(&built.body);
    hash.finalize().into()
}

/// An answer under the step's `pass` rule (the integration's `accept` judge): passed,
/// failed (a 2xx that does not pass, or a 4xx), or an error (408, 429, 3xx, 5xx, or an
/// answer that does not read where `pass` or `keep` must read it); with the kept values.
pub(crate) fn judged(
    document: &CheckDocument,
    status: u16,
    body: &[u8],
) -> (Outcome, Map<String, Value>, Option<String>) {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let reads_body = document.request.accept.pointer.is_some() || !document.keep.is_empty();
    let (outcome, reason) = match judge(&document.request, status, body) {
        Judged::Retry | Judged::Redirect => (Outcome::Error, Some(format!("HTTP {status}"))),
        _ if reads_body && (200..=299).contains(&status) && parsed.is_none() => {
            (Outcome::Error, Some("the answer is not JSON".to_string()))
        }
        Judged::Accepted { .. } => (Outcome::Passed, None),
        Judged::Refused { reason } => (Outcome::Failed, Some(reason)),
    };
    let mut kept = Map::new();
    if let Some(answer) = &parsed {
        for (name, pointer) in &document.keep {
            let value = match pointer.lookup(answer) {
                Some(Value::String(text)) => {
                    Value::String(text.chars().take(KEPT_TEXT_MAX).collect())
                }
                Some(value @ (Value::Number(_) | Value::Bool(_))) => value.clone(),
                _ => continue,
            };
            kept.insert(name.clone(), value);
        }
    }
    (outcome, kept, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document() -> CheckDocument {
        CheckDocument::parse(&json!({
            "url": "http://127.0.0.1:9/claim",
            "body": {"cert_url": {"from": "/cert"}},
            "pass": {"status": [200], "pointer": "/outcome", "equals": "success"},
            "keep": {"expires": "/expires_at"}}))
        .unwrap()
    }

    #[test]
    fn answers_become_outcomes() {
        let doc = document();
        let (outcome, kept, _) = judged(
            &doc,
            200,
            br#"{"outcome": "success", "expires_at": "2027-01-01"}"#,
        );
        assert_eq!(outcome, Outcome::Passed);
        assert_eq!(kept["expires"], "2027-01-01");
        assert_eq!(
            judged(&doc, 200, br#"{"outcome": "failure"}"#).0,
            Outcome::Failed
        );
        assert_eq!(judged(&doc, 404, b"").0, Outcome::Failed);
        assert_eq!(judged(&doc, 503, b"").0, Outcome::Error);
        assert_eq!(judged(&doc, 200, b"<html>").0, Outcome::Error);
    }

    #[test]
    fn the_cache_is_bounded_and_forgets_expired_answers() {
        let mut cache = Cache::default();
        let now = Instant::now();
        cache.put([1; 32], 200, vec![0; 10], now + Duration::from_secs(1), now);
        assert_eq!(cache.get(&[1; 32], now), Some((200, vec![0; 10])));
        assert_eq!(cache.get(&[1; 32], now + Duration::from_secs(2)), None);
        assert_eq!(cache.bytes, 0);
        for n in 0..20u8 {
            cache.put(
                [n; 32],
                200,
                vec![0; CACHE_BYTES / 16],
                now + Duration::from_secs(9),
                now,
            );
            assert!(cache.bytes <= CACHE_BYTES);
        }
    }
}
