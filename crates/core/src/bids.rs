//! Bidding (DESIGN.md section 14): which eligible buyers of a lead request price by bid,
//! their bid requests, which answers count, and the `bids` table that records them. One
//! owner for both callers: a ping (`ping`) and an auto-delivered lead (`accept`).
//!
//! Runs before the caller's writer job, on the request's task: the bidders and their
//! eligibility are read from the pool (`eligibility::eligible_bidders`), the requests go out through
//! the outbox's bid client (`outbox::bid`, the only outbound HTTP), each within its
//! buyer's `--bid-timeout`, and what comes back ([`Bids`]) is handed to the job, which
//! re-checks eligibility with the bids as prices (`eligibility::apply_bids`) and records
//! every bid ([`record`]). No network call runs inside a writer job.
//!
//! Does not decide who wins (`autodelivery::select`, the ping's `route`) and does not send
//! anything itself (`outbox::bid`).

use crate::db::PrepareKept;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rusqlite::{Connection, params};
use serde::Serialize;
use serde_json::Value;

use crate::delivery::transaction::BidRef;
use crate::ingest::model::{StoredLead, StoredRequest};
use crate::outbox::bid::{BidCall, BidClient, BidOutcome, BidResult};

/// A bid-priced subscription of the request's product.
#[derive(Debug, Clone)]
pub(crate) struct Bidder {
    pub(crate) buyer_id: crate::ids::BuyerId,
    url: String,
    timeout_ms: i64,
    min_price_cents: Option<i64>,
    max_price_cents: Option<i64>,
    signing_secret: String,
}

impl Bidder {
    /// How long its bid request may take.
    pub(crate) fn timeout_ms(&self) -> i64 {
        self.timeout_ms
    }
}

/// One bid as recorded.
#[derive(Debug, Clone)]
pub(crate) struct RecordedBid {
    pub(crate) id: String,
    pub(crate) buyer_id: crate::ids::BuyerId,
    /// `bid`, `pass`, `timeout`, `error`, `below_min`, `above_max`.
    pub(crate) outcome: &'static str,
    pub(crate) price_cents: Option<i64>,
    pub(crate) bid_id: Option<String>,
    pub(crate) latency_ms: i64,
    pub(crate) error: Option<String>,
}

/// What the bidding for one request came to, for the writer job: who was asked and the
/// usable bids (for the decision), and every bid as it is recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bids {
    pub(crate) known: KnownBids,
    pub(crate) recorded: Vec<RecordedBid>,
}

impl Bids {
    /// Whether `bid` won: its buyer was taken (`taken`) at its usable bid.
    pub(crate) fn won(&self, bid: &RecordedBid, taken: &[&str]) -> bool {
        bid.outcome == "bid"
            && self.known.bid_of(&bid.buyer_id).map(|r| &r.bid_request_id) == Some(&bid.id)
            && taken.contains(&bid.buyer_id.as_str())
    }
}

pub(crate) fn bidders(
    conn: &Connection,
    workspace_id: &str,
    product_id: &str,
) -> rusqlite::Result<Vec<Bidder>> {
    conn.prepare_kept(
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

/// The bids made for a request: who was asked, the usable bids (buyer → cents) and their
/// ids (for the transaction and `lead.delivered`). The bids collected for a ping or an
/// auto-delivered lead, or, when the waterfall decides again, the recorded ones.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownBids {
    pub(crate) asked: HashSet<crate::ids::BuyerId>,
    pub(crate) prices: HashMap<crate::ids::BuyerId, i64>,
    pub(crate) refs: HashMap<crate::ids::BuyerId, BidRef>,
}

impl KnownBids {
    /// The bid that prices `buyer_id`, if it made a usable one.
    pub(crate) fn bid_of(&self, buyer_id: &crate::ids::BuyerId) -> Option<&BidRef> {
        self.refs
            .get(buyer_id)
            .filter(|_| self.prices.contains_key(buyer_id))
    }
}

/// The bid requests of one lead request, ready to go out with others.
pub(crate) struct Asking {
    bidders: Vec<Bidder>,
    calls: Vec<BidCall>,
}

/// The `lead.bid_request` body a bidder gets.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BidRequestView<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    bid_request_id: &'a str,
    product: ProductRef<'a>,
    field_values: &'a serde_json::Map<String, Value>,
    postal_code: Option<&'a str>,
    city: Option<&'a str>,
    country: Option<&'a str>,
    delivery_mode: &'a str,
    expires_at: String,
}

#[derive(Serialize)]
struct ProductRef<'a> {
    id: &'a str,
    slug: &'a str,
}

/// The bid requests for `request` of `lead` to each of `bidders`: the product, its
/// answers, postal code, city and country, never the person. `expires_at` is how long the
/// bid is taken to hold (a ping's reservation, or the lead's decision).
pub(crate) fn asking(
    lead: &StoredLead,
    request: &StoredRequest,
    bidders: Vec<Bidder>,
    delivery_mode: &str,
    expires_at: i64,
) -> Asking {
    let fields = &lead.fields.person;
    let calls = bidders
        .iter()
        .map(|b| {
            let id = crate::ids::new("bid");
            BidCall {
                buyer_id: b.buyer_id.clone(),
                bid_request_id: id.clone(),
                url: b.url.clone(),
                signing_secret: b.signing_secret.clone(),
                timeout: Duration::from_millis(u64::try_from(b.timeout_ms).unwrap_or(300)),
                body: serde_json::to_value(BidRequestView {
                    kind: "lead.bid_request",
                    bid_request_id: &id,
                    product: ProductRef {
                        id: &request.interest.product_id,
                        slug: &request.interest.product_slug,
                    },
                    field_values: &request.interest.field_values,
                    postal_code: fields.postal_code.as_deref(),
                    city: fields.city.as_deref(),
                    country: fields.country.as_deref(),
                    delivery_mode,
                    expires_at: crate::clock::iso(expires_at),
                })
                .expect("a bid request always serialises"),
            }
        })
        .collect();
    Asking { bidders, calls }
}

/// Sends the bid requests of every request in `asking` at once and waits for each at
/// most its buyer's timeout from `arrived` (the HTTP request's arrival); the bids of each
/// request, in `asking`'s order.
pub(crate) async fn collect(
    client: &BidClient,
    asking: Vec<Asking>,
    arrived: std::time::Instant,
) -> Vec<Bids> {
    let mut of_call: HashMap<String, usize> = HashMap::new();
    let mut calls = Vec::new();
    let mut bidders = Vec::with_capacity(asking.len());
    for (n, one) in asking.into_iter().enumerate() {
        for call in one.calls {
            of_call.insert(call.bid_request_id.clone(), n);
            calls.push(call);
        }
        bidders.push(one.bidders);
    }
    let mut results: Vec<Vec<BidResult>> = bidders.iter().map(|_| Vec::new()).collect();
    for result in client.collect(calls, arrived).await {
        if let Some(&n) = of_call.get(&result.bid_request_id) {
            results[n].push(result);
        }
    }
    bidders
        .iter()
        .zip(results)
        .map(|(bidders, results)| tally(bidders, results))
        .collect()
}

/// What `bidders` answered (`results`, matched by buyer): the usable bids within each
/// buyer's min/max price, and every answer as recorded. A bidder without a result (its
/// task failed) was asked and made no bid.
fn tally(bidders: &[Bidder], results: Vec<BidResult>) -> Bids {
    let mut bids = Bids::default();
    for bidder in bidders {
        bids.known.asked.insert(bidder.buyer_id.clone());
    }
    for result in results {
        let Some(bidder) = bidders.iter().find(|b| b.buyer_id == result.buyer_id) else {
            continue;
        };
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

/// What a recorded bid was asked for.
#[derive(Debug, Clone, Copy)]
pub enum Owner<'a> {
    Ping(&'a str),
    /// A lead request decided by auto-delivery.
    Request(crate::ids::LeadRequestId),
}

/// Records one bid request and what came of it (`won` when its buyer was taken at the
/// bid), in the caller's writer job.
pub(crate) fn record(
    conn: &Connection,
    owner: Owner,
    bid: &RecordedBid,
    won: bool,
    now: i64,
) -> rusqlite::Result<()> {
    let (ping_id, request_id) = match owner {
        Owner::Ping(id) => (Some(id), None),
        Owner::Request(id) => (None, Some(id)),
    };
    conn.prepare_kept(
        "INSERT INTO bids (id, ping_id, lead_request_id, buyer_id, outcome, price_cents, bid_id,
            latency_ms, error, won, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        bid.id,
        ping_id,
        request_id,
        bid.buyer_id,
        bid.outcome,
        bid.price_cents,
        bid.bid_id,
        bid.latency_ms,
        bid.error,
        won,
        now
    ])?;
    Ok(())
}

/// Deletes the bids of ping `ping_id`, which a purge deletes (`ping::store`); returns how
/// many.
pub(crate) fn delete_of_ping(conn: &Connection, ping_id: &str) -> rusqlite::Result<usize> {
    conn.prepare_kept("DELETE FROM bids WHERE ping_id = ?1")?
        .execute([ping_id])
}

/// The bids of an owner, oldest first, by ping or by lead request (each column has its
/// partial index).
const OF_PING: &str = "SELECT id, buyer_id, outcome, price_cents, bid_id, latency_ms, error, won, \
    lead_request_id FROM bids WHERE ping_id = ?1 ORDER BY created_at, id";
const OF_REQUEST: &str = "SELECT id, buyer_id, outcome, price_cents, bid_id, latency_ms, error, \
    won, lead_request_id FROM bids WHERE lead_request_id = ?1 ORDER BY created_at, id";

fn of_owner(owner: Owner<'_>) -> (&'static str, rusqlite::types::Value) {
    match owner {
        Owner::Ping(id) => (OF_PING, id.to_string().into()),
        Owner::Request(id) => (OF_REQUEST, rusqlite::types::Value::from(id)),
    }
}

/// The bids recorded for `owner` as a decision prices with them: every buyer asked, and
/// the usable bids with their ids (a ping's post, or a waterfall deciding again).
pub(crate) fn known(conn: &Connection, owner: Owner) -> rusqlite::Result<KnownBids> {
    let mut known = KnownBids::default();
    let (sql, id) = of_owner(owner);
    let mut stmt = conn.prepare_kept(sql)?;
    let mut rows = stmt.query([id])?;
    while let Some(row) = rows.next()? {
        let buyer_id: crate::ids::BuyerId = row.get(1)?;
        known.asked.insert(buyer_id.clone());
        if let ("bid", Some(price)) = (row.get_ref(2)?.as_str()?, row.get::<_, Option<i64>>(3)?) {
            known.prices.insert(buyer_id.clone(), price);
            known.refs.insert(
                buyer_id,
                BidRef {
                    bid_request_id: row.get(0)?,
                    bid_id: row.get(4)?,
                },
            );
        }
    }
    Ok(known)
}

/// A recorded bid as the operator sees it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BidView {
    bid_request_id: String,
    buyer_account_id: String,
    outcome: String,
    bid: Option<f64>,
    bid_id: Option<String>,
    latency_ms: i64,
    error: Option<String>,
    won: bool,
    /// The lead request it belongs to, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    lead_request_id: Option<crate::ids::LeadRequestId>,
}

/// The bids of `owner` as the operator sees them (`ping show`, `lead show`).
pub fn shown(conn: &Connection, owner: Owner) -> rusqlite::Result<Vec<Value>> {
    let (sql, id) = of_owner(owner);
    conn.prepare_kept(sql)?
        .query_map([id], |row| {
            let shown = BidView {
                bid_request_id: row.get(0)?,
                buyer_account_id: row.get(1)?,
                outcome: row.get(2)?,
                bid: row.get::<_, Option<i64>>(3)?.map(crate::money::as_f64),
                bid_id: row.get(4)?,
                latency_ms: row.get(5)?,
                error: row.get(6)?,
                won: row.get(7)?,
                lead_request_id: row.get(8)?,
            };
            Ok(serde_json::to_value(shown).expect("a bid always serialises"))
        })?
        .collect()
}
