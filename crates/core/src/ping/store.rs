//! The `pings` and `ping_reservations` tables: every write and every read of them (a
//! ping's bids are `bids`'s).
//!
//! Owns the ping's record and its states (`accepted` → `posted` | `expired` | `released`;
//! `rejected` from the start), and giving a reservation's places back: the cap places
//! through `caps::release` and the balance held through `ledger::unhold`, each in the
//! job that ends the ping. [`expire_due`] ends every accepted ping whose time has passed:
//! the sweep of `serve` calls it, and so does every job that decides on caps or balances
//! (a ping, an ingest with auto-delivery, a post) before it reads them, so a lapsed
//! reservation never holds anything whatever the sweep's timing. [`erase_person`] takes the
//! person out of the pings tied to them, for `privacy`'s erasure, and
//! [`delete_unposted_before`] deletes the old pings that never became a lead, for its
//! purge.

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use crate::caps::{self, Windows};
use crate::db::stored::stored_enum;
use crate::ledger;

stored_enum! {
    /// Where a ping stands.
    pub enum PingStatus as "ping status" {
        /// Sold: its reservations hold until `expiresAt`.
        Accepted = "accepted",
        /// No buyer (or routing off, or the score too low): nothing held.
        Rejected = "rejected",
        /// Its lead came and was delivered to the reserved buyers.
        Posted = "posted",
        /// No lead came in time; the reservations were given back.
        Expired = "expired",
        /// The post failed (validation, duplicate, quality); the reservations were given back.
        Released = "released",
    }
}

/// A new ping as the writer inserts it.
pub(crate) struct NewPing<'a> {
    pub(crate) id: &'a str,
    pub(crate) source_id: &'a crate::ids::SourceId,
    pub(crate) container_id: &'a str,
    pub(crate) workspace_id: &'a str,
    pub(crate) product_id: &'a str,
    pub(crate) external_id: Option<&'a str>,
    pub(crate) email_sha256: Option<&'a str>,
    pub(crate) phone_sha256: Option<&'a str>,
    pub(crate) body: &'a str,
    pub(crate) status: PingStatus,
    pub(crate) reason: Option<&'a str>,
    pub(crate) payout_cents: Option<i64>,
    /// The operator's decision trace (JSON text); stored as `ingest::trace` stores a lead
    /// request's, a zstd frame of about a fifth of its size (a ping's twenty candidates made
    /// some 4.8 KB of text, more than a page: the biggest part of what a ping wrote).
    pub(crate) decision: &'a str,
    pub(crate) created_at: i64,
    pub(crate) expires_at: Option<i64>,
}

pub(crate) fn insert(conn: &Connection, ping: &NewPing) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "INSERT INTO pings (id, source_id, container_id, workspace_id, product_id, external_id,
            email_sha256, phone_sha256, body, status, reason, payout_cents, decision,
            created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )?
    .execute(params![
        ping.id,
        ping.source_id,
        ping.container_id,
        ping.workspace_id,
        ping.product_id,
        ping.external_id,
        ping.email_sha256,
        ping.phone_sha256,
        ping.body,
        ping.status,
        ping.reason,
        ping.payout_cents,
        crate::ingest::trace::encode(ping.decision, ping.id),
        ping.created_at,
        ping.expires_at,
    ])?;
    Ok(())
}

/// One buyer's reservation of an accepted ping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub position: i64,
    pub buyer_id: crate::ids::BuyerId,
    pub product_id: String,
    pub price_cents: i64,
    /// What it holds of a prepaid balance (0 for postpaid buyers).
    pub held_cents: i64,
    /// The cap windows its place is held in (their starts).
    pub cap_day_start: i64,
    pub cap_month_start: i64,
    pub bid_request_id: Option<String>,
    pub bid_id: Option<String>,
}

/// A [`Reservation`] as the operator sees it (`ping show`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationView<'a> {
    buyer_account_id: &'a str,
    buyer_price: f64,
    held: f64,
    bid: Option<ReservedBidView<'a>>,
}

/// The bid a reservation was priced by.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservedBidView<'a> {
    bid_request_id: &'a str,
    bid_id: Option<&'a str>,
}

impl Reservation {
    pub fn view(&self) -> ReservationView<'_> {
        ReservationView {
            buyer_account_id: self.buyer_id.as_str(),
            buyer_price: crate::money::as_f64(self.price_cents),
            held: crate::money::as_f64(self.held_cents),
            bid: self.bid_request_id.as_deref().map(|id| ReservedBidView {
                bid_request_id: id,
                bid_id: self.bid_id.as_deref(),
            }),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a reservation always serialises")
    }

    fn windows(&self) -> Windows {
        // `caps::release` names a window by its start; the ends are not read.
        Windows {
            day: (self.cap_day_start, self.cap_day_start),
            month: (self.cap_month_start, self.cap_month_start),
        }
    }
}

/// Takes a reservation: holds the buyer's cap place in `windows` and `held_cents` of its
/// balance, and records both under the ping, in the caller's job.
pub(crate) fn reserve(
    conn: &Connection,
    ping_id: &str,
    reservation: &Reservation,
    windows: &Windows,
) -> rusqlite::Result<()> {
    caps::hold(
        conn,
        &reservation.buyer_id,
        &reservation.product_id,
        windows,
    )?;
    ledger::hold(conn, &reservation.buyer_id, reservation.held_cents)?;
    conn.prepare_kept(
        "INSERT INTO ping_reservations (ping_id, position, buyer_id, product_id, price_cents,
            held_cents, cap_day_start, cap_month_start, bid_request_id, bid_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        ping_id,
        reservation.position,
        reservation.buyer_id,
        reservation.product_id,
        reservation.price_cents,
        reservation.held_cents,
        windows.day.0,
        windows.month.0,
        reservation.bid_request_id,
        reservation.bid_id,
    ])?;
    Ok(())
}

/// The reservations of a ping, in rank order.
pub fn reservations(conn: &Connection, ping_id: &str) -> rusqlite::Result<Vec<Reservation>> {
    conn.prepare_kept(
        "SELECT position, buyer_id, product_id, price_cents, held_cents, cap_day_start,
                cap_month_start, bid_request_id, bid_id
         FROM ping_reservations WHERE ping_id = ?1 ORDER BY position",
    )?
    .query_map([ping_id], |row| {
        Ok(Reservation {
            position: row.get(0)?,
            buyer_id: row.get(1)?,
            product_id: row.get(2)?,
            price_cents: row.get(3)?,
            held_cents: row.get(4)?,
            cap_day_start: row.get(5)?,
            cap_month_start: row.get(6)?,
            bid_request_id: row.get(7)?,
            bid_id: row.get(8)?,
        })
    })?
    .collect()
}

/// Gives back what the ping's reservations hold (cap places, balance), and returns them.
/// The rows stay: they are the record of what was sold.
fn give_back(conn: &Connection, ping_id: &str) -> rusqlite::Result<Vec<Reservation>> {
    let held = reservations(conn, ping_id)?;
    for reservation in &held {
        caps::release(
            conn,
            &reservation.buyer_id,
            &reservation.product_id,
            &reservation.windows(),
        )?;
        ledger::unhold(conn, &reservation.buyer_id, reservation.held_cents)?;
    }
    Ok(held)
}

/// Ends an accepted ping: gives its reservations back and moves it to `status`
/// (`expired`, `released`, or `posted` with its lead). Returns the reservations it held;
/// nothing when the ping was no longer accepted.
pub(crate) fn end(
    conn: &Connection,
    ping_id: &str,
    status: PingStatus,
    reason: Option<&str>,
    lead_id: Option<crate::ids::LeadId>,
    now: i64,
) -> rusqlite::Result<Vec<Reservation>> {
    let changed = conn
        .prepare_kept(
            "UPDATE pings SET status = ?2, reason = coalesce(?3, reason), lead_id = ?4,
                ended_at = ?5
             WHERE id = ?1 AND status = 'accepted'",
        )?
        .execute(params![ping_id, status, reason, lead_id, now])?;
    if changed == 0 {
        return Ok(Vec::new());
    }
    give_back(conn, ping_id)
}

/// Ends every accepted ping whose reservation has lapsed at `now` (`expired`); returns how
/// many. One index probe when none has.
pub(crate) fn expire_due(conn: &Connection, now: i64) -> rusqlite::Result<usize> {
    let due: Vec<String> = conn
        .prepare_kept(
            "SELECT id FROM pings WHERE status = 'accepted' AND expires_at <= ?1
             ORDER BY expires_at",
        )?
        .query_map([now], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for id in &due {
        end(conn, id, PingStatus::Expired, None, None, now)?;
    }
    Ok(due.len())
}

/// Whether any accepted ping has lapsed at `now` (the sweep's read before it writes).
pub(crate) fn any_due(conn: &Connection, now: i64) -> rusqlite::Result<bool> {
    conn.prepare_kept(
        "SELECT EXISTS (SELECT 1 FROM pings WHERE status = 'accepted' AND expires_at <= ?1)",
    )?
    .query_row([now], |row| row.get(0))
}

/// The pings of a workspace a purge deletes: created before the cutoff and ended without
/// a post (rejected, expired, released). The same terms as the partial index
/// `pings_unposted` (migration 17), so the planner walks it and never a posted ping.
const UNPOSTED_BEFORE: &str = "FROM pings
     WHERE workspace_id = ?1 AND created_at < ?2 AND status <> 'accepted' AND status <> 'posted'";

/// How many pings of `workspace_id` created before `cutoff` a purge at `now` deletes:
/// those ended without a post, and the accepted ones whose reservation has lapsed (the
/// purge's job expires them first).
pub(crate) fn count_unposted_before(
    conn: &Connection,
    workspace_id: &str,
    cutoff: i64,
    now: i64,
) -> rusqlite::Result<u64> {
    let ended: i64 = conn
        .prepare_cached(&format!("SELECT count(*) {UNPOSTED_BEFORE}"))?
        .query_row(params![workspace_id, cutoff], |row| row.get(0))?;
    let lapsed: i64 = conn
        .prepare_kept(
            "SELECT count(*) FROM pings
             WHERE status = 'accepted' AND expires_at <= ?3
               AND workspace_id = ?1 AND created_at < ?2",
        )?
        .query_row(params![workspace_id, cutoff, now], |row| row.get(0))?;
    Ok((ended + lapsed).max(0) as u64)
}

/// Deletes the oldest `limit` pings of `workspace_id` created before `cutoff` that ended
/// without a post, with their reservations (given back when they ended) and bids: a ping
/// holds no lead, so nothing else names it. Lapsed reservations are expired first. Returns
/// how many pings went; fewer than `limit` means none is left.
pub(crate) fn delete_unposted_before(
    conn: &Connection,
    workspace_id: &str,
    cutoff: i64,
    limit: usize,
    now: i64,
) -> rusqlite::Result<u64> {
    expire_due(conn, now)?;
    // No `LIMIT ?`: SQLite plans a bound LIMIT by its value, so the cached statement would
    // be compiled again for every job. The rows come in `pings_unposted` order, so reading
    // only `limit` of them costs the same.
    let ids: Vec<String> = conn
        .prepare_cached(&format!("SELECT id {UNPOSTED_BEFORE} ORDER BY created_at"))?
        .query_map(params![workspace_id, cutoff], |row| row.get(0))?
        .take(limit)
        .collect::<Result<_, _>>()?;
    for id in &ids {
        crate::bids::delete_of_ping(conn, id)?;
        conn.prepare_kept("DELETE FROM ping_reservations WHERE ping_id = ?1")?
            .execute([id])?;
        conn.prepare_kept("DELETE FROM pings WHERE id = ?1")?
            .execute([id])?;
    }
    Ok(ids.len() as u64)
}

/// What ties pings to a person an erasure takes (`privacy`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tie<'a> {
    /// The ping whose post made this lead.
    Lead(crate::ids::LeadId),
    /// Every ping that promised this email hash (`secrets::hash` of the duplicate key).
    EmailHash(&'a str),
    /// Every ping that promised this phone hash.
    PhoneHash(&'a str),
}

/// What an erased ping's body keeps, as a lead's tombstone keeps them: the product, the
/// partner's own id and the country. Postal code, city, answers and properties go.
const KEPT_IN_BODY: [&str; 4] = ["productSlug", "productId", "externalId", "country"];

/// A ping's body as received, without the person ([`KEPT_IN_BODY`] only); a body that
/// does not read as an object becomes `{}`.
fn erased_body(body: &str) -> String {
    let kept: serde_json::Map<String, Value> = match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(fields)) => fields
            .into_iter()
            .filter(|(name, _)| KEPT_IN_BODY.contains(&name.as_str()))
            .collect(),
        _ => serde_json::Map::new(),
    };
    Value::Object(kept).to_string()
}

/// Removes the person from the pings `tie` names: the email and phone hashes they
/// promised, and of the body all but [`KEPT_IN_BODY`]. Ids, statuses, payouts,
/// reservations and bids stay (they hold no person). Returns how many pings changed; one
/// erased before is not counted again.
pub(crate) fn erase_person(conn: &Connection, tie: Tie) -> rusqlite::Result<u64> {
    // Each column has its own index (migration 14).
    let (sql, value) = match tie {
        Tie::Lead(id) => (
            "SELECT id, body FROM pings WHERE lead_id = ?1",
            rusqlite::types::Value::from(id),
        ),
        Tie::EmailHash(hash) => (
            "SELECT id, body FROM pings WHERE email_sha256 = ?1",
            hash.to_string().into(),
        ),
        Tie::PhoneHash(hash) => (
            "SELECT id, body FROM pings WHERE phone_sha256 = ?1",
            hash.to_string().into(),
        ),
    };
    let found: Vec<(String, String)> = conn
        .prepare_kept(sql)?
        .query_map([value], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut changed = 0;
    for (id, body) in found {
        let erased = erased_body(&body);
        changed += conn
            .prepare_kept(
                "UPDATE pings SET email_sha256 = NULL, phone_sha256 = NULL, body = ?2
                 WHERE id = ?1
                   AND (email_sha256 IS NOT NULL OR phone_sha256 IS NOT NULL OR body <> ?2)",
            )?
            .execute(params![id, erased])? as u64;
    }
    Ok(changed)
}

/// A ping as stored.
#[derive(Debug, Clone)]
pub struct Ping {
    pub id: String,
    pub source_id: crate::ids::SourceId,
    pub container_id: String,
    pub product_id: String,
    pub external_id: Option<String>,
    pub email_sha256: Option<String>,
    pub phone_sha256: Option<String>,
    pub body: String,
    pub status: PingStatus,
    pub reason: Option<String>,
    pub payout_cents: Option<i64>,
    pub decision: Option<String>,
    pub lead_id: Option<crate::ids::LeadId>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub ended_at: Option<i64>,
}

/// A [`Ping`] as the operator sees it (`ping list`, `ping show`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PingView<'a> {
    id: &'a str,
    source_id: &'a crate::ids::SourceId,
    channel_id: &'a str,
    product_id: &'a str,
    external_id: Option<&'a str>,
    // What the partner promised the post will match (gone once the person is erased, with
    // the body's postal code, city and answers).
    email_sha256: Option<&'a str>,
    phone_sha256: Option<&'a str>,
    /// The ping's body as received (free-form).
    body: Value,
    status: &'static str,
    reason: Option<&'a str>,
    payout: Option<f64>,
    lead_id: Option<crate::ids::LeadId>,
    created_at: String,
    expires_at: Option<String>,
    ended_at: Option<String>,
}

impl Ping {
    /// The status as of `now`: an accepted ping whose time has passed is expired, also
    /// before the sweep has ended it (lazy on read).
    pub(crate) fn status_at(&self, now: i64) -> PingStatus {
        match (self.status, self.expires_at) {
            (PingStatus::Accepted, Some(expires)) if expires <= now => PingStatus::Expired,
            (status, _) => status,
        }
    }

    /// The operator's view (`ping list`, `ping show`).
    pub fn view(&self, now: i64) -> PingView<'_> {
        PingView {
            id: &self.id,
            source_id: &self.source_id,
            channel_id: &self.container_id,
            product_id: &self.product_id,
            external_id: self.external_id.as_deref(),
            email_sha256: self.email_sha256.as_deref(),
            phone_sha256: self.phone_sha256.as_deref(),
            body: serde_json::from_str::<Value>(&self.body).unwrap_or(Value::Null),
            status: self.status_at(now).as_str(),
            reason: self.reason.as_deref(),
            payout: self.payout_cents.map(crate::money::as_f64),
            lead_id: self.lead_id,
            created_at: crate::clock::iso(self.created_at),
            expires_at: self.expires_at.map(crate::clock::iso),
            ended_at: self.ended_at.map(crate::clock::iso),
        }
    }

    pub fn to_json(&self, now: i64) -> Value {
        serde_json::to_value(self.view(now)).expect("a ping always serialises")
    }
}

const COLUMNS: &str = "id, source_id, container_id, product_id, external_id, \
    email_sha256, phone_sha256, body, status, reason, payout_cents, decision, lead_id, \
    created_at, expires_at, ended_at";

fn from_row(row: &Row) -> rusqlite::Result<Ping> {
    let id: String = row.get(0)?;
    // Stored compressed (a ping stored before that: the text itself).
    let decision = crate::ingest::trace::decode(row.get_ref(11)?, &id)?;
    Ok(Ping {
        id,
        source_id: row.get(1)?,
        container_id: row.get(2)?,
        product_id: row.get(3)?,
        external_id: row.get(4)?,
        email_sha256: row.get(5)?,
        phone_sha256: row.get(6)?,
        body: row.get(7)?,
        status: row.get(8)?,
        reason: row.get(9)?,
        payout_cents: row.get(10)?,
        decision,
        lead_id: row.get(12)?,
        created_at: row.get(13)?,
        expires_at: row.get(14)?,
        ended_at: row.get(15)?,
    })
}

pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Ping>> {
    // Built once: a post reads its ping in its writer job.
    static SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {COLUMNS} FROM pings WHERE id = ?1"));
    conn.prepare_kept(&SQL)?
        .query_row([id], from_row)
        .optional()
}

/// The ping whose post made lead `lead_id` (`posted`), if any.
pub(crate) fn posted_of_lead(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
) -> rusqlite::Result<Option<Ping>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM pings WHERE lead_id = ?1 AND status = 'posted'"
    ))?
    .query_row([lead_id], from_row)
    .optional()
}

/// What `ping list` selects.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub source_id: Option<crate::ids::SourceId>,
    pub status: Option<PingStatus>,
    pub limit: i64,
}

/// The newest pings first, by source and status as of `now` (an accepted ping past its
/// time lists as expired).
pub fn list(conn: &Connection, filter: &ListFilter, now: i64) -> rusqlite::Result<Vec<Ping>> {
    // Accepted and expired are told apart by the clock, not only the column.
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM pings
         WHERE (?1 IS NULL OR source_id = ?1)
           AND (?2 IS NULL
                OR (?2 = 'accepted' AND status = 'accepted' AND expires_at > ?3)
                OR (?2 = 'expired' AND (status = 'expired'
                                        OR (status = 'accepted' AND expires_at <= ?3)))
                OR (?2 NOT IN ('accepted', 'expired') AND status = ?2))
         ORDER BY created_at DESC, id DESC LIMIT ?4"
    ))?
    .query_map(
        params![
            filter.source_id,
            filter.status.map(PingStatus::as_str),
            now,
            filter.limit
        ],
        from_row,
    )?
    .collect()
}
