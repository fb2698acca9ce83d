//! Check requests (DESIGN.md section 22): the requests of the workspace's check steps, sent
//! to every service at once during ingest, each within its own deadline.
//!
//! Owns the outbound half of checks: the client (hyper-util over rustls with the outbox's
//! connector, which checks every resolved address against the URL rule at connect time;
//! one per service) and reading the answer's status and body. It decides nothing: the
//! request is built and the answer judged by the domain's `checks::run`, which calls this
//! through its `Checker` trait, on the ingest request's task, never inside a writer job.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use leadrelay_core::checks::run::{CheckCall, Checker, Sending, Sent};

use super::connect::{self, Connector};
use crate::outbound_url::Reach;

/// The pooled client, or why it could not be built.
type Built = Result<Client<Connector, Full<Bytes>>, String>;

/// How much of an answer is read.
const ANSWER_LIMIT: usize = 64 * 1024;

/// The check client of one service that sends over HTTP. Built on first use.
#[derive(Clone, Default)]
struct HttpChecker {
    client: Arc<OnceLock<Built>>,
    /// Where it may send (`serve --public-outbound-only`).
    reach: Reach,
}

/// The service's check client: it sends only where `reach` allows.
pub(crate) fn client(reach: Reach) -> leadrelay_core::checks::CheckClient {
    leadrelay_core::checks::CheckClient::new(HttpChecker {
        client: Arc::default(),
        reach,
    })
}

impl Checker for HttpChecker {
    fn send_all(&self, calls: Vec<CheckCall>, arrived: Instant) -> Sending<'_> {
        let client = self.client();
        let reach = self.reach;
        Box::pin(async move {
            // Every call at once, each a task on the runtime: a check waits on its socket,
            // holding no thread and no writer.
            let count = calls.len();
            let mut tasks = tokio::task::JoinSet::new();
            for (position, call) in calls.into_iter().enumerate() {
                let sending = send(client.clone(), reach, call, arrived);
                tasks.spawn(async move { (position, sending.await) });
            }
            let mut results: Vec<(Sent, i64)> = (0..count)
                .map(|_| (Sent::Failed("the check task panicked".into()), 0))
                .collect();
            while let Some(joined) = tasks.join_next().await {
                if let Ok((position, result)) = joined {
                    results[position] = result;
                }
            }
            results
        })
    }
}

impl HttpChecker {
    fn client(&self) -> Built {
        self.client
            .get_or_init(|| {
                // Each call's own timeout bounds connecting too.
                let https = connect::connector(self.reach, None)
                    .map_err(|e| format!("cannot set up TLS for check requests: {e}"))?;
                Ok(Client::builder(hyper_util::rt::TokioExecutor::new())
                    .pool_idle_timeout(Duration::from_secs(60))
                    .build(https))
            })
            .clone()
    }
}

async fn send(client: Built, reach: Reach, call: CheckCall, arrived: Instant) -> (Sent, i64) {
    let started = Instant::now();
    let deadline = tokio::time::Instant::from_std(arrived + call.timeout);
    let sent = match client {
        Err(e) => Sent::Failed(e),
        Ok(client) => match tokio::time::timeout_at(deadline, exchange(&client, reach, call)).await
        {
            Ok(sent) => sent,
            Err(_) => Sent::Timeout,
        },
    };
    let latency = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    (sent, latency)
}

async fn exchange(client: &Client<Connector, Full<Bytes>>, reach: Reach, call: CheckCall) -> Sent {
    // A URL stored before the rule changed is checked again here, as the sender does (a
    // host name's addresses are checked by the connector when it connects).
    if let Err(e) = crate::outbound_url::check_with(&call.url, reach) {
        return Sent::Failed(format!("invalid check URL: {e}"));
    }
    let mut request = http::Request::builder()
        .method(call.method)
        .uri(call.url.as_str())
        .header(http::header::CONTENT_TYPE, call.content_type)
        .header(
            http::header::USER_AGENT,
            concat!("leadrelay/", env!("CARGO_PKG_VERSION")),
        );
    for (name, value) in &call.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = match request.body(Full::new(Bytes::from(call.body))) {
        Ok(request) => request,
        Err(e) => return Sent::Failed(format!("invalid check request: {e}")),
    };
    let response = match client.request(request).await {
        Ok(response) => response,
        Err(e) => {
            return Sent::Failed(match super::sender::refused_address(&e) {
                Some(refused) => format!("not sent: {refused}"),
                None => format!("request failed: {e}"),
            });
        }
    };
    let status = response.status().as_u16();
    match Limited::new(response.into_body(), ANSWER_LIMIT)
        .collect()
        .await
    {
        Ok(collected) => Sent::Answered {
            status,
            body: collected.to_bytes().to_vec(),
        },
        Err(e) => Sent::Failed(format!("reading the answer failed: {e}")),
    }
}
