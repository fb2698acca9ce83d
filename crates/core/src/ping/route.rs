//! Answering a ping (DESIGN.md section 14): the ping is routed like an auto-delivered lead
//! (the container's switch, the score on what a ping has, the eligible buyers, the one
//! selection), and the buyers taken are reserved instead of delivered, in one writer job.
//!
//! Owns the ping's decision and its answer. The rules are auto-delivery's, called, not
//! copied: `autodelivery::Settings`, `evaluator::evaluate`, `eligibility::candidates`
//! (caps with held places, balances less holds, filters on the fields the ping gave,
//! schedules, the breaker), `select::rank` and `autodelivery::take_ranked`. What a ping
//! reserves is written through `store::reserve`.

use crate::db::PrepareKept;
use serde::Serialize;
use serde_json::Value;

use super::PingError;
use super::store::{self, NewPing, PingStatus, Reservation};
use crate::autodelivery::decision::{RequestDecision, RequestReason, Stored, Subject};
use crate::autodelivery::eligibility::{self, Candidate};
use crate::autodelivery::features::{Feature, Features};
use crate::autodelivery::{self, Attempt, ProductTerms, Settings, evaluator, select};
use crate::bids::{self as bidding, Bids};
use crate::config::buyer::Plan;
use crate::ingest::model::{StoredLead, StoredRequest};

/// A checked ping, ready for the writer: the lead it stands for (no person: the fields a
/// ping may carry) with its one request, whose id is the ping's.
pub(crate) struct PreparedPing {
    /// The ping's id (`png_…`).
    pub(crate) id: String,
    /// The lead the ping describes, as eligibility reads one; its ids are placeholders that
    /// name no stored row (a post makes the lead with its own).
    pub(crate) lead: StoredLead,
    pub(crate) email_sha256: Option<String>,
    pub(crate) phone_sha256: Option<String>,
    /// The body as received, stored with the ping (it has no personal data).
    pub(crate) body: String,
}

impl PreparedPing {
    pub(crate) fn request(&self) -> &StoredRequest {
        &self.lead.requests[0]
    }
}

/// The partner's answer: no buyer, buyer price or candidate (disclosure, DESIGN.md 5).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PingAnswer {
    pub(crate) ping_id: String,
    pub(crate) status: PingStatus,
    pub(crate) reason: Option<&'static str>,
    pub(crate) payout_cents: Option<i64>,
    pub(crate) expires_at: Option<i64>,
}

/// A [`PingAnswer`] as the partner gets it.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum PingAnswerView<'a> {
    Accepted(AcceptedPingView<'a>),
    Rejected(RejectedPingView<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AcceptedPingView<'a> {
    ping_id: &'a str,
    status: &'static str,
    payout: Option<f64>,
    expires_at: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RejectedPingView<'a> {
    ping_id: &'a str,
    status: &'static str,
    reason: Option<&'static str>,
}

impl PingAnswer {
    pub(crate) fn view(&self) -> PingAnswerView<'_> {
        match self.status {
            PingStatus::Accepted => PingAnswerView::Accepted(AcceptedPingView {
                ping_id: &self.ping_id,
                status: "accepted",
                payout: self.payout_cents.map(crate::money::as_f64),
                expires_at: self.expires_at.map(crate::clock::iso),
            }),
            _ => PingAnswerView::Rejected(RejectedPingView {
                ping_id: &self.ping_id,
                status: "rejected",
                reason: self.reason,
            }),
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a ping answer always serialises")
    }
}

/// The features of a ping, for the evaluator. A ping has no person, so the features that
/// read one are taken from what the ping promises instead: an email or phone hash counts
/// as a contact (the post is checked for a valid one by quality and must match the hash),
/// names count as given (every lead must have both, so the post will), and the address is
/// the share of postal code, city and country given (street and house number are personal
/// data, not part of a ping). Consent, the product's required fields and the soft flags
/// are read as for a lead.
fn features(ping: &PreparedPing, settings: &Settings, product: &ProductTerms) -> Features {
    let lead = &ping.lead;
    let mut features = autodelivery::features_for(lead, ping.request(), settings, product);
    let flag = |yes: bool| if yes { 1.0 } else { 0.0 };
    features.values[Feature::ValidEmail.index()] = flag(ping.email_sha256.is_some());
    features.values[Feature::ValidPhone.index()] = flag(ping.phone_sha256.is_some());
    features.values[Feature::Names.index()] = 1.0;
    let address = ["postalCode", "city", "country"];
    let given = address
        .iter()
        .filter(|f| lead.fields.text(f).is_some())
        .count();
    features.values[Feature::AddressCompleteness.index()] = given as f64 / address.len() as f64;
    features
}

/// What the supplier earns: the source's revenue share of what the lead sells for (the sum
/// of the reserved prices), exact cents rounded half away from zero, or else the supplier
/// cost (the source's, else the product's).
pub(crate) fn payout(
    revenue_share_bp: Option<i64>,
    supplier_cost_cents: i64,
    prices: impl IntoIterator<Item = i64>,
) -> i64 {
    let Some(share) = revenue_share_bp else {
        return supplier_cost_cents;
    };
    let sold: i128 = prices.into_iter().map(i128::from).sum();
    let scaled = sold * i128::from(share);
    // Half away from zero: add half the divisor in the direction of the sign.
    let rounded = (2 * scaled + scaled.signum() * 10_000) / 20_000;
    i64::try_from(rounded).unwrap_or(i64::MAX)
}

/// Whether the ping's email or phone hash is on its workspace's suppression list: it gets
/// no offer (either action: a flagged lead is never sold, so no buyer is reserved for it).
fn is_suppressed(conn: &rusqlite::Connection, ping: &PreparedPing) -> rusqlite::Result<bool> {
    use crate::suppression::{self, Kind};
    let workspace_id = &ping.lead.workspace_id;
    let Some(list) = suppression::lookup(conn, workspace_id)? else {
        return Ok(false);
    };
    for (kind, hash) in [
        (Kind::Email, &ping.email_sha256),
        (Kind::Phone, &ping.phone_sha256),
    ] {
        if let Some(hash) = hash
            && list.holds_hash(conn, workspace_id, kind, hash)?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Decides a ping and writes it: runs as one writer job. Lapsed reservations are freed
/// first, so that they hold nothing the decision reads.
pub(crate) fn decide(
    conn: &rusqlite::Connection,
    ping: &PreparedPing,
    bids: &Bids,
    now: i64,
) -> Result<PingAnswer, PingError> {
    store::expire_due(conn, now)?;
    let lead = &ping.lead;
    let request = ping.request();
    let settings =
        Settings::load_for(conn, &lead.container_id, &lead.source_id, now)?.ok_or_else(|| {
            PingError::Internal(format!("container '{}' not found", lead.container_id))
        })?;
    let product =
        autodelivery::product_terms(conn, &request.interest.product_id)?.ok_or_else(|| {
            PingError::Internal(format!(
                "product '{}' not found",
                request.interest.product_id
            ))
        })?;

    let mut evaluation = None;
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut reserved: Vec<Reservation> = Vec::new();
    let reason = if is_suppressed(conn, ping)? {
        RequestReason::Suppressed
    } else if !settings.row.auto_delivery {
        RequestReason::AutoDeliveryDisabled
    } else {
        let evaluated = evaluator::evaluate(
            &features(ping, &settings, &product),
            &settings.row.weights,
            settings.row.threshold,
        );
        let passed = evaluated.passed;
        evaluation = Some(evaluated);
        if !passed {
            RequestReason::ScoreBelowThreshold
        } else {
            candidates = eligibility::candidates(
                conn,
                &eligibility::Context {
                    lead,
                    request,
                    tz: &settings.row.tz,
                    now_ms: now,
                    windows: &settings.windows,
                    bidding: eligibility::Bidding::Asked(&bids.known),
                },
            )?;
            eligibility::apply_bids(conn, &mut candidates, &bids.known)?;
            select::rank(&mut candidates);
            let mut position = 0;
            reserved = autodelivery::take_ranked(&mut candidates, settings.wanted(), |c| {
                position += 1;
                let held_cents = match plan_of(conn, &c.buyer_id)? {
                    Some(Plan::Prepaid) => c.price_cents,
                    _ => 0,
                };
                let (bid_request_id, bid_id) = match bids.known.bid_of(&c.buyer_id) {
                    Some(bid) => (Some(bid.bid_request_id.clone()), bid.bid_id.clone()),
                    None => (None, None),
                };
                Ok(Attempt::Taken(Reservation {
                    position,
                    buyer_id: c.buyer_id.clone(),
                    product_id: request.interest.product_id.clone(),
                    price_cents: c.price_cents,
                    held_cents,
                    cap_day_start: settings.windows.day.0,
                    cap_month_start: settings.windows.month.0,
                    bid_request_id,
                    bid_id,
                }))
            })?;
            if reserved.is_empty() {
                RequestReason::NoEligibleBuyer
            } else {
                RequestReason::Delivered
            }
        }
    };
    let accepted = !reserved.is_empty();
    let decision = RequestDecision {
        request_id: Subject::Ping(ping.id.clone()),
        reason,
        evaluation,
        deliveries: Vec::new(),
        candidates,
        decided_at: now,
    };
    let shown = decision.operator_text(Stored::Ping {
        outcome: if accepted { "reserved" } else { "rejected" },
    });
    let answer = if accepted {
        let cost = settings
            .source_cost_cents
            .or(product.default_cost_cents)
            .unwrap_or(0);
        PingAnswer {
            ping_id: ping.id.clone(),
            status: PingStatus::Accepted,
            reason: None,
            payout_cents: Some(payout(
                settings.row.revenue_share_bp,
                cost,
                reserved.iter().map(|r| r.price_cents),
            )),
            expires_at: Some(now.saturating_add(settings.row.ping_ttl_ms)),
        }
    } else {
        PingAnswer {
            ping_id: ping.id.clone(),
            status: PingStatus::Rejected,
            reason: Some(reason.code()),
            payout_cents: None,
            expires_at: None,
        }
    };
    store::insert(
        conn,
        &NewPing {
            id: &answer.ping_id,
            source_id: &lead.source_id,
            container_id: &lead.container_id,
            workspace_id: &lead.workspace_id,
            product_id: &request.interest.product_id,
            external_id: lead.fields.external_id.as_deref(),
            email_sha256: ping.email_sha256.as_deref(),
            phone_sha256: ping.phone_sha256.as_deref(),
            body: &ping.body,
            status: answer.status,
            reason: answer.reason,
            payout_cents: answer.payout_cents,
            decision: &shown,
            created_at: now,
            expires_at: answer.expires_at,
        },
    )?;
    for reservation in &reserved {
        store::reserve(conn, &answer.ping_id, reservation, &settings.windows)?;
    }
    for bid in &bids.recorded {
        let won = reserved
            .iter()
            .any(|r| r.bid_request_id.as_deref() == Some(bid.id.as_str()));
        bidding::record(conn, bidding::Owner::Ping(&answer.ping_id), bid, won, now)?;
    }
    Ok(answer)
}

fn plan_of(
    conn: &rusqlite::Connection,
    buyer_id: &crate::ids::BuyerId,
) -> Result<Option<Plan>, autodelivery::AutoDeliveryError> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .prepare_kept("SELECT plan FROM buyers WHERE id = ?1")?
        .query_row([buyer_id], |row| row.get(0))
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revenue_share_is_exact_cents_rounded_half_away_from_zero() {
        assert_eq!(
            payout(None, 1250, [4000]),
            1250,
            "no share: the supplier cost"
        );
        assert_eq!(payout(Some(4000), 1250, [2550]), 1020, "40% of 25.50");
        // 33.33% of 10.05 = 3.349665 → 3.35; 12.5% of 0.20 = 0.025 → 0.03 (half away).
        assert_eq!(payout(Some(3333), 0, [1005]), 335);
        assert_eq!(payout(Some(1250), 0, [20]), 3);
        assert_eq!(payout(Some(1250), 0, [12]), 2, "0.015 → 0.02");
        assert_eq!(
            payout(Some(5000), 0, [1000, 2001]),
            1501,
            "the sum of the prices"
        );
        assert_eq!(payout(Some(10_000), 0, [i64::MAX]), i64::MAX);
    }
}
