//! Data lifecycle and privacy (DESIGN.md section 12): erasing a person (`lead erase`) and
//! purging leads past their workspace's retention ([`purge`]), both leaving tombstones,
//! and the erasure log.
//!
//! Orchestrates only: every table is written by its owner. For each lead taken,
//! [`erase_lead`] asks `ingest::erase` for the tombstone (lead columns, raw body, the
//! interests' answers), `delivery::event` for each event's body without the person and
//! `outbox::store` to store it and drop the attempts' response excerpts,
//! `delivery::transaction` and `ledger` to drop the free-text reasons of the lead's
//! transactions and refunds, `lifecycle::clawback` those of its cancellation, and
//! `autodelivery::stored_features` the categories the evaluator took from the person
//! (answers, postal region) out of the features kept for training, and `ping::store` the
//! hashes, postal code, city and answers of the pings tied to the person (the lead's own
//! ping; by email or phone, every ping that promised its hash). Ids,
//! times, products, statuses and money stay, so reports and the ledger still add up.
//!
//! An erasure runs as small writer jobs of at most [`LEADS_PER_JOB`] leads, so it never
//! holds the writer long; each job takes the leads that match at that moment. The job that
//! finds fewer than a whole batch is the last one and closes the log row, so when `lead
//! erase` returns, every lead with that email (or phone) committed before its last job is
//! a tombstone; a lead committed after it is not touched.
//!
//! Owns the `erasures` table (the log: what was asked and by whom, when, how many records
//! changed; never the erased values).

pub mod purge;

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use crate::db::{Db, DbError};

/// The most leads one erasure or purge job takes. A lead costs its tombstone, its events
/// and its index entries; a hundred keep a job to a few milliseconds of writer time.
pub const LEADS_PER_JOB: usize = 100;

/// What names the person to erase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Lead(crate::ids::LeadId),
    /// The email's duplicate key (`normalize::email_key`): trimmed, lower-cased.
    Email(String),
    /// The phone's duplicate key: its digits.
    Phone(String),
}

impl Selector {
    /// A lead id as typed; one that is not one of ours is an unknown lead.
    pub fn lead(text: &str) -> Result<Selector, PrivacyError> {
        crate::ids::LeadId::parse(text)
            .map(Selector::Lead)
            .ok_or_else(|| PrivacyError::UnknownLead(text.to_string()))
    }

    /// An email as the operator typed it, matched after the duplicate rule's
    /// normalisation; refused when it is not a usable address (no lead is stored with such
    /// a key).
    pub fn email(text: &str) -> Result<Selector, PrivacyError> {
        crate::ingest::normalize::email_key(text)
            .map(Selector::Email)
            .ok_or(PrivacyError::NotAnEmail)
    }

    /// A phone as typed, matched by its digits.
    pub fn phone(text: &str) -> Result<Selector, PrivacyError> {
        crate::ingest::normalize::phone_key(text)
            .map(Selector::Phone)
            .ok_or(PrivacyError::NotAPhone)
    }

    /// What the log says about it: the kind of selector, never its value.
    fn kind(&self) -> &'static str {
        match self {
            Selector::Lead(_) => "lead",
            Selector::Email(_) => "email",
            Selector::Phone(_) => "phone",
        }
    }

    /// Whether `text` holds the selector's value (a reason must not).
    fn appears_in(&self, text: &str) -> bool {
        let text = text.to_lowercase();
        match self {
            Selector::Lead(_) => false,
            Selector::Email(key) => text.contains(key.as_str()),
            Selector::Phone(digits) => {
                let only_digits: String = text.chars().filter(char::is_ascii_digit).collect();
                only_digits.contains(digits.as_str())
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PrivacyError {
    #[error("unknown lead '{0}'")]
    UnknownLead(String),
    #[error(
        "not a usable email address: no lead is stored under one (find such a lead with \
         `leadrelay lead list` and erase it with --lead)"
    )]
    NotAnEmail,
    #[error(
        "not a usable phone number (7 to 15 digits): no lead is stored under one (find such \
         a lead with `leadrelay lead list` and erase it with --lead)"
    )]
    NotAPhone,
    #[error("the reason must not contain the erased email or phone: the log never holds them")]
    ReasonHoldsValue,
    #[error("unknown workspace '{0}'")]
    UnknownWorkspace(String),
    #[error(transparent)]
    Suppression(#[from] crate::suppression::SuppressionError),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for PrivacyError {
    fn from(e: rusqlite::Error) -> Self {
        PrivacyError::Db(DbError::Sqlite(e))
    }
}

/// How many records an erasure (or a purge) changed, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Leads made tombstones.
    pub leads: u64,
    /// Lead requests whose answers were removed.
    pub requests: u64,
    /// Transactions whose history, refund or cancellation reasons were removed.
    pub transactions: u64,
    /// Events whose body now carries the tombstone.
    pub events: u64,
    /// Attempts whose response excerpt was removed.
    pub attempts: u64,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.leads += other.leads;
        self.requests += other.requests;
        self.transactions += other.transactions;
        self.events += other.events;
        self.attempts += other.attempts;
    }

    /// The records besides the leads, as `records` of an erasure's output.
    pub fn view(self) -> RecordsView {
        RecordsView {
            requests: self.requests,
            transactions: self.transactions,
            events: self.events,
            attempts: self.attempts,
        }
    }

    /// [`Counts::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(self) -> Value {
        crate::to_value(self.view())
    }
}

/// How many records besides the leads an erasure changed, by kind.
#[derive(Debug, Serialize)]
pub struct RecordsView {
    requests: u64,
    transactions: u64,
    events: u64,
    attempts: u64,
}

/// Removes the person from lead `lead_id` and everything made from it; a lead that is a
/// tombstone already is left alone (its erasure did all of this in the same job).
pub(crate) fn erase_lead(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
    now: i64,
) -> rusqlite::Result<Counts> {
    let tombstoned = crate::ingest::erase::tombstone(conn, lead_id, now)?;
    if tombstoned.leads == 0 {
        return Ok(Counts::default());
    }
    let mut counts = Counts {
        leads: tombstoned.leads,
        requests: tombstoned.requests,
        ..Counts::default()
    };
    for transaction_id in crate::delivery::transaction::ids_of_lead(conn, lead_id)? {
        let reasons = crate::delivery::transaction::erase_reasons(conn, &transaction_id)?
            + crate::ledger::erase_reasons(conn, &transaction_id)?
            + crate::lifecycle::returns::erase_reasons(conn, &transaction_id)?;
        if reasons > 0 {
            counts.transactions += 1;
        }
        for (event_id, payload) in
            crate::outbox::store::payloads_of_transaction(conn, &transaction_id)?
        {
            let erased = crate::delivery::event::erased_body(&payload);
            let changed = crate::outbox::store::erase_event(conn, &event_id, &erased, now)?;
            counts.events += 1;
            counts.attempts += changed.attempts;
        }
    }
    crate::lifecycle::clawback::erase_reasons(conn, lead_id)?;
    crate::autodelivery::stored_features::erase_personal(conn, lead_id)?;
    crate::ping::store::erase_person(conn, crate::ping::store::Tie::Lead(lead_id))?;
    Ok(counts)
}

/// One row of the erasure log.
#[derive(Debug, Clone)]
pub struct Erasure {
    pub id: String,
    pub kind: &'static str,
    pub selector: String,
    pub workspace_id: Option<String>,
    pub cutoff: Option<i64>,
    pub counts: Counts,
    pub actor: String,
    pub reason: Option<String>,
    pub started_at: i64,
    pub finished_at: Option<i64>,
}

impl Erasure {
    pub fn view(&self) -> ErasureView<'_> {
        ErasureView {
            id: &self.id,
            kind: self.kind,
            by: &self.selector,
            workspace_id: self.workspace_id.as_deref(),
            cutoff: self.cutoff.map(crate::clock::iso),
            leads: self.counts.leads,
            records: self.counts.view(),
            actor: &self.actor,
            reason: self.reason.as_deref(),
            started_at: crate::clock::iso(self.started_at),
            finished_at: self.finished_at.map(crate::clock::iso),
        }
    }

    /// [`Erasure::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// One row of the erasure log as `privacy log --json` shows it: the kind of selector,
/// never its value.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErasureView<'a> {
    id: &'a str,
    kind: &'static str,
    by: &'a str,
    workspace_id: Option<&'a str>,
    cutoff: Option<String>,
    leads: u64,
    records: RecordsView,
    actor: &'a str,
    reason: Option<&'a str>,
    started_at: String,
    finished_at: Option<String>,
}

/// Adds `counts` to log row `id`, and closes it at `finished` when given.
fn log_progress(
    conn: &Connection,
    id: &str,
    counts: Counts,
    finished: Option<i64>,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "UPDATE erasures SET leads = leads + ?2, requests = requests + ?3,
            transactions = transactions + ?4, events = events + ?5, attempts = attempts + ?6,
            finished_at = coalesce(?7, finished_at)
         WHERE id = ?1",
    )?
    .execute(params![
        id,
        counts.leads as i64,
        counts.requests as i64,
        counts.transactions as i64,
        counts.events as i64,
        counts.attempts as i64,
        finished
    ])?;
    Ok(())
}

struct NewLogRow<'a> {
    kind: &'static str,
    selector: &'a str,
    workspace_id: Option<&'a str>,
    cutoff: Option<i64>,
    actor: &'a str,
    reason: Option<&'a str>,
    now: i64,
}

fn log_start(conn: &Connection, row: &NewLogRow) -> rusqlite::Result<String> {
    let id = crate::ids::new("ers");
    conn.prepare_kept(
        "INSERT INTO erasures (id, kind, selector, workspace_id, cutoff, actor, reason,
            started_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        id,
        row.kind,
        row.selector,
        row.workspace_id,
        row.cutoff,
        row.actor,
        row.reason,
        row.now
    ])?;
    Ok(id)
}

/// The erasure log, newest first, at most `limit` rows.
pub fn log(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<Erasure>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare(
        "SELECT id, kind, selector, workspace_id, cutoff, leads, requests, transactions,
                events, attempts, actor, reason, started_at, finished_at
         FROM erasures ORDER BY started_at DESC, id DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit], |row| {
        Ok(Erasure {
            id: row.get(0)?,
            kind: match row.get_ref(1)?.as_str()? {
                "purge" => "purge",
                _ => "erase",
            },
            selector: row.get(2)?,
            workspace_id: row.get(3)?,
            cutoff: row.get(4)?,
            counts: Counts {
                leads: row.get::<_, i64>(5)?.max(0) as u64,
                requests: row.get::<_, i64>(6)?.max(0) as u64,
                transactions: row.get::<_, i64>(7)?.max(0) as u64,
                events: row.get::<_, i64>(8)?.max(0) as u64,
                attempts: row.get::<_, i64>(9)?.max(0) as u64,
            },
            actor: row.get(10)?,
            reason: row.get(11)?,
            started_at: row.get(12)?,
            finished_at: row.get(13)?,
        })
    })?;
    rows.collect()
}

/// What `lead erase` did.
#[derive(Debug, Clone)]
pub struct ErasureReport {
    pub erasure_id: String,
    pub selector: &'static str,
    pub counts: Counts,
    /// `--lead` of a lead that was erased before: nothing changed.
    pub already_erased: bool,
    /// Other leads (not erased) that share the erased lead's email or phone, for `--lead`.
    pub others_with_same_contact: u64,
    /// Whether the WAL was emptied afterwards, so no old page copy holds the person.
    pub checkpointed: bool,
}

/// `leadrelay lead erase`: removes the person `selector` names from every lead that holds
/// it, in jobs of [`LEADS_PER_JOB`] leads, logging the erasure, then empties the WAL
/// (old copies of the changed pages). `actor` is who asked, `reason` their note (never
/// the erased value).
/// `suppress`: the erased leads' emails and phones go on their workspaces' suppression
/// lists (reason `erased`) in the same jobs, before the values are wiped.
pub fn erase(
    db: &Db,
    selector: Selector,
    actor: &str,
    by: &crate::audit::Actor,
    reason: Option<&str>,
    suppress: bool,
) -> Result<ErasureReport, PrivacyError> {
    if reason.is_some_and(|r| selector.appears_in(r)) {
        return Err(PrivacyError::ReasonHoldsValue);
    }
    let mut already_erased = false;
    let mut others = 0;
    if let Selector::Lead(id) = &selector {
        let (state, sharing) = db.read_blocking(|conn| {
            let state = crate::ingest::erase::erased_at(conn, *id)?;
            let sharing = crate::ingest::erase::others_with_same_contact(conn, *id)?;
            Ok::<_, PrivacyError>((state, sharing))
        })?;
        match state {
            None => return Err(PrivacyError::UnknownLead(id.to_string())),
            Some(Some(_)) => already_erased = true,
            Some(None) => others = sharing,
        }
    }
    let selector_kind = selector.kind();
    let erasure_id = db.write_blocking({
        let actor = actor.to_string();
        let by = by.clone();
        let reason = reason.map(str::to_string);
        let lead = match &selector {
            Selector::Lead(id) => Some(id.to_string()),
            _ => None,
        };
        move |conn| {
            let now = crate::clock::now_ms();
            let row = NewLogRow {
                kind: "erase",
                selector: selector_kind,
                workspace_id: None,
                cutoff: None,
                actor: &actor,
                reason: reason.as_deref(),
                now,
            };
            let erasure_id = log_start(conn, &row)?;
            // The erased value is never written: a lead id names itself, an email or a
            // phone only its kind.
            let changes = crate::audit::Changes::new()
                .set("selector", serde_json::Value::Null, selector_kind)
                .set("lead", serde_json::Value::Null, lead)
                .set("suppress", serde_json::Value::Null, suppress);
            crate::audit::record(conn, &by, "privacy.erase", &erasure_id, &changes, now)?;
            Ok::<_, PrivacyError>(erasure_id)
        }
    })?;
    let mut counts = Counts::default();
    loop {
        let (step, done) = db.write_blocking({
            let selector = selector.clone();
            let erasure_id = erasure_id.clone();
            move |conn| {
                erase_step(
                    conn,
                    &selector,
                    &erasure_id,
                    suppress,
                    crate::clock::now_ms(),
                )
            }
        })?;
        counts.add(step);
        if done {
            break;
        }
    }
    let checkpointed = db.checkpoint_truncate()?;
    Ok(ErasureReport {
        erasure_id,
        selector: selector_kind,
        counts,
        already_erased,
        others_with_same_contact: others,
        checkpointed,
    })
}

/// Puts lead `id`'s email and phone (unless erased already) on its workspace's
/// suppression list, reason `erased`.
fn suppress_contact(
    conn: &Connection,
    id: crate::ids::LeadId,
    now: i64,
) -> Result<(), PrivacyError> {
    use crate::suppression::{self, Kind};
    let contact: Option<(String, Option<String>, Option<String>)> = conn
        .prepare_kept(
            "SELECT workspace_id, email, phone FROM leads WHERE id = ?1 AND erased_at IS NULL",
        )?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()?;
    let Some((workspace_id, email, phone)) = contact else {
        return Ok(());
    };
    for (kind, value) in [(Kind::Email, email), (Kind::Phone, phone)] {
        if let Some(key) = value.as_deref().and_then(|v| kind.normalise(v)) {
            suppression::add_key(conn, &workspace_id, kind, &key, Some("erased"), now)?;
        }
    }
    Ok(())
}

/// One job of an erasure: the leads `selector` matches now (up to [`LEADS_PER_JOB`]),
/// erased, and the log row moved on; the job that finds fewer than a whole batch closes the
/// row. Returns what it changed and whether it was the last.
fn erase_step(
    conn: &Connection,
    selector: &Selector,
    erasure_id: &str,
    suppress: bool,
    now: i64,
) -> Result<(Counts, bool), PrivacyError> {
    let ids = match selector {
        // A tombstone already is left alone by `erase_lead` (the one guard: erasing twice
        // changes nothing, and the first erasure's time stays).
        Selector::Lead(id) => vec![*id],
        Selector::Email(key) => crate::ingest::erase::with_email(conn, key, LEADS_PER_JOB)?,
        Selector::Phone(key) => crate::ingest::erase::with_phone(conn, key, LEADS_PER_JOB)?,
    };
    let done = ids.len() < LEADS_PER_JOB || matches!(selector, Selector::Lead(_));
    let mut counts = Counts::default();
    for id in &ids {
        if suppress {
            suppress_contact(conn, *id, now)?;
        }
        counts.add(erase_lead(conn, *id, now)?);
    }
    // Pings that promised the person's hash, posted or not (a posted one went with its
    // lead above); a repeat finds none left.
    let hash = |key: &str| crate::secrets::hash(key);
    match selector {
        Selector::Lead(_) => {}
        Selector::Email(key) => {
            crate::ping::store::erase_person(conn, crate::ping::store::Tie::EmailHash(&hash(key)))?;
        }
        Selector::Phone(key) => {
            crate::ping::store::erase_person(conn, crate::ping::store::Tie::PhoneHash(&hash(key)))?;
        }
    }
    log_progress(conn, erasure_id, counts, done.then_some(now))?;
    Ok((counts, done))
}

/// How many leads, not erased, `selector` names now (what `lead erase` asks to confirm).
pub fn matching(conn: &Connection, selector: &Selector) -> Result<u64, DbError> {
    Ok(match selector {
        Selector::Lead(id) => u64::from(crate::ingest::erase::erased_at(conn, *id)? == Some(None)),
        Selector::Email(key) => crate::ingest::erase::count_with_email(conn, key)?,
        Selector::Phone(key) => crate::ingest::erase::count_with_phone(conn, key)?,
    })
}

/// When the erasure log row `id` was closed, if it exists.
pub fn finished_at(conn: &Connection, id: &str) -> rusqlite::Result<Option<Option<i64>>> {
    conn.query_row(
        "SELECT finished_at FROM erasures WHERE id = ?1",
        [id],
        |row| row.get(0),
    )
    .optional()
}
