//! The stored lead and interests as auto-delivery sees them: the columns the evaluator,
//! the filters and the step checks read, loaded in one query each.
//!
//! Owns reading those rows and naming a lead's fields the way partners and filters do
//! (`postalCode`, `fieldValues.roof`, an additional property). It does not own how a lead
//! is stored (ingest) or shown (`lead show`).

use std::borrow::Cow;

use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};

/// The lead fields partners send, by their interface name, in the order of the columns
/// [`load`] selects after the fixed ones.
const NAMED_FIELDS: [&str; 19] = [
    "externalId",
    "firstName",
    "lastName",
    "email",
    "phone",
    "street",
    "houseNumber",
    "postalCode",
    "city",
    "country",
    "consentStatus",
    "legalBasis",
    "consentCapturedAt",
    "consentTextVersion",
    "capturedByExternalId",
    "capturedByName",
    "capturedByTeam",
    "capturedAt",
    "captureMethod",
];

#[derive(Debug, Clone)]
pub struct Lead {
    pub id: String,
    pub workspace_id: String,
    pub container_id: String,
    pub quality_status: String,
    pub quality_reasons: Vec<String>,
    pub duplicate_status: String,
    /// Values of [`NAMED_FIELDS`], same order.
    named: [Option<String>; 19],
    /// The Lead's properties beyond the interface's.
    additional: Map<String, Value>,
}

impl Lead {
    /// A lead field by its interface name, or an additional property (a string, or a
    /// number or boolean as its JSON text). `None` when absent.
    pub fn field(&self, name: &str) -> Option<Cow<'_, str>> {
        if let Some(index) = NAMED_FIELDS.iter().position(|n| *n == name) {
            return self.named[index].as_deref().map(Cow::Borrowed);
        }
        match self.additional.get(name)? {
            Value::String(s) => Some(Cow::Borrowed(s)),
            Value::Number(n) => Some(Cow::Owned(n.to_string())),
            Value::Bool(b) => Some(Cow::Owned(b.to_string())),
            _ => None,
        }
    }

    /// A named field, trimmed, when it holds more than blanks.
    pub fn text(&self, name: &str) -> Option<Cow<'_, str>> {
        match self.field(name)? {
            Cow::Borrowed(s) if !s.trim().is_empty() => Some(Cow::Borrowed(s.trim())),
            Cow::Owned(s) if !s.trim().is_empty() => Some(Cow::Owned(s.trim().to_string())),
            _ => None,
        }
    }
}

/// Loads the lead `lead_id`; `None` when there is none.
pub fn load(conn: &Connection, lead_id: &str) -> rusqlite::Result<Option<Lead>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, workspace_id, container_id, quality_status, quality_reasons,
                duplicate_status, additional,
                external_id, first_name, last_name, email, phone, street, house_number,
                postal_code, city, country, consent_status, legal_basis, consent_captured_at,
                consent_text_version, captured_by_external_id, captured_by_name,
                captured_by_team, captured_at, capture_method
         FROM leads WHERE id = ?1",
    )?;
    stmt.query_row([lead_id], |row| {
        let reasons: String = row.get(4)?;
        let additional: String = row.get(6)?;
        let mut named: [Option<String>; 19] = Default::default();
        for (index, value) in named.iter_mut().enumerate() {
            *value = row.get(7 + index)?;
        }
        Ok(Lead {
            id: row.get(0)?,
            workspace_id: row.get(1)?,
            container_id: row.get(2)?,
            quality_status: row.get(3)?,
            // Both are written by ingest as JSON; a row edited by hand into something else
            // reads as empty rather than stopping every later lead's evaluation.
            quality_reasons: serde_json::from_str(&reasons).unwrap_or_default(),
            duplicate_status: row.get(5)?,
            named,
            additional: serde_json::from_str(&additional).unwrap_or_default(),
        })
    })
    .optional()
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

/// The lead's interests with `triggerAutoDelivery` true, in the order the partner sent them.
pub fn interests_to_evaluate(conn: &Connection, lead_id: &str) -> rusqlite::Result<Vec<Interest>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, product_id, routing_ready, field_values FROM lead_requests
         WHERE lead_id = ?1 AND trigger_auto_delivery = 1
         ORDER BY position",
    )?;
    let rows = stmt.query_map([lead_id], |row| {
        let field_values: String = row.get(3)?;
        Ok(Interest {
            id: row.get(0)?,
            product_id: row.get(1)?,
            routing_ready: row.get(2)?,
            field_values: serde_json::from_str(&field_values).unwrap_or_default(),
        })
    })?;
    rows.collect()
}

#[cfg(test)]
pub(crate) mod testing {
    //! Leads built in memory for the unit tests of the evaluator and the filters.

    use super::*;

    /// A lead with `fields` set by interface name (unknown names become additional
    /// properties), quality ok and unique.
    pub fn lead(fields: &[(&str, &str)]) -> Lead {
        let mut named: [Option<String>; 19] = Default::default();
        let mut additional = Map::new();
        for (name, value) in fields {
            match NAMED_FIELDS.iter().position(|n| n == name) {
                Some(index) => named[index] = Some(value.to_string()),
                None => {
                    additional.insert(name.to_string(), Value::String(value.to_string()));
                }
            }
        }
        Lead {
            id: "lead_test".into(),
            workspace_id: "ws".into(),
            container_id: "web".into(),
            quality_status: "ok".into(),
            quality_reasons: Vec::new(),
            duplicate_status: "unique".into(),
            named,
            additional,
        }
    }

    pub fn interest(answers: &[(&str, &str)]) -> Interest {
        Interest {
            id: "lreq_test".into(),
            product_id: "solar".into(),
            routing_ready: None,
            field_values: answers
                .iter()
                .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                .collect(),
        }
    }
}
