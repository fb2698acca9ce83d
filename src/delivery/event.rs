//! The body of the `lead.delivered` event (SPEC.md section 6): exactly its fields, with the
//! lead as a native Lead object (person, consent and capture fields, capture metadata and
//! the partner's additional properties) and the interest's field values.
//!
//! Owns building the body from the lead as stored (handed over by the caller, never read
//! back here); its `lead` object is `ingest::model::LeadFields` as buyers get it, the one
//! definition that auto-delivery's filters read too. It does not own sending it: the body
//! is written to the outbox with the transaction and sent, unchanged on every attempt, by
//! `outbox`.

use serde_json::{Map, Value, json};

use crate::config::buyer::Buyer;
use crate::config::container::DeliveryMode;
use crate::ingest::model::{LeadFields, StoredLead, StoredRequest};

/// The interest's answers as buyers get them: strings or null. Anything else (stored by an
/// older version) is passed on as its JSON text rather than dropped.
fn field_values(answers: &Map<String, Value>) -> Value {
    Value::Object(
        answers
            .iter()
            .map(|(key, value)| match value {
                Value::String(_) | Value::Null => (key.clone(), value.clone()),
                other => (key.clone(), Value::String(other.to_string())),
            })
            .collect(),
    )
}

pub(crate) struct Party<'a> {
    pub id: &'a str,
    pub name: &'a str,
}

pub(crate) struct ProductRef<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub slug: &'a str,
}

/// Everything the event body says.
pub(crate) struct LeadDelivered<'a> {
    pub transaction_id: &'a str,
    pub lead_request_id: &'a str,
    pub lead_id: &'a str,
    pub delivery_mode: DeliveryMode,
    pub sent_at_ms: i64,
    pub buyer: Party<'a>,
    pub product: ProductRef<'a>,
    pub buyer_price_cents: i64,
    pub supplier_cost_cents: i64,
    pub margin_cents: i64,
    pub lead: &'a LeadFields,
    pub answers: &'a Map<String, Value>,
    /// The winning bid that priced the lead (ping/post), named so the buyer can match it.
    pub bid: Option<&'a super::transaction::BidRef>,
}

impl LeadDelivered<'_> {
    /// The body, with exactly the fields of SPEC.md section 6 in its order.
    pub(crate) fn to_json(&self) -> Value {
        let mut body = json!({
            "event": "lead.delivered",
            "transactionId": self.transaction_id,
            "deliveryChannel": "webhook",
            "leadRequestId": self.lead_request_id,
            "leadId": self.lead_id,
            "deliveryMode": self.delivery_mode.as_str(),
            "sentAt": crate::clock::iso(self.sent_at_ms),
            "buyer": {"id": self.buyer.id, "name": self.buyer.name},
            "product": {
                "id": self.product.id,
                "name": self.product.name,
                "slug": self.product.slug,
            },
            "pricing": {
                "buyerPrice": crate::money::to_json(self.buyer_price_cents),
                "supplierCost": crate::money::to_json(self.supplier_cost_cents),
                "marginAmount": crate::money::to_json(self.margin_cents),
            },
            "lead": self.lead,
            "fieldValues": field_values(self.answers),
        });
        // Only a lead sold by a bid has `bid`: every other event keeps SPEC.md's fields.
        if let Some(bid) = self.bid {
            body["bid"] = bid.to_json();
        }
        body
    }
}

/// What a sale was made at, as its event tells the buyer.
pub(crate) struct Sale<'a> {
    pub(crate) delivery_mode: DeliveryMode,
    pub(crate) buyer_price_cents: i64,
    pub(crate) supplier_cost_cents: i64,
    /// The winning bid that set the price, if a bid did.
    pub(crate) bid: Option<&'a super::transaction::BidRef>,
}

/// The body of the event for `request` of `lead` sold to `buyer` as `sale` says (the
/// margin is price minus cost), sent now: the one builder of a `lead.delivered` body, for
/// a delivery and for `buyer integration preview`.
pub(crate) fn lead_delivered(
    transaction_id: &str,
    lead: &StoredLead,
    request: &StoredRequest,
    buyer: &Buyer,
    sale: Sale<'_>,
) -> Value {
    let product = &request.interest;
    LeadDelivered {
        transaction_id,
        lead_request_id: &request.id,
        lead_id: &lead.id,
        delivery_mode: sale.delivery_mode,
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
        buyer_price_cents: sale.buyer_price_cents,
        supplier_cost_cents: sale.supplier_cost_cents,
        margin_cents: sale.buyer_price_cents - sale.supplier_cost_cents,
        lead: &lead.fields,
        answers: &product.field_values,
        bid: sale.bid,
    }
    .to_json()
}

/// The body of an event whose lead's person was erased: the same body with the lead as
/// its tombstone (`ingest::erase::erased_lead_json`: `"erased": true`, the person's fields
/// `null`) and no interest answers. A body that is not a JSON object (never written by
/// this module) is replaced by an empty one rather than kept.
pub(crate) fn erased_body(payload: &str) -> String {
    let mut body = match serde_json::from_str::<Value>(payload) {
        Ok(Value::Object(body)) => body,
        _ => Map::new(),
    };
    let lead = match body.get("lead") {
        Some(Value::Object(lead)) => crate::ingest::erase::erased_lead_json(lead),
        _ => crate::ingest::erase::erased_lead_json(&Map::new()),
    };
    body.insert("lead".into(), Value::Object(lead));
    if body.contains_key("fieldValues") {
        body.insert("fieldValues".into(), Value::Object(Map::new()));
    }
    Value::Object(body).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_erased_body_keeps_the_deal_and_drops_the_person() {
        let body = json!({
            "event": "lead.delivered", "transactionId": "txn_1", "leadId": "lead_1",
            "pricing": {"buyerPrice": 25.0},
            "lead": {"externalId": "x1", "firstName": "Ada", "email": "ada@example.org",
                     "utmSource": "ads"},
            "fieldValues": {"roof": "tile"},
        });
        let erased: Value = serde_json::from_str(&erased_body(&body.to_string())).unwrap();
        assert_eq!(erased["transactionId"], "txn_1");
        assert_eq!(erased["pricing"]["buyerPrice"], 25.0);
        assert_eq!(erased["lead"]["erased"], true);
        assert_eq!(erased["lead"]["externalId"], "x1");
        assert_eq!(erased["lead"]["firstName"], Value::Null);
        assert_eq!(erased["lead"].get("utmSource"), None);
        assert_eq!(erased["fieldValues"], json!({}));
        let text = erased.to_string();
        assert!(!text.contains("Ada") && !text.contains("ada@"), "{text}");
        // The keys stay in their place.
        assert_eq!(
            erased.as_object().unwrap().keys().collect::<Vec<_>>(),
            body.as_object().unwrap().keys().collect::<Vec<_>>()
        );
    }

    #[test]
    fn field_values_are_strings_or_null() {
        let stored = json!({"roof": "tile", "size": null, "n": 3});
        assert_eq!(
            field_values(stored.as_object().unwrap()),
            json!({"roof": "tile", "size": null, "n": "3"})
        );
    }

    #[test]
    fn the_body_carries_constants_iso_time_and_money_as_numbers() {
        let lead = LeadFields {
            external_id: Some("x1".into()),
            ..LeadFields::default()
        };
        let body = LeadDelivered {
            bid: None,
            transaction_id: "txn_1",
            lead_request_id: "lreq_1",
            lead_id: "lead_1",
            delivery_mode: DeliveryMode::Multi,
            sent_at_ms: 0,
            buyer: Party { id: "b", name: "B" },
            product: ProductRef {
                id: "p",
                name: "P",
                slug: "p",
            },
            buyer_price_cents: 2500,
            supplier_cost_cents: 400,
            margin_cents: 2100,
            lead: &lead,
            answers: &Map::new(),
        }
        .to_json();
        assert_eq!(body["event"], "lead.delivered");
        assert_eq!(body["deliveryChannel"], "webhook");
        assert_eq!(body["deliveryMode"], "multi");
        assert_eq!(body["sentAt"], "1970-01-01T00:00:00.000Z");
        assert_eq!(body["pricing"]["marginAmount"], json!(21.0));
        assert_eq!(
            body["lead"],
            json!({"externalId": "x1", "firstName": "", "lastName": ""})
        );
    }
}
