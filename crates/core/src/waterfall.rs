//! The waterfall (DESIGN.md section 18): when a buyer's API refuses a lead that
//! auto-delivery (or a ping's post) sold it, at the event's first attempt, auto-delivery
//! decides again for that request, and the lead goes to the next buyer, also the next
//! bidder: the recorded bids (the ping's for a post, the request's own for an
//! auto-delivered lead, `bids::known`) price the bid-priced buyers asked, and a post's
//! supplier earns the ping's payout.
//!
//! Runs in the outbox's writer job that records the refusal (`attempt`), right after
//! `lifecycle::refusal` took the sale back (no network here: the new buyer's event is sent
//! by the outbox like any other). The decision is auto-delivery's own (`autodelivery::decide`,
//! as `lead reroute` runs it): a buyer that held the request before, its transaction
//! refused, voided or live, is not eligible again (`already_delivered`), so each step
//! leaves out every buyer that refused or holds it. The container bounds it
//! (`--waterfall on|off`, `--waterfall-max N`). Every refusal is a step in the request's
//! stored decision (`waterfall`), which `lead show` prints.

use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

use crate::autodelivery::decision::{self, RequestReason};
use crate::autodelivery::{ACTOR, AutoDeliveryError, Settings};
use crate::delivery::transaction::{self, Transaction};
use crate::ingest::status::{LeadStatus, RequestStatus};

/// Why a refusal led to no new decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The sale was not auto-delivery's (the operator's `deliver`).
    NotAutoDelivered,
    /// The buyer refused after earlier attempts had failed: the lead is no longer fresh.
    NotFirstAttempt,
    WaterfallOff,
    WaterfallMaxReached,
    LeadNotActive,
}

impl Stop {
    pub(crate) fn code(self) -> &'static str {
        match self {
            Stop::NotAutoDelivered => "not_auto_delivered",
            Stop::NotFirstAttempt => "not_first_attempt",
            Stop::WaterfallOff => "waterfall_off",
            Stop::WaterfallMaxReached => "waterfall_max_reached",
            Stop::LeadNotActive => "lead_not_active",
        }
    }
}

/// One refusal in the request's stored decision (`waterfall`), as `lead show` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Step<'a> {
    /// 1 for the first refusal of the request.
    step: usize,
    refused_by: &'a str,
    transaction_id: &'a crate::ids::TransactionId,
    reason: &'a str,
    at: String,
    /// Whether the lead went on to a new decision; `outcome` is its reason code, or why not.
    rerouted: bool,
    outcome: &'static str,
    /// The buyers the new decision delivered to; only a step that rerouted has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    delivered_to: Option<Vec<&'a str>>,
}

impl Step<'_> {
    fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a waterfall step serialises")
    }
}

/// Who may fall through to the next buyer: sales auto-delivery made (the waterfall's own
/// included) and the sales of a ping's post.
fn sold_by_auto_delivery(conn: &Connection, refused: &Transaction) -> rusqlite::Result<bool> {
    Ok(transaction::history(conn, &refused.id)?
        .first()
        .is_some_and(|created| [ACTOR, crate::ping::post::ACTOR].contains(&created.actor.as_str())))
}

/// After the refusal of `refused` (already rejected and refunded) with the buyer's
/// `reason`: decides again for its request when the waterfall applies, and records the
/// step in the request's trace. Returns how many new transactions were written (their
/// events are due at once).
pub fn after_refusal(
    conn: &Connection,
    refused: &Transaction,
    reason: &str,
    first_attempt: bool,
    now_ms: i64,
) -> Result<usize, AutoDeliveryError> {
    let Some(lead) = crate::ingest::view::find(conn, refused.lead_id)? else {
        return Ok(0);
    };
    let Some(request) = lead.request(refused.lead_request_id) else {
        return Ok(0);
    };
    let mut settings =
        Settings::load(conn, &lead, now_ms)?.ok_or_else(|| AutoDeliveryError::Missing {
            kind: "container",
            id: lead.container_id.clone(),
        })?;
    let mut steps: Vec<Value> = request
        .decision
        .as_ref()
        .and_then(|d| d.get("waterfall"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let taken = steps
        .iter()
        .filter(|s| s.get("rerouted").and_then(Value::as_bool) == Some(true))
        .count() as i64;
    let stop = if !sold_by_auto_delivery(conn, refused)? {
        Some(Stop::NotAutoDelivered)
    } else if !first_attempt {
        Some(Stop::NotFirstAttempt)
    } else if !settings.row.waterfall {
        Some(Stop::WaterfallOff)
    } else if taken >= settings.row.waterfall_max {
        Some(Stop::WaterfallMaxReached)
    } else if lead.status != LeadStatus::Active {
        Some(Stop::LeadNotActive)
    } else {
        None
    };
    let mut step = Step {
        step: steps.len() + 1,
        refused_by: refused.buyer_id.as_str(),
        transaction_id: &refused.id,
        reason,
        at: crate::clock::iso(now_ms),
        rerouted: false,
        outcome: "",
        delivered_to: None,
    };
    match stop {
        Some(stop) => {
            step.outcome = stop.code();
            steps.push(step.to_json());
            // A sale by hand made no decision; a waterfall that stops keeps the last one.
            if let Some(previous) = &request.decision {
                let mut kept = previous.clone();
                kept["waterfall"] = Value::Array(steps);
                let open = !transaction::of_request(conn, request.id)?
                    .iter()
                    .any(|t| t.status.is_live());
                let status = if open {
                    RequestStatus::Open
                } else {
                    RequestStatus::Delivered
                };
                crate::ingest::status::record_decision(
                    conn,
                    request.id,
                    &kept.to_string(),
                    status,
                )?;
            }
            Ok(0)
        }
        None => {
            // The lead falls to the next bidder: the bids recorded for it (its ping's, or
            // its own when it was auto-delivered) price the bid-priced buyers asked, and
            // a post's supplier earns what its ping promised.
            let ping = crate::ping::store::posted_of_lead(conn, lead.id)?;
            let bids = match &ping {
                Some(ping) => {
                    settings.source_cost_cents = ping.payout_cents.or(settings.source_cost_cents);
                    crate::bids::known(conn, crate::bids::Owner::Ping(&ping.id))?
                }
                None => crate::bids::known(conn, crate::bids::Owner::Request(request.id))?,
            };
            let decided = crate::autodelivery::decide(
                conn,
                &lead,
                request,
                &settings,
                Some(&bids),
                crate::autodelivery::Sold::Maybe,
            )?;
            step.rerouted = true;
            step.outcome = decided.reason.code();
            step.delivered_to = Some(
                decided
                    .deliveries
                    .iter()
                    .map(|d| d.buyer_id.as_str())
                    .collect(),
            );
            steps.push(step.to_json());
            decision::store_with(conn, &decided, |stored| {
                stored["waterfall"] = Value::Array(steps);
                if let Some(ping) = &ping {
                    stored["pingId"] = Value::from(ping.id.as_str());
                }
            })?;
            if decided.reason != RequestReason::Delivered {
                log::info!(
                    "waterfall: request {} refused by {} found no next buyer ({})",
                    request.id,
                    refused.buyer_id,
                    decided.reason.code()
                );
            }
            Ok(decided.deliveries.len())
        }
    }
}
