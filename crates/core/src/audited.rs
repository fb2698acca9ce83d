//! The changes that more than one edge makes (the CLI, the console, the portals), each as
//! one function that makes the change through its owner and records it in the audit log on
//! the same connection, so every edge writes the same entry for the same change.
//!
//! Owns no table: buyers are `config::buyer`'s, returns `lifecycle::returns`', events
//! `outbox::store`'s, entries `audit`'s. Changes made by one edge only record their entry
//! where they are made.

use rusqlite::Connection;
use serde_json::Value;

use crate::audit::{self, Actor, Changes};
use crate::config::{ConfigError, buyer};
use crate::lifecycle::LifecycleError;
use crate::lifecycle::returns::{self, Decided, Decision};
use crate::outbox::store::{self as outbox, Event, OutboxError};

/// Pauses (`paused`) or resumes buyer `id`: `buyer.pause` or `buyer.resume`.
pub fn set_buyer_paused(
    conn: &Connection,
    actor: &Actor,
    id: &str,
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
    audit::record(conn, actor, action, id, &changes, now)?;
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
    id: &str,
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
            decided.transaction["status"].clone(),
        )
        .set("note", Value::Null, decided.item.note.clone());
    audit::record(conn, actor, action, id, &changes, now)?;
    Ok(decided)
}

/// Makes failed or pending event `id` due now (`outbox::store::retry`): `outbox.retry`.
pub fn retry_event(
    conn: &Connection,
    actor: &Actor,
    id: &str,
    now: i64,
) -> Result<Event, OutboxError> {
    let before = outbox::find(conn, id)?.map(|e| e.status.as_str().to_string());
    let after = outbox::retry(conn, id, now)?;
    let changes = Changes::new().set(
        "status",
        before.map_or(Value::Null, Value::from),
        after.status.as_str(),
    );
    audit::record(conn, actor, "outbox.retry", id, &changes, now)?;
    Ok(after)
}
