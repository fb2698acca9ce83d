//! Bidding for a ping (DESIGN.md section 14): which eligible buyers price by bid, their
//! bid requests, and which answers count.
//!
//! Runs before the ping's writer job, on the request's task: the bidders and their
//! eligibility are read from the pool, the requests go out through the outbox's bid client
//! (`outbox::bid`, the only outbound HTTP), and what comes back is handed to the job, which
//! re-checks eligibility with the bids as prices (`eligibility::apply_bids`) and records
//! every bid (`store::insert_bid`). No network call runs inside a writer job.

use std::collections::HashSet;
use std::time::Duration;

use rusqlite::Connection;
use serde_json::json;

use super::route::PreparedPing;
use crate::autodelivery::Settings;
use crate::autodelivery::eligibility::{self, Bidding, KnownBids, Reason};
use crate::delivery::transaction::BidRef;
use crate::outbox::bid::{BidCall, BidClient, BidOutcome};

/// A bid-priced subscription of the ping's product.
#[derive(Debug, Clone)]
pub(crate) struct Bidder {
    buyer_id: String,
    url: String,
    timeout_ms: i64,
    min_price_cents: Option<i64>,
    max_price_cents: Option<i64>,
    signing_secret: String,
}

/// One bid as recorded.
#[derive(Debug, Clone)]
pub(crate) struct RecordedBid {
    pub(crate) id: String,
    pub(crate) buyer_id: String,
    /// `bid`, `pass`, `timeout`, `error`, `below_min`, `above_max`.
    pub(crate) outcome: &'static str,
    pub(crate) price_cents: Option<i64>,
    pub(crate) bid_id: Option<String>,
    pub(crate) latency_ms: i64,
    pub(crate) error: Option<String>,
}

/// What the bidding came to, for the writer job: who was asked and the usable bids (for
/// the decision), and every bid as it is recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bids {
    pub(crate) known: KnownBids,
    pub(crate) recorded: Vec<RecordedBid>,
}

fn bidders(
    conn: &Connection,
    workspace_id: &str,
    product_id: &str,
) -> rusqlite::Result<Vec<Bidder>> {
    conn.prepare_cached(
        "SELECT s.buyer_id, s.bid_url, s.bid_timeout_ms, s.min_price_cents, s.max_price_cents,
                b.signing_secret
         FROM subscriptions s JOIN buyers b ON b.id = s.buyer_id
         WHERE s.product_id = ?1 AND b.workspace_id = ?2 AND s.pricing = 'bid'
           AND b.archived_at IS NULL",
    )?
    .query_map([product_id, workspace_id], |row| {
        Ok(Bidder {
            buyer_id: row.get(0)?,
            url: row.get::<_, Option<String>>(1)?.unwrap_or_default(),
            timeout_ms: row.get::<_, Option<i64>>(2)?.unwrap_or(300),
            min_price_cents: row.get(3)?,
            max_price_cents: row.get(4)?,
            signing_secret: row.get(5)?,
        })
    })?
    .collect()
}

/// The bidders of the ping's product that are eligible now (read from the pool; the writer
/// job checks again), with the settings the ping is decided on.
pub(crate) fn eligible_bidders(
    conn: &Connection,
    ping: &PreparedPing,
    now: i64,
) -> rusqlite::Result<Vec<Bidder>> {
    let lead = &ping.lead;
    let request = ping.request();
    let all = bidders(conn, &lead.workspace_id, &request.interest.product_id)?;
    if all.is_empty() {
        return Ok(all);
    }
    let Some(settings) = Settings::load_for(conn, &lead.container_id, &lead.source_id, now)? else {
        return Ok(Vec::new());
    };
    if !settings.auto_delivery {
        return Ok(Vec::new());
    }
    let candidates = eligibility::candidates(
        conn,
        &eligibility::Context {
            lead,
            request,
            tz: &settings.tz,
            now_ms: now,
            windows: &settings.windows,
            bidding: Bidding::Asking,
        },
    )?;
    let eligible: HashSet<&str> = candidates
        .iter()
        .filter(|c| c.reason == Reason::Eligible)
        .map(|c| c.buyer_id.as_str())
        .collect();
    Ok(all
        .into_iter()
        .filter(|b| eligible.contains(b.buyer_id.as_str()))
        .collect())
}

/// Asks every bidder at once; `expires_at` is when the answer's reservation would lapse.
pub(crate) async fn collect(
    client: &BidClient,
    ping: &PreparedPing,
    bidders: Vec<Bidder>,
    delivery_mode: &str,
    expires_at: i64,
) -> Bids {
    let request = ping.request();
    let fields = &ping.lead.fields.person;
    let calls: Vec<BidCall> = bidders
        .iter()
        .map(|b| {
            let id = crate::ids::new("bid");
            BidCall {
                buyer_id: b.buyer_id.clone(),
                bid_request_id: id.clone(),
                url: b.url.clone(),
                signing_secret: b.signing_secret.clone(),
                timeout: Duration::from_millis(u64::try_from(b.timeout_ms).unwrap_or(300)),
                body: json!({
                    "type": "lead.bid_request",
                    "bidRequestId": id,
                    "product": {
                        "id": request.interest.product_id,
                        "slug": request.interest.product_slug,
                    },
                    "fieldValues": request.interest.field_values,
                    "postalCode": fields.postal_code,
                    "city": fields.city,
                    "country": fields.country,
                    "deliveryMode": delivery_mode,
                    "expiresAt": crate::clock::iso(expires_at),
                }),
            }
        })
        .collect();
    let results = client.collect(calls).await;
    let mut bids = Bids::default();
    for (bidder, result) in bidders.iter().zip(results) {
        bids.known.asked.insert(bidder.buyer_id.clone());
        let (outcome, price_cents, bid_id, error) = match result.outcome {
            BidOutcome::Bid {
                price_cents,
                bid_id,
            } => {
                let outcome = if bidder.min_price_cents.is_some_and(|min| price_cents < min) {
                    "below_min"
                } else if bidder.max_price_cents.is_some_and(|max| price_cents > max) {
                    "above_max"
                } else {
                    bids.known
                        .prices
                        .insert(bidder.buyer_id.clone(), price_cents);
                    bids.known.refs.insert(
                        bidder.buyer_id.clone(),
                        BidRef {
                            bid_request_id: result.bid_request_id.clone(),
                            bid_id: bid_id.clone(),
                        },
                    );
                    "bid"
                };
                (outcome, Some(price_cents), bid_id, None)
            }
            BidOutcome::Pass => ("pass", None, None, None),
            BidOutcome::Timeout => ("timeout", None, None, None),
            BidOutcome::Error(e) => ("error", None, None, Some(e)),
        };
        bids.recorded.push(RecordedBid {
            id: result.bid_request_id,
            buyer_id: result.buyer_id,
            outcome,
            price_cents,
            bid_id,
            latency_ms: result.latency_ms,
            error,
        });
    }
    bids
}
