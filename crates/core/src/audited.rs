//! The changes that more than one edge makes (the CLI, the console, the portals), each as
//! one function that makes the change through its owner and records it in the audit log on
//! the same connection, so every edge writes the same entry for the same change.
//!
//! Owns no table: buyers are `config::buyer`'s, returns `lifecycle::returns`', events
//! `outbox::store`'s, portal users `partners`', entries `audit`'s. Changes made by one edge only record their entry
//! where they are made.

use rusqlite::Connection;
use serde_json::Value;

use crate::attempt::RetryError;
use crate::audit::{self, Actor, Changes};
use crate::config::{ConfigError, buyer};
use crate::db::Db;
use crate::lifecycle::LifecycleError;
use crate::lifecycle::returns::{self, Decided, Decision, Filed};
use crate::outbox::store::{self as outbox, Event};
use crate::partners::{self, PartnerUser, PartnerUserError};

/// Pauses (`paused`) or resumes buyer `id`: `buyer.pause` or `buyer.resume`.
pub fn set_buyer_paused(
    conn: &Connection,
    actor: &Actor,
    id: &crate::ids::BuyerId,
    paused: bool,
    now: i64,
) -> Result<buyer::Buyer, ConfigError> {
    let before = buyer::get(conn, id)?;
    let after = buyer::set_paused(conn, id, paused)?;
    let action = if paused {
        "buyer.pause"
    } else {
        "buyer.resume"
    };
    let status = |b: &buyer::Buyer| if b.paused { "paused" } else { "active" };
    let changes = Changes::new().set("status", status(&before), status(&after));
    audit::record(conn, actor, action, id.as_str(), &changes, now)?;
    Ok(after)
}

/// Decides the pending return of transaction `id` (`returns::decide`):
/// `transaction.return_approve` or `transaction.return_deny`, with the return's and the
/// transaction's status. `history_actor` is who the transaction's history names
/// (`operator`).
pub fn decide_return(
    conn: &Connection,
    actor: &Actor,
    history_actor: &str,
    id: &crate::ids::TransactionId,
    decision: Decision,
    note: Option<&str>,
    now: i64,
) -> Result<Decided, LifecycleError> {
    let before = crate::delivery::transaction::find(conn, id)?.map(|t| t.status.to_string());
    let decided = returns::decide(conn, id, decision, note, history_actor, now)?;
    let action = match decision {
        Decision::Approve => "transaction.return_approve",
        Decision::Deny => "transaction.return_deny",
    };
    let changes = Changes::new()
        .set("returnStatus", "pending", decided.item.status.to_string())
        .set(
            "status",
            before.map_or(Value::Null, Value::from),
            decided.transaction.status.as_str(),
        )
        .set("note", Value::Null, decided.item.note.clone());
    audit::record(conn, actor, action, id.as_str(), &changes, now)?;
    Ok(decided)
}

/// Files a return of transaction `id` for its buyer (`returns::request`):
/// `transaction.return_request`, with the reason code and the note; a replay of a return
/// filed before changes nothing and records nothing. `history_actor` is who the
/// transaction's history names.
pub fn request_return(
    conn: &Connection,
    actor: &Actor,
    history_actor: &str,
    id: &crate::ids::TransactionId,
    reason_code: &str,
    note: Option<&str>,
    now: i64,
) -> Result<Filed, LifecycleError> {
    let filed = returns::request(conn, id, reason_code, note, history_actor, now)?;
    if !filed.already_applied() {
        let changes = Changes::new()
            .set("reasonCode", Value::Null, reason_code)
            .set("note", Value::Null, note);
        audit::record(
            conn,
            actor,
            "transaction.return_request",
            id.as_str(),
            &changes,
            now,
        )?;
    }
    Ok(filed)
}

/// Revokes portal user `id`, of a buyer or a supplier (`partners::revoke`: its sessions
/// end): `portal_user.revoke`.
pub fn revoke_portal_user(
    conn: &Connection,
    actor: &Actor,
    id: &str,
    now: i64,
) -> Result<PartnerUser, PartnerUserError> {
    let user =
        partners::find(conn, id)?.ok_or_else(|| PartnerUserError::NotFound(id.to_string()))?;
    let buyer_side = matches!(user.party, partners::Party::Buyer(_));
    revoke_portal_user_of(conn, actor, id, buyer_side, now)
}

/// [`revoke_portal_user`] of a buyer's user (`buyer_side`) or a supplier's: a user of the
/// other side is not found (`buyer user revoke`, `supplier user revoke`).
pub fn revoke_portal_user_of(
    conn: &Connection,
    actor: &Actor,
    id: &str,
    buyer_side: bool,
    now: i64,
) -> Result<PartnerUser, PartnerUserError> {
    let before = partners::find(conn, id)?.and_then(|user| user.revoked_at);
    let user = partners::revoke(conn, id, buyer_side, now)?;
    let iso = |at: Option<i64>| at.map_or(Value::Null, |at| crate::clock::iso(at).into());
    let changes = Changes::new()
        .set("name", user.name.as_str(), user.name.as_str())
        .set("party", user.party.label(), user.party.label())
        .set("revokedAt", iso(before), iso(user.revoked_at));
    audit::record(conn, actor, "portal_user.revoke", id, &changes, now)?;
    Ok(user)
}

/// Makes failed or pending event `id` due now (`attempt::retry_event`): `outbox.retry`.
pub fn retry_event(
    conn: &Connection,
    actor: &Actor,
    id: &crate::ids::EventId,
    now: i64,
) -> Result<Event, RetryError> {
    let before = outbox::find(conn, id)?.map(|e| e.status.as_str().to_string());
    let after = crate::attempt::retry_event(conn, id, now)?;
    let changes = Changes::new().set(
        "status",
        before.map_or(Value::Null, Value::from),
        after.status.as_str(),
    );
    audit::record(conn, actor, "outbox.retry", id.as_str(), &changes, now)?;
    Ok(after)
}

/// [`set_buyer_paused`] as one writer job, for the console.
pub async fn set_buyer_paused_job(
    db: &Db,
    actor: Actor,
    id: crate::ids::BuyerId,
    paused: bool,
    now: i64,
) -> Result<buyer::Buyer, ConfigError> {
    db.write(move |conn| set_buyer_paused(conn, &actor, &id, paused, now))
        .await
}

/// [`decide_return`] as one writer job, for the console.
pub async fn decide_return_job(
    db: &Db,
    actor: Actor,
    id: crate::ids::TransactionId,
    decision: Decision,
    note: Option<String>,
    now: i64,
) -> Result<Decided, LifecycleError> {
    db.write(move |conn| {
        decide_return(
            conn,
            &actor,
            "operator",
            &id,
            decision,
            note.as_deref(),
            now,
        )
    })
    .await
}

/// [`revoke_portal_user`] as one writer job, for the console.
pub async fn revoke_portal_user_job(
    db: &Db,
    actor: Actor,
    id: String,
    now: i64,
) -> Result<PartnerUser, PartnerUserError> {
    db.write(move |conn| revoke_portal_user(conn, &actor, &id, now))
        .await
}

/// [`retry_event`] as one writer job, for the console.
pub async fn retry_event_job(
    db: &Db,
    actor: Actor,
    id: crate::ids::EventId,
    now: i64,
) -> Result<Event, RetryError> {
    db.write(move |conn| retry_event(conn, &actor, &id, now))
        .await
}
