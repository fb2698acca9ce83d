//! One attempt at one event: the signed POST to the buyer's webhook and the verdict on the
//! answer (DESIGN.md section 3).
//!
//! Owns the outbound HTTP client (ureq: a global timeout, no redirects, TLS certificates
//! verified, pooled connections) and the rules that turn an answer into delivered, retry or
//! failed (permanent for the event), and into what it says about the buyer's endpoint (its
//! circuit breaker, `health`). It does not touch the database: the worker records what it
//! returns.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::health::Observation;
use super::schedule::parse_retry_after;
use super::signing::SigningKey;
use super::store::{Attempt, Claimed, EXCERPT_LIMIT, Verdict};

/// How much of a response body is read: enough for any reasonable acknowledgement with a
/// partner id, and a bound on what a misbehaving receiver can make us hold.
const BODY_READ_LIMIT: u64 = 64 * 1024;

/// The longest partner id taken from a response, like the interface's `externalId`.
const PARTNER_ID_MAX: usize = 128;

pub struct Sender {
    agent: ureq::Agent,
}

impl Sender {
    /// A sender whose every request, connecting included, ends within `timeout`, keeping
    /// up to `per_host` idle connections to each buyer and `idle` in all.
    pub fn new(timeout: Duration, per_host: usize, idle: usize) -> Sender {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A buyer's redirect is an answer (failed at once), never followed: following
            // it would send a signed lead to an address nobody configured.
            .max_redirects(0)
            .timeout_global(Some(timeout))
            .user_agent(format!("leadrelay/{}", env!("CARGO_PKG_VERSION")))
            .max_idle_connections_per_host(per_host.max(1))
            .max_idle_connections(idle.max(1))
            .build();
        Sender {
            agent: ureq::Agent::new_with_config(config),
        }
    }

    /// Sends `event` once, signed with a fresh timestamp, and judges the answer.
    pub fn send(&self, event: &Claimed) -> Attempt {
        let started_at = crate::clock::now_ms();
        let clock = Instant::now();
        let mut attempt = Attempt {
            event_id: event.id.clone(),
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
        };
        let key = match SigningKey::from_secret(&event.signing_secret) {
            Ok(key) => key,
            Err(e) => {
                attempt.error = Some(e.to_string());
                return attempt;
            }
        };
        let timestamp = started_at / 1000;
        let signature = key.sign(&event.id, timestamp, event.payload.as_bytes());
        let result = self
            .agent
            .post(&event.url)
            .header("content-type", "application/json")
            .header("webhook-id", &event.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .send(event.payload.as_bytes());
        match result {
            Ok(mut response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, jiff::Timestamp::now()));
                let body = response
                    .body_mut()
                    .with_config()
                    .limit(BODY_READ_LIMIT)
                    .read_to_vec();
                let body = match body {
                    Ok(body) => body,
                    Err(e) => {
                        // The status decides; an unreadable body only loses the excerpt.
                        attempt.error = Some(format!("reading the response failed: {e}"));
                        Vec::new()
                    }
                };
                attempt.http_status = Some(status);
                attempt.response_excerpt = excerpt(&body);
                (attempt.verdict, attempt.observation) = judge(status, retry_after, &body);
            }
            Err(e) => {
                attempt.error = Some(e.to_string());
                attempt.verdict = judge_error(&e);
                // No answer at all: the endpoint cannot take leads now.
                attempt.observation = Observation::Failure;
            }
        }
        attempt.duration_ms = i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX);
        attempt
    }
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

/// The verdict when no answer came. Timeouts and connection errors are worth another try;
/// a URL that cannot be used, a redirect ureq refused and a certificate that does not
/// verify are not, until the operator changes something.
fn judge_error(error: &ureq::Error) -> Verdict {
    match error {
        ureq::Error::BadUri(_)
        | ureq::Error::Http(_)
        | ureq::Error::RequireHttpsOnly(_)
        | ureq::Error::RedirectFailed
        | ureq::Error::TooManyRedirects => Verdict::Failed,
        e if is_certificate_error(e) => Verdict::Failed,
        _ => Verdict::Retry { retry_after: None },
    }
}

/// Whether the TLS handshake failed on the buyer's certificate (unknown issuer, expired,
/// wrong name, none presented) or the URL's host cannot be a TLS server name. Other TLS
/// failures (an alert, a reset mid-handshake) may pass and are retried.
fn is_certificate_error(error: &ureq::Error) -> bool {
    let certificate = |e: &rustls::Error| {
        matches!(
            e,
            rustls::Error::InvalidCertificate(_)
                | rustls::Error::NoCertificatesPresented
                | rustls::Error::InvalidCertRevocationList(_)
        )
    };
    match error {
        ureq::Error::Tls(_) | ureq::Error::Pem(_) => true,
        ureq::Error::Rustls(e) => certificate(e),
        // The handshake runs inside the TLS stream's reads and writes, whose errors carry
        // the rustls error inside an I/O error.
        ureq::Error::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .is_some_and(certificate),
        _ => false,
    }
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
                Verdict::Failed => "failed",
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
