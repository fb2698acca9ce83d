//! The post (DESIGN.md section 14): a lead sent to the normal ingest endpoints with the
//! `pingId` of an accepted ping, inside the ingest writer job.
//!
//! Owns the post's rules: the ping must be the source's (`ping_unknown`), accepted and
//! unused (`ping_used`), unexpired (`ping_expired`), and the lead must match it: an
//! interest in the ping's product and the same hashed email and phone when the ping carried
//! them (`ping_mismatch`). A post that passes is delivered to the reserved buyers at the
//! reserved prices ([`complete`], through `delivery::deliver_lead` and auto-delivery's
//! `take_ranked`), whatever `triggerAutoDelivery` says; one refused for a duplicate, an
//! invalid lead or a validation problem gives the reservations back ([`release`]). The
//! writer runs posts one after another, so of two posts of one ping exactly one claims it.

use rusqlite::Connection;

use super::store::{self, Ping, PingStatus};
use crate::autodelivery::decision::{self, RequestDecision, RequestReason, Subject};
use crate::autodelivery::eligibility::{Candidate, Reason};
use crate::autodelivery::{self, Attempt, AutoDeliveryError, Settings};
use crate::config::source::Source;
use crate::delivery::transaction::BidRef;
use crate::delivery::{self, DeliveryTerms, LeadDelivery};
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::model::{StoredLead, StoredRequest};
use crate::ingest::quality::QualityStatus;
use crate::ingest::store::PreparedLead;

/// Who the post's transactions name as their creator.
pub(crate) const ACTOR: &str = "ping";

/// Why a post was refused before anything was stored: its code (`ping_unknown`,
/// `ping_used`, `ping_expired`, `ping_mismatch`) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingRefusal {
    pub code: &'static str,
    pub message: String,
}

impl PingRefusal {
    fn new(code: &'static str, message: String) -> PingRefusal {
        PingRefusal { code, message }
    }
}

/// A ping a post has claimed: the post will deliver it or give it back.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub(crate) ping: Ping,
}

impl Claim {
    /// The position of the lead's interest in the ping's product.
    pub(crate) fn request_position(&self, lead: &PreparedLead) -> Option<usize> {
        lead.lead
            .interests
            .iter()
            .position(|i| i.product_id == self.ping.product_id)
    }
}

/// Checks the ping a lead names (`ping_id`) against the lead and the source. A ping found
/// lapsed is expired here and now (its reservations given back in this job).
pub(crate) fn claim(
    conn: &Connection,
    source: &Source,
    ping_id: &str,
    lead: &PreparedLead,
    now: i64,
) -> rusqlite::Result<Result<Claim, PingRefusal>> {
    let unknown = || {
        PingRefusal::new(
            "ping_unknown",
            format!("no accepted ping '{ping_id}' of this source"),
        )
    };
    let Some(ping) = store::find(conn, ping_id)? else {
        return Ok(Err(unknown()));
    };
    if ping.source_id != source.id {
        return Ok(Err(unknown()));
    }
    match ping.status_at(now) {
        PingStatus::Accepted => {}
        PingStatus::Rejected => {
            return Ok(Err(PingRefusal::new(
                "ping_unknown",
                format!("ping '{ping_id}' was rejected: nothing was reserved for it"),
            )));
        }
        PingStatus::Posted | PingStatus::Released => {
            return Ok(Err(PingRefusal::new(
                "ping_used",
                format!("ping '{ping_id}' was used by an earlier post"),
            )));
        }
        PingStatus::Expired => {
            // Lazy freeing: a lapsed reservation is given back by whoever finds it first.
            store::end(conn, ping_id, PingStatus::Expired, None, None, now)?;
            return Ok(Err(PingRefusal::new(
                "ping_expired",
                format!(
                    "ping '{ping_id}' expired at {}",
                    ping.expires_at.map(crate::clock::iso).unwrap_or_default()
                ),
            )));
        }
    }
    let claim = Claim { ping };
    if claim.request_position(lead).is_none() {
        return Ok(Err(PingRefusal::new(
            "ping_mismatch",
            format!(
                "ping '{ping_id}' was for product '{}'; the lead has no interest in it",
                claim.ping.product_id
            ),
        )));
    }
    let differs = |promised: &Option<String>, key: &Option<String>| match promised {
        // The promised hash is `secrets::hash` of the normalised key: `secrets::verify` hashes
        // the key the same way and compares in constant time.
        Some(hash) => !key
            .as_deref()
            .is_some_and(|key| crate::secrets::verify(key, hash)),
        None => false,
    };
    for (name, promised, key) in [
        ("email", &claim.ping.email_sha256, &lead.email_key),
        ("phone", &claim.ping.phone_sha256, &lead.phone_key),
    ] {
        if differs(promised, key) {
            return Ok(Err(PingRefusal::new(
                "ping_mismatch",
                format!("the lead's {name} does not match the {name}Sha256 of ping '{ping_id}'"),
            )));
        }
    }
    Ok(Ok(claim))
}

/// Gives a claimed ping's reservations back: the post was refused (`reason`). `lead_id`
/// names the lead when it was stored all the same (held for duplicate review, invalid), so
/// the ping stays tied to it (`ping show`, an erasure of the lead).
pub(crate) fn release(
    conn: &Connection,
    claim: &Claim,
    reason: &str,
    lead_id: Option<crate::ids::LeadId>,
    now: i64,
) -> rusqlite::Result<()> {
    store::end(
        conn,
        &claim.ping.id,
        PingStatus::Released,
        Some(reason),
        lead_id,
        now,
    )?;
    Ok(())
}

/// Gives back the reservations of ping `ping_id` of `source_id` whose post failed
/// validation (nothing was stored); a ping of another source, or not accepted, is left
/// alone. Its own writer job.
pub(crate) fn release_invalid(
    conn: &Connection,
    source_id: &crate::ids::SourceId,
    ping_id: &str,
    now: i64,
) -> rusqlite::Result<()> {
    if let Some(ping) = store::find(conn, ping_id)?
        && ping.source_id == *source_id
        && ping.status_at(now) == PingStatus::Accepted
    {
        store::end(
            conn,
            ping_id,
            PingStatus::Released,
            Some("validation_failed"),
            None,
            now,
        )?;
    }
    Ok(())
}

/// Completes a claimed post once its lead is stored: a duplicate under review or an
/// invalid lead gives the reservations back; otherwise the lead's request in the ping's
/// product goes to each reserved buyer at its reserved price, the supplier's cost being
/// the ping's payout. Returns the request's decision (stored on it, as auto-delivery's).
pub(crate) fn complete(
    conn: &Connection,
    claim: &Claim,
    lead: &StoredLead,
    request: &StoredRequest,
    now: i64,
) -> Result<RequestDecision, AutoDeliveryError> {
    let stop = |reason| RequestDecision {
        request_id: Subject::Request(request.id),
        reason,
        evaluation: None,
        deliveries: Vec::new(),
        candidates: Vec::new(),
        decided_at: now,
    };
    let refused = if lead.duplicate_status == DuplicateStatus::Review {
        Some(RequestReason::DuplicateReview)
    } else if lead.quality_status == QualityStatus::Invalid {
        Some(RequestReason::QualityInvalid)
    } else {
        None
    };
    if let Some(reason) = refused {
        release(conn, claim, reason.code(), Some(lead.id), now)?;
        let decision = stop(reason);
        store_decision(conn, &decision, &claim.ping.id)?;
        return Ok(decision);
    }
    let reservations = store::end(
        conn,
        &claim.ping.id,
        PingStatus::Posted,
        None,
        Some(lead.id),
        now,
    )?;
    let settings =
        Settings::load_for(conn, &lead.container_id, &lead.source_id, now)?.ok_or_else(|| {
            AutoDeliveryError::Missing {
                kind: "container",
                id: lead.container_id.clone(),
            }
        })?;
    let terms = DeliveryTerms {
        mode: settings.row.mode,
        max_buyers: settings.row.max_buyers,
        supplier_cost_cents: claim.ping.payout_cents.unwrap_or(0),
        cap_windows: Some(settings.windows),
    };
    let bids: std::collections::HashMap<&str, BidRef> = reservations
        .iter()
        .filter_map(|r| {
            let bid_request_id = r.bid_request_id.clone()?;
            Some((
                r.buyer_id.as_str(),
                BidRef {
                    bid_request_id,
                    bid_id: r.bid_id.clone(),
                },
            ))
        })
        .collect();
    let mut candidates: Vec<Candidate> = reservations
        .iter()
        .map(|r| Candidate {
            buyer_id: r.buyer_id.clone(),
            price_cents: r.price_cents,
            priority: 0,
            last_served_at: None,
            created_at: 0,
            reason: Reason::Eligible,
            detail: None,
        })
        .collect();
    let deliveries = autodelivery::take_ranked(&mut candidates, usize::MAX, |c| {
        let order = LeadDelivery {
            lead,
            request,
            terms,
            buyer_id: &c.buyer_id,
            price_cents: Some(c.price_cents),
            actor: ACTOR,
            bid: bids.get(c.buyer_id.as_str()),
        };
        let delivered = delivery::deliver_lead(conn, &order);
        Ok(
            match autodelivery::refusal_of(delivered, request.id, &c.buyer_id)? {
                Attempt::Taken(d) => Attempt::Taken(decision::Delivery {
                    transaction_id: d.transaction_id,
                    buyer_id: d.buyer_id,
                    price_cents: d.buyer_price_cents,
                    mode: d.delivery_mode,
                }),
                // Every reserved buyer is tried: a refusal for one (paused since the ping)
                // does not end the others.
                Attempt::Refused { detail, .. } => Attempt::Refused {
                    request_full: false,
                    detail,
                },
            },
        )
    })?;
    let decision = RequestDecision {
        request_id: Subject::Request(request.id),
        reason: if deliveries.is_empty() {
            RequestReason::NoEligibleBuyer
        } else {
            RequestReason::Delivered
        },
        evaluation: None,
        deliveries,
        candidates,
        decided_at: now,
    };
    store_decision(conn, &decision, &claim.ping.id)?;
    Ok(decision)
}

/// Stores the post's decision on its request, naming the ping it came from.
fn store_decision(
    conn: &Connection,
    decision: &RequestDecision,
    ping_id: &str,
) -> rusqlite::Result<()> {
    decision::store_with(conn, decision, |stored| {
        stored["pingId"] = serde_json::Value::from(ping_id);
    })
}
