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
use super::event::{LeadDelivered, Party, ProductRef};
use crate::config::buyer;

/// The event `buyer_id` would get for lead `lead_id`.
pub fn event_for(conn: &Connection, lead_id: &str, buyer_id: &str) -> Result<Value, DeliveryError> {
    let buyer = buyer::find(conn, buyer_id)?
        .ok_or_else(|| DeliveryError::BuyerNotFound(buyer_id.to_string()))?;
    if let Some(payload) = crate::outbox::store::latest_payload(conn, lead_id, &buyer.id)?
        && let Ok(event) = serde_json::from_str(&payload)
    {
        return Ok(event);
    }
    let lead = crate::ingest::view::find(conn, lead_id)?
        .ok_or_else(|| DeliveryError::RequestNotFound(format!("of lead {lead_id}")))?;
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
                .ok_or_else(|| DeliveryError::RequestNotFound(format!("of lead {lead_id}")))?,
            0,
        ),
    };
    let terms = super::deliver::load_terms(
        conn,
        &lead.container_id,
        &lead.source_id,
        &request.interest.product_id,
    )?
    .ok_or_else(|| DeliveryError::RequestNotFound(request.id.clone()))?;
    let product = &request.interest;
    Ok(LeadDelivered {
        transaction_id: "txn_preview",
        lead_request_id: &request.id,
        lead_id: &lead.id,
        delivery_mode: terms.mode,
        sent_at_ms: crate::clock::now_ms(),
        buyer: Party {
            id: &buyer.id,
            name: &buyer.name,
        },
        product: ProductRef {
            id: &product.product_id,
            name: &product.product_name,
            slug: &product.product_slug,
        },
        buyer_price_cents: price_cents,
        supplier_cost_cents: terms.supplier_cost_cents,
        margin_cents: price_cents - terms.supplier_cost_cents,
        lead: &lead.fields,
        answers: &product.field_values,
        // A preview names no bid: a bid is asked only for a ping or a delivery.
        bid: None,
    }
    .to_json())
}
