//! The stored lead and the interests to evaluate, as auto-delivery sees them.
//!
//! Reads through `ingest::view` (the one owner of the lead's columns) and keeps what the
//! evaluator, the filters and the step checks need, with the lead's fields by the names
//! partners and filters use (`postalCode`, `consentStatus`, an additional property).

use std::borrow::Cow;

use rusqlite::Connection;
use serde_json::{Map, Value};

use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::quality::QualityStatus;
use crate::ingest::view;

#[derive(Debug, Clone)]
pub struct Lead {
    pub id: String,
    pub workspace_id: String,
    pub container_id: String,
    pub quality_status: QualityStatus,
    pub quality_reasons: Vec<String>,
    pub duplicate_status: DuplicateStatus,
    /// Person, consent, capture and additional properties by interface name, as buyers
    /// get them.
    pub(super) fields: Map<String, Value>,
}

impl Lead {
    /// A lead field by its interface name, or an additional property (a string, or a
    /// number or boolean as its JSON text). `None` when absent.
    pub fn field(&self, name: &str) -> Option<Cow<'_, str>> {
        match self.fields.get(name)? {
            Value::String(s) => Some(Cow::Borrowed(s)),
            Value::Number(n) => Some(Cow::Owned(n.to_string())),
            Value::Bool(b) => Some(Cow::Owned(b.to_string())),
            _ => None,
        }
    }

    /// A field, trimmed, when it holds more than blanks.
    pub fn text(&self, name: &str) -> Option<Cow<'_, str>> {
        match self.field(name)? {
            Cow::Borrowed(s) if !s.trim().is_empty() => Some(Cow::Borrowed(s.trim())),
            Cow::Owned(s) if !s.trim().is_empty() => Some(Cow::Owned(s.trim().to_string())),
            _ => None,
        }
    }
}

/// An interest of the lead that asked for automated delivery.
#[derive(Debug, Clone)]
pub struct Interest {
    pub id: String,
    pub product_id: String,
    /// `None` when the partner did not say.
    pub routing_ready: Option<bool>,
    pub field_values: Map<String, Value>,
}

impl Interest {
    /// An answer by field name, trimmed, when it holds more than blanks.
    pub fn answer(&self, name: &str) -> Option<&str> {
        match self.field_values.get(name)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim()),
            _ => None,
        }
    }
}

/// The lead `lead_id` and its interests with `triggerAutoDelivery` true, in the order the
/// partner sent them; `None` when there is no such lead.
pub fn load(conn: &Connection, lead_id: &str) -> rusqlite::Result<Option<(Lead, Vec<Interest>)>> {
    let Some(record) = view::find(conn, lead_id)? else {
        return Ok(None);
    };
    let fields = match record.partner_fields() {
        Value::Object(fields) => fields,
        _ => Map::new(),
    };
    let interests = record
        .requests
        .into_iter()
        .filter(|r| r.trigger_auto_delivery)
        .map(|r| Interest {
            id: r.id,
            product_id: r.product_id,
            routing_ready: r.routing_ready,
            field_values: r.field_values,
        })
        .collect();
    let lead = Lead {
        id: record.id,
        workspace_id: record.workspace_id,
        container_id: record.container_id,
        quality_status: record.quality_status,
        quality_reasons: record.quality_reasons,
        duplicate_status: record.duplicate_status,
        fields,
    };
    Ok(Some((lead, interests)))
}
