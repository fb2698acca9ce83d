//! Bid requests as the domain sees them (DESIGN.md section 14): what is asked of each
//! bidder ([`BidCall`]), what it came to ([`BidResult`]), and the [`BidClient`] that asks.
//! The client sends through a [`Bidder`], which the edge crate implements over HTTP (its
//! `outbox::bid`): the domain names no HTTP client. Which buyers are asked, which bids
//! count and who wins is `bids`', `ping`'s and auto-delivery's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One bid request to send.
#[derive(Debug, Clone)]
pub struct BidCall {
    pub buyer_id: crate::ids::BuyerId,
    pub bid_request_id: String,
    pub url: String,
    pub signing_secret: String,
    /// From the arrival of the request that asks (`BidClient::collect`).
    pub timeout: Duration,
    /// The `lead.bid_request` body.
    pub body: Value,
}

/// What a bid request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BidOutcome {
    /// A price in cents, with the buyer's id of the bid when it gave one.
    Bid {
        price_cents: i64,
        bid_id: Option<String>,
    },
    /// The buyer passed (`{"bid": null}` or 204).
    Pass,
    /// No answer within the bid's timeout.
    Timeout,
    /// No usable answer: a connection error, an error status, a body that does not read.
    Error(String),
}

impl BidOutcome {
    /// The outcome's name as recorded (`bids.outcome`).
    pub fn name(&self) -> &'static str {
        match self {
            BidOutcome::Bid { .. } => "bid",
            BidOutcome::Pass => "pass",
            BidOutcome::Timeout => "timeout",
            BidOutcome::Error(_) => "error",
        }
    }
}

/// One answered (or unanswered) bid request.
#[derive(Debug, Clone)]
pub struct BidResult {
    pub buyer_id: crate::ids::BuyerId,
    pub bid_request_id: String,
    pub outcome: BidOutcome,
    pub latency_ms: i64,
}

/// What a [`Bidder`] answers: the results of its calls, in the calls' order.
pub type Collected<'a> = Pin<Box<dyn Future<Output = Vec<BidResult>> + Send + 'a>>;

/// Sends bid requests: every call at once, each waited for until its own timeout counted
/// from `arrived` (when the request that asks arrived: what its sender waits for).
pub trait Bidder: Send + Sync {
    fn collect(&self, calls: Vec<BidCall>, arrived: Instant) -> Collected<'_>;
}

/// The bid client of one service.
#[derive(Clone)]
pub struct BidClient(Arc<dyn Bidder>);

impl std::fmt::Debug for BidClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BidClient")
    }
}

impl BidClient {
    /// A client that sends through `bidder`.
    pub fn new(bidder: impl Bidder + 'static) -> BidClient {
        BidClient(Arc::new(bidder))
    }

    /// Sends every call at once and waits for each until its own timeout counted from
    /// `arrived`, so the reads and checks before the bids come out of the bidders' time,
    /// not on top of it; the results in the calls' order. Must run on a tokio runtime.
    pub async fn collect(&self, calls: Vec<BidCall>, arrived: Instant) -> Vec<BidResult> {
        self.0.collect(calls, arrived).await
    }
}
