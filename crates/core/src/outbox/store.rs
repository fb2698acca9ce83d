//! The outbox tables: events (the only queue of outbound webhooks) and their attempts.
//!
//! Owns every statement on `outbox_events` and `outbox_attempts`: writing an event with its
//! transaction, claiming due events under a lease, renewing and releasing leases, recording
//! an attempt and moving the event (delivered, due again later, failed), and the operator's
//! views. It does not own when these run (the worker) or how a request is sent (sender).
//!
//! It writes no other table: what an attempt or a retry means for the event's transaction
//! comes back as facts ([`Recorded`], [`DeliveryFact`], [`Refusal`]) that the use case
//! recording the attempt (`attempt`) applies through the transaction's owner in the same
//! job.

use crate::db::PrepareKept;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::health::Observation;
use super::schedule::{self, RetrySchedule};
use crate::db::DbError;
use crate::db::stored::stored_enum;

stored_enum! {
    /// Where an event stands: due (or in flight), delivered after a 2xx, given up, or
    /// voided: never sent, because its sale ended before its first attempt.
    pub enum EventStatus as "outbox event status" {
        Pending = "pending",
        Delivered = "delivered",
        Failed = "failed",
        Voided = "voided",
    }
}

stored_enum! {
    /// What an event tells its buyer.
    pub enum EventKind as "outbox event kind" {
        LeadDelivered = "lead.delivered",
        /// The operator's decision on a buyer's return (DESIGN.md section 19).
        ReturnDecided = "transaction.return_decided",
    }
}

/// The longest response excerpt kept per attempt.
pub const EXCERPT_LIMIT: usize = 1024;

pub(crate) struct NewEvent<'a> {
    pub transaction_id: &'a crate::ids::TransactionId,
    pub buyer_id: &'a crate::ids::BuyerId,
    /// The buyer's webhook URL when the event was made (each attempt records the URL it
    /// actually used, which follows the buyer's current setting).
    pub url: &'a str,
    pub payload: &'a str,
    pub created_at: i64,
}

/// Writes a `lead.delivered` event, due at once, and returns its id (the `webhook-id`).
pub(crate) fn insert(conn: &Connection, event: &NewEvent) -> rusqlite::Result<crate::ids::EventId> {
    insert_row(
        conn,
        Some(event.transaction_id),
        &NewNotice {
            kind: EventKind::LeadDelivered,
            buyer_id: event.buyer_id,
            url: event.url,
            payload: event.payload,
            created_at: event.created_at,
        },
    )
}

/// Writes `event` (of `transaction_id`, when it delivers one), due at once; its id.
fn insert_row(
    conn: &Connection,
    transaction_id: Option<&crate::ids::TransactionId>,
    event: &NewNotice,
) -> rusqlite::Result<crate::ids::EventId> {
    let id = crate::ids::EventId::generate();
    conn.prepare_kept(
        "INSERT INTO outbox_events (id, kind, transaction_id, buyer_id, url, payload, status,
            next_attempt_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
    )?
    .execute(params![
        id,
        event.kind,
        transaction_id,
        event.buyer_id,
        event.url,
        event.payload,
        EventStatus::Pending,
        event.created_at
    ])?;
    Ok(id)
}

/// An event that tells a buyer of a change (not a lead's delivery), for the generic
/// integration only.
pub(crate) struct NewNotice<'a> {
    pub kind: EventKind,
    pub buyer_id: &'a crate::ids::BuyerId,
    pub url: &'a str,
    pub payload: &'a str,
    pub created_at: i64,
}

/// Writes a notice, due at once, and returns its id. It names no transaction in
/// `transaction_id`, which ties an event to the transaction it delivers: its outcome must
/// not move that transaction's delivery status, nor a refusal take the sale back (the
/// payload names the transaction).
pub(crate) fn insert_notice(
    conn: &Connection,
    notice: &NewNotice,
) -> rusqlite::Result<crate::ids::EventId> {
    insert_row(conn, None, notice)
}

/// A due event taken by a claim, with what sending it needs.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: crate::ids::EventId,
    /// The event's rowid when it was claimed: its attempt is recorded through it, without
    /// a search of the id index ([`record_attempt`] checks that it still names `id`).
    pub row: i64,
    pub buyer_id: crate::ids::BuyerId,
    pub url: String,
    pub signing_secret: String,
    /// The buyer's previous signing secret while a rotation's overlap lasts: the event is
    /// signed with both.
    pub previous_signing_secret: Option<String>,
    pub payload: String,
    /// The event's claim counter after this claim: the outcome of the attempt moves the
    /// event only while no later claim took it.
    pub claim: i64,
    /// Claimed as the probe of an unhealthy buyer's endpoint.
    pub probe: bool,
    /// The X-Request-Id of the ingest request that stored the event's lead request, so the
    /// outbox's log lines about the event name it.
    pub request_id: Option<String>,
    /// The buyer's integration (`None`: the generic signed webhook). Boxed: most buyers
    /// have none, and claims travel through the senders' queue.
    pub integration: Option<Box<BuyerIntegration>>,
}

/// A mapped buyer's integration as a claim carries it.
#[derive(Debug, Clone)]
pub struct BuyerIntegration {
    /// The stored document (checked when it was set).
    pub document: String,
    /// The buyer's integration secrets by name.
    pub secrets: Vec<(String, String)>,
}

/// A buyer with pending events: when the earliest falls due (an event in flight is not due
/// before its lease ends), and its endpoint's breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueBuyer {
    pub buyer_id: crate::ids::BuyerId,
    pub next_due: i64,
    pub unhealthy: bool,
    pub next_probe_at: Option<i64>,
}

/// Every buyer with pending events, by id, with the earliest due time and the breaker: a
/// skip scan of `outbox_buyer_due`, two index seeks per such buyer however many events
/// wait. The index is named: without statistics SQLite would take `outbox_status_created`
/// for `status = 'pending'` and read every pending event at each step (with a backlog of
/// 10,000 events that was most of the outbox's database time; `bench/conditions.sh`).
const DUE_BUYERS: &str = "WITH RECURSIVE buyer(id) AS (
        SELECT (SELECT min(buyer_id) FROM outbox_events INDEXED BY outbox_buyer_due
                WHERE status = 'pending')
        UNION ALL
        SELECT (SELECT min(buyer_id) FROM outbox_events INDEXED BY outbox_buyer_due
                WHERE status = 'pending' AND buyer_id > buyer.id)
        FROM buyer WHERE buyer.id IS NOT NULL
    )
    SELECT buyer.id,
           (SELECT min(next_attempt_at) FROM outbox_events INDEXED BY outbox_buyer_due
            WHERE status = 'pending' AND buyer_id = buyer.id),
           h.state = 'unhealthy', h.next_probe_at
    FROM buyer LEFT JOIN buyer_health h ON h.buyer_id = buyer.id
    WHERE buyer.id IS NOT NULL";

/// Every buyer with pending events, by id ([`DUE_BUYERS`]).
pub fn due_buyers(conn: &Connection) -> rusqlite::Result<Vec<DueBuyer>> {
    let mut stmt = conn.prepare_kept(DUE_BUYERS)?;
    let rows = stmt.query_map([], |row| {
        Ok(DueBuyer {
            buyer_id: row.get(0)?,
            next_due: row.get(1)?,
            unhealthy: row.get::<_, Option<bool>>(2)?.unwrap_or(false),
            next_probe_at: row.get(3)?,
        })
    })?;
    rows.collect()
}

/// What a claim sends with, of the buyer at `?2`; read once per claim (every event of a
/// claim is one buyer's), not joined to each event.
const CLAIM_BUYER: &str = "SELECT webhook_url, signing_secret,
        CASE WHEN previous_signing_valid_until > ?2 THEN previous_signing_secret END,
        integration
    FROM buyers WHERE id = ?1";

/// The columns a claim reads, from an event `e` and the request `r` that caused it.
macro_rules! claim_select {
    ($where:literal) => {
        concat!(
            "SELECT e.rowid, e.id, e.payload, r.request_id, e.claims, e.kind
             FROM outbox_events e
             LEFT JOIN transactions t ON t.id = e.transaction_id
             LEFT JOIN lead_requests r ON r.id = t.lead_request_id
             WHERE e.status = 'pending' AND e.buyer_id = ?1 AND ",
            $where,
            " ORDER BY e.next_attempt_at"
        )
    };
}

/// A buyer's events due at `?2`, oldest due first.
const CLAIM_DUE: &str = claim_select!("e.next_attempt_at <= ?2");

/// A buyer's events not in flight at `?2`, due or not, oldest due first (a probe).
const CLAIM_PROBE: &str = claim_select!("(e.lease_until IS NULL OR e.lease_until <= ?2)");

/// Claims up to `limit` of `buyer_id`'s events that are due at `now`, oldest due first,
/// leasing them until `lease_until`. The claim moves each event's due time to the end of
/// its lease: while it is in flight it is not due, and if its sender dies it is due again
/// when the lease runs out (a crashed or stuck claim is taken again).
///
/// A `probe` (of an unhealthy endpoint, whose events' own schedules wait for it) takes the
/// earliest due of the buyer's events that is not in flight, due or not.
///
/// The statements have no `LIMIT ?`: SQLite plans a bound LIMIT by its value, so each new
/// value would compile the statement again (every claim, as the number of free places
/// changes). The rows come in `outbox_buyer_due` order, so reading only `limit` of them
/// costs the same as the LIMIT did.
pub fn claim_for_buyer(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    now: i64,
    lease_until: i64,
    limit: usize,
    probe: bool,
) -> rusqlite::Result<Vec<Claimed>> {
    let buyer = conn
        .prepare_kept(CLAIM_BUYER)?
        .query_row(params![buyer_id, now], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<String>>(2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()?;
    // An event's buyer always exists (a foreign key); were it gone, nothing is claimed, as
    // the join that read it with each event did.
    let Some((url, signing_secret, previous_signing_secret, integration)) = buyer else {
        return Ok(Vec::new());
    };
    let sql = if probe { CLAIM_PROBE } else { CLAIM_DUE };
    let mut candidates: Vec<Claimed> = conn
        .prepare_kept(sql)?
        .query_map(params![buyer_id, now], |row| {
            let delivery = row.get::<_, EventKind>(5)? == EventKind::LeadDelivered;
            Ok(Claimed {
                row: row.get(0)?,
                id: row.get(1)?,
                buyer_id: buyer_id.clone(),
                url: url.clone(),
                signing_secret: signing_secret.clone(),
                payload: row.get(2)?,
                previous_signing_secret: previous_signing_secret.clone(),
                // The claim about to be made: the job that reads the row also writes it.
                claim: row.get::<_, i64>(4)? + 1,
                probe,
                request_id: row.get(3)?,
                // A buyer's document maps `lead.delivered`; any other event goes as the
                // generic signed webhook.
                integration: integration.clone().filter(|_| delivery).map(|document| {
                    Box::new(BuyerIntegration {
                        document,
                        secrets: Vec::new(),
                    })
                }),
            })
        })?
        .take(limit)
        .collect::<Result<_, _>>()?;
    // One buyer per claim: its secrets are read once, when its integration sends any.
    if candidates.iter().any(|c| c.integration.is_some()) {
        let secrets = crate::integration::store::secrets(conn, buyer_id)?;
        for integration in candidates.iter_mut().filter_map(|c| c.integration.as_mut()) {
            integration.secrets = secrets.clone();
        }
    }
    // Without `RETURNING`: SQLite runs a statement with one as a trigger, with a statement
    // journal and a temporary table for the rows it returns, which cost more than the update.
    let mut take = conn.prepare_kept(
        "UPDATE outbox_events SET lease_until = ?2, next_attempt_at = ?2, claims = ?3
         WHERE rowid = ?1",
    )?;
    for candidate in &candidates {
        take.execute(params![candidate.row, lease_until, candidate.claim])?;
    }
    Ok(candidates)
}

/// Extends the leases of events still in flight here, so no claim elsewhere takes them
/// while this process still owns them.
pub fn renew(
    conn: &Connection,
    held: &[(crate::ids::EventId, i64)],
    lease_until: i64,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_kept(
        "UPDATE outbox_events SET lease_until = ?3, next_attempt_at = ?3
         WHERE id = ?1 AND claims = ?2 AND status = 'pending'",
    )?;
    for (id, claim) in held {
        stmt.execute(params![id, claim, lease_until])?;
    }
    Ok(())
}

/// Makes the buyer's waiting events due now (its endpoint answers again after being
/// unhealthy: what failed while it was down goes out at once, not hours later on its own
/// schedule). Events in flight are left alone; each keeps its place in its schedule.
pub fn due_now(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    now: i64,
) -> rusqlite::Result<usize> {
    conn.prepare_kept(
        "UPDATE outbox_events SET next_attempt_at = ?2
         WHERE status = 'pending' AND buyer_id = ?1 AND next_attempt_at > ?2
           AND (lease_until IS NULL OR lease_until <= ?2)",
    )?
    .execute(params![buyer_id, now])
}

/// Gives up claims that were never sent (shutdown), so the events are due again at once.
pub fn release(
    conn: &Connection,
    held: &[(crate::ids::EventId, i64)],
    now: i64,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_kept(
        "UPDATE outbox_events SET lease_until = NULL, next_attempt_at = ?3
         WHERE id = ?1 AND claims = ?2 AND status = 'pending'",
    )?;
    for (id, claim) in held {
        stmt.execute(params![id, claim, now])?;
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
    /// Permanent for this event: any other 4xx, a redirect, a TLS certificate error, a
    /// URL that cannot be used. Trying again would not help.
    Failed,
    /// A mapped integration's buyer refused the lead (DESIGN.md section 18): its answer
    /// did not meet the integration's `accept`, or was a 4xx; `reason` is the buyer's.
    Refused { reason: String },
}

/// One attempt, ready to record.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub event_id: crate::ids::EventId,
    /// The event's rowid when it was claimed ([`Claimed::row`]).
    pub row: i64,
    pub buyer_id: crate::ids::BuyerId,
    pub claim: i64,
    /// The attempt was the probe of an unhealthy endpoint.
    pub probe: bool,
    pub url: String,
    pub started_at: i64,
    pub duration_ms: i64,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    pub response_excerpt: Option<String>,
    pub verdict: Verdict,
    /// What the attempt says about the buyer's endpoint (its circuit breaker).
    pub observation: Observation,
    /// The request a mapped integration sent, secrets masked (JSON); `None` for the
    /// generic webhook, whose body is the event's payload.
    pub request: Option<String>,
}

stored_enum! {
    /// What recording an attempt did to its event (`outbox_attempts.outcome`).
    pub enum Outcome as "attempt outcome" {
        Delivered = "delivered",
        /// Due again later.
        Retry = "retry",
        Failed = "failed",
        /// The buyer's API refused the lead: the event is given up, the transaction rejected.
        Refused = "refused",
    }
}

/// Where an event that delivers a transaction now stands, as that transaction's delivery
/// status says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendState {
    /// Due (again): an operator's retry reopened a failed event.
    Pending,
    /// The event's first 2xx; the buyer's own id for the transaction when its answer named
    /// one.
    Sent { partner_external_id: Option<String> },
    /// The event was given up.
    Failed,
}

/// A change of the delivery status of the transaction an event delivers, for the use case
/// to apply through the transaction's owner in the same job. An event that delivers no
/// transaction (a notice) makes none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeliveryFact {
    pub transaction_id: crate::ids::TransactionId,
    pub state: SendState,
}

/// What recording one attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub outcome: Outcome,
    /// The transaction's new delivery status, when the attempt moved its event to one.
    pub delivery: Option<DeliveryFact>,
    /// The refusal a refused attempt of the event's latest claim made.
    pub refusal: Option<Refusal>,
}

/// A refusal recorded on a pending event: what the transaction's owner and the waterfall
/// do next, in the same job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub transaction_id: crate::ids::TransactionId,
    pub buyer_id: crate::ids::BuyerId,
    pub reason: String,
    /// Refused at the event's first attempt (the waterfall applies only then).
    pub first_attempt: bool,
}

/// Records an attempt and moves its event: delivered after a 2xx (whatever claim made it:
/// the buyer has it); due again on the schedule or failed otherwise, but only when the
/// attempt's claim is still the event's latest (a stale sender's error must not reschedule
/// an event another claim owns now). The worker calls [`record_attempt`]; the unit tests
/// need only the outcome.
#[cfg(test)]
pub(crate) fn record(
    conn: &Connection,
    attempt: &Attempt,
    schedule: &RetrySchedule,
    now: i64,
) -> rusqlite::Result<Option<Outcome>> {
    Ok(record_attempt(conn, attempt, schedule, now)?.map(|recorded| recorded.outcome))
}

/// What recording an attempt reads of its event.
const EVENT_STATE: &str =
    "rowid, status, attempts, retry_base, claims, transaction_id, erased_at IS NOT NULL";

/// [`record`], also returning what the attempt means for the event's transaction (its
/// delivery status, a refusal), for the caller to apply in the same job. `None` when the
/// event is gone.
pub(crate) fn record_attempt(
    conn: &Connection,
    attempt: &Attempt,
    schedule: &RetrySchedule,
    now: i64,
) -> rusqlite::Result<Option<Recorded>> {
    let state = |row: &Row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, EventStatus>(1)?,
            row.get::<_, i64>(2)?,
            row.get::<_, i64>(3)?,
            row.get::<_, i64>(4)?,
            row.get::<_, Option<crate::ids::TransactionId>>(5)?,
            row.get::<_, bool>(6)?,
        ))
    };
    // Found by the rowid of its claim; by its id only if that no longer names it (a rowid
    // can change when the file is vacuumed while the server is down, or be reused once
    // its event was purged).
    // Built once: this runs for every attempt, on the writer.
    static BY_ROW: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("SELECT {EVENT_STATE} FROM outbox_events WHERE rowid = ?1 AND id = ?2")
    });
    static BY_ID: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("SELECT {EVENT_STATE} FROM outbox_events WHERE id = ?1")
    });
    let mut row = conn
        .prepare_kept(&BY_ROW)?
        .query_row(params![attempt.row, attempt.event_id], state)
        .optional()?;
    if row.is_none() {
        row = conn
            .prepare_kept(&BY_ID)?
            .query_row([&attempt.event_id], state)
            .optional()?;
    }
    let Some((rowid, status, attempts, retry_base, claims, transaction_id, erased)) = row else {
        return Ok(None);
    };
    // An attempt that was sent before its event's person was erased may come back with an
    // answer that echoes the person: keep none for an erased event.
    let (excerpt, request) = if erased {
        (None, None)
    } else {
        (
            attempt.response_excerpt.as_deref(),
            attempt.request.as_deref(),
        )
    };
    let number = attempts + 1;
    let current = claims == attempt.claim && status == EventStatus::Pending;
    let error = attempt.error.clone().or_else(|| match &attempt.verdict {
        Verdict::Delivered { .. } => None,
        Verdict::Refused { reason } => Some(format!("refused by the buyer: {reason}")),
        _ => attempt.http_status.map(|s| format!("HTTP {s}")),
    });
    let mut refusal = None;
    let mut delivery = None;
    let state_now = |state: SendState| {
        transaction_id.clone().map(|transaction_id| DeliveryFact {
            transaction_id,
            state,
        })
    };
    // Whether the statement that moved the event also counted the attempt: one write of
    // the event's row per attempt instead of two (the row holds the whole payload).
    let mut counted = false;
    let outcome = match &attempt.verdict {
        Verdict::Delivered {
            partner_external_id,
        } => {
            if status != EventStatus::Delivered {
                conn.prepare_kept(
                    "UPDATE outbox_events SET status = 'delivered', delivered_at = ?2,
                        lease_until = NULL, last_error = NULL, attempts = attempts + 1
                     WHERE rowid = ?1",
                )?
                .execute(params![rowid, now])?;
                counted = true;
                delivery = state_now(SendState::Sent {
                    partner_external_id: partner_external_id.clone(),
                });
            }
            Outcome::Delivered
        }
        // A failed probe of an unhealthy endpoint says the buyer is down, not that this
        // event is: the event keeps its place in its schedule (the attempt does not count
        // towards it) and waits with the others for the next probe.
        Verdict::Retry { .. } if attempt.probe => {
            if current {
                conn.prepare_kept(
                    "UPDATE outbox_events SET next_attempt_at = ?2, lease_until = NULL,
                        last_error = ?3, retry_base = retry_base + 1, attempts = attempts + 1
                     WHERE rowid = ?1",
                )?
                .execute(params![rowid, now, error])?;
                counted = true;
            }
            Outcome::Retry
        }
        Verdict::Retry { retry_after } => {
            let failed_in_a_row = u32::try_from(number - retry_base).unwrap_or(u32::MAX);
            match schedule.delay(failed_in_a_row, *retry_after, schedule::random_fraction()) {
                Some(wait) => {
                    if current {
                        let due = now + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2);
                        conn.prepare_kept(
                            "UPDATE outbox_events SET next_attempt_at = ?2, lease_until = NULL,
                                last_error = ?3, attempts = attempts + 1
                             WHERE rowid = ?1",
                        )?
                        .execute(params![rowid, due, error])?;
                        counted = true;
                    }
                    Outcome::Retry
                }
                None => {
                    if current {
                        mark_failed(conn, rowid, &error)?;
                        counted = true;
                        delivery = state_now(SendState::Failed);
                    }
                    Outcome::Failed
                }
            }
        }
        Verdict::Failed => {
            if current {
                mark_failed(conn, rowid, &error)?;
                counted = true;
                delivery = state_now(SendState::Failed);
            }
            Outcome::Failed
        }
        // Given up like a permanent failure; the transaction's fate is the caller's.
        Verdict::Refused { reason } => {
            if current {
                mark_failed(conn, rowid, &error)?;
                counted = true;
                delivery = state_now(SendState::Failed);
                refusal = transaction_id.clone().map(|transaction_id| Refusal {
                    transaction_id,
                    buyer_id: attempt.buyer_id.clone(),
                    reason: reason.clone(),
                    first_attempt: number == 1,
                });
            }
            Outcome::Refused
        }
    };
    if !counted {
        conn.prepare_kept("UPDATE outbox_events SET attempts = attempts + 1 WHERE rowid = ?1")?
            .execute([rowid])?;
    }
    conn.prepare_kept(
        "INSERT INTO outbox_attempts (event_id, attempt, url, started_at, duration_ms,
            http_status, error, response_excerpt, outcome, request)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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
        outcome,
        request
    ])?;
    Ok(Some(Recorded {
        outcome,
        delivery,
        refusal,
    }))
}

/// Gives the event at `rowid` up after an attempt, counting the attempt.
fn mark_failed(conn: &Connection, rowid: i64, error: &Option<String>) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "UPDATE outbox_events SET status = 'failed', lease_until = NULL, last_error = ?2,
            attempts = attempts + 1
         WHERE rowid = ?1",
    )?
    .execute(params![rowid, error])?;
    Ok(())
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
    conn.prepare_kept(
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

/// Why an operator's retry of an event was refused by the outbox.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("unknown event '{0}'")]
    NotFound(crate::ids::EventId),
    #[error("event '{0}' was delivered already; there is nothing to retry")]
    AlreadyDelivered(crate::ids::EventId),
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
    pub id: crate::ids::EventId,
    pub kind: EventKind,
    pub transaction_id: Option<crate::ids::TransactionId>,
    pub buyer_id: crate::ids::BuyerId,
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
    pub fn view(&self) -> EventView<'_> {
        let pending = self.status == EventStatus::Pending;
        EventView {
            id: &self.id,
            event: self.kind.as_str(),
            transaction_id: self.transaction_id.as_ref(),
            buyer_account_id: self.buyer_id.as_str(),
            status: self.status.as_str(),
            attempts: self.attempts,
            next_attempt_at: pending.then(|| crate::clock::iso(self.next_attempt_at)),
            leased_until: self.lease_until.filter(|_| pending).map(crate::clock::iso),
            last_error: self.last_error.as_deref(),
            created_at: crate::clock::iso(self.created_at),
            delivered_at: self.delivered_at.map(crate::clock::iso),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("an event always serialises")
    }
}

/// An [`Event`] as `outbox list` shows it (without the body).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView<'a> {
    id: &'a crate::ids::EventId,
    event: &'static str,
    transaction_id: Option<&'a crate::ids::TransactionId>,
    buyer_account_id: &'a str,
    status: &'static str,
    attempts: i64,
    next_attempt_at: Option<String>,
    leased_until: Option<String>,
    last_error: Option<&'a str>,
    created_at: String,
    delivered_at: Option<String>,
}

pub fn find(conn: &Connection, id: &crate::ids::EventId) -> rusqlite::Result<Option<Event>> {
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
pub fn of_transaction(
    conn: &Connection,
    transaction_id: &crate::ids::TransactionId,
) -> rusqlite::Result<Vec<Event>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {EVENT_COLUMNS} FROM outbox_events WHERE transaction_id = ?1
         ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([transaction_id], event_from_row)?;
    rows.collect()
}

/// The body of the latest event buyer `buyer_id` got for lead `lead_id` (a preview shows
/// exactly what was sent).
pub(crate) fn latest_payload(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
    buyer_id: &crate::ids::BuyerId,
) -> rusqlite::Result<Option<String>> {
    conn.prepare_kept(
        "SELECT e.payload FROM outbox_events e JOIN transactions t ON t.id = e.transaction_id
         WHERE t.lead_id = ?1 AND t.buyer_id = ?2
         ORDER BY e.created_at DESC, e.id DESC LIMIT 1",
    )?
    .query_row(params![lead_id, buyer_id], |row| row.get(0))
    .optional()
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
    /// A mapped integration's request, secrets masked.
    pub request: Option<Value>,
}

impl AttemptRecord {
    pub fn view(&self) -> AttemptView<'_> {
        AttemptView {
            attempt: self.attempt,
            at: crate::clock::iso(self.started_at),
            url: &self.url,
            duration_ms: self.duration_ms,
            http_status: self.http_status,
            error: self.error.as_deref(),
            response_excerpt: self.response_excerpt.as_deref(),
            outcome: self.outcome.as_str(),
            request: self.request.as_ref(),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("an attempt always serialises")
    }
}

/// An [`AttemptRecord`] as shown (`outbox show`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView<'a> {
    attempt: i64,
    at: String,
    url: &'a str,
    duration_ms: i64,
    http_status: Option<i64>,
    error: Option<&'a str>,
    response_excerpt: Option<&'a str>,
    outcome: &'static str,
    /// A mapped integration's request as sent, secrets masked (free-form).
    request: Option<&'a Value>,
}

/// Every attempt of an event, in order.
pub fn attempts(
    conn: &Connection,
    event_id: &crate::ids::EventId,
) -> rusqlite::Result<Vec<AttemptRecord>> {
    let mut stmt = conn.prepare_kept(
        "SELECT attempt, url, started_at, duration_ms, http_status, error, response_excerpt,
            outcome, request
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
            request: row
                .get::<_, Option<String>>(8)?
                .and_then(|text| serde_json::from_str(&text).ok()),
        })
    })?;
    rows.collect()
}

/// An event an operator's retry may make due now: failed, or pending and not in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Retryable {
    pub id: crate::ids::EventId,
    pub status: EventStatus,
    /// The transaction it delivers, if any: the retry's caller leaves the event alone when
    /// that sale was taken back.
    pub transaction_id: Option<crate::ids::TransactionId>,
}

/// Event `id` as an operator's retry brings it back; refused when it is unknown or was
/// delivered already.
pub(crate) fn retryable(
    conn: &Connection,
    id: &crate::ids::EventId,
) -> Result<Retryable, OutboxError> {
    let event = find(conn, id)?.ok_or_else(|| OutboxError::NotFound(id.clone()))?;
    if event.status == EventStatus::Delivered {
        return Err(OutboxError::AlreadyDelivered(id.clone()));
    }
    Ok(Retryable {
        id: event.id,
        status: event.status,
        transaction_id: event.transaction_id,
    })
}

/// One chunk of a buyer's events, by id, for `outbox retry --buyer`.
#[derive(Debug, Clone, Copy)]
pub struct BuyerChunk<'a> {
    pub buyer_id: &'a crate::ids::BuyerId,
    /// Only failed or only pending events; `None`: both.
    pub status: Option<EventStatus>,
    /// The last id of the previous chunk (`""` for the first).
    pub after: &'a str,
    /// How many events at most.
    pub size: usize,
}

/// The events of `chunk` that are failed, or pending and not in flight at `now`: what
/// `outbox retry --buyer` makes due, each through [`reopen`]. Returns them and the last id
/// it looked at (`None` when there were none: the caller is done).
pub(crate) fn retryable_of_buyer(
    conn: &Connection,
    chunk: &BuyerChunk,
    now: i64,
) -> rusqlite::Result<(Vec<Retryable>, Option<String>)> {
    let found: Vec<(Retryable, Option<i64>)> = conn
        .prepare_kept(
            "SELECT id, status, lease_until, transaction_id FROM outbox_events
             WHERE buyer_id = ?1 AND id > ?2 AND status <> 'delivered'
               AND (?3 IS NULL OR status = ?3)
             ORDER BY id",
        )?
        .query_map(params![chunk.buyer_id, chunk.after, chunk.status], |row| {
            Ok((
                Retryable {
                    id: row.get(0)?,
                    status: row.get(1)?,
                    transaction_id: row.get(3)?,
                },
                row.get(2)?,
            ))
        })?
        // No `LIMIT ?` (see `claim_for_buyer`): the rows come in id order.
        .take(chunk.size)
        .collect::<Result<_, _>>()?;
    let last = found.last().map(|(event, _)| event.id.to_string());
    let retryable = found
        .into_iter()
        // An event in flight is being tried already; making it due would send it twice.
        .filter(|(event, lease_until)| {
            !(event.status == EventStatus::Pending && lease_until.is_some_and(|end| end > now))
        })
        .map(|(event, _)| event)
        .collect();
    Ok((retryable, last))
}

/// Makes `event` due now, the one way an operator's retry (by id or in bulk) brings an
/// event back. A failed event starts the retry schedule again, and its transaction's
/// delivery status goes back to pending: the fact returned, for the caller to apply. The
/// caller decides first whether the event may go again (its sale not taken back).
pub(crate) fn reopen(
    conn: &Connection,
    event: &Retryable,
    now: i64,
) -> rusqlite::Result<Option<DeliveryFact>> {
    conn.prepare_kept(
        "UPDATE outbox_events
         SET status = 'pending', next_attempt_at = ?2, lease_until = NULL,
             retry_base = CASE WHEN status = 'failed' THEN attempts ELSE retry_base END
         WHERE id = ?1",
    )?
    .execute(params![event.id, now])?;
    Ok(event
        .transaction_id
        .clone()
        .filter(|_| event.status == EventStatus::Failed)
        .map(|transaction_id| DeliveryFact {
            transaction_id,
            state: SendState::Pending,
        }))
}

/// Gives up a pending event for good (its transaction was voided): it is marked failed
/// with `reason`, and an attempt under way that still gets its 2xx marks it delivered.
pub(crate) fn cancel_pending(
    conn: &Connection,
    transaction_id: &crate::ids::TransactionId,
    reason: &str,
) -> rusqlite::Result<usize> {
    conn.prepare_kept(
        "UPDATE outbox_events SET status = 'failed', lease_until = NULL, last_error = ?2
         WHERE transaction_id = ?1 AND status = 'pending'",
    )?
    .execute(params![transaction_id, reason])
}

/// Voids the events of transaction `transaction_id` (just rejected or cancelled) that were
/// never tried and are not being tried: the person's data is not sent for a sale that no
/// longer exists. An event whose first attempt is in flight (leased) is not recalled, and
/// one tried before goes on as it was. Returns how many were voided.
pub(crate) fn void_unsent(
    conn: &Connection,
    transaction_id: &crate::ids::TransactionId,
    reason: &str,
    now: i64,
) -> rusqlite::Result<usize> {
    conn.prepare_kept(
        "UPDATE outbox_events SET status = 'voided', lease_until = NULL, last_error = ?2
         WHERE transaction_id = ?1 AND status = 'pending' AND attempts = 0
           AND (lease_until IS NULL OR lease_until <= ?3)",
    )?
    .execute(params![transaction_id, reason, now])
}

/// The events of a transaction as an erasure rewrites them: id and payload.
pub(crate) fn payloads_of_transaction(
    conn: &Connection,
    transaction_id: &crate::ids::TransactionId,
) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare_kept(
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
/// echo the person) and the requests a mapped integration sent (they carry the person). A pending event is sent with the new payload from its next attempt
/// on, under the same `webhook-id`; the event remembers the erasure, so an attempt that
/// was in flight meanwhile records no excerpt ([`record`]).
pub(crate) fn erase_event(
    conn: &Connection,
    id: &str,
    payload: &str,
    now: i64,
) -> rusqlite::Result<ErasedEvent> {
    conn.prepare_kept(
        "UPDATE outbox_events SET payload = ?2, erased_at = coalesce(erased_at, ?3)
         WHERE id = ?1",
    )?
    .execute(params![id, payload, now])?;
    let attempts = conn
        .prepare_kept(
            "UPDATE outbox_attempts SET response_excerpt = NULL, request = NULL
             WHERE event_id = ?1 AND (response_excerpt IS NOT NULL OR request IS NOT NULL)",
        )?
        .execute([id])?;
    Ok(ErasedEvent {
        attempts: attempts as u64,
    })
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
