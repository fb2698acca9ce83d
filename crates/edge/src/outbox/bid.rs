//! Bid requests (DESIGN.md section 14): the signed POST that asks a bid-priced buyer what it
//! pays for a lead, sent to every bidder at once, each within its own deadline.
//!
//! Owns the outbound half of bidding: the request (Standard Webhooks headers with the
//! buyer's signing secret, `signing`), the client (hyper-util over rustls, as the outbox's
//! sender; one per service, so its pooled connections live on the runtime that made them)
//! and the reading of an answer: `200 {"bid": 27.50, "bidId": "…"}` is a bid, `{"bid":
//! null}` or 204 a pass, anything else (a timeout, an error status, a body that does not
//! read) no bid, each with its latency. It decides nothing about the lead: which buyers are
//! asked, which bids count and who wins is `ping`'s and auto-delivery's, and it never runs
//! inside a writer job (the caller collects bids on the runtime before its job).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use serde_json::Value;

use super::connect::{self, Connector};
use super::signing::SigningKey;
use crate::outbound_url::Reach;
pub(crate) use leadrelay_core::outbox::bid::{
    BidCall, BidClient, BidOutcome, BidResult, Bidder, Collected,
};

/// The pooled client, or why it could not be built.
type Built = Result<Client<Connector, Full<Bytes>>, String>;

/// How much of a bid answer is read.
const ANSWER_LIMIT: usize = 16 * 1024;

/// The longest bid id taken from an answer.
const BID_ID_MAX: usize = 128;

/// The bid client of one service that sends over HTTP: [`client`]. Built on first use.
#[derive(Clone, Default)]
struct HttpBidder {
    client: Arc<OnceLock<Built>>,
    /// Where it may send (`serve --public-outbound-only`).
    reach: Reach,
}

/// The service's bid client: it sends only where `reach` allows.
pub(crate) fn client(reach: Reach) -> BidClient {
    BidClient::new(HttpBidder {
        client: Arc::default(),
        reach,
    })
}

impl Bidder for HttpBidder {
    fn collect(&self, calls: Vec<BidCall>, arrived: Instant) -> Collected<'_> {
        Box::pin(HttpBidder::collect(self, calls, arrived))
    }
}

impl HttpBidder {
    fn client(&self) -> Built {
        self.client
            .get_or_init(|| {
                // Each call's own timeout bounds connecting too.
                let https = connect::connector(self.reach, None)
                    .map_err(|e| format!("cannot set up TLS for bid requests: {e}"))?;
                Ok(Client::builder(hyper_util::rt::TokioExecutor::new())
                    .pool_idle_timeout(Duration::from_secs(60))
                    .build(https))
            })
            .clone()
    }

    /// Sends every call at once and waits for each until its own timeout counted from
    /// `arrived` (when the request that asks arrived: what its sender waits for), so the
    /// reads and checks before the bids come out of the bidders' time, not on top of it;
    /// the results in the calls' order. Must run on a tokio runtime.
    async fn collect(&self, calls: Vec<BidCall>, arrived: Instant) -> Vec<BidResult> {
        let client = self.client();
        let reach = self.reach;
        collect_with(calls, move |call| ask(client.clone(), reach, call, arrived)).await
    }
}

/// [`HttpBidder::collect`] with `ask` sending each call: one task per call, all at once. A
/// task that panics (or is cancelled) is an `error` outcome of its call, logged with the
/// buyer and the bid request id (nothing of the lead, nor the panic's message, which may
/// hold anything).
async fn collect_with<F, Fut>(calls: Vec<BidCall>, ask: F) -> Vec<BidResult>
where
    F: Fn(BidCall) -> Fut,
    Fut: std::future::Future<Output = BidResult> + Send + 'static,
{
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut asked = HashMap::with_capacity(calls.len());
    for (position, call) in calls.into_iter().enumerate() {
        let who = (call.buyer_id.clone(), call.bid_request_id.clone());
        let asking = ask(call);
        let task = tasks.spawn(async move { (position, asking.await) });
        asked.insert(task.id(), (position, who));
    }
    let mut results: Vec<(usize, BidResult)> = Vec::with_capacity(asked.len());
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            Err(e) => {
                let Some((position, (buyer_id, bid_request_id))) = asked.remove(&e.id()) else {
                    continue;
                };
                let what = if e.is_panic() {
                    "panicked"
                } else {
                    "was cancelled"
                };
                log::error!(
                    "bid request {bid_request_id} to buyer {buyer_id}: its task {what}; \
                     recorded as an error"
                );
                results.push((
                    position,
                    BidResult {
                        buyer_id,
                        bid_request_id,
                        outcome: BidOutcome::Error(format!("the bid task {what}")),
                        latency_ms: i64::try_from(started.elapsed().as_millis())
                            .unwrap_or(i64::MAX),
                    },
                ));
            }
        }
    }
    results.sort_by_key(|(position, _)| *position);
    results.into_iter().map(|(_, result)| result).collect()
}

async fn ask(client: Built, reach: Reach, call: BidCall, arrived: Instant) -> BidResult {
    let started = Instant::now();
    let deadline = tokio::time::Instant::from_std(arrived + call.timeout);
    let outcome = match client {
        Err(e) => BidOutcome::Error(e),
        Ok(client) => {
            match tokio::time::timeout_at(deadline, exchange(&client, reach, &call)).await {
                Ok(outcome) => outcome,
                Err(_) => BidOutcome::Timeout,
            }
        }
    };
    BidResult {
        buyer_id: call.buyer_id,
        bid_request_id: call.bid_request_id,
        outcome,
        latency_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
    }
}

async fn exchange(
    client: &Client<Connector, Full<Bytes>>,
    reach: Reach,
    call: &BidCall,
) -> BidOutcome {
    // A URL stored before the rule existed is checked again here, as the sender does (a
    // host name's addresses are checked by the connector).
    if let Err(e) = crate::outbound_url::check_with(&call.url, reach) {
        return BidOutcome::Error(format!("invalid bid URL: {e}"));
    }
    let key = match SigningKey::from_secret(&call.signing_secret) {
        Ok(key) => key,
        Err(e) => return BidOutcome::Error(e.to_string()),
    };
    let body = call.body.to_string();
    let timestamp = crate::clock::now_ms() / 1000;
    let request = http::Request::post(call.url.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("leadrelay/", env!("CARGO_PKG_VERSION")),
        )
        .header("webhook-id", &call.bid_request_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header(
            "webhook-signature",
            key.sign(&call.bid_request_id, timestamp, body.as_bytes()),
        )
        .body(Full::new(Bytes::from(body)));
    let request = match request {
        Ok(request) => request,
        Err(e) => return BidOutcome::Error(format!("invalid bid URL: {e}")),
    };
    let response = match client.request(request).await {
        Ok(response) => response,
        Err(e) => {
            return BidOutcome::Error(match super::sender::refused_address(&e) {
                Some(refused) => format!("not sent: {refused}"),
                None => format!("request failed: {e}"),
            });
        }
    };
    let status = response.status().as_u16();
    if status == 204 {
        return BidOutcome::Pass;
    }
    let read = Limited::new(response.into_body(), ANSWER_LIMIT)
        .collect()
        .await;
    let bytes = match read {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return BidOutcome::Error(format!("reading the answer failed: {e}")),
    };
    if status != 200 {
        return BidOutcome::Error(format!("HTTP {status}"));
    }
    read_answer(&bytes)
}

/// Reads a 200 answer's body: `{"bid": <amount> | null, "bidId"?: string}`. The amount is
/// turned into cents from its decimal text by `money::cents_from_json_text` (rounded half
/// away from zero); serde_json gives back the shortest text of the number it read, which is
/// the text sent for any amount of up to 15 significant digits.
fn read_answer(bytes: &[u8]) -> BidOutcome {
    let malformed = |why: &str| BidOutcome::Error(format!("malformed answer: {why}"));
    let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(bytes) else {
        return malformed("not a JSON object");
    };
    let price_cents = match answer.get("bid") {
        Some(Value::Null) => return BidOutcome::Pass,
        Some(Value::Number(number)) => {
            match crate::money::cents_from_json_text(&number.to_string()) {
                Ok(cents) if cents >= 0 => cents,
                _ => return malformed("bid is not an amount of 0 or more"),
            }
        }
        _ => return malformed("no bid"),
    };
    let bid_id = match answer.get("bidId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if !id.is_empty() && id.chars().count() <= BID_ID_MAX => {
            Some(id.clone())
        }
        Some(_) => return malformed("bidId is not a string of 1 to 128 characters"),
    };
    BidOutcome::Bid {
        price_cents,
        bid_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log lines of this module, kept for the tests (the one logger of the unit tests).
    static LINES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    struct Kept;

    impl log::Log for Kept {
        fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
            metadata.target() == module_path!().trim_end_matches("::tests")
        }
        fn log(&self, record: &log::Record<'_>) {
            if self.enabled(record.metadata()) {
                let line = format!("{} {}", record.level(), record.args());
                LINES.lock().unwrap().push(line);
            }
        }
        fn flush(&self) {}
    }

    fn call(buyer_id: &str, bid_request_id: &str) -> BidCall {
        BidCall {
            buyer_id: buyer_id.into(),
            bid_request_id: bid_request_id.into(),
            url: "http://127.0.0.1:9/bid".into(),
            signing_secret: String::new(),
            timeout: Duration::from_millis(100),
            body: serde_json::json!({"postalCode": "10115", "email": "ann@example.org"}),
        }
    }

    #[test]
    fn a_bid_task_that_panics_is_an_error_and_logged_without_the_lead() {
        if log::set_logger(&Kept).is_ok() {
            log::set_max_level(log::LevelFilter::Trace);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let calls = vec![call("calm", "bidreq_calm"), call("wild", "bidreq_wild")];
        let results = runtime.block_on(collect_with(calls, |call| async move {
            if call.buyer_id.as_str() == "wild" {
                panic!("a test panic with {}", call.body);
            }
            BidResult {
                buyer_id: call.buyer_id,
                bid_request_id: call.bid_request_id,
                outcome: BidOutcome::Pass,
                latency_ms: 1,
            }
        }));
        let outcomes: Vec<(&str, &str, &'static str)> = results
            .iter()
            .map(|r| {
                (
                    r.buyer_id.as_str(),
                    r.bid_request_id.as_str(),
                    r.outcome.name(),
                )
            })
            .collect();
        assert_eq!(
            outcomes,
            [
                ("calm", "bidreq_calm", "pass"),
                ("wild", "bidreq_wild", "error")
            ]
        );
        let lines = LINES.lock().unwrap().clone();
        let logged: Vec<&String> = lines.iter().filter(|l| l.contains("bidreq_wild")).collect();
        assert_eq!(logged.len(), 1, "{lines:?}");
        assert!(logged[0].starts_with("ERROR"), "{logged:?}");
        assert!(logged[0].contains("buyer wild"), "{logged:?}");
        assert!(logged[0].contains("panicked"), "{logged:?}");
        assert!(!logged[0].contains("ann@"), "{logged:?}");
    }

    #[test]
    fn answers_are_read_exactly() {
        assert_eq!(
            read_answer(br#"{"bid": 27.50, "bidId": "b-1"}"#),
            BidOutcome::Bid {
                price_cents: 2750,
                bid_id: Some("b-1".into())
            }
        );
        assert_eq!(
            read_answer(br#"{"bid": 1.005}"#),
            BidOutcome::Bid {
                price_cents: 101,
                bid_id: None
            },
            "half away from zero on the decimal text"
        );
        assert_eq!(read_answer(br#"{"bid": null}"#), BidOutcome::Pass);
        for bad in [
            &br#"{"bid": "12"}"#[..],
            br#"{"bid": -1}"#,
            b"[]",
            b"nope",
            br#"{"bid": 5, "bidId": 7}"#,
        ] {
            assert!(matches!(read_answer(bad), BidOutcome::Error(_)), "{bad:?}");
        }
    }
}
