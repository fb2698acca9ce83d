//! The buyer portal's signed test event (`POST /delivery/test`, DESIGN.md section 20): one
//! `lead.test` POST to the buyer's webhook URL, signed as every event is (Standard
//! Webhooks), sent now and not recorded; the answer is shown to the buyer.
//!
//! It is not an outbox event: nothing is retried, no attempt is stored and the buyer's
//! health is not moved by it. It goes where the service may send (`--public-outbound-only`)
//! and waits at most [`TIMEOUT`].

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;

use super::connect;
use super::signing::SigningKey;
use crate::outbound_url::Reach;

/// How long the test waits for the buyer's answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How much of the answer is kept to show.
const EXCERPT_BYTES: usize = 2048;

/// What the buyer's endpoint answered.
#[derive(Debug, Clone)]
pub(crate) struct TestAnswer {
    pub http_status: Option<u16>,
    pub excerpt: String,
    pub error: Option<String>,
    pub duration_ms: u128,
}

/// Sends a signed `lead.test` event for buyer `buyer_id` to `url`.
pub(crate) async fn send(
    buyer_id: &crate::ids::BuyerId,
    url: &str,
    signing_secret: &str,
    reach: Reach,
) -> TestAnswer {
    let started = Instant::now();
    let outcome = tokio::time::timeout(TIMEOUT, exchange(buyer_id, url, signing_secret, reach))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", TIMEOUT.as_secs())));
    let duration_ms = started.elapsed().as_millis();
    match outcome {
        Ok((status, excerpt)) => TestAnswer {
            http_status: Some(status),
            excerpt,
            error: None,
            duration_ms,
        },
        Err(error) => TestAnswer {
            http_status: None,
            excerpt: String::new(),
            error: Some(error),
            duration_ms,
        },
    }
}

async fn exchange(
    buyer_id: &crate::ids::BuyerId,
    url: &str,
    signing_secret: &str,
    reach: Reach,
) -> Result<(u16, String), String> {
    crate::outbound_url::check_with(url, reach).map_err(|e| format!("invalid URL: {e}"))?;
    let key = SigningKey::from_secret(signing_secret).map_err(|e| e.to_string())?;
    let https =
        connect::connector(reach, Some(TIMEOUT)).map_err(|e| format!("cannot set up TLS: {e}"))?;
    let client: Client<_, Full<Bytes>> =
        Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
    let id = crate::ids::new("msg_test");
    let now = crate::clock::now_ms();
    let body = serde_json::to_string(&TestEvent {
        event: "lead.test",
        buyer_account_id: buyer_id.as_str(),
        sent_at: crate::clock::iso(now),
    })
    .expect("strings serialise");
    let timestamp = now / 1000;
    let request = http::Request::post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("leadrelay/", env!("CARGO_PKG_VERSION")),
        )
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header(
            "webhook-signature",
            key.sign(&id, timestamp, body.as_bytes()),
        )
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("invalid URL: {e}"))?;
    let response =
        client
            .request(request)
            .await
            .map_err(|e| match super::sender::refused_address(&e) {
                Some(refused) => format!("not sent: {refused}"),
                None => format!("request failed: {e}"),
            })?;
    let status = response.status().as_u16();
    // Only the first bytes are kept; a longer answer is cut, not an error.
    let mut excerpt = Vec::new();
    let mut body = Limited::new(response.into_body(), 1024 * 1024);
    while excerpt.len() < EXCERPT_BYTES {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    excerpt.extend_from_slice(data);
                }
            }
            _ => break,
        }
    }
    excerpt.truncate(EXCERPT_BYTES);
    Ok((status, String::from_utf8_lossy(&excerpt).into_owned()))
}

/// The body of a `lead.test` event.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TestEvent<'a> {
    event: &'static str,
    buyer_account_id: &'a str,
    sent_at: String,
}
