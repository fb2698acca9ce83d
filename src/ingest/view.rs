//! Reading stored leads back: one lead with its requests, or a list, as the operator sees
//! them (`leadrelay lead show`, `lead list`) and as buyers get them (`partner_fields`).
//!
//! Owns the read SQL of leads and lead requests. Writing them is `store`'s.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Map, Value, json};

use super::dedupe::DuplicateStatus;
use super::model::{Capture, Consent, Person};
use super::quality::QualityStatus;
use super::status::{LeadStatus, RequestStatus};
use crate::config::container::ContainerKind;

/// A stored lead with its requests.
#[derive(Debug, Clone)]
pub struct LeadRecord {
    pub id: String,
    pub source_id: String,
    pub container_id: String,
    pub container_kind: ContainerKind,
    pub workspace_id: String,
    pub external_id: Option<String>,
    pub person: Person,
    pub consent: Consent,
    pub capture: Capture,
    pub additional: Map<String, Value>,
    pub quality_status: QualityStatus,
    pub quality_reasons: Vec<String>,
    pub duplicate_status: DuplicateStatus,
    pub duplicate_match: Option<Value>,
    pub status: LeadStatus,
    pub created_at: i64,
    pub requests: Vec<RequestRecord>,
}

/// A stored lead request with its product.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub id: String,
    pub position: i64,
    pub product_id: String,
    pub product_slug: String,
    pub product_name: String,
    pub routing_ready: Option<bool>,
    pub trigger_auto_delivery: bool,
    pub field_values: Map<String, Value>,
    pub status: RequestStatus,
    /// The auto-delivery decision, when one was made.
    pub decision: Option<Value>,
    pub created_at: i64,
}

const LEAD_COLUMNS: &str = "l.id, l.source_id, l.container_id, c.kind, l.workspace_id, \
    l.external_id, l.first_name, l.last_name, l.email, l.phone, l.street, l.house_number, \
    l.postal_code, l.city, l.country, l.consent_status, l.legal_basis, l.consent_captured_at, \
    l.consent_text_version, l.captured_by_external_id, l.captured_by_name, l.captured_by_team, \
    l.captured_at, l.capture_method, l.capture_metadata, l.additional, l.quality_status, \
    l.quality_reasons, l.duplicate_status, l.duplicate_match, l.status, l.created_at";

fn json_column<T: serde::de::DeserializeOwned>(text: Option<String>) -> Option<T> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

fn lead_from_row(row: &Row) -> rusqlite::Result<LeadRecord> {
    Ok(LeadRecord {
        id: row.get(0)?,
        source_id: row.get(1)?,
        container_id: row.get(2)?,
        container_kind: row.get(3)?,
        workspace_id: row.get(4)?,
        external_id: row.get(5)?,
        person: Person {
            first_name: row.get(6)?,
            last_name: row.get(7)?,
            email: row.get(8)?,
            phone: row.get(9)?,
            street: row.get(10)?,
            house_number: row.get(11)?,
            postal_code: row.get(12)?,
            city: row.get(13)?,
            country: row.get(14)?,
        },
        consent: Consent {
            status: row.get(15)?,
            legal_basis: row.get(16)?,
            captured_at: row.get(17)?,
            text_version: row.get(18)?,
        },
        capture: Capture {
            captured_by_external_id: row.get(19)?,
            captured_by_name: row.get(20)?,
            captured_by_team: row.get(21)?,
            captured_at: row.get(22)?,
            capture_method: row.get(23)?,
            metadata: json_column(row.get(24)?),
        },
        additional: json_column(row.get(25)?).unwrap_or_default(),
        quality_status: row.get(26)?,
        quality_reasons: json_column(row.get(27)?).unwrap_or_default(),
        duplicate_status: row.get(28)?,
        duplicate_match: json_column(row.get(29)?),
        status: row.get(30)?,
        created_at: row.get(31)?,
        requests: Vec::new(),
    })
}

/// The lead `id` with its requests, or `None`.
pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<LeadRecord>> {
    let Some(mut lead) = find_without_requests(conn, id)? else {
        return Ok(None);
    };
    lead.requests = requests_of(conn, id)?;
    Ok(Some(lead))
}

/// The lead alone (`requests` left empty), for callers that need only its fields, such as
/// the `lead.delivered` event written on the writer thread.
pub fn find_without_requests(conn: &Connection, id: &str) -> rusqlite::Result<Option<LeadRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {LEAD_COLUMNS} FROM leads l JOIN containers c ON c.id = l.container_id
         WHERE l.id = ?1"
    ))?
    .query_row([id], lead_from_row)
    .optional()
}

/// The lead's requests with their products, in the order they were given.
pub fn requests_of(conn: &Connection, lead_id: &str) -> rusqlite::Result<Vec<RequestRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT r.id, r.position, r.product_id, p.slug, p.name, r.routing_ready,
                r.trigger_auto_delivery, r.field_values, r.status, r.decision, r.created_at
         FROM lead_requests r JOIN products p ON p.id = r.product_id
         WHERE r.lead_id = ?1 ORDER BY r.position",
    )?;
    stmt.query_map([lead_id], |row| {
        Ok(RequestRecord {
            id: row.get(0)?,
            position: row.get(1)?,
            product_id: row.get(2)?,
            product_slug: row.get(3)?,
            product_name: row.get(4)?,
            routing_ready: row.get(5)?,
            trigger_auto_delivery: row.get(6)?,
            field_values: json_column(row.get(7)?).unwrap_or_default(),
            status: row.get(8)?,
            decision: json_column(row.get(9)?),
            created_at: row.get(10)?,
        })
    })?
    .collect()
}

/// The raw body the lead came in (the batch item for a batch), as received.
pub fn raw_body(conn: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT body FROM lead_bodies WHERE lead_id = ?1",
        [id],
        |r| r.get(0),
    )
    .optional()
}

/// Newest leads first, of one source or of all, at most `limit`.
pub fn list(
    conn: &Connection,
    source_id: Option<&str>,
    limit: usize,
) -> rusqlite::Result<Vec<LeadRecord>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // Rows are inserted by the one writer in creation order, so the rowid breaks ties of
    // the same millisecond; by source, the (source_id, created_at) index (which ends in the
    // rowid) gives the order, without one the table itself does.
    let (filter, order) = match source_id {
        Some(_) => ("WHERE l.source_id = ?1", "l.created_at DESC, l.rowid DESC"),
        None => ("WHERE ?1 IS NULL", "l.rowid DESC"),
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT {LEAD_COLUMNS} FROM leads l JOIN containers c ON c.id = l.container_id
         {filter} ORDER BY {order} LIMIT ?2"
    ))?;
    let mut leads: Vec<LeadRecord> = stmt
        .query_map(params![source_id, limit], lead_from_row)?
        .collect::<Result<_, _>>()?;
    for lead in &mut leads {
        lead.requests = requests_of(conn, &lead.id)?;
    }
    Ok(leads)
}

fn insert_some(map: &mut Map<String, Value>, key: &str, value: &Option<String>) {
    if let Some(value) = value {
        map.insert(key.into(), value.as_str().into());
    }
}

impl LeadRecord {
    /// The person, consent, capture and additional properties as native Lead fields
    /// (absent fields and null additional properties left out): what a buyer gets as
    /// `lead`. A validated field always wins over an additional property of its name.
    pub fn partner_fields(&self) -> Value {
        let mut fields = Map::new();
        insert_some(&mut fields, "externalId", &self.external_id);
        fields.insert("firstName".into(), self.person.first_name.as_str().into());
        fields.insert("lastName".into(), self.person.last_name.as_str().into());
        for (key, value) in self.person_pairs() {
            insert_some(&mut fields, key, value);
        }
        for (key, value) in self.consent_pairs() {
            insert_some(&mut fields, key, value);
        }
        for (key, value) in self.capture_pairs() {
            insert_some(&mut fields, key, value);
        }
        if let Some(metadata) = &self.capture.metadata {
            fields.insert("capture".into(), json!({ "metadata": metadata }));
        }
        for (key, value) in &self.additional {
            if !value.is_null() {
                fields.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        Value::Object(fields)
    }

    /// The optional person fields in interface order (the names come before them).
    fn person_pairs(&self) -> [(&'static str, &Option<String>); 7] {
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

    fn consent_pairs(&self) -> [(&'static str, &Option<String>); 4] {
        let c = &self.consent;
        [
            ("consentStatus", &c.status),
            ("legalBasis", &c.legal_basis),
            ("consentCapturedAt", &c.captured_at),
            ("consentTextVersion", &c.text_version),
        ]
    }

    fn capture_pairs(&self) -> [(&'static str, &Option<String>); 5] {
        let c = &self.capture;
        [
            ("capturedByExternalId", &c.captured_by_external_id),
            ("capturedByName", &c.captured_by_name),
            ("capturedByTeam", &c.captured_by_team),
            ("capturedAt", &c.captured_at),
            ("captureMethod", &c.capture_method),
        ]
    }

    /// Everything stored about the lead, for `leadrelay lead show`.
    pub fn to_json(&self) -> Value {
        let mut person = Map::new();
        person.insert("firstName".into(), self.person.first_name.as_str().into());
        person.insert("lastName".into(), self.person.last_name.as_str().into());
        for (key, value) in self.person_pairs() {
            person.insert(key.into(), value.clone().into());
        }
        let consent: Map<String, Value> = self
            .consent_pairs()
            .into_iter()
            .map(|(key, value)| {
                let key = match key {
                    "consentStatus" => "status",
                    "consentCapturedAt" => "capturedAt",
                    "consentTextVersion" => "textVersion",
                    other => other,
                };
                (key.to_string(), value.clone().into())
            })
            .collect();
        let mut capture: Map<String, Value> = self
            .capture_pairs()
            .into_iter()
            .map(|(key, value)| (key.to_string(), value.clone().into()))
            .collect();
        capture.insert(
            "metadata".into(),
            self.capture
                .metadata
                .clone()
                .map_or(Value::Null, Value::Object),
        );
        let requests: Vec<Value> = self.requests.iter().map(RequestRecord::to_json).collect();
        json!({
            "id": self.id,
            "sourceId": self.source_id,
            self.container_kind.id_key(): self.container_id,
            "workspaceId": self.workspace_id,
            "externalId": self.external_id,
            "status": self.status.as_str(),
            "person": person,
            "consent": consent,
            "capture": capture,
            "additionalProperties": self.additional,
            "qualityStatus": self.quality_status.as_str(),
            "qualityReasons": self.quality_reasons,
            "duplicateStatus": self.duplicate_status.as_str(),
            "duplicateMatch": self.duplicate_match,
            "requests": requests,
            "createdAt": crate::clock::iso(self.created_at),
        })
    }

    /// One line's worth of the lead, for `leadrelay lead list`.
    pub fn summary_json(&self) -> Value {
        json!({
            "id": self.id,
            "sourceId": self.source_id,
            self.container_kind.id_key(): self.container_id,
            "externalId": self.external_id,
            "firstName": self.person.first_name,
            "lastName": self.person.last_name,
            "email": self.person.email,
            "phone": self.person.phone,
            "qualityStatus": self.quality_status.as_str(),
            "duplicateStatus": self.duplicate_status.as_str(),
            "status": self.status.as_str(),
            "products": self.requests.iter().map(|r| r.product_slug.as_str()).collect::<Vec<_>>(),
            "requestIds": self.requests.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            "createdAt": crate::clock::iso(self.created_at),
        })
    }
}

impl RequestRecord {
    pub fn to_json(&self) -> Value {
        let mut request = json!({
            "id": self.id,
            "position": self.position,
            "productId": self.product_id,
            "productSlug": self.product_slug,
            "productName": self.product_name,
            "routingReady": self.routing_ready,
            "triggerAutoDelivery": self.trigger_auto_delivery,
            "fieldValues": self.field_values,
            "status": self.status.as_str(),
            "createdAt": crate::clock::iso(self.created_at),
        });
        if let Some(decision) = &self.decision {
            request["decision"] = decision.clone();
        }
        request
    }
}
