//! The native lead as ingest understands it after validation: person, consent, capture,
//! additional properties and interests, each in a typed field.
//!
//! Owns the data types only. Validation (`validate`) builds them from JSON, `store` writes
//! them, `view` reads them back.

use serde_json::{Map, Value};

/// A validated lead, ready to be normalised and stored.
#[derive(Debug, Clone, Default)]
pub struct LeadInput {
    pub external_id: Option<String>,
    pub person: Person,
    pub consent: Consent,
    pub capture: Capture,
    /// The Lead's properties beyond the interface's, kept and passed on to buyers.
    pub additional: Map<String, Value>,
    pub interests: Vec<Interest>,
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
    /// `None` when the partner did not say.
    pub routing_ready: Option<bool>,
    pub trigger_auto_delivery: bool,
    /// The answers, keyed by field name; values are strings or null.
    pub field_values: Map<String, Value>,
}
