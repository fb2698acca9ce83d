//! The source's duplicate rule: does an earlier lead in the rule's scope and window have the
//! same email or phone?
//!
//! Owns the matching SQL. It runs inside the ingest writer job, right before the insert, so
//! two identical leads sent at the same moment are still caught: the writer runs jobs one
//! after another, and the second sees the first's row. What a match leads to (review or
//! reject) is decided by `store` from the rule's action.

use rusqlite::{Connection, OptionalExtension};
use serde_json::{Value, json};

use crate::config::source::{DedupeAction, DedupeRule, DedupeScope};
use crate::db::stored::stored_enum;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

stored_enum! {
    /// The duplicate rule's verdict on a lead. Only `unique` and `review` are stored: a
    /// rejected duplicate is not.
    pub enum DuplicateStatus as "duplicate status" {
        Unique = "unique",
        /// Stored, marked for review, not auto-delivered.
        Review = "review",
        /// Not stored.
        Rejected = "rejected",
    }
}

impl DuplicateStatus {
    /// What a match means under `action`.
    pub fn for_match(action: DedupeAction) -> DuplicateStatus {
        match action {
            DedupeAction::Review => DuplicateStatus::Review,
            DedupeAction::Reject => DuplicateStatus::Rejected,
        }
    }
}

/// The earlier lead a new one duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateMatch {
    pub lead_id: String,
    /// `email` or `phone`.
    pub matched_on: &'static str,
    /// `channel`, `table` or `workspace`.
    pub scope: &'static str,
    pub created_at: i64,
}

impl DuplicateMatch {
    pub fn to_json(&self) -> Value {
        json!({
            "leadId": self.lead_id,
            "matchedOn": self.matched_on,
            "scope": self.scope,
            "createdAt": crate::clock::iso(self.created_at),
        })
    }
}

/// Where the rule looks: the source's container or its workspace.
pub struct Scope<'a> {
    pub container_id: &'a str,
    pub workspace_id: &'a str,
    /// The scope's name as shown: `channel`, `table` or `workspace`.
    pub name: &'static str,
}

/// The statement for each (field, scope). The leading equality on the normalised key and
/// the range on `created_at` use the `leads_email` / `leads_phone` index; the oldest match
/// in the window is the one reported, as it is the original the others repeat.
fn statement(field: &str, scope: DedupeScope) -> Option<&'static str> {
    Some(match (field, scope) {
        ("email", DedupeScope::Container) => {
            "SELECT id, created_at FROM leads WHERE email_norm = ?1 AND created_at >= ?2 \
             AND container_id = ?3 ORDER BY created_at LIMIT 1"
        }
        ("email", DedupeScope::Workspace) => {
            "SELECT id, created_at FROM leads WHERE email_norm = ?1 AND created_at >= ?2 \
             AND workspace_id = ?3 ORDER BY created_at LIMIT 1"
        }
        ("phone", DedupeScope::Container) => {
            "SELECT id, created_at FROM leads WHERE phone_norm = ?1 AND created_at >= ?2 \
             AND container_id = ?3 ORDER BY created_at LIMIT 1"
        }
        ("phone", DedupeScope::Workspace) => {
            "SELECT id, created_at FROM leads WHERE phone_norm = ?1 AND created_at >= ?2 \
             AND workspace_id = ?3 ORDER BY created_at LIMIT 1"
        }
        _ => return None,
    })
}

/// How many earlier leads of the workspace, at any time and from any source, have this
/// email or phone key, counted up to `cap` (the evaluator's `duplicatesSeen`: a lead
/// offered before, elsewhere, is one buyers may already have). Uses the `leads_email` /
/// `leads_phone` indexes.
pub fn seen_before(
    conn: &Connection,
    workspace_id: &str,
    email_key: Option<&str>,
    phone_key: Option<&str>,
    cap: u32,
) -> rusqlite::Result<u32> {
    if email_key.is_none() && phone_key.is_none() {
        return Ok(0);
    }
    conn.prepare_cached(
        "SELECT count(*) FROM (
             SELECT id FROM leads WHERE email_norm = ?1 AND workspace_id = ?3
             UNION
             SELECT id FROM leads WHERE phone_norm = ?2 AND workspace_id = ?3
             LIMIT ?4)",
    )?
    .query_row(
        rusqlite::params![email_key, phone_key, workspace_id, cap],
        |row| row.get(0),
    )
}

/// The first match of `rule` for a lead with these keys, checking the rule's fields in
/// order. A window of 0 days means no time limit.
pub fn find_match(
    conn: &Connection,
    rule: &DedupeRule,
    scope: &Scope,
    email_key: Option<&str>,
    phone_key: Option<&str>,
    now: i64,
) -> rusqlite::Result<Option<DuplicateMatch>> {
    let since = if rule.window_days == 0 {
        i64::MIN
    } else {
        now - rule.window_days * DAY_MS
    };
    let scope_id = match rule.scope {
        DedupeScope::Container => scope.container_id,
        DedupeScope::Workspace => scope.workspace_id,
    };
    for field in &rule.fields {
        let (key, matched_on) = match field.as_str() {
            "email" => (email_key, "email"),
            "phone" => (phone_key, "phone"),
            _ => continue,
        };
        let (Some(key), Some(sql)) = (key, statement(field, rule.scope)) else {
            continue;
        };
        let found = conn
            .prepare_cached(sql)?
            .query_row(rusqlite::params![key, since, scope_id], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
            })
            .optional()?;
        if let Some((lead_id, created_at)) = found {
            return Ok(Some(DuplicateMatch {
                lead_id,
                matched_on,
                scope: scope.name,
                created_at,
            }));
        }
    }
    Ok(None)
}
