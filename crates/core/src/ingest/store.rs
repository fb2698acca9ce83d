//! Ingest's steps of the writer job that accepts leads (`accept::job`): idempotency
//! ([`replay`]), the duplicate rule ([`judge`]) and the inserts of a lead and its lead
//! requests ([`insert`]), each returning its facts to the job, which composes them with
//! a post's ping, auto-delivery, the bids and the reports.
//!
//! Owns the SQL that writes leads, their raw bodies and their lead requests. Everything
//! that needs no database (parsing, validation, normalisation, quality, serialising the
//! JSON columns) happens before, on the request's task ([`PreparedLead`]), so the job
//! holds the writer for as short a time as possible. Because the writer runs jobs one
//! after another, the idempotency and duplicate checks see every earlier lead, also one
//! from the same batch or from a request that arrived in the same millisecond. The lead
//! just inserted is handed on as stored ([`stored_lead`]), never read back.

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};

use super::IngestError;
use super::body;
use super::dedupe::DuplicateMatch;
use super::dedupe::{self, DuplicateStatus};
use super::model::{Lead, StoredLead, StoredRequest};
use super::normalize;
use super::quality::Quality;
use super::status::{LeadStatus, RequestStatus};
use crate::config::source::{DedupeScope, Source};
use crate::ids::{LeadId, LeadRequestId};

/// The duplicate rule's scope as shown in `duplicateMatch`: the source's container kind or
/// `workspace`.
fn scope_name(source: &Source) -> &'static str {
    match source.dedupe.scope {
        DedupeScope::Container => source.container_kind.as_str(),
        DedupeScope::Workspace => "workspace",
    }
}

/// A valid lead with everything computed that needs no database: the writer job's input.
/// It exists apart from [`Lead`] so that the job only binds ready values (contact keys,
/// quality, the text of the JSON columns, the compressed body) and spends no writer time
/// serialising.
#[derive(Debug)]
pub struct PreparedLead {
    pub lead: Lead,
    /// The lead's JSON as received, as stored (`body::encode`).
    body: Vec<u8>,
    pub email_key: Option<String>,
    pub phone_key: Option<String>,
    /// The keys' hashes as stored (`normalize::key_hash`).
    email_hash: Option<i64>,
    phone_hash: Option<i64>,
    pub quality: Quality,
    additional_json: String,
    metadata_json: Option<String>,
    reasons_json: String,
    field_values_json: Vec<String>,
    /// The outcomes of the workspace's check steps (DESIGN.md section 22), run before the
    /// job; empty when it has none.
    pub(crate) checks: Vec<crate::checks::CheckRecord>,
}

impl PreparedLead {
    /// The email's duplicate key with its hash.
    pub(crate) fn email(&self) -> Option<dedupe::Contact<'_>> {
        Some(dedupe::Contact {
            key: self.email_key.as_deref()?,
            hash: self.email_hash?,
        })
    }

    /// The phone's duplicate key with its hash.
    pub(crate) fn phone(&self) -> Option<dedupe::Contact<'_>> {
        Some(dedupe::Contact {
            key: self.phone_key.as_deref()?,
            hash: self.phone_hash?,
        })
    }

    /// `raw` is the lead's JSON as received.
    pub fn new(lead: Lead, raw: String, quality: Quality) -> PreparedLead {
        let fields = &lead.fields;
        let email_key = fields
            .person
            .email
            .as_deref()
            .and_then(normalize::email_key);
        let phone_key = fields
            .person
            .phone
            .as_deref()
            .and_then(normalize::phone_key);
        let additional_json = json_text(&fields.additional);
        let metadata_json = fields.capture.metadata.as_ref().map(json_text);
        let body = body::encode(
            &raw,
            &body::Columns::of(fields, &additional_json, metadata_json.as_deref()),
        );
        PreparedLead {
            additional_json,
            metadata_json,
            reasons_json: json_text(&quality.reasons),
            field_values_json: lead
                .interests
                .iter()
                .map(|interest| json_text(&interest.field_values))
                .collect(),
            body,
            lead,
            email_hash: email_key.as_deref().map(normalize::key_hash),
            phone_hash: phone_key.as_deref().map(normalize::key_hash),
            email_key,
            phone_key,
            quality,
            checks: Vec::new(),
        }
    }
}

impl PreparedLead {
    /// Marks the lead as one whose contact is suppressed, under the workspace's `flag`
    /// action: quality `invalid` with reason `suppressed`, so that it is stored but never
    /// delivered (auto-delivery stops at quality, delivery refuses the reason).
    pub(crate) fn flag_suppressed(&mut self) {
        self.quality.status = super::quality::QualityStatus::Invalid;
        if !self
            .quality
            .reasons
            .iter()
            .any(|r| r == crate::suppression::SUPPRESSED)
        {
            self.quality
                .reasons
                .push(crate::suppression::SUPPRESSED.into());
        }
        self.reasons_json = json_text(&self.quality.reasons);
    }

    /// Records what the check steps decided (DESIGN.md section 22): their outcomes, and
    /// each flag (`check_failed:NAME`, `check_error:NAME`) as a quality reason that makes
    /// the lead `invalid`, so that auto-delivery never takes it.
    pub(crate) fn set_checks(
        &mut self,
        records: Vec<crate::checks::CheckRecord>,
        flags: Vec<String>,
    ) {
        self.checks = records;
        if flags.is_empty() {
            return;
        }
        self.quality.status = super::quality::QualityStatus::Invalid;
        self.quality
            .reasons
            .extend(flags.into_iter().map(Into::into));
        self.reasons_json = json_text(&self.quality.reasons);
    }
}

/// The text of a JSON column.
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("maps and lists of JSON values always serialise")
}

/// What ingest found out about a lead: the item's `ingest` object.
#[derive(Debug, Clone)]
pub struct IngestFacts {
    pub quality: Quality,
    pub duplicate_status: DuplicateStatus,
    pub duplicate_match: Option<DuplicateMatch>,
}

/// A stored lead as an idempotent replay answers it: the columns its first answer was made
/// of, as stored (status values as text, JSON columns as their text).
#[derive(Debug)]
pub struct StoredFacts {
    pub lead_id: LeadId,
    pub external_id: String,
    pub quality_status: String,
    /// JSON array of reason codes.
    pub quality_reasons: String,
    pub duplicate_status: String,
    /// JSON object, the `duplicateMatch`.
    pub duplicate_match: Option<String>,
    /// In the order the partner gave them.
    pub requests: Vec<StoredRequestFacts>,
}

#[derive(Debug)]
pub struct StoredRequestFacts {
    pub id: LeadRequestId,
    pub trigger_auto_delivery: bool,
    /// Auto-delivery's stored decision (the operator's view), when one was made.
    pub decision: Option<String>,
}

const FIND_EXTERNAL: &str = "SELECT id, quality_status, quality_reasons, duplicate_status, \
    duplicate_match FROM leads WHERE source_id = ?1 AND external_id = ?2";

const FIND_REQUESTS: &str = "SELECT id, trigger_auto_delivery, decision FROM lead_requests \
    WHERE lead_id = ?1 ORDER BY position";

const INSERT_LEAD: &str = "INSERT INTO leads (id, source_id, container_id, workspace_id, \
    external_id, first_name, last_name, email, phone, street, house_number, postal_code, city, \
    country, consent_status, legal_basis, consent_captured_at, consent_text_version, \
    captured_by_external_id, captured_by_name, captured_by_team, captured_at, capture_method, \
    capture_metadata, additional, email_key, phone_key, quality_status, quality_reasons, \
    duplicate_status, duplicate_match, body, created_at, checks) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
    ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34)";

const INSERT_REQUEST: &str = "INSERT INTO lead_requests (id, lead_id, position, product_id, \
    routing_ready, trigger_auto_delivery, field_values, created_at, request_id) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// The statements every lead of a job runs, taken once per job rather than once per lead
/// (in batches of 100 rusqlite's cache, which hashes the statement's text at every take and
/// return, cost the writer 14,500 instructions per lead, then 2,650; callgrind, BENCHMARKS.md
/// "Plain ingest"). The writer's own table (`db::statements`) makes a take cheap, but not free.
pub(crate) struct Statements<'c> {
    find_external: crate::db::KeptStatement<'c>,
    insert_lead: crate::db::KeptStatement<'c>,
}

impl<'c> Statements<'c> {
    pub(crate) fn new(conn: &'c Connection) -> rusqlite::Result<Statements<'c>> {
        Ok(Statements {
            find_external: conn.prepare_kept(FIND_EXTERNAL)?,
            insert_lead: conn.prepare_kept(INSERT_LEAD)?,
        })
    }
}

/// The stored lead of `source` with `lead`'s externalId, when there is one: a replay,
/// answered as the first was from what this returns.
pub(crate) fn replay(
    conn: &Connection,
    statements: &mut Statements,
    source: &Source,
    lead: &PreparedLead,
) -> rusqlite::Result<Option<StoredFacts>> {
    match lead.lead.fields.external_id.as_deref() {
        Some(external_id) => {
            find_external(conn, &mut statements.find_external, &source.id, external_id)
        }
        None => Ok(None),
    }
}

/// What the duplicate rule of `source` makes of `lead` (with its quality): the lead's
/// `ingest` facts, which decide whether it is stored.
pub(crate) fn judge(
    conn: &Connection,
    source: &Source,
    lead: &PreparedLead,
    now: i64,
) -> rusqlite::Result<IngestFacts> {
    let duplicate_match = duplicate_match(conn, source, lead, now)?;
    let duplicate_status = match duplicate_match {
        Some(_) => DuplicateStatus::for_match(source.dedupe.action),
        None => DuplicateStatus::Unique,
    };
    Ok(IngestFacts {
        quality: lead.quality.clone(),
        duplicate_status,
        duplicate_match,
    })
}

/// [`judge`]'s facts for a lead that no earlier lead of its workspace shares an email or
/// phone key with ([`seen_before`] counted none): no duplicate rule can find one.
pub(crate) fn judged_unique(lead: &PreparedLead) -> IngestFacts {
    IngestFacts {
        quality: lead.quality.clone(),
        duplicate_status: DuplicateStatus::Unique,
        duplicate_match: None,
    }
}

/// How many earlier leads of `source`'s workspace share `lead`'s email or phone, counted up
/// to `cap`: read before the insert so that what follows it never reads the leads table.
pub(crate) fn seen_before(
    conn: &Connection,
    source: &Source,
    lead: &PreparedLead,
    cap: u32,
) -> rusqlite::Result<u32> {
    dedupe::seen_before(conn, &source.workspace_id, lead.email(), lead.phone(), cap)
}

/// A lead just inserted: its id and its requests' ids, by position.
pub(crate) struct Inserted {
    pub(crate) lead_id: LeadId,
    pub(crate) request_ids: Vec<LeadRequestId>,
}

/// Inserts `lead` of `source`, judged as `ingest`, and its lead requests; returns their
/// new ids.
pub(crate) fn insert(
    conn: &Connection,
    statements: &mut Statements,
    source: &Source,
    lead: &PreparedLead,
    ingest: &IngestFacts,
    now: i64,
) -> Result<Inserted, IngestError> {
    let lead_id = LeadId::generate();
    let request_ids: Vec<LeadRequestId> = lead
        .lead
        .interests
        .iter()
        .map(|_| LeadRequestId::generate())
        .collect();
    insert_lead(
        &mut statements.insert_lead,
        source,
        lead,
        lead_id,
        ingest,
        now,
    )?;
    // The writer runs a request's job with the request's X-Request-Id current
    // (`request_id::current`); it is kept on each lead request as its text (migration 33),
    // ours and a client's alike. None for leads that came without an HTTP request.
    let http_request_id = crate::request_id::current();
    // Taken from the statement cache only for a lead with interests (a plain lead has none).
    let mut insert_request = None;
    for (position, ((interest, request_id), field_values)) in lead
        .lead
        .interests
        .iter()
        .zip(&request_ids)
        .zip(&lead.field_values_json)
        .enumerate()
    {
        let insert_request = match &mut insert_request {
            Some(statement) => statement,
            None => insert_request.insert(conn.prepare_kept(INSERT_REQUEST)?),
        };
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
    }
    Ok(Inserted {
        lead_id,
        request_ids,
    })
}

/// The earlier lead `lead` duplicates under `source`'s duplicate rule, if any (none
/// without a rule). The writer job decides with it; the handler reads it before asking
/// for bids, since a duplicate is never auto-delivered.
pub(crate) fn duplicate_match(
    conn: &Connection,
    source: &Source,
    lead: &PreparedLead,
    now: i64,
) -> rusqlite::Result<Option<dedupe::DuplicateMatch>> {
    if source.dedupe.fields.is_empty() {
        return Ok(None);
    }
    let scope = dedupe::Scope {
        container_id: &source.container_id,
        workspace_id: &source.workspace_id,
        name: scope_name(source),
    };
    dedupe::find_match(
        conn,
        &source.dedupe,
        &scope,
        lead.email(),
        lead.phone(),
        now,
    )
}

/// Whether `lead` is a replay: `source` has a lead with its externalId already (the job
/// will answer it as the first was).
pub(crate) fn is_replay(
    conn: &Connection,
    source: &Source,
    lead: &PreparedLead,
) -> rusqlite::Result<bool> {
    let Some(external_id) = lead.lead.fields.external_id.as_deref() else {
        return Ok(false);
    };
    conn.prepare_kept(
        "SELECT EXISTS (SELECT 1 FROM leads WHERE source_id = ?1 AND external_id = ?2)",
    )?
    .query_row(params![source.id, external_id], |row| row.get(0))
}

/// A valid lead as it will be stored, before the writer job (no ids yet, no duplicate
/// found): what the bidders' eligibility is read for (`accept::bids`).
pub(crate) fn unstored_lead(source: &Source, lead: &PreparedLead, now: i64) -> StoredLead {
    // Placeholders that name no stored row.
    let request_ids: Vec<LeadRequestId> = (0..lead.lead.interests.len())
        .map(|_| LeadRequestId::generate())
        .collect();
    stored_lead(source, lead, LeadId::generate(), &request_ids, None, now)
}

/// The lead just inserted, as stored: the same values the inserts bound, handed on so that
/// nothing after the insert reads it back.
pub(crate) fn stored_lead(
    source: &Source,
    lead: &PreparedLead,
    id: LeadId,
    request_ids: &[LeadRequestId],
    ingest: Option<&IngestFacts>,
    now: i64,
) -> StoredLead {
    StoredLead {
        id,
        source_id: source.id.clone(),
        container_id: source.container_id.clone(),
        container_kind: source.container_kind,
        workspace_id: source.workspace_id.clone(),
        fields: lead.lead.fields.clone(),
        quality_status: lead.quality.status,
        quality_reasons: lead.quality.reasons.iter().map(|r| r.to_string()).collect(),
        duplicate_status: ingest.map_or(DuplicateStatus::Unique, |i| i.duplicate_status),
        duplicate_match: ingest
            .and_then(|i| i.duplicate_match.as_ref())
            .map(|m| m.to_json()),
        status: LeadStatus::Active,
        created_at: now,
        erased_at: None,
        checks: lead.checks.clone(),
        requests: lead
            .lead
            .interests
            .iter()
            .zip(request_ids)
            .enumerate()
            .map(|(position, (interest, id))| StoredRequest {
                id: *id,
                position: position as i64,
                interest: interest.clone(),
                status: RequestStatus::Open,
                decision: None,
                created_at: now,
            })
            .collect(),
    }
}

fn insert_lead(
    insert: &mut crate::db::KeptStatement,
    source: &Source,
    lead: &PreparedLead,
    lead_id: LeadId,
    ingest: &IngestFacts,
    now: i64,
) -> Result<(), IngestError> {
    let duplicate_status = ingest.duplicate_status;
    let duplicate_match = ingest
        .duplicate_match
        .as_ref()
        .map(|m| serde_json::to_string(&m.view()).expect("a duplicate match always serialises"));
    let fields = &lead.lead.fields;
    let person = &fields.person;
    let consent = &fields.consent;
    let capture = &fields.capture;
    insert.execute(params![
        lead_id,
        source.id,
        source.container_id,
        source.workspace_id,
        fields.external_id,
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
        lead.email_hash,
        lead.phone_hash,
        lead.quality.status.as_str(),
        lead.reasons_json,
        duplicate_status.as_str(),
        duplicate_match,
        lead.body,
        now,
        (!lead.checks.is_empty()).then(|| json_text(&lead.checks)),
    ])?;
    Ok(())
}

/// The lead of `source` with `external_id`, as a replay answers it: its ingest facts and
/// its requests with auto-delivery's decisions.
fn find_external(
    conn: &Connection,
    find: &mut crate::db::KeptStatement,
    source_id: &crate::ids::SourceId,
    external_id: &str,
) -> rusqlite::Result<Option<StoredFacts>> {
    let found = find
        .query_row(params![source_id, external_id], |row| {
            Ok(StoredFacts {
                lead_id: row.get(0)?,
                external_id: external_id.to_string(),
                quality_status: row.get(1)?,
                quality_reasons: row.get(2)?,
                duplicate_status: row.get(3)?,
                duplicate_match: row.get(4)?,
                requests: Vec::new(),
            })
        })
        .optional()?;
    let Some(mut facts) = found else {
        return Ok(None);
    };
    facts.requests = conn
        .prepare_kept(FIND_REQUESTS)?
        .query_map([facts.lead_id], |row| {
            let id: LeadRequestId = row.get(0)?;
            Ok(StoredRequestFacts {
                trigger_auto_delivery: row.get(1)?,
                decision: super::trace::decode(row.get_ref(2)?, &id.to_string())?,
                id,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(Some(facts))
}

/// Compresses the decision traces of up to `limit` lead requests after rowid `after` that
/// were stored before the compressed format (`trace`: TEXT values); returns how many
/// requests it walked and the last one's rowid (`None`: nothing is left). `leadrelay
/// vacuum` runs it before it rebuilds the file.
pub(crate) fn compress_legacy_traces(
    conn: &Connection,
    after: i64,
    limit: usize,
) -> rusqlite::Result<(usize, Option<i64>)> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut select = conn.prepare(
        "SELECT rowid, id, decision FROM lead_requests WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
    )?;
    let mut encoded: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut last = None;
    let mut rows = select.query([after, limit])?;
    while let Some(row) = rows.next()? {
        let rowid: i64 = row.get(0)?;
        last = Some(rowid);
        if let rusqlite::types::ValueRef::Text(_) = row.get_ref(2)? {
            let json = row.get_ref(2)?.as_str()?;
            let id: LeadRequestId = row.get(1)?;
            encoded.push((rowid, super::trace::encode(json, &id.to_string())));
        }
    }
    let mut update = conn.prepare("UPDATE lead_requests SET decision = ?2 WHERE rowid = ?1")?;
    for (rowid, stored) in &encoded {
        update.execute(params![rowid, stored])?;
    }
    Ok((encoded.len(), last))
}

/// Compresses up to `limit` raw bodies stored before the compressed format (TEXT values,
/// moved into `leads` by migration 7) into it; returns how many. `leadrelay vacuum` runs
/// it before it rebuilds the file.
pub(crate) fn compress_legacy_bodies(conn: &Connection, limit: usize) -> rusqlite::Result<usize> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut select = conn.prepare(&format!(
        "SELECT rowid, body, {} FROM leads WHERE typeof(body) = 'text' LIMIT ?1",
        body::COLUMN_NAMES
    ))?;
    let mut encoded: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut rows = select.query([limit])?;
    while let Some(row) = rows.next()? {
        let raw = row.get_ref(1)?.as_str()?;
        encoded.push((row.get(0)?, body::encode(raw, &body::Columns::at(row, 2)?)));
    }
    let mut update = conn.prepare("UPDATE leads SET body = ?2 WHERE rowid = ?1")?;
    for (rowid, stored) in &encoded {
        update.execute(params![rowid, stored])?;
    }
    Ok(encoded.len())
}
