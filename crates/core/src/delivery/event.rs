//! The body of the `lead.delivered` event (SPEC.md section 6): exactly its fields, with the
//! lead as a native Lead object (person, consent and capture fields, capture metadata and
//! the partner's additional properties) and the interest's field values.
//!
//! Owns building the body from the lead as stored (handed over by the caller, never read
//! back here); its `lead` object is `ingest::model::LeadFields` as buyers get it, the one
//! definition that auto-delivery's filters read too. It does not own sending it: the body
//! is written to the outbox with the transaction and sent, unchanged on every attempt, by
//! `outbox`.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::config::container::DeliveryMode;
use crate::ids::{LeadId, LeadRequestId};
use crate::ingest::model::{LeadFields, StoredLead, StoredRequest};

/// Who an event names: a buyer's id and name.
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
    pub transaction_id: &'a crate::ids::TransactionId,
    pub lead_request_id: LeadRequestId,
    pub lead_id: LeadId,
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
        // Infallible: every part serialises (strings, finite numbers, JSON values).
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The body as the text the outbox stores and sends: the same as [`Self::to_json`]'s
    /// text, written straight from the parts, without a tree of `Value`s (this runs for
    /// every delivery on the writer thread).
    pub(crate) fn to_text(&self) -> String {
        // Infallible, as above.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The body's keys in SPEC.md section 6's order; `bid` only for a lead sold by a bid.
impl Serialize for LeadDelivered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("event", "lead.delivered")?;
        map.serialize_entry("transactionId", self.transaction_id)?;
        map.serialize_entry("deliveryChannel", "webhook")?;
        map.serialize_entry("leadRequestId", &self.lead_request_id)?;
        map.serialize_entry("leadId", &self.lead_id)?;
        map.serialize_entry("deliveryMode", self.delivery_mode.as_str())?;
        map.serialize_entry("sentAt", &crate::clock::iso(self.sent_at_ms))?;
        map.serialize_entry(
            "buyer",
            &Named(&[("id", self.buyer.id), ("name", self.buyer.name)]),
        )?;
        map.serialize_entry(
            "product",
            &Named(&[
                ("id", self.product.id),
                ("name", self.product.name),
                ("slug", self.product.slug),
            ]),
        )?;
        map.serialize_entry(
            "pricing",
            &Pricing {
                buyer_price_cents: self.buyer_price_cents,
                supplier_cost_cents: self.supplier_cost_cents,
                margin_cents: self.margin_cents,
            },
        )?;
        map.serialize_entry("lead", self.lead)?;
        map.serialize_entry("fieldValues", &FieldValues(self.answers))?;
        if let Some(bid) = self.bid {
            map.serialize_entry("bid", &bid.view())?;
        }
        map.end()
    }
}

/// An object of string fields, in the order given.
struct Named<'a>(&'a [(&'static str, &'a str)]);

impl Serialize for Named<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// The body's `pricing`: money as numbers of euros (`money::to_json`).
struct Pricing {
    buyer_price_cents: i64,
    supplier_cost_cents: i64,
    margin_cents: i64,
}

impl Serialize for Pricing {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("buyerPrice", &crate::money::as_f64(self.buyer_price_cents))?;
        map.serialize_entry(
            "supplierCost",
            &crate::money::as_f64(self.supplier_cost_cents),
        )?;
        map.serialize_entry("marginAmount", &crate::money::as_f64(self.margin_cents))?;
        map.end()
    }
}

/// The interest's answers as buyers get them: strings or null. Anything else (stored by an
/// older version) is passed on as its JSON text rather than dropped.
struct FieldValues<'a>(&'a Map<String, Value>);

impl Serialize for FieldValues<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            match value {
                Value::String(_) | Value::Null => map.serialize_entry(key, value)?,
                other => map.serialize_entry(key, &other.to_string())?,
            }
        }
        map.end()
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
pub(crate) fn lead_delivered<'a>(
    transaction_id: &'a crate::ids::TransactionId,
    lead: &'a StoredLead,
    request: &'a StoredRequest,
    buyer: Party<'a>,
    sale: Sale<'a>,
) -> LeadDelivered<'a> {
    let product = &request.interest;
    LeadDelivered {
        transaction_id,
        lead_request_id: request.id,
        lead_id: lead.id,
        delivery_mode: sale.delivery_mode,
        sent_at_ms: crate::clock::now_ms(),
        buyer,
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
    use serde_json::json;

    const LEAD: &str = "lead_01JD7Q4N9V3X8K2M5P6R7S8T9W";
    const LREQ: &str = "lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9";

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
            serde_json::to_value(FieldValues(stored.as_object().unwrap())).unwrap(),
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
            transaction_id: &"txn_1".into(),
            lead_request_id: LREQ.parse().unwrap(),
            lead_id: LEAD.parse().unwrap(),
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

    #[test]
    fn the_text_is_the_bodys_json_in_specs_order() {
        let mut lead = LeadFields {
            external_id: Some("x1".into()),
            ..LeadFields::default()
        };
        lead.person.first_name = "Ann \"A\"".into();
        lead.capture.metadata = Some(Map::from_iter([("form".into(), json!("f1"))]));
        lead.additional = Map::from_iter([("score".into(), json!(7.5))]);
        let answers = json!({"roof": "tile", "n": 3, "none": null});
        let bid = crate::delivery::transaction::BidRef {
            bid_request_id: "breq_1".into(),
            bid_id: Some("bid_1".into()),
        };
        let body = LeadDelivered {
            bid: Some(&bid),
            transaction_id: &"txn_1".into(),
            lead_request_id: LREQ.parse().unwrap(),
            lead_id: LEAD.parse().unwrap(),
            delivery_mode: DeliveryMode::Exclusive,
            sent_at_ms: 1_700_000_000_123,
            buyer: Party {
                id: "b",
                name: "B ü",
            },
            product: ProductRef {
                id: "p",
                name: "P",
                slug: "p-1",
            },
            buyer_price_cents: 2550,
            supplier_cost_cents: -5,
            margin_cents: 2555,
            lead: &lead,
            answers: answers.as_object().unwrap(),
        };
        let text = body.to_text();
        assert_eq!(
            text,
            r#"{"event":"lead.delivered","transactionId":"txn_1","deliveryChannel":"webhook","leadRequestId":"lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9","leadId":"lead_01JD7Q4N9V3X8K2M5P6R7S8T9W","deliveryMode":"exclusive","sentAt":"2023-11-14T22:13:20.123Z","buyer":{"id":"b","name":"B ü"},"product":{"id":"p","name":"P","slug":"p-1"},"pricing":{"buyerPrice":25.5,"supplierCost":-0.05,"marginAmount":25.55},"lead":{"externalId":"x1","firstName":"Ann \"A\"","lastName":"","capture":{"metadata":{"form":"f1"}},"score":7.5},"fieldValues":{"roof":"tile","n":"3","none":null},"bid":{"bidRequestId":"breq_1","bidId":"bid_1"}}"#
        );
        assert_eq!(body.to_json().to_string(), text);
        // The same text as the tree of `Value`s the body was built as before.
        let tree = json!({
            "event": "lead.delivered", "transactionId": "txn_1", "deliveryChannel": "webhook",
            "leadRequestId": LREQ, "leadId": LEAD, "deliveryMode": "exclusive",
            "sentAt": crate::clock::iso(1_700_000_000_123),
            "buyer": {"id": "b", "name": "B ü"},
            "product": {"id": "p", "name": "P", "slug": "p-1"},
            "pricing": {
                "buyerPrice": crate::money::to_json(2550),
                "supplierCost": crate::money::to_json(-5),
                "marginAmount": crate::money::to_json(2555),
            },
            "lead": &lead,
            "fieldValues": {"roof": "tile", "n": "3", "none": null},
            "bid": bid.view(),
        });
        assert_eq!(tree.to_string(), text);
    }
}
