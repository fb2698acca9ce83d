//! The audit log (DESIGN.md section 23): the owner of the `audit_log` table.
//!
//! Every change of configuration or money is recorded by the job that makes it, on the same
//! connection and so in the same transaction: an entry exists exactly when its change does.
//! An entry names when, who ([`Actor`]), what (`action`, e.g. `buyer.update`), on which
//! object, and each changed field with its old and new value ([`Changes`]); a secret appears
//! as `"rotated"`, never its value, and suppressed values never appear at all.
//!
//! The log is append-only: nothing here updates or deletes an entry (and the table's
//! triggers refuse both). Each entry carries the hash of the one before it, and its own hash
//! covers that and its fields, so [`verify`] (run by `leadrelay check`) names the first entry
//! that was edited, removed or reordered.
//!
//! Owns the table, the chain and the entries' reading ([`list`]). It does not decide what
//! counts as a change: each caller passes its action and fields, usually as the [`diff`] of
//! the record's view before and after.

use crate::db::PrepareKept;
use std::collections::BTreeMap;
use std::fmt;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Who made a change, as written in the log's `actor` column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A CLI command, run by this operating-system user.
    Cli(String),
    /// A console operator, by name.
    Operator(String),
    /// A buyer portal user, by id.
    BuyerUser(String),
    /// A supplier portal user, by id.
    SupplierUser(String),
    /// A buyer's lifecycle call over the partner API, by buyer id.
    ApiBuyer(crate::ids::BuyerId),
    /// A supplier's lifecycle call over the partner API, by supplier id.
    ApiSupplier(crate::ids::SupplierId),
    /// The server on its own (retention, sweeps).
    Server,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Cli(user) => write!(f, "cli:{user}"),
            Actor::Operator(name) => write!(f, "operator:{name}"),
            Actor::BuyerUser(id) => write!(f, "buyer-user:{id}"),
            Actor::SupplierUser(id) => write!(f, "supplier-user:{id}"),
            Actor::ApiBuyer(id) => write!(f, "api:buyer:{id}"),
            Actor::ApiSupplier(id) => write!(f, "api:supplier:{id}"),
            Actor::Server => f.write_str("server"),
        }
    }
}

/// One field's old and new value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub old: Value,
    pub new: Value,
}

/// The changed fields of one entry, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Changes(BTreeMap<String, Change>);

/// What a secret's change is written as: never the value, nor its hash.
pub const ROTATED: &str = "rotated";

impl Changes {
    pub fn new() -> Changes {
        Changes::default()
    }

    /// Adds field `name` going from `old` to `new`.
    pub fn set(mut self, name: &str, old: impl Into<Value>, new: impl Into<Value>) -> Changes {
        self.0.insert(
            name.to_string(),
            Change {
                old: old.into(),
                new: new.into(),
            },
        );
        self
    }

    /// Adds secret `name` as rotated (or set): its value is never written.
    pub fn secret(self, name: &str) -> Changes {
        self.set(name, Value::Null, ROTATED)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Change> {
        self.0.get(name)
    }
}

/// Whether a view's field `name` holds a secret (`secret`, `signingSecret`, `token`, `key`,
/// `…Secret`, `…Token`, `…Key`): its change is written as [`ROTATED`].
fn is_secret_field(name: &str) -> bool {
    matches!(name, "secret" | "token" | "key")
        || name.ends_with("Secret")
        || name.ends_with("Token")
        || name.ends_with("Key")
}

/// The fields that differ between two views of a record (JSON objects; `Null` before a
/// creation, after a deletion). Secret fields are written as [`ROTATED`].
pub fn diff(before: &Value, after: &Value) -> Changes {
    let empty = serde_json::Map::new();
    let old = before.as_object().unwrap_or(&empty);
    let new = after.as_object().unwrap_or(&empty);
    let mut changes = Changes::new();
    for name in old.keys().chain(new.keys()) {
        let (was, is) = (
            old.get(name).unwrap_or(&Value::Null),
            new.get(name).unwrap_or(&Value::Null),
        );
        if was == is || changes.0.contains_key(name) {
            continue;
        }
        changes = if is_secret_field(name) {
            changes.secret(name)
        } else {
            changes.set(name, was.clone(), is.clone())
        };
    }
    changes
}

/// The hash that starts the chain (the `prev_hash` of the first entry).
const GENESIS: &str = "";

/// An entry's hash: SHA-256 (hex) over the previous hash and every stored field, each
/// length-prefixed so no two different entries write the same bytes.
fn entry_digest(
    prev: &str,
    seq: i64,
    at: i64,
    actor: &str,
    action: &str,
    object: &str,
    changes: &str,
) -> String {
    let mut hasher = Sha256::new();
    for part in [
        prev,
        &seq.to_string(),
        &at.to_string(),
        actor,
        action,
        object,
        changes,
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Appends an entry: `actor` did `action` on `object_id` at `now`, changing `changes`.
/// Called by the job that makes the change, on its connection.
pub fn record(
    conn: &Connection,
    actor: &Actor,
    action: &str,
    object_id: &str,
    changes: &Changes,
    now: i64,
) -> rusqlite::Result<()> {
    let last: Option<(i64, String)> = conn
        .prepare_kept("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let (seq, prev) = match last {
        Some((seq, digest)) => (seq + 1, digest),
        None => (1, GENESIS.to_string()),
    };
    let actor = actor.to_string();
    let changes = serde_json::to_string(changes).expect("changes are JSON values");
    let digest = entry_digest(&prev, seq, now, &actor, action, object_id, &changes);
    conn.prepare_kept(
        "INSERT INTO audit_log (seq, at, actor, action, object_id, changes, prev_hash, hash) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        seq, now, actor, action, object_id, changes, prev, digest
    ])?;
    Ok(())
}

/// [`record`] of the [`diff`] of `before` and `after`, the common case of an update.
pub fn record_diff(
    conn: &Connection,
    actor: &Actor,
    action: &str,
    object_id: &str,
    before: &Value,
    after: &Value,
    now: i64,
) -> rusqlite::Result<()> {
    record(conn, actor, action, object_id, &diff(before, after), now)
}

/// An entry as read back.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub seq: i64,
    #[serde(serialize_with = "iso")]
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub object_id: String,
    pub changes: Value,
}

fn iso<S: serde::Serializer>(at: &i64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&crate::clock::iso(*at))
}

/// Which entries [`list`] returns; every given part must match.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub object_id: Option<String>,
    /// The whole actor (`cli:ana`), or a prefix ending in `:` (`operator:`).
    pub actor: Option<String>,
    /// A prefix of the action (`buyer.` or `buyer.update`).
    pub action_prefix: Option<String>,
    /// From this instant on (ms, inclusive).
    pub from: Option<i64>,
    /// Before this instant (ms, exclusive).
    pub to: Option<i64>,
    /// At most this many, newest first; `None`: all, oldest first.
    pub newest: Option<u32>,
}

/// The entries that match `filter`, oldest first (or the newest `filter.newest`, newest
/// first).
pub fn list(conn: &Connection, filter: &Filter) -> rusqlite::Result<Vec<Entry>> {
    let limit = filter.newest.map_or(-1, i64::from);
    let mut statement = conn.prepare_kept(
        "SELECT seq, at, actor, action, object_id, changes FROM audit_log \
         WHERE (?1 IS NULL OR object_id = ?1) \
           AND (?2 IS NULL OR actor = ?2 \
                OR (substr(?2, -1) = ':' AND substr(actor, 1, length(?2)) = ?2)) \
           AND (?3 IS NULL OR substr(action, 1, length(?3)) = ?3) \
           AND (?4 IS NULL OR at >= ?4) AND (?5 IS NULL OR at < ?5) \
         ORDER BY seq DESC LIMIT ?6",
    )?;
    let rows = statement.query_map(
        params![
            filter.object_id,
            filter.actor,
            filter.action_prefix,
            filter.from,
            filter.to,
            limit
        ],
        |row| {
            let changes: String = row.get(5)?;
            Ok(Entry {
                seq: row.get(0)?,
                at: row.get(1)?,
                actor: row.get(2)?,
                action: row.get(3)?,
                object_id: row.get(4)?,
                changes: serde_json::from_str(&changes).unwrap_or(Value::String(changes)),
            })
        },
    )?;
    let mut entries = rows.collect::<rusqlite::Result<Vec<Entry>>>()?;
    if filter.newest.is_none() {
        entries.reverse();
    }
    Ok(entries)
}

/// The first entry whose chain is broken, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit log entry {seq} is broken: {why}")]
pub struct Broken {
    pub seq: i64,
    pub why: &'static str,
}

/// Walks the chain from the first entry; `Ok` with the number of entries when every entry
/// follows the one before and hashes to its stored hash.
pub fn verify_chain(conn: &Connection) -> rusqlite::Result<Result<u64, Broken>> {
    let mut statement = conn.prepare(
        "SELECT seq, at, actor, action, object_id, changes, prev_hash, hash \
         FROM audit_log ORDER BY seq",
    )?;
    let mut rows = statement.query([])?;
    let mut prev = GENESIS.to_string();
    let mut expected_seq = 1;
    let mut count = 0;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let stored_prev: String = row.get(6)?;
        let stored_digest: String = row.get(7)?;
        let broken = |why| Ok(Err(Broken { seq, why }));
        if seq != expected_seq {
            return broken("an entry before it is missing");
        }
        if stored_prev != prev {
            return broken("it does not carry the hash of the entry before it");
        }
        let digest = entry_digest(
            &prev,
            seq,
            row.get(1)?,
            &row.get::<_, String>(2)?,
            &row.get::<_, String>(3)?,
            &row.get::<_, String>(4)?,
            &row.get::<_, String>(5)?,
        );
        if digest != stored_digest {
            return broken("its fields do not match its hash");
        }
        prev = stored_digest;
        expected_seq += 1;
        count += 1;
    }
    Ok(Ok(count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conn() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::apply_migrations(&mut conn).unwrap();
        conn
    }

    #[test]
    fn a_diff_names_changed_fields_and_hides_secrets() {
        let before = json!({"id": "b", "price": "25.00", "signingSecret": "whsec_a", "same": 1});
        let after = json!({"id": "b", "price": "27.50", "signingSecret": "whsec_b", "same": 1, "new": true});
        let changes = diff(&before, &after);
        assert_eq!(changes.get("price").unwrap().new, json!("27.50"));
        assert_eq!(changes.get("signingSecret").unwrap().new, json!(ROTATED));
        assert_eq!(changes.get("new").unwrap().old, Value::Null);
        assert!(changes.get("same").is_none() && changes.get("id").is_none());
        assert!(!serde_json::to_string(&changes).unwrap().contains("whsec"));
    }

    #[test]
    fn the_chain_verifies_and_filters_select() {
        let conn = conn();
        let changes = Changes::new().set("status", "active", "paused");
        record(
            &conn,
            &Actor::Cli("ana".into()),
            "buyer.pause",
            "b1",
            &changes,
            1,
        )
        .unwrap();
        record(
            &conn,
            &Actor::Server,
            "privacy.purge",
            "ws",
            &Changes::new(),
            2,
        )
        .unwrap();
        record(
            &conn,
            &Actor::Operator("bo".into()),
            "buyer.resume",
            "b1",
            &changes,
            3,
        )
        .unwrap();
        assert_eq!(verify_chain(&conn).unwrap(), Ok(3));
        let by = |filter: Filter| list(&conn, &filter).unwrap().len();
        assert_eq!(by(Filter::default()), 3);
        let object = Filter {
            object_id: Some("b1".into()),
            ..Filter::default()
        };
        assert_eq!(by(object), 2);
        let actor = Filter {
            actor: Some("operator:".into()),
            ..Filter::default()
        };
        assert_eq!(by(actor), 1);
        let action = Filter {
            action_prefix: Some("buyer.".into()),
            from: Some(2),
            ..Filter::default()
        };
        assert_eq!(by(action), 1);
        conn.execute_batch(
            "DROP TRIGGER audit_log_no_update; UPDATE audit_log SET actor = 'cli:eve' WHERE seq = 2",
        )
        .unwrap();
        assert_eq!(verify_chain(&conn).unwrap().unwrap_err().seq, 2);
    }

    #[test]
    fn entries_cannot_be_updated_or_deleted() {
        let conn = conn();
        record(&conn, &Actor::Server, "x", "y", &Changes::new(), 1).unwrap();
        assert!(
            conn.execute("UPDATE audit_log SET actor = 'a'", [])
                .is_err()
        );
        assert!(conn.execute("DELETE FROM audit_log", []).is_err());
    }
}
