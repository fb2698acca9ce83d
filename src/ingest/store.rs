//! The ingest writer job: idempotency, the duplicate rule and the inserts of a request's
//! leads, all in one job on the writer thread.
//!
//! Owns the SQL that writes leads, their raw bodies and their lead requests. Everything
//! that needs no database (parsing, validation, normalisation, quality, serialising the
//! JSON columns) happens before, on the request's task, so the job holds the writer for
//! as short a time as possible. Because the writer runs jobs one after another, the
//! idempotency and duplicate checks see every earlier lead, also one from the same batch
//! or from a request that arrived in the same millisecond.

use rusqlite::{Connection, OptionalExtension, params};

use super::IngestError;
use super::dedupe::{self, DuplicateStatus};
use super::model::LeadInput;
use super::normalize;
use super::quality::{Quality, QualityStatus};
use super::result::{IngestFacts, ItemFacts, Status};
use crate::config::container::ContainerKind;
use crate::config::source::{DedupeRule, DedupeScope, Source};

/// Where a request's leads go: the source, its container and workspace, and its duplicate
/// rule, as read at the start of the request.
#[derive(Debug, Clone)]
pub struct Target {
    pub source_id: String,
    pub container_id: String,
    pub container_kind: ContainerKind,
    pub workspace_id: String,
    pub dedupe: DedupeRule,
}

impl Target {
    pub fn of(source: &Source) -> Target {
        Target {
            source_id: source.id.clone(),
            container_id: source.container_id.clone(),
            container_kind: source.container_kind,
            workspace_id: source.workspace_id.clone(),
            dedupe: source.dedupe.clone(),
        }
    }

    fn scope_name(&self) -> &'static str {
        match self.dedupe.scope {
            DedupeScope::Container => self.container_kind.as_str(),
            DedupeScope::Workspace => "workspace",
        }
    }
}

/// A valid lead with everything computed that needs no database.
#[derive(Debug)]
pub struct PreparedLead {
    pub input: LeadInput,
    /// The lead's JSON as received.
    pub raw: String,
    pub email_key: Option<String>,
    pub phone_key: Option<String>,
    pub quality: Quality,
    additional_json: String,
    metadata_json: Option<String>,
    reasons_json: String,
    field_values_json: Vec<String>,
}

impl PreparedLead {
    pub fn new(input: LeadInput, raw: String, quality: Quality) -> PreparedLead {
        let email_key = input.person.email.as_deref().and_then(normalize::email_key);
        let phone_key = input.person.phone.as_deref().and_then(normalize::phone_key);
        PreparedLead {
            additional_json: json_text(&input.additional),
            metadata_json: input.capture.metadata.as_ref().map(json_text),
            reasons_json: json_text(&quality.reasons),
            field_values_json: input
                .interests
                .iter()
                .map(|interest| json_text(&interest.field_values))
                .collect(),
            input,
            raw,
            email_key,
            phone_key,
            quality,
        }
    }
}

/// The text of a JSON column.
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("maps and lists of JSON values always serialise")
}

/// A lead request just stored.
#[derive(Debug, Clone)]
pub struct StoredRequest {
    pub id: String,
    pub product_id: String,
    pub routing_ready: Option<bool>,
    pub trigger_auto_delivery: bool,
}

/// A lead just stored, with what a later step in the same writer job (auto-delivery,
/// DESIGN.md section 5) needs to decide about it.
#[derive(Debug, Clone)]
pub struct StoredLead {
    pub lead_id: String,
    pub workspace_id: String,
    pub container_id: String,
    pub container_kind: ContainerKind,
    pub quality: QualityStatus,
    pub duplicate: DuplicateStatus,
    pub requests: Vec<StoredRequest>,
    pub created_at: i64,
}

/// What happened to one prepared lead.
#[derive(Debug)]
pub enum Outcome {
    /// Stored: accepted, or a duplicate kept for review. `item` is the answer, also saved
    /// in `leads.result`.
    Created {
        item: ItemFacts,
        lead: StoredLead,
        /// Transactions auto-delivery created for it; the outbox is woken when any were.
        auto_delivered: usize,
    },
    /// The source has a lead with this externalId already: its first answer (`result`).
    Replay {
        lead_id: String,
        result: Option<String>,
    },
    /// A duplicate under a rule with action `reject`: nothing was stored.
    DuplicateRejected { item: ItemFacts },
}

const FIND_EXTERNAL: &str =
    "SELECT id, result FROM leads WHERE source_id = ?1 AND external_id = ?2";

const INSERT_LEAD: &str = "INSERT INTO leads (id, source_id, container_id, workspace_id, \
    external_id, first_name, last_name, email, phone, street, house_number, postal_code, city, \
    country, consent_status, legal_basis, consent_captured_at, consent_text_version, \
    captured_by_external_id, captured_by_name, captured_by_team, captured_at, capture_method, \
    capture_metadata, additional, email_norm, phone_norm, quality_status, quality_reasons, \
    duplicate_status, duplicate_match, result, created_at) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
    ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33)";

const INSERT_BODY: &str = "INSERT INTO lead_bodies (lead_id, body) VALUES (?1, ?2)";

const INSERT_REQUEST: &str = "INSERT INTO lead_requests (id, lead_id, position, product_id, \
    routing_ready, trigger_auto_delivery, field_values, created_at, request_id) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// Stores `leads` in order; one outcome per lead. Runs as (part of) one writer job: an
/// error rolls back the whole job, so a request's leads are stored all or none.
pub fn store_all(
    conn: &Connection,
    target: &Target,
    leads: &[PreparedLead],
    now: i64,
) -> Result<Vec<Outcome>, IngestError> {
    let mut outcomes = Vec::with_capacity(leads.len());
    for lead in leads {
        outcomes.push(store_one(conn, target, lead, now)?);
    }
    Ok(outcomes)
}

fn store_one(
    conn: &Connection,
    target: &Target,
    lead: &PreparedLead,
    now: i64,
) -> Result<Outcome, IngestError> {
    let external_id = lead.input.external_id.as_deref();
    if let Some(external_id) = external_id {
        let found = conn
            .prepare_cached(FIND_EXTERNAL)?
            .query_row(params![target.source_id, external_id], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
            })
            .optional()?;
        if let Some((lead_id, result)) = found {
            return Ok(Outcome::Replay { lead_id, result });
        }
    }

    let duplicate_match = if target.dedupe.fields.is_empty() {
        None
    } else {
        let scope = dedupe::Scope {
            container_id: &target.container_id,
            workspace_id: &target.workspace_id,
            name: target.scope_name(),
        };
        dedupe::find_match(
            conn,
            &target.dedupe,
            &scope,
            lead.email_key.as_deref(),
            lead.phone_key.as_deref(),
            now,
        )?
    };
    let duplicate_status = match duplicate_match {
        Some(_) => DuplicateStatus::for_match(target.dedupe.action),
        None => DuplicateStatus::Unique,
    };
    let ingest = IngestFacts {
        quality: lead.quality.clone(),
        duplicate_status,
        duplicate_match,
    };
    if duplicate_status == DuplicateStatus::Rejected {
        return Ok(Outcome::DuplicateRejected {
            item: ItemFacts {
                status: Status::Rejected,
                lead_id: None,
                external_id: external_id.map(str::to_string),
                request_ids: Vec::new(),
                ingest: Some(ingest),
                errors: Vec::new(),
                auto_delivery: None,
            },
        });
    }

    let lead_id = crate::ids::new("lead");
    let item = ItemFacts {
        status: match duplicate_status {
            DuplicateStatus::Unique => Status::Accepted,
            _ => Status::Duplicate,
        },
        lead_id: Some(lead_id.clone()),
        external_id: external_id.map(str::to_string),
        request_ids: lead
            .input
            .interests
            .iter()
            .map(|_| crate::ids::new("lreq"))
            .collect(),
        ingest: Some(ingest),
        errors: Vec::new(),
        auto_delivery: None,
    };
    insert_lead(conn, target, lead, &lead_id, &item, now)?;
    conn.prepare_cached(INSERT_BODY)?
        .execute(params![lead_id, lead.raw])?;
    let mut requests = Vec::with_capacity(item.request_ids.len());
    // The writer runs a request's job with the request's X-Request-Id current
    // (`request_id::current`); it is kept on each lead request. None for leads that came
    // without an HTTP request.
    let http_request_id = crate::request_id::current();
    let mut insert_request = conn.prepare_cached(INSERT_REQUEST)?;
    for (position, ((interest, request_id), field_values)) in lead
        .input
        .interests
        .iter()
        .zip(&item.request_ids)
        .zip(&lead.field_values_json)
        .enumerate()
    {
        insert_request.execute(params![
            request_id,
            lead_id,
            position as i64,
            interest.product_id,
            interest.routing_ready,
            interest.trigger_auto_delivery,
            field_values,
            now,
            http_request_id.as_deref(),
        ])?;
        requests.push(StoredRequest {
            id: request_id.clone(),
            product_id: interest.product_id.clone(),
            routing_ready: interest.routing_ready,
            trigger_auto_delivery: interest.trigger_auto_delivery,
        });
    }
    let stored = StoredLead {
        lead_id,
        workspace_id: target.workspace_id.clone(),
        container_id: target.container_id.clone(),
        container_kind: target.container_kind,
        quality: lead.quality.status,
        duplicate: duplicate_status,
        requests,
        created_at: now,
    };
    // Auto-delivery (DESIGN.md section 5) runs here, inside this same writer job, so that
    // caps and balances cannot race; its decision joins the answer saved for replays.
    let mut item = item;
    let mut auto_delivered = 0;
    if stored.requests.iter().any(|r| r.trigger_auto_delivery)
        && let Some(auto) = crate::autodelivery::run_for_lead(conn, &stored.lead_id, now)?
    {
        auto_delivered = auto.delivered();
        item.auto_delivery = Some(auto.to_json());
        save_result(conn, target, &stored.lead_id, &item)?;
    }
    Ok(Outcome::Created {
        item,
        lead: stored,
        auto_delivered,
    })
}

fn insert_lead(
    conn: &Connection,
    target: &Target,
    lead: &PreparedLead,
    lead_id: &str,
    item: &ItemFacts,
    now: i64,
) -> Result<(), IngestError> {
    let ingest = item.ingest.as_ref();
    let duplicate_status = ingest.map_or(DuplicateStatus::Unique, |i| i.duplicate_status);
    let duplicate_match = ingest
        .and_then(|i| i.duplicate_match.as_ref())
        .map(|m| m.to_json().to_string());
    let input = &lead.input;
    let person = &input.person;
    let consent = &input.consent;
    let capture = &input.capture;
    conn.prepare_cached(INSERT_LEAD)?.execute(params![
        lead_id,
        target.source_id,
        target.container_id,
        target.workspace_id,
        input.external_id,
        person.first_name,
        person.last_name,
        person.email,
        person.phone,
        person.street,
        person.house_number,
        person.postal_code,
        person.city,
        person.country,
        consent.status,
        consent.legal_basis,
        consent.captured_at,
        consent.text_version,
        capture.captured_by_external_id,
        capture.captured_by_name,
        capture.captured_by_team,
        capture.captured_at,
        capture.capture_method,
        lead.metadata_json,
        lead.additional_json,
        lead.email_key,
        lead.phone_key,
        lead.quality.status.as_str(),
        lead.reasons_json,
        duplicate_status.as_str(),
        duplicate_match,
        item.to_text(target),
        now,
    ])?;
    Ok(())
}

/// Saves `item` as the lead's answer, so that a replay answers the same (for a step that
/// adds to the answer after the lead was inserted).
pub fn save_result(
    conn: &Connection,
    target: &Target,
    lead_id: &str,
    item: &ItemFacts,
) -> Result<(), IngestError> {
    conn.prepare_cached("UPDATE leads SET result = ?2 WHERE id = ?1")?
        .execute(params![lead_id, item.to_text(target)])?;
    Ok(())
}
