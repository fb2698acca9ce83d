//! Suppression lists (DESIGN.md section 22): the contacts a workspace never sells again.
//!
//! Owns `suppressions` and `suppression_keys`. An entry is a keyed hash, never the value:
//! HMAC-SHA-256, under a random key per workspace (made when its list is first written),
//! of the SHA-256 (hex) of the email or phone normalised as the duplicate rule does
//! (`normalize::email_key`, `phone_key`). Hashing the SHA-256 rather than the key lets a
//! ping, which carries only `emailSha256` / `phoneSha256`, be checked the same way. The
//! value itself is never stored or logged.

use crate::db::PrepareKept;
use hmac::{Hmac, Mac};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;
use sha2::Sha256;

use crate::config::workspace::{self, SuppressionAction};
use leadrelay_rules::normalize;

/// The quality reason of a lead stored although its contact is suppressed (workspace
/// action `flag`): such a lead is never delivered.
pub const SUPPRESSED: &str = "suppressed";

/// What was suppressed: an email or a phone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Email,
    Phone,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Email => "email",
            Kind::Phone => "phone",
        }
    }

    /// The value's duplicate key, when it is a usable email or phone.
    pub fn normalise(self, value: &str) -> Option<String> {
        match self {
            Kind::Email => normalize::email_key(value),
            Kind::Phone => normalize::phone_key(value),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SuppressionError {
    #[error("not a usable {0}")]
    Unusable(&'static str),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
}

/// A workspace's key and action, read once per ingest request or ping.
pub struct Lookup {
    key: [u8; 32],
    pub action: SuppressionAction,
}

/// One entry as listed: no value, only the first bytes of its keyed hash.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    pub kind: String,
    pub reason: Option<String>,
    pub added_at: i64,
}

impl Entry {
    pub fn view(&self) -> EntryView<'_> {
        EntryView {
            id: &self.id,
            kind: &self.kind,
            reason: self.reason.as_deref(),
            added_at: crate::clock::iso(self.added_at),
        }
    }

    /// [`Entry::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// An entry as `suppression list --json` shows it: its short id, never the value.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryView<'a> {
    id: &'a str,
    kind: &'a str,
    reason: Option<&'a str>,
    added_at: String,
}

fn digest(key: &[u8; 32], kind: Kind, sha256_hex: &str) -> [u8; 32] {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(kind.as_str().as_bytes());
    mac.update(b":");
    mac.update(sha256_hex.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The shown id of an entry: the first 6 bytes of its keyed hash, in hex.
fn short_id(digest: &[u8]) -> String {
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

fn key_of(conn: &Connection, workspace_id: &str) -> rusqlite::Result<Option<[u8; 32]>> {
    let key: Option<Vec<u8>> = conn
        .prepare_kept("SELECT hmac_key FROM suppression_keys WHERE workspace_id = ?1")?
        .query_row([workspace_id], |row| row.get(0))
        .optional()?;
    Ok(key.and_then(|k| <[u8; 32]>::try_from(k.as_slice()).ok()))
}

/// The workspace's key, made now if it has none (writer connections only).
fn key_or_create(
    conn: &Connection,
    workspace_id: &str,
    now: i64,
) -> Result<[u8; 32], SuppressionError> {
    workspace::get(conn, workspace_id)?;
    if let Some(key) = key_of(conn, workspace_id)? {
        return Ok(key);
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("the operating system's random source is available");
    conn.execute(
        "INSERT INTO suppression_keys (workspace_id, hmac_key, created_at) VALUES (?1, ?2, ?3)",
        params![workspace_id, key.as_slice(), now],
    )?;
    Ok(key)
}

/// The lookup of `workspace_id`, or `None` when its list was never written (nothing is
/// suppressed there: the one primary-key read is all a lead of it costs).
pub fn lookup(conn: &Connection, workspace_id: &str) -> rusqlite::Result<Option<Lookup>> {
    let found: Option<(Vec<u8>, SuppressionAction)> = conn
        .prepare_kept(
            "SELECT k.hmac_key, w.suppression_action FROM suppression_keys k
             JOIN workspaces w ON w.id = k.workspace_id WHERE k.workspace_id = ?1",
        )?
        .query_row([workspace_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(found.and_then(|(key, action)| {
        Some(Lookup {
            key: <[u8; 32]>::try_from(key.as_slice()).ok()?,
            action,
        })
    }))
}

impl Lookup {
    /// Whether the contact whose duplicate key is `key` is suppressed.
    pub fn holds_key(
        &self,
        conn: &Connection,
        workspace_id: &str,
        kind: Kind,
        key: &str,
    ) -> rusqlite::Result<bool> {
        self.holds_hash(conn, workspace_id, kind, &crate::secrets::hash(key))
    }

    /// Whether the contact whose SHA-256 (hex, as a ping carries it) is `sha256_hex` is
    /// suppressed.
    pub fn holds_hash(
        &self,
        conn: &Connection,
        workspace_id: &str,
        kind: Kind,
        sha256_hex: &str,
    ) -> rusqlite::Result<bool> {
        let digest = digest(&self.key, kind, sha256_hex);
        conn.prepare_kept("SELECT 1 FROM suppressions WHERE workspace_id = ?1 AND digest = ?2")?
            .query_row(params![workspace_id, digest.as_slice()], |_| Ok(()))
            .optional()
            .map(|found| found.is_some())
    }
}

/// Adds the contact whose duplicate key is `key`; `false` when it was there already (its
/// first reason and time stay).
pub fn add_key(
    conn: &Connection,
    workspace_id: &str,
    kind: Kind,
    key: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<bool, SuppressionError> {
    let hmac_key = key_or_create(conn, workspace_id, now)?;
    insert(conn, workspace_id, &hmac_key, kind, key, reason, now)
}

fn insert(
    conn: &Connection,
    workspace_id: &str,
    hmac_key: &[u8; 32],
    kind: Kind,
    key: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<bool, SuppressionError> {
    let digest = digest(hmac_key, kind, &crate::secrets::hash(key));
    let added = conn
        .prepare_kept(
            "INSERT INTO suppressions (workspace_id, digest, kind, reason, added_at)
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        )?
        .execute(params![
            workspace_id,
            digest.as_slice(),
            kind.as_str(),
            reason,
            now
        ])?;
    Ok(added == 1)
}

/// Adds `value` as typed (normalised here).
pub fn add(
    conn: &Connection,
    workspace_id: &str,
    kind: Kind,
    value: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<bool, SuppressionError> {
    let key = kind
        .normalise(value)
        .ok_or(SuppressionError::Unusable(kind.as_str()))?;
    add_key(conn, workspace_id, kind, &key, reason, now)
}

/// Counts of an import.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    pub added: u64,
    pub already_present: u64,
    pub unusable: u64,
}

impl Imported {
    pub fn add(&mut self, other: Imported) {
        self.added += other.added;
        self.already_present += other.already_present;
        self.unusable += other.unusable;
    }
}

/// One batch of an import, in one writer job: each `(kind, value)` as typed.
pub fn import_batch(
    conn: &Connection,
    workspace_id: &str,
    values: &[(Kind, String)],
    reason: Option<&str>,
    now: i64,
) -> Result<Imported, SuppressionError> {
    let hmac_key = key_or_create(conn, workspace_id, now)?;
    let mut counts = Imported::default();
    for (kind, value) in values {
        match kind.normalise(value) {
            None => counts.unusable += 1,
            Some(key) => {
                if insert(conn, workspace_id, &hmac_key, *kind, &key, reason, now)? {
                    counts.added += 1;
                } else {
                    counts.already_present += 1;
                }
            }
        }
    }
    Ok(counts)
}

/// The keyed hash of `value` as typed in `workspace_id`'s list; `None` when the list was
/// never written (it has no key: nothing is suppressed there).
fn digest_of(
    conn: &Connection,
    workspace_id: &str,
    kind: Kind,
    value: &str,
) -> Result<Option<[u8; 32]>, SuppressionError> {
    let key = kind
        .normalise(value)
        .ok_or(SuppressionError::Unusable(kind.as_str()))?;
    workspace::get(conn, workspace_id)?;
    Ok(key_of(conn, workspace_id)?
        .map(|hmac_key| digest(&hmac_key, kind, &crate::secrets::hash(&key))))
}

/// Removes `value`; `false` when it was not suppressed.
pub fn remove(
    conn: &Connection,
    workspace_id: &str,
    kind: Kind,
    value: &str,
) -> Result<bool, SuppressionError> {
    let Some(digest) = digest_of(conn, workspace_id, kind, value)? else {
        return Ok(false);
    };
    let removed = conn.execute(
        "DELETE FROM suppressions WHERE workspace_id = ?1 AND digest = ?2",
        params![workspace_id, digest.as_slice()],
    )?;
    Ok(removed == 1)
}

/// The entry of `value`, if it is suppressed.
pub fn check(
    conn: &Connection,
    workspace_id: &str,
    kind: Kind,
    value: &str,
) -> Result<Option<Entry>, SuppressionError> {
    let Some(digest) = digest_of(conn, workspace_id, kind, value)? else {
        return Ok(None);
    };
    Ok(conn
        .query_row(
            "SELECT digest, kind, reason, added_at FROM suppressions
             WHERE workspace_id = ?1 AND digest = ?2",
            params![workspace_id, digest.as_slice()],
            entry,
        )
        .optional()?)
}

fn entry(row: &rusqlite::Row) -> rusqlite::Result<Entry> {
    let digest: Vec<u8> = row.get(0)?;
    Ok(Entry {
        id: short_id(&digest),
        kind: row.get(1)?,
        reason: row.get(2)?,
        added_at: row.get(3)?,
    })
}

/// The workspace's entries, newest first, at most `limit`.
pub fn list(
    conn: &Connection,
    workspace_id: &str,
    limit: usize,
) -> Result<Vec<Entry>, SuppressionError> {
    workspace::get(conn, workspace_id)?;
    let mut stmt = conn.prepare(
        "SELECT digest, kind, reason, added_at FROM suppressions WHERE workspace_id = ?1
         ORDER BY added_at DESC, digest LIMIT ?2",
    )?;
    let rows = stmt.query_map(
        params![workspace_id, i64::try_from(limit).unwrap_or(i64::MAX)],
        entry,
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}
