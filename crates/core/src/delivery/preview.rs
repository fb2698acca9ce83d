//! The `lead.delivered` event a buyer would get for a lead, without delivering anything:
//! what `buyer integration preview` turns into the buyer's request.
//!
//! When the buyer had the lead already, the stored event (exactly what was sent); else the
//! event built as a delivery would build it now, for the lead's first request the buyer
//! subscribes to (else its first), at the subscription price, with `txn_preview` as its
//! transaction id. Reads only.

use rusqlite::Connection;
use serde_json::Value;

use super::DeliveryError;
use crate::config::buyer::{self, Buyer};
use crate::ingest::model::StoredLead;

/// The event `buyer` would get for `lead`.
pub fn event_for(
    conn: &Connection,
    lead: &StoredLead,
    buyer: &Buyer,
) -> Result<Value, DeliveryError> {
    if let Some(payload) = crate::outbox::store::latest_payload(conn, lead.id, &buyer.id)?
        && let Ok(event) = serde_json::from_str(&payload)
    {
        return Ok(event);
    }
    let mut chosen = None;
    for request in &lead.requests {
        if let Some(subscription) =
            buyer::find_subscription(conn, &buyer.id, &request.interest.product_id)?
        {
            chosen = Some((request, subscription.price_cents));
            break;
        }
    }
    let (request, price_cents) = match chosen {
        Some(found) => found,
        None => (
            lead.requests
                .first()
                .ok_or_else(|| DeliveryError::RequestNotFound(format!("of lead {}", lead.id)))?,
            0,
        ),
    };
    let terms = super::deliver::load_terms(
        conn,
        &lead.container_id,
        &lead.source_id,
        &request.interest.product_id,
    )?
    .ok_or_else(|| DeliveryError::RequestNotFound(request.id.to_string()))?;
    // A preview names no transaction of the file.
    let preview_id = crate::ids::TransactionId::from("txn_preview");
    Ok(super::event::lead_delivered(
        &preview_id,
        lead,
        request,
        super::event::Party {
            id: buyer.id.as_str(),
            name: &buyer.name,
        },
        super::event::Sale {
            delivery_mode: terms.mode,
            buyer_price_cents: price_cents,
            supplier_cost_cents: terms.supplier_cost_cents,
            // A preview names no bid: a bid is asked only for a ping or a delivery.
            bid: None,
        },
    )
    .to_json())
}
