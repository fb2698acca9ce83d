//! One attempt at one event: the signed POST to the buyer's webhook and the verdict on the
//! answer (DESIGN.md section 3).
//!
//! Owns the outbound HTTP client and the rules that turn an answer into delivered, retry or
//! failed (permanent for the event), and into what it says about the buyer's endpoint (its
//! circuit breaker, `health`). The client is hyper-util's pooled client over rustls with
//! the public web roots (certificates are verified): non-blocking, so hundreds of sends in
//! flight cost tasks, not threads (ARCHITECTURE.md, "the outbox"). It never follows a
//! redirect, and each attempt, connecting included, ends within the request timeout. It
//! does not touch the database: the worker records what it returns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use serde_json::Value;

use super::connect::{self, Connector};
use super::health::Observation;
use super::schedule::parse_retry_after;
use super::signing::SigningKey;
use super::store::{Attempt, Claimed, EXCERPT_LIMIT, Verdict};
use crate::integration::IntegrationDocument;
use crate::integration::answer::{self, Judged};
use crate::integration::request::Built;
use crate::outbound_url::{OutboundUrlError, Reach};

/// How much of a response body is read: enough for any reasonable acknowledgement with a
/// partner id, and a bound on what a misbehaving receiver can make us hold.
const BODY_READ_LIMIT: usize = 64 * 1024;

/// The longest partner id taken from a response, like the interface's `externalId`.
const PARTNER_ID_MAX: usize = 128;

/// How long an idle connection to a buyer is kept for the next event.
const IDLE_CONNECTION: Duration = Duration::from_secs(60);

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up TLS for outbound webhooks: {0}")]
pub struct SetupError(#[from] rustls::Error);

#[derive(Clone)]
pub(crate) struct Sender {
    client: Client<Connector, Full<Bytes>>,
    timeout: Duration,
    user_agent: Arc<str>,
    /// Where it may send (`serve --public-outbound-only`).
    reach: Reach,
    /// Mapped buyers' integration documents, parsed.
    documents: Arc<Documents>,
}

/// Each mapped buyer's integration document, parsed once per version: kept with the
/// stored text it was parsed from, which every claim carries, and parsed again only when
/// that text differs (the operator changed the integration). Comparing the text is exact
/// and costs a memcmp of a few hundred bytes; parsing and checking a document costs a JSON
/// parse and the whole rule check (bench/integration.sh, BENCHMARKS.md). One entry per
/// buyer that has sent through an integration since the service started.
#[derive(Default)]
struct Documents(Mutex<HashMap<crate::ids::BuyerId, (String, Arc<IntegrationDocument>)>>);

impl Documents {
    /// `buyer_id`'s document stored as `text`, parsed.
    fn get(
        &self,
        buyer_id: &crate::ids::BuyerId,
        text: &str,
    ) -> Result<Arc<IntegrationDocument>, String> {
        // A poisoned lock only means a sender panicked while parsing; the map is intact.
        let mut parsed = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((parsed_from, document)) = parsed.get(buyer_id)
            && parsed_from == text
        {
            return Ok(Arc::clone(document));
        }
        let document = Arc::new(IntegrationDocument::from_stored(text)?);
        parsed.insert(buyer_id.clone(), (text.to_string(), Arc::clone(&document)));
        Ok(document)
    }
}

impl Sender {
    /// A sender whose every attempt, connecting included, ends within `timeout`, keeping
    /// up to `per_host` idle connections to each buyer, and connecting only where `reach`
    /// allows. Must be used on a tokio runtime.
    pub(crate) fn new(
        timeout: Duration,
        per_host: usize,
        reach: Reach,
    ) -> Result<Sender, SetupError> {
        let https = connect::connector(reach, Some(timeout))?;
        // hyper's client never follows a redirect: a 3xx comes back as the answer.
        let client = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(per_host.max(1))
            .pool_idle_timeout(IDLE_CONNECTION)
            .build(https);
        Ok(Sender {
            client,
            timeout,
            user_agent: format!("leadrelay/{}", env!("CARGO_PKG_VERSION")).into(),
            reach,
            documents: Arc::default(),
        })
    }

    /// Sends `event` once, signed with a fresh timestamp, and judges the answer.
    pub(crate) async fn send(&self, event: &Claimed) -> Attempt {
        let started_at = crate::clock::now_ms();
        let clock = Instant::now();
        let mut attempt = Attempt {
            event_id: event.id.clone(),
            row: event.row,
            buyer_id: event.buyer_id.clone(),
            claim: event.claim,
            probe: event.probe,
            url: event.url.clone(),
            started_at,
            duration_ms: 0,
            http_status: None,
            error: None,
            response_excerpt: None,
            verdict: Verdict::Failed,
            // A request that cannot be made (a bad secret) says nothing of the endpoint.
            observation: Observation::Answered,
            request: None,
        };
        // The buyer's request builder and answer rules: its integration, else the generic
        // signed webhook.
        let mapped = match event
            .integration
            .as_ref()
            .map(|integration| self.documents.get(&event.buyer_id, &integration.document))
        {
            None => None,
            Some(Ok(document)) => Some(document),
            Some(Err(why)) => {
                attempt.error = Some(format!("the buyer's integration is not valid: {why}"));
                return attempt;
            }
        };
        // The URL was checked when it was set; a URL stored before the rule existed, or by
        // hand, is refused here too (a permanent failure: the operator fixes the URL and
        // retries the event).
        if let Err(e) = crate::outbound_url::check_with(&event.url, self.reach) {
            attempt.error = Some(format!("not sent: {e}"));
            return attempt;
        }
        let key = match SigningKey::from_secret(&event.signing_secret) {
            Ok(key) => key,
            Err(e) => {
                attempt.error = Some(e.to_string());
                return attempt;
            }
        };
        let request = match &mapped {
            None => self.request(event, &key, started_at / 1000),
            Some(document) => {
                let built = match build_mapped(document, event) {
                    Ok(built) => built,
                    Err(why) => {
                        // Nothing was sent: the operator's setting, not the endpoint.
                        attempt.error = Some(why);
                        return attempt;
                    }
                };
                attempt.url = built.url.clone();
                attempt.request = Some(built.masked_json().to_string());
                // The integration's own URL passes the same rule before each send.
                if let Err(e) = crate::outbound_url::check_with(&built.url, self.reach) {
                    attempt.error = Some(format!("not sent: {e}"));
                    return attempt;
                }
                self.mapped_request(
                    event,
                    document.sign.then_some(&key),
                    &built,
                    started_at / 1000,
                )
            }
        };
        let request = match request {
            Ok(request) => request,
            Err(e) => {
                // The URL cannot be used at all: permanent until the operator changes it,
                // and an endpoint that cannot take leads.
                attempt.error = Some(format!("invalid webhook URL: {e}"));
                attempt.observation = Observation::Failure;
                return attempt;
            }
        };
        match tokio::time::timeout(self.timeout, self.exchange(request)).await {
            Ok(Ok(answer)) => {
                attempt.http_status = Some(answer.status);
                attempt.response_excerpt = excerpt(&answer.body);
                attempt.error = answer.body_error;
                (attempt.verdict, attempt.observation) = match &mapped {
                    None => judge(answer.status, answer.retry_after, &answer.body),
                    Some(document) => {
                        judge_mapped(document, answer.status, answer.retry_after, &answer.body)
                    }
                };
            }
            Ok(Err(e)) => match refused_address(&e) {
                // The name resolved to an address the rule refuses: nothing was sent, as
                // for a refused URL (permanent; says nothing of the endpoint).
                Some(refused) => attempt.error = Some(format!("not sent: {refused}")),
                None => {
                    attempt.error = Some(describe(&e));
                    attempt.verdict = judge_error(&e);
                    // No answer at all: the endpoint cannot take leads now.
                    attempt.observation = Observation::Failure;
                }
            },
            Err(_) => {
                attempt.error = Some(format!(
                    "timeout: no answer within {}",
                    crate::duration::format(self.timeout)
                ));
                attempt.verdict = Verdict::Retry { retry_after: None };
                attempt.observation = Observation::Failure;
            }
        }
        attempt.duration_ms = i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX);
        attempt
    }

    /// The signed POST of `event`.
    fn request(
        &self,
        event: &Claimed,
        key: &SigningKey,
        timestamp: i64,
    ) -> Result<http::Request<Full<Bytes>>, http::Error> {
        let mut signature = key.sign(event.id.as_str(), timestamp, event.payload.as_bytes());
        // During a rotation's overlap the previous secret signs too (Standard Webhooks:
        // space-separated signatures), so a buyer verifying with either one accepts it.
        if let Some(previous) = &event.previous_signing_secret
            && let Ok(previous) = SigningKey::from_secret(previous)
        {
            signature.push(' ');
            signature.push_str(&previous.sign(
                event.id.as_str(),
                timestamp,
                event.payload.as_bytes(),
            ));
        }
        http::Request::post(event.url.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::USER_AGENT, &*self.user_agent)
            .header("webhook-id", event.id.as_str())
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(Full::new(Bytes::from(event.payload.clone())))
    }

    /// A mapped integration's request, with the Standard Webhooks headers over the body it
    /// sends when `key` is given (the document's `sign`).
    fn mapped_request(
        &self,
        event: &Claimed,
        key: Option<&SigningKey>,
        built: &Built,
        timestamp: i64,
    ) -> Result<http::Request<Full<Bytes>>, http::Error> {
        let mut request = http::Request::builder()
            .method(built.method)
            .uri(built.url.as_str())
            .header(http::header::CONTENT_TYPE, built.content_type)
            .header(http::header::USER_AGENT, &*self.user_agent);
        for header in &built.headers {
            request = request.header(header.name.as_str(), header.value.as_str());
        }
        if let Some(key) = key {
            request = request
                .header("webhook-id", event.id.as_str())
                .header("webhook-timestamp", timestamp.to_string())
                .header(
                    "webhook-signature",
                    key.sign(event.id.as_str(), timestamp, &built.body),
                );
        }
        request.body(Full::new(Bytes::from(built.body.clone())))
    }

    /// Sends the request and reads the answer (the body up to [`BODY_READ_LIMIT`]).
    async fn exchange(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<Answer, hyper_util::client::legacy::Error> {
        let response = self.client.request(request).await?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, jiff::Timestamp::now()));
        let mut body = response.into_body();
        let mut read = Vec::new();
        let mut body_error = None;
        while read.len() < BODY_READ_LIMIT {
            match body.frame().await {
                None => break,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        let room = BODY_READ_LIMIT - read.len();
                        read.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                Some(Err(e)) => {
                    // The status decides; an unreadable body only loses the excerpt.
                    body_error = Some(format!("reading the response failed: {e}"));
                    break;
                }
            }
        }
        Ok(Answer {
            status,
            retry_after,
            body: read,
            body_error,
        })
    }
}

/// What came back.
struct Answer {
    status: u16,
    retry_after: Option<Duration>,
    body: Vec<u8>,
    body_error: Option<String>,
}

/// The verdict on an HTTP answer, and what it says about the endpoint. A redirect is
/// never followed (it would send a signed lead to an address nobody configured) and fails
/// the event; it also counts against the endpoint, which keeps answering it for every event
/// until the operator changes the URL. Another 4xx refuses this event but shows the
/// endpoint up.
fn judge(status: u16, retry_after: Option<Duration>, body: &[u8]) -> (Verdict, Observation) {
    match status {
        200..=299 => (
            Verdict::Delivered {
                partner_external_id: partner_id(body),
            },
            Observation::Success,
        ),
        408 | 429 | 500..=599 => (Verdict::Retry { retry_after }, Observation::Failure),
        300..=399 => (Verdict::Failed, Observation::Failure),
        _ => (Verdict::Failed, Observation::Answered),
    }
}

/// Builds a mapped integration's request for `event`; the error says why none can be
/// made (a secret not set, an event the body rules cannot read).
fn build_mapped(document: &IntegrationDocument, event: &Claimed) -> Result<Built, String> {
    let payload: Value = serde_json::from_str(&event.payload)
        .map_err(|e| format!("the stored event is not JSON: {e}"))?;
    crate::integration::request::build(document, &payload, &event.url, |name| {
        event
            .integration
            .as_ref()?
            .secrets
            .iter()
            .find(|(secret, _)| secret == name)
            .map(|(_, value)| value.clone())
    })
    .map_err(|e| e.to_string())
}

/// The verdict on a mapped integration's answer (`integration::answer`). A refusal shows
/// a working endpoint; a 4xx refusal counts as a generic webhook's 4xx does.
fn judge_mapped(
    document: &IntegrationDocument,
    status: u16,
    retry_after: Option<Duration>,
    body: &[u8],
) -> (Verdict, Observation) {
    match answer::judge(document, status, body) {
        Judged::Accepted { external_id } => (
            Verdict::Delivered {
                partner_external_id: external_id,
            },
            Observation::Success,
        ),
        Judged::Refused { reason } => (
            Verdict::Refused { reason },
            if (200..=299).contains(&status) {
                Observation::Success
            } else {
                Observation::Answered
            },
        ),
        Judged::Retry => (Verdict::Retry { retry_after }, Observation::Failure),
        Judged::Redirect => (Verdict::Failed, Observation::Failure),
    }
}

/// The verdict when no answer came. Connection errors are worth another try; a URL the
/// client cannot use and a certificate that does not verify are not, until the operator
/// changes something.
fn judge_error(error: &hyper_util::client::legacy::Error) -> Verdict {
    if is_certificate_error(error) || unusable_url(error) {
        Verdict::Failed
    } else {
        Verdict::Retry { retry_after: None }
    }
}

/// The errors in `error`'s chain, outermost first. An I/O error's `source` skips the error
/// it wraps (the connector's TLS error comes wrapped twice), so that one is taken instead.
fn chain<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |e| match e.downcast_ref::<std::io::Error>() {
        Some(io) => io
            .get_ref()
            .map(|inner| inner as &(dyn std::error::Error + 'static)),
        None => e.source(),
    })
}

/// Whether the TLS handshake failed on the buyer's certificate (unknown issuer, expired,
/// wrong name, none presented). Other TLS failures (an alert, a reset mid-handshake) may
/// pass and are retried.
fn is_certificate_error(error: &hyper_util::client::legacy::Error) -> bool {
    let certificate = |e: &rustls::Error| {
        matches!(
            e,
            rustls::Error::InvalidCertificate(_)
                | rustls::Error::NoCertificatesPresented
                | rustls::Error::InvalidCertRevocationList(_)
        )
    };
    chain(error).any(|e| e.downcast_ref::<rustls::Error>().is_some_and(certificate))
}

/// The rule's refusal of an address the buyer's host name resolved to, when that is why
/// no connection was made (`connect::CheckedResolver`). The bid client asks too.
pub(super) fn refused_address(
    error: &hyper_util::client::legacy::Error,
) -> Option<&OutboundUrlError> {
    chain(error).find_map(|e| e.downcast_ref::<OutboundUrlError>())
}

/// Whether the connector refused the URL itself (a scheme other than http and https, a
/// host that cannot be a TLS server name): no later attempt can do better.
fn unusable_url(error: &hyper_util::client::legacy::Error) -> bool {
    chain(error).any(|e| {
        let text = e.to_string();
        text.contains("invalid dnsname") || text.contains("unsupported scheme")
    })
}

/// The whole chain of `error`, joined with ": " (hyper's own message alone is as vague as
/// "client error (Connect)").
fn describe(error: &hyper_util::client::legacy::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in chain(error) {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// The partner's own id from a JSON object body: `partnerExternalId`, else `externalId`.
fn partner_id(body: &[u8]) -> Option<String> {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    ["partnerExternalId", "externalId"]
        .iter()
        .filter_map(|key| object.get(*key).and_then(Value::as_str))
        .find(|id| !id.is_empty() && id.chars().count() <= PARTNER_ID_MAX)
        .map(str::to_string)
}

/// The first [`EXCERPT_LIMIT`] bytes of a body as text, cut at a character boundary.
fn excerpt(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(EXCERPT_LIMIT)]);
    // A multi-byte character cut in half at the limit shows as a replacement character at
    // the end; drop it rather than store something the buyer never sent.
    let text = if body.len() > EXCERPT_LIMIT {
        text.trim_end_matches('\u{FFFD}')
    } else {
        &text
    };
    Some(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_parsed_once_per_version_and_buyer() {
        let documents = Documents::default();
        let form = include_str!("../../../../docs/examples/form-integration.json");
        let first = documents.get(&"b1".into(), form).unwrap();
        let again = documents.get(&"b1".into(), form).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same version is parsed once"
        );
        let other_buyer = documents.get(&"b2".into(), form).unwrap();
        assert!(!Arc::ptr_eq(&first, &other_buyer), "one entry per buyer");
        let crm = include_str!("../../../../docs/examples/crm-integration.json");
        let changed = documents.get(&"b1".into(), crm).unwrap();
        assert!(!Arc::ptr_eq(&first, &changed), "a new version is parsed");
        assert_ne!(changed.url, first.url);
        assert!(
            documents.get(&"b1".into(), "{").is_err(),
            "a stored document that does not parse is an error, never an old version"
        );
        let crm_again = documents.get(&"b1".into(), crm).unwrap();
        assert!(
            Arc::ptr_eq(&changed, &crm_again),
            "a failed parse keeps the last version"
        );
    }

    #[test]
    fn statuses_are_judged_as_designed() {
        let cases: &[(u16, &str)] = &[
            (200, "delivered"),
            (204, "delivered"),
            (299, "delivered"),
            (301, "failed"),
            (302, "failed"),
            (400, "failed"),
            (401, "failed"),
            (404, "failed"),
            (408, "retry"),
            (409, "failed"),
            (429, "retry"),
            (500, "retry"),
            (503, "retry"),
            (599, "retry"),
        ];
        for (status, expected) in cases {
            let verdict = match judge(*status, None, b"").0 {
                Verdict::Delivered { .. } => "delivered",
                Verdict::Retry { .. } => "retry",
                Verdict::Failed | Verdict::Refused { .. } => "failed",
            };
            assert_eq!(verdict, *expected, "HTTP {status}");
        }
    }

    #[test]
    fn partner_ids_come_from_a_json_object_body() {
        assert_eq!(
            partner_id(br#"{"externalId": "B-1"}"#),
            Some("B-1".to_string())
        );
        assert_eq!(
            partner_id(br#"{"partnerExternalId": "P-1", "externalId": "B-1"}"#),
            Some("P-1".to_string())
        );
        assert_eq!(partner_id(br#"{"externalId": 7}"#), None);
        assert_eq!(partner_id(br#"{"externalId": ""}"#), None);
        assert_eq!(partner_id(br#"["B-1"]"#), None);
        assert_eq!(partner_id(b"ok"), None);
        let long = format!(r#"{{"externalId": "{}"}}"#, "x".repeat(129));
        assert_eq!(partner_id(long.as_bytes()), None);
    }

    #[test]
    fn excerpts_are_bounded_and_whole_characters() {
        assert_eq!(excerpt(b""), None);
        assert_eq!(excerpt(b"ok").as_deref(), Some("ok"));
        let long = "é".repeat(1000);
        let cut = excerpt(long.as_bytes()).unwrap();
        assert!(cut.len() <= EXCERPT_LIMIT);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
