//! The outbox tables: events (the only queue of outbound webhooks) and their attempts.
//!
//! Owns every statement on `outbox_events` and `outbox_attempts`: writing an event with its
//! transaction, claiming due events under a lease, renewing and releasing leases, recording
//! an attempt and moving the event (delivered, due again later, failed), and the operator's
//! views. It does not own when these run (the worker) or how a request is sent (sender).

use std::collections::HashSet;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde_json::{Value, json};

use super::schedule::{self, RetrySchedule};
use crate::db::DbError;
use crate::db::stored::stored_enum;
use crate::delivery::transaction::{self, DeliveryStatus};

stored_enum! {
    /// Where an event stands: due (or in flight), delivered after a 2xx, or given up.
    pub enum EventStatus as "outbox event status" {
        Pending = "pending",
        Delivered = "delivered",
        Failed = "failed",
    }
}

stored_enum! {
    /// What an event tells its buyer.
    pub enum EventKind as "outbox event kind" {
        LeadDelivered = "lead.delivered",
    }
}

/// The longest response excerpt kept per attempt.
pub const EXCERPT_LIMIT: usize = 1024;

pub struct NewEvent<'a> {
    pub transaction_id: &'a str,
    pub buyer_id: &'a str,
    /// The buyer's webhook URL when the event was made (each attempt records the URL it
    /// actually used, which follows the buyer's current setting).
    pub url: &'a str,
    pub payload: &'a str,
    pub created_at: i64,
}

/// Writes a `lead.delivered` event, due at once, and returns its id (the `webhook-id`).
pub fn insert(conn: &Connection, event: &NewEvent) -> rusqlite::Result<String> {
    let id = crate::ids::new("evt");
    conn.prepare_cached(
        "INSERT INTO outbox_events (id, kind, transaction_id, buyer_id, url, payload, status,
            next_attempt_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
    )?
    .execute(params![
        id,
        EventKind::LeadDelivered,
        event.transaction_id,
        event.buyer_id,
        event.url,
        event.payload,
        EventStatus::Pending,
        event.created_at
    ])?;
    Ok(id)
}

/// A due event taken by a claim, with what sending it needs.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: String,
    pub buyer_id: String,
    pub url: String,
    pub signing_secret: String,
    /// The buyer's previous signing secret while a rotation's overlap lasts: the event is
    /// signed with both.
    pub previous_signing_secret: Option<String>,
    pub payload: String,
    /// The event's claim counter after this claim: the outcome of the attempt moves the
    /// event only while no later claim took it.
    pub claim: i64,
    /// The X-Request-Id of the ingest request that stored the event's lead request, so the
    /// outbox's log lines about the event name it.
    pub request_id: Option<String>,
}

/// What the claimer says about a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Take,
    /// Not this one (it is in flight here already).
    Skip,
    /// Not this one, and no more of this buyer's in this claim (its in-flight limit).
    SkipBuyer,
}

/// How many rounds a claim looks for candidates; each round leaves out the buyers found to
/// be at their limit, so one buyer's backlog cannot hide everyone else's due events.
const CLAIM_ROUNDS: usize = 4;

/// What a claim took, and whether due events may be left behind (the limit was reached,
/// or a buyer was at its limit), so the claimer knows to claim again when places free up.
#[derive(Debug, Default)]
pub struct Claim {
    pub events: Vec<Claimed>,
    pub more_due: bool,
}

/// Claims up to `limit` events that are due at `now` and not leased (or whose lease ran
/// out: a crashed or stuck claim), oldest due first, leasing them until `lease_until`.
/// `admit` decides each candidate in order.
pub fn claim(
    conn: &Connection,
    now: i64,
    lease_until: i64,
    limit: usize,
    mut admit: impl FnMut(&str, &str) -> Admit,
) -> rusqlite::Result<Claim> {
    let mut claimed: Vec<Claimed> = Vec::new();
    let mut more_due = false;
    let mut seen: HashSet<String> = HashSet::new();
    let mut full_buyers: Vec<String> = Vec::new();
    for _ in 0..CLAIM_ROUNDS {
        let wanted = limit - claimed.len();
        if wanted == 0 {
            break;
        }
        // Fetch more than wanted: some candidates are skipped (in flight here, or their
        // buyer is at its limit).
        let fetch = (wanted * 2 + seen.len()).max(32);
        let placeholders = vec!["?"; full_buyers.len()].join(", ");
        let sql = format!(
            "SELECT e.id, e.buyer_id, b.webhook_url, b.signing_secret, e.payload,
                    CASE WHEN b.previous_signing_valid_until > ?
                         THEN b.previous_signing_secret END,
                    r.request_id
             FROM outbox_events e JOIN buyers b ON b.id = e.buyer_id
             LEFT JOIN transactions t ON t.id = e.transaction_id
             LEFT JOIN lead_requests r ON r.id = t.lead_request_id
             WHERE e.status = 'pending' AND e.next_attempt_at <= ?
               AND (e.lease_until IS NULL OR e.lease_until <= ?)
               AND e.buyer_id NOT IN ({placeholders})
             ORDER BY e.next_attempt_at, e.id
             LIMIT ?"
        );
        let mut values: Vec<rusqlite::types::Value> = vec![now.into(), now.into(), now.into()];
        values.extend(
            full_buyers
                .iter()
                .cloned()
                .map(rusqlite::types::Value::from),
        );
        values.push((fetch as i64).into());
        let mut stmt = conn.prepare_cached(&sql)?;
        let candidates: Vec<Claimed> = stmt
            .query_map(params_from_iter(values), |row| {
                Ok(Claimed {
                    id: row.get(0)?,
                    buyer_id: row.get(1)?,
                    url: row.get(2)?,
                    signing_secret: row.get(3)?,
                    payload: row.get(4)?,
                    previous_signing_secret: row.get(5)?,
                    claim: 0,
                    request_id: row.get(6)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        let exhausted = candidates.len() < fetch;
        let mut new_full = false;
        for mut candidate in candidates {
            if claimed.len() == limit {
                more_due = true;
                break;
            }
            if !seen.insert(candidate.id.clone()) || full_buyers.contains(&candidate.buyer_id) {
                continue;
            }
            match admit(&candidate.id, &candidate.buyer_id) {
                Admit::Take => {
                    candidate.claim = conn
                        .prepare_cached(
                            "UPDATE outbox_events SET lease_until = ?2, claims = claims + 1
                             WHERE id = ?1 RETURNING claims",
                        )?
                        .query_row(params![candidate.id, lease_until], |row| row.get(0))?;
                    claimed.push(candidate);
                }
                Admit::Skip => {}
                Admit::SkipBuyer => {
                    more_due = true;
                    full_buyers.push(candidate.buyer_id);
                    new_full = true;
                }
            }
        }
        if exhausted || !new_full {
            if !exhausted {
                more_due = true;
            }
            break;
        }
    }
    if claimed.len() == limit {
        more_due = true;
    }
    Ok(Claim {
        events: claimed,
        more_due,
    })
}

/// Extends the leases of events still in flight here (queued behind a slow buyer, or being
/// sent), so no claim elsewhere takes them while this process still owns them.
pub fn renew(conn: &Connection, held: &[(String, i64)], lease_until: i64) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "UPDATE outbox_events SET lease_until = ?3
         WHERE id = ?1 AND claims = ?2 AND status = 'pending'",
    )?;
    for (id, claim) in held {
        stmt.execute(params![id, claim, lease_until])?;
    }
    Ok(())
}

/// Gives up claims that were never sent (shutdown), so the events are due again at once.
pub fn release(conn: &Connection, held: &[(String, i64)]) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "UPDATE outbox_events SET lease_until = NULL WHERE id = ?1 AND claims = ?2",
    )?;
    for (id, claim) in held {
        stmt.execute(params![id, claim])?;
    }
    Ok(())
}

/// How the buyer's system answered one attempt, as the sender judged it.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A 2xx; the partner's own id for the transaction when the body named one.
    Delivered { partner_external_id: Option<String> },
    /// 408, 429, 5xx, a timeout or a connection error; the buyer's `Retry-After` if given.
    Retry { retry_after: Option<Duration> },
    /// Any other status (other 4xx, 3xx): trying again would not help.
    Failed,
}

/// One attempt, ready to record.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub event_id: String,
    pub claim: i64,
    pub url: String,
    pub started_at: i64,
    pub duration_ms: i64,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    pub response_excerpt: Option<String>,
    pub verdict: Verdict,
}

stored_enum! {
    /// What recording an attempt did to its event (`outbox_attempts.outcome`).
    pub enum Outcome as "attempt outcome" {
        Delivered = "delivered",
        /// Due again later.
        Retry = "retry",
        Failed = "failed",
    }
}

/// Records an attempt and moves its event: delivered after a 2xx (whatever claim made it:
/// the buyer has it); due again on the schedule or failed otherwise, but only when the
/// attempt's claim is still the event's latest (a stale sender's error must not reschedule
/// an event another claim owns now).
pub fn record(
    conn: &Connection,
    attempt: &Attempt,
    schedule: &RetrySchedule,
    now: i64,
) -> rusqlite::Result<Option<Outcome>> {
    let row = conn
        .prepare_cached(
            "SELECT status, attempts, retry_base, claims, transaction_id, erased_at IS NOT NULL
             FROM outbox_events WHERE id = ?1",
        )?
        .query_row([&attempt.event_id], |row| {
            Ok((
                row.get::<_, EventStatus>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, Option<String>>(4)?,
                row.get::<_, bool>(5)?,
            ))
        })
        .optional()?;
    let Some((status, attempts, retry_base, claims, transaction_id, erased)) = row else {
        return Ok(None);
    };
    // An attempt that was sent before its event's person was erased may come back with an
    // answer that echoes the person: keep none for an erased event.
    let excerpt = if erased {
        None
    } else {
        attempt.response_excerpt.as_deref()
    };
    let number = attempts + 1;
    let current = claims == attempt.claim && status == EventStatus::Pending;
    let error = attempt.error.clone().or_else(|| match attempt.verdict {
        Verdict::Delivered { .. } => None,
        _ => attempt.http_status.map(|s| format!("HTTP {s}")),
    });
    let outcome = match &attempt.verdict {
        Verdict::Delivered {
            partner_external_id,
        } => {
            if status != EventStatus::Delivered {
                conn.prepare_cached(
                    "UPDATE outbox_events SET status = 'delivered', delivered_at = ?2,
                        lease_until = NULL, last_error = NULL
                     WHERE id = ?1",
                )?
                .execute(params![attempt.event_id, now])?;
                if let Some(txn) = &transaction_id {
                    transaction::set_delivery_status(
                        conn,
                        txn,
                        DeliveryStatus::Sent,
                        partner_external_id.as_deref(),
                    )?;
                }
            }
            Outcome::Delivered
        }
        Verdict::Retry { retry_after } => {
            let failed_in_a_row = u32::try_from(number - retry_base).unwrap_or(u32::MAX);
            match schedule.delay(failed_in_a_row, *retry_after, schedule::random_fraction()) {
                Some(wait) => {
                    if current {
                        let due = now + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2);
                        conn.prepare_cached(
                            "UPDATE outbox_events SET next_attempt_at = ?2, lease_until = NULL,
                                last_error = ?3
                             WHERE id = ?1",
                        )?
                        .execute(params![attempt.event_id, due, error])?;
                    }
                    Outcome::Retry
                }
                None => {
                    if current {
                        mark_failed(conn, &attempt.event_id, transaction_id.as_deref(), &error)?;
                    }
                    Outcome::Failed
                }
            }
        }
        Verdict::Failed => {
            if current {
                mark_failed(conn, &attempt.event_id, transaction_id.as_deref(), &error)?;
            }
            Outcome::Failed
        }
    };
    conn.prepare_cached("UPDATE outbox_events SET attempts = attempts + 1 WHERE id = ?1")?
        .execute([&attempt.event_id])?;
    conn.prepare_cached(
        "INSERT INTO outbox_attempts (event_id, attempt, url, started_at, duration_ms,
            http_status, error, response_excerpt, outcome)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        attempt.event_id,
        number,
        attempt.url,
        attempt.started_at,
        attempt.duration_ms,
        attempt.http_status,
        attempt.error,
        excerpt,
        outcome
    ])?;
    Ok(Some(outcome))
}

fn mark_failed(
    conn: &Connection,
    event_id: &str,
    transaction_id: Option<&str>,
    error: &Option<String>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE outbox_events SET status = 'failed', lease_until = NULL, last_error = ?2
         WHERE id = ?1",
    )?
    .execute(params![event_id, error])?;
    if let Some(txn) = transaction_id {
        transaction::set_delivery_status(conn, txn, DeliveryStatus::Failed, None)?;
    }
    Ok(())
}

/// When the next event falls due: the earliest pending event's due time or lease end,
/// `None` when nothing is pending. The worker sleeps until then (or a wake-up).
pub fn next_due(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached(
        "SELECT min(max(next_attempt_at, coalesce(lease_until, 0)))
         FROM outbox_events WHERE status = 'pending'",
    )?
    .query_row([], |row| row.get(0))
}

/// How the outbox stands, for `GET /api/health` and `GET /metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    pub pending: i64,
    pub failed: i64,
    /// When the oldest pending event was made; `None` when nothing is pending.
    pub oldest_pending_ms: Option<i64>,
}

/// Counts pending and failed events and finds the oldest pending one (three lookups on
/// `outbox_status_created`).
pub fn figures(conn: &Connection) -> rusqlite::Result<Figures> {
    conn.prepare_cached(
        "SELECT
            (SELECT count(*) FROM outbox_events WHERE status = 'pending'),
            (SELECT count(*) FROM outbox_events WHERE status = 'failed'),
            (SELECT min(created_at) FROM outbox_events WHERE status = 'pending')",
    )?
    .query_row([], |row| {
        Ok(Figures {
            pending: row.get(0)?,
            failed: row.get(1)?,
            oldest_pending_ms: row.get(2)?,
        })
    })
}

/// Why an operator command on an event was refused.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("unknown event '{0}'")]
    NotFound(String),
    #[error("event '{0}' was delivered already; there is nothing to retry")]
    AlreadyDelivered(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for OutboxError {
    fn from(e: rusqlite::Error) -> Self {
        OutboxError::Db(DbError::Sqlite(e))
    }
}

/// An event as the operator sees it.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: String,
    pub kind: EventKind,
    pub transaction_id: Option<String>,
    pub buyer_id: String,
    pub url: String,
    pub payload: String,
    pub status: EventStatus,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub lease_until: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
}

const EVENT_COLUMNS: &str = "id, kind, transaction_id, buyer_id, url, payload, status, \
    attempts, next_attempt_at, lease_until, last_error, created_at, delivered_at";

fn event_from_row(row: &Row) -> rusqlite::Result<Event> {
    Ok(Event {
        id: row.get(0)?,
        kind: row.get(1)?,
        transaction_id: row.get(2)?,
        buyer_id: row.get(3)?,
        url: row.get(4)?,
        payload: row.get(5)?,
        status: row.get(6)?,
        attempts: row.get(7)?,
        next_attempt_at: row.get(8)?,
        lease_until: row.get(9)?,
        last_error: row.get(10)?,
        created_at: row.get(11)?,
        delivered_at: row.get(12)?,
    })
}

impl Event {
    /// The summary shown by `outbox list` (without the body).
    pub fn to_json(&self) -> Value {
        let pending = self.status == EventStatus::Pending;
        json!({
            "id": self.id,
            "event": self.kind.as_str(),
            "transactionId": self.transaction_id,
            "buyerAccountId": self.buyer_id,
            "status": self.status.as_str(),
            "attempts": self.attempts,
            "nextAttemptAt": pending.then(|| crate::clock::iso(self.next_attempt_at)),
            "leasedUntil": self
                .lease_until
                .filter(|_| pending)
                .map(crate::clock::iso),
            "lastError": self.last_error,
            "createdAt": crate::clock::iso(self.created_at),
            "deliveredAt": self.delivered_at.map(crate::clock::iso),
        })
    }
}

pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Event>> {
    conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM outbox_events WHERE id = ?1"
    ))?
    .query_row([id], event_from_row)
    .optional()
}

/// Events, newest first, optionally of one status.
pub fn list(
    conn: &Connection,
    status: Option<EventStatus>,
    limit: i64,
) -> rusqlite::Result<Vec<Event>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM outbox_events
         WHERE (?1 IS NULL OR status = ?1)
         ORDER BY created_at DESC, id DESC LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![status, limit], event_from_row)?;
    rows.collect()
}

/// The events of one transaction, oldest first.
pub fn of_transaction(conn: &Connection, transaction_id: &str) -> rusqlite::Result<Vec<Event>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM outbox_events WHERE transaction_id = ?1
         ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([transaction_id], event_from_row)?;
    rows.collect()
}

/// One recorded attempt.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub attempt: i64,
    pub url: String,
    pub started_at: i64,
    pub duration_ms: i64,
    pub http_status: Option<i64>,
    pub error: Option<String>,
    pub response_excerpt: Option<String>,
    pub outcome: Outcome,
}

impl AttemptRecord {
    pub fn to_json(&self) -> Value {
        json!({
            "attempt": self.attempt,
            "at": crate::clock::iso(self.started_at),
            "url": self.url,
            "durationMs": self.duration_ms,
            "httpStatus": self.http_status,
            "error": self.error,
            "responseExcerpt": self.response_excerpt,
            "outcome": self.outcome.as_str(),
        })
    }
}

/// Every attempt of an event, in order.
pub fn attempts(conn: &Connection, event_id: &str) -> rusqlite::Result<Vec<AttemptRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT attempt, url, started_at, duration_ms, http_status, error, response_excerpt,
            outcome
         FROM outbox_attempts WHERE event_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([event_id], |row| {
        Ok(AttemptRecord {
            attempt: row.get(0)?,
            url: row.get(1)?,
            started_at: row.get(2)?,
            duration_ms: row.get(3)?,
            http_status: row.get(4)?,
            error: row.get(5)?,
            response_excerpt: row.get(6)?,
            outcome: row.get(7)?,
        })
    })?;
    rows.collect()
}

/// Makes a failed or pending event due now. A failed event starts the retry schedule
/// again; its transaction's delivery status goes back to pending.
pub fn retry(conn: &Connection, id: &str, now: i64) -> Result<Event, OutboxError> {
    let event = find(conn, id)?.ok_or_else(|| OutboxError::NotFound(id.to_string()))?;
    if event.status == EventStatus::Delivered {
        return Err(OutboxError::AlreadyDelivered(id.to_string()));
    }
    conn.prepare_cached(
        "UPDATE outbox_events
         SET status = 'pending', next_attempt_at = ?2, lease_until = NULL,
             retry_base = CASE WHEN status = 'failed' THEN attempts ELSE retry_base END
         WHERE id = ?1",
    )?
    .execute(params![id, now])?;
    if let Some(txn) = &event.transaction_id {
        transaction::set_delivery_status(conn, txn, DeliveryStatus::Pending, None)?;
    }
    find(conn, id)?.ok_or_else(|| OutboxError::NotFound(id.to_string()))
}

/// The events of a transaction as an erasure rewrites them: id and payload.
pub(crate) fn payloads_of_transaction(
    conn: &Connection,
    transaction_id: &str,
) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, payload FROM outbox_events WHERE transaction_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([transaction_id], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// What erasing the person from an event changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErasedEvent {
    /// Response excerpts removed from its attempts.
    pub(crate) attempts: u64,
}

/// Replaces event `id`'s payload with `payload` (the person erased from it, built by
/// `delivery::event`) and removes its attempts' response excerpts (a buyer's answer may
/// echo the person). A pending event is sent with the new payload from its next attempt
/// on, under the same `webhook-id`; the event remembers the erasure, so an attempt that
/// was in flight meanwhile records no excerpt ([`record`]).
pub(crate) fn erase_event(
    conn: &Connection,
    id: &str,
    payload: &str,
    now: i64,
) -> rusqlite::Result<ErasedEvent> {
    conn.prepare_cached(
        "UPDATE outbox_events SET payload = ?2, erased_at = coalesce(erased_at, ?3)
         WHERE id = ?1",
    )?
    .execute(params![id, payload, now])?;
    let attempts = conn
        .prepare_cached(
            "UPDATE outbox_attempts SET response_excerpt = NULL
             WHERE event_id = ?1 AND response_excerpt IS NOT NULL",
        )?
        .execute([id])?;
    Ok(ErasedEvent {
        attempts: attempts as u64,
    })
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
