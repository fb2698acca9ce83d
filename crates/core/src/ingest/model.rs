//! The typed lead: the lead as validation leaves it ([`Lead`]), its own fields as buyers get
//! them ([`LeadFields`]), and the lead as stored ([`StoredLead`]).
//!
//! Owns the data types and the one definition of what a buyer gets as `lead` (the
//! `lead.delivered` event's object, SPEC.md section 6), which is also what subscription
//! filters and the evaluator read ([`LeadFields::field`]). Validation (`validate`) builds a
//! [`Lead`]; `store` writes it and, when auto-delivery needs it, hands on the
//! [`StoredLead`] it wrote; `view` reads stored leads back into the same type.

use std::borrow::Cow;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::dedupe::DuplicateStatus;
use super::quality::QualityStatus;
use super::status::{LeadStatus, RequestStatus};
use crate::config::container::ContainerKind;
use crate::ids::{LeadId, LeadRequestId};
use leadrelay_rules::fields::FIELD_NAMES;

/// A validated lead, every interest resolved to a product of the source's workspace: what
/// ingest stores. (A lead before its products are resolved is a `validate::LeadDraft`,
/// whose interests may still name unknown products.)
#[derive(Debug, Clone, Default)]
pub struct Lead {
    pub fields: LeadFields,
    pub interests: Vec<Interest>,
    /// The ping this lead is the post of (DESIGN.md section 14); not passed on to buyers.
    pub ping_id: Option<String>,
}

/// The lead's own fields (the native Lead without its interests): what the partner said
/// about the person and what buyers get as `lead`. Kept apart from the interests because
/// a buyer gets all of them with each interest it buys.
#[derive(Debug, Clone, Default)]
pub struct LeadFields {
    pub external_id: Option<String>,
    pub person: Person,
    pub consent: Consent,
    pub capture: Capture,
    /// The Lead's properties beyond the interface's, kept and passed on to buyers.
    pub additional: Map<String, Value>,
}

#[derive(Debug, Clone, Default)]
pub struct Person {
    pub first_name: String,
    pub last_name: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub street: Option<String>,
    pub house_number: Option<String>,
    pub postal_code: Option<String>,
    pub city: Option<String>,
    pub country: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Consent {
    pub status: Option<String>,
    pub legal_basis: Option<String>,
    pub captured_at: Option<String>,
    pub text_version: Option<String>,
}

/// Who captured the lead and how: the flat capture fields merged with the `capture` object.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    pub captured_by_external_id: Option<String>,
    pub captured_by_name: Option<String>,
    pub captured_by_team: Option<String>,
    pub captured_at: Option<String>,
    pub capture_method: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

/// One interest of the lead in a product of the source's workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct Interest {
    pub product_id: String,
    /// The product's slug and name, as the `lead.delivered` event and `lead show` name it.
    pub product_slug: String,
    pub product_name: String,
    /// `None` when the partner did not say.
    pub routing_ready: Option<bool>,
    pub trigger_auto_delivery: bool,
    /// The answers, keyed by field name; values are strings or null.
    pub field_values: Map<String, Value>,
}

impl Interest {
    /// An answer by field name, trimmed, when it holds more than blanks.
    pub(crate) fn answer(&self, name: &str) -> Option<&str> {
        match self.field_values.get(name)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim()),
            _ => None,
        }
    }
}

/// A lead as stored, with its requests: what ingest wrote (handed on by the writer job
/// that wrote it, so auto-delivery and delivery never read it back) or what `view` reads
/// from the file (the `deliver` command, `lead show`, `lead list`).
#[derive(Debug, Clone)]
pub struct StoredLead {
    pub(crate) id: LeadId,
    pub(crate) source_id: crate::ids::SourceId,
    pub(crate) container_id: String,
    pub(crate) container_kind: ContainerKind,
    pub(crate) workspace_id: String,
    pub(crate) fields: LeadFields,
    pub(crate) quality_status: QualityStatus,
    pub(crate) quality_reasons: Vec<String>,
    pub(crate) duplicate_status: DuplicateStatus,
    /// The `duplicateMatch` object, as stored.
    pub(crate) duplicate_match: Option<Value>,
    pub(crate) status: LeadStatus,
    pub(crate) created_at: i64,
    /// When the person was erased (or the lead purged): a tombstone.
    pub erased_at: Option<i64>,
    /// The outcomes of its check steps (DESIGN.md section 22).
    pub(crate) checks: Vec<crate::checks::CheckRecord>,
    /// In the order the partner gave them.
    pub requests: Vec<StoredRequest>,
}

impl StoredLead {
    /// The request `id` of this lead.
    pub(crate) fn request(&self, id: LeadRequestId) -> Option<&StoredRequest> {
        self.requests.iter().find(|r| r.id == id)
    }
}

/// A stored lead request: one interest of a stored lead, with its state.
#[derive(Debug, Clone)]
pub struct StoredRequest {
    pub id: LeadRequestId,
    pub(crate) position: i64,
    pub(crate) interest: Interest,
    pub(crate) status: RequestStatus,
    /// The auto-delivery decision (the operator's view), when one was made.
    pub(crate) decision: Option<Value>,
    pub(crate) created_at: i64,
}

impl LeadFields {
    /// The interface's text fields in the order buyers get them ([`FIELD_NAMES`]), each
    /// with its value (`None` when absent). First and last name are always present.
    fn texts(&self) -> [(&'static str, Option<&str>); 19] {
        std::array::from_fn(|i| (FIELD_NAMES[i], self.text_at(i)))
    }

    /// The value of the text field at `index` of [`FIELD_NAMES`].
    fn text_at(&self, index: usize) -> Option<&str> {
        let (p, c, k) = (&self.person, &self.consent, &self.capture);
        match index {
            0 => self.external_id.as_deref(),
            1 => Some(p.first_name.as_str()),
            2 => Some(p.last_name.as_str()),
            3 => p.email.as_deref(),
            4 => p.phone.as_deref(),
            5 => p.street.as_deref(),
            6 => p.house_number.as_deref(),
            7 => p.postal_code.as_deref(),
            8 => p.city.as_deref(),
            9 => p.country.as_deref(),
            10 => c.status.as_deref(),
            11 => c.legal_basis.as_deref(),
            12 => c.captured_at.as_deref(),
            13 => c.text_version.as_deref(),
            14 => k.captured_by_external_id.as_deref(),
            15 => k.captured_by_name.as_deref(),
            16 => k.captured_by_team.as_deref(),
            17 => k.captured_at.as_deref(),
            18 => k.capture_method.as_deref(),
            _ => None,
        }
    }

    /// The value of the text field `name` (`None` when absent or not a text field): one
    /// field looked up without the whole of [`LeadFields::texts`], as filters and features
    /// look up several per lead and buyer.
    fn text_named(&self, name: &str) -> Option<&str> {
        let index = FIELD_NAMES.iter().position(|field| *field == name)?;
        self.text_at(index)
    }

    /// Whether buyers get `name` from an interface field rather than from an additional
    /// property: a validated field always wins over an additional property of its name.
    fn shadows(&self, name: &str) -> bool {
        self.text_named(name).is_some() || self.metadata_shadows(name)
    }

    /// Whether `capture.metadata` takes the name `capture` from an additional property.
    fn metadata_shadows(&self, name: &str) -> bool {
        name == "capture" && self.capture.metadata.is_some()
    }

    /// A field as buyers get it, by its interface name or as an additional property (a
    /// string, or a number or boolean as its JSON text); `None` when absent or not a
    /// single value. What subscription filters and the evaluator read.
    pub(crate) fn field(&self, name: &str) -> Option<Cow<'_, str>> {
        if let Some(value) = self.text_named(name) {
            return Some(Cow::Borrowed(value));
        }
        // No text field of that name holds a value (looked up just above), so only the
        // metadata can shadow an additional property.
        if self.metadata_shadows(name) {
            return None;
        }
        match self.additional.get(name)? {
            Value::String(s) => Some(Cow::Borrowed(s)),
            Value::Number(n) => Some(Cow::Owned(n.to_string())),
            Value::Bool(b) => Some(Cow::Owned(b.to_string())),
            _ => None,
        }
    }

    /// A field, trimmed, when it holds more than blanks.
    pub(crate) fn text(&self, name: &str) -> Option<Cow<'_, str>> {
        match self.field(name)? {
            Cow::Borrowed(s) if !s.trim().is_empty() => Some(Cow::Borrowed(s.trim())),
            Cow::Owned(s) if !s.trim().is_empty() => Some(Cow::Owned(s.trim().to_string())),
            _ => None,
        }
    }

    /// The optional person fields in interface order (the names come before them).
    pub(crate) fn person_pairs(&self) -> [(&'static str, &Option<String>); 7] {
        let p = &self.person;
        [
            ("email", &p.email),
            ("phone", &p.phone),
            ("street", &p.street),
            ("houseNumber", &p.house_number),
            ("postalCode", &p.postal_code),
            ("city", &p.city),
            ("country", &p.country),
        ]
    }

    pub(crate) fn consent_pairs(&self) -> [(&'static str, &Option<String>); 4] {
        let c = &self.consent;
        [
            ("status", &c.status),
            ("legalBasis", &c.legal_basis),
            ("capturedAt", &c.captured_at),
            ("textVersion", &c.text_version),
        ]
    }

    pub(crate) fn capture_pairs(&self) -> [(&'static str, &Option<String>); 5] {
        let c = &self.capture;
        [
            ("capturedByExternalId", &c.captured_by_external_id),
            ("capturedByName", &c.captured_by_name),
            ("capturedByTeam", &c.captured_by_team),
            ("capturedAt", &c.captured_at),
            ("captureMethod", &c.capture_method),
        ]
    }
}

/// The lead as buyers get it (the `lead.delivered` event's `lead`): the person, consent and
/// capture fields as native Lead fields, absent ones left out, `capture.metadata`, then the
/// additional properties that are not null.
impl Serialize for LeadFields {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.texts() {
            if let Some(value) = value {
                map.serialize_entry(key, value)?;
            }
        }
        if let Some(metadata) = &self.capture.metadata {
            #[derive(Serialize)]
            struct Capture<'a> {
                metadata: &'a Map<String, Value>,
            }
            map.serialize_entry("capture", &Capture { metadata })?;
        }
        for (key, value) in &self.additional {
            if !value.is_null() && !self.shadows(key) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields() -> LeadFields {
        let mut fields = LeadFields {
            external_id: Some("x1".into()),
            ..LeadFields::default()
        };
        fields.person.first_name = "Ann".into();
        fields.person.last_name = "Lee".into();
        fields.person.postal_code = Some(" 80331 ".into());
        fields.consent.status = Some("granted".into());
        fields.capture.metadata = Some(Map::from_iter([("form".into(), json!("f1"))]));
        fields.additional = Map::from_iter([
            ("utmSource".into(), json!("google")),
            ("score".into(), json!(7)),
            ("optIn".into(), json!(true)),
            ("gone".into(), Value::Null),
            ("tags".into(), json!(["a"])),
            // Absent interface field: the additional property of its name is passed on.
            ("city".into(), json!("Wien")),
        ]);
        fields
    }

    #[test]
    fn buyers_get_present_fields_in_interface_order_then_additional_ones() {
        let shown = serde_json::to_string(&fields()).unwrap();
        assert_eq!(
            shown,
            r#"{"externalId":"x1","firstName":"Ann","lastName":"Lee","postalCode":" 80331 ","consentStatus":"granted","capture":{"metadata":{"form":"f1"}},"utmSource":"google","score":7,"optIn":true,"tags":["a"],"city":"Wien"}"#
        );
    }

    #[test]
    fn an_interface_field_wins_over_an_additional_property_of_its_name() {
        let mut shadowed = fields();
        shadowed.person.city = Some("Graz".into());
        shadowed
            .additional
            .insert("capture".into(), json!({"other": 1}));
        let shown = serde_json::to_value(&shadowed).unwrap();
        assert_eq!(shown["city"], "Graz");
        assert_eq!(shown["capture"], json!({"metadata": {"form": "f1"}}));
        assert_eq!(shadowed.field("city").as_deref(), Some("Graz"));
        let text = serde_json::to_string(&shadowed).unwrap();
        assert_eq!(text.matches("\"city\"").count(), 1, "{text}");
        assert_eq!(text.matches("\"capture\"").count(), 1, "{text}");
        let mut text_capture = fields();
        text_capture
            .additional
            .insert("capture".into(), json!("web"));
        assert_eq!(
            text_capture.field("capture"),
            None,
            "the metadata shadows it"
        );
        text_capture.capture.metadata = None;
        assert_eq!(text_capture.field("capture").as_deref(), Some("web"));
    }

    #[test]
    fn filters_read_what_buyers_get() {
        let fields = fields();
        let shown = serde_json::to_value(&fields).unwrap();
        for (name, value) in shown.as_object().unwrap() {
            let expected = match value {
                Value::String(s) => Some(s.clone()),
                Value::Number(_) | Value::Bool(_) => Some(value.to_string()),
                _ => None,
            };
            assert_eq!(fields.field(name).map(Cow::into_owned), expected, "{name}");
        }
        assert_eq!(fields.field("gone"), None, "null is absent");
        assert_eq!(fields.field("email"), None);
        assert_eq!(fields.text("postalCode").as_deref(), Some("80331"));
    }
}
