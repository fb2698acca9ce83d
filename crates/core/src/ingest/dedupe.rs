//! The source's duplicate rule: does an earlier lead in the rule's scope and window have the
//! same email or phone?
//!
//! Owns the matching SQL. It runs inside the ingest writer job, right before the insert, so
//! two identical leads sent at the same moment are still caught: the writer runs jobs one
//! after another, and the second sees the first's row. What a match leads to (review or
//! reject) is decided by `store` from the rule's action.

use crate::db::PrepareKept;
use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

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
    pub lead_id: crate::ids::LeadId,
    /// `email` or `phone`.
    pub matched_on: &'static str,
    /// `channel`, `table` or `workspace`.
    pub scope: &'static str,
    pub created_at: i64,
}

/// A [`DuplicateMatch`] as shown (`duplicateMatch` of a result, stored on the lead).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DuplicateMatchView {
    lead_id: crate::ids::LeadId,
    matched_on: &'static str,
    scope: &'static str,
    created_at: String,
}

impl DuplicateMatch {
    pub fn view(&self) -> DuplicateMatchView {
        DuplicateMatchView {
            lead_id: self.lead_id,
            matched_on: self.matched_on,
            scope: self.scope,
            created_at: crate::clock::iso(self.created_at),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a duplicate match always serialises")
    }
}

/// Where the rule looks: the source's container or its workspace.
pub(crate) struct Scope<'a> {
    pub container_id: &'a str,
    pub workspace_id: &'a str,
    /// The scope's name as shown: `channel`, `table` or `workspace`.
    pub name: &'static str,
}

/// The statement for each (field, scope). The leading equality on the key's hash and the
/// range on `created_at` use the `leads_email` / `leads_phone` index; rows come oldest
/// first, and the first whose stored email (phone) has the key is the match reported, as
/// it is the original the others repeat (a hash collision is skipped, never a match).
fn statement(field: &str, scope: DedupeScope) -> Option<&'static str> {
    Some(match (field, scope) {
        ("email", DedupeScope::Container) => {
            "SELECT id, created_at, email FROM leads WHERE email_key = ?1 AND created_at >= ?2 \
             AND container_id = ?3 ORDER BY created_at"
        }
        ("email", DedupeScope::Workspace) => {
            "SELECT id, created_at, email FROM leads WHERE email_key = ?1 AND created_at >= ?2 \
             AND workspace_id = ?3 ORDER BY created_at"
        }
        ("phone", DedupeScope::Container) => {
            "SELECT id, created_at, phone FROM leads WHERE phone_key = ?1 AND created_at >= ?2 \
             AND container_id = ?3 ORDER BY created_at"
        }
        ("phone", DedupeScope::Workspace) => {
            "SELECT id, created_at, phone FROM leads WHERE phone_key = ?1 AND created_at >= ?2 \
             AND workspace_id = ?3 ORDER BY created_at"
        }
        _ => return None,
    })
}

/// Whether a stored email (phone) has the duplicate key: `normalize::email_matches`.
type KeyMatch = fn(Option<&str>, &str) -> bool;

/// A lead's duplicate key (`normalize::email_key`, `phone_key`) with its stored hash
/// (`normalize::key_hash`), computed before the writer job so that the job only binds it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Contact<'a> {
    pub key: &'a str,
    pub hash: i64,
}

/// How many earlier leads of the workspace, at any time and from any source, have this
/// email or phone key, counted up to `cap` (the evaluator's `duplicatesSeen`: a lead
/// offered before, elsewhere, is one buyers may already have). Uses the `leads_email` /
/// `leads_phone` indexes (on the keys' hashes), each hit confirmed against the stored value.
pub(crate) fn seen_before(
    conn: &Connection,
    workspace_id: &str,
    email: Option<Contact>,
    phone: Option<Contact>,
    cap: u32,
) -> rusqlite::Result<u32> {
    let cap = cap as usize;
    let mut seen = std::collections::BTreeSet::new();
    let lookups: [(Option<Contact>, &str, KeyMatch); 2] = [
        (
            email,
            "SELECT id, email FROM leads WHERE email_key = ?1 AND workspace_id = ?2",
            super::normalize::email_matches,
        ),
        (
            phone,
            "SELECT id, phone FROM leads WHERE phone_key = ?1 AND workspace_id = ?2",
            super::normalize::phone_matches,
        ),
    ];
    for (contact, sql, matches) in lookups {
        let Some(Contact { key, hash }) = contact else {
            continue;
        };
        let mut stmt = conn.prepare_kept(sql)?;
        let mut rows = stmt.query(rusqlite::params![hash, workspace_id])?;
        while seen.len() < cap
            && let Some(row) = rows.next()?
        {
            // A hash collision is another person: confirmed against the stored value.
            if matches(row.get_ref(1)?.as_str_or_null()?, key) {
                seen.insert(row.get::<_, crate::ids::LeadId>(0)?);
            }
        }
    }
    Ok(seen.len().min(cap) as u32)
}

/// The first match of `rule` for a lead with these keys, checking the rule's fields in
/// order. A window of 0 days means no time limit.
pub(crate) fn find_match(
    conn: &Connection,
    rule: &DedupeRule,
    scope: &Scope,
    email: Option<Contact>,
    phone: Option<Contact>,
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
        let (contact, matched_on) = match field.as_str() {
            "email" => (email, "email"),
            "phone" => (phone, "phone"),
            _ => continue,
        };
        let (Some(Contact { key, hash }), Some(sql)) = (contact, statement(field, rule.scope))
        else {
            continue;
        };
        let matches = |stored: Option<&str>| match matched_on {
            "email" => super::normalize::email_matches(stored, key),
            _ => super::normalize::phone_matches(stored, key),
        };
        let mut stmt = conn.prepare_kept(sql)?;
        let mut rows = stmt.query(rusqlite::params![hash, since, scope_id])?;
        let mut found = None;
        while let Some(row) = rows.next()? {
            if matches(row.get_ref(2)?.as_str_or_null()?) {
                found = Some((row.get(0)?, row.get::<_, i64>(1)?));
                break;
            }
        }
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
