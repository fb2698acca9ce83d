//! The operator's configuration: workspaces, channels and lead tables (containers),
//! sources, products, buyers with their subscriptions, suppliers, and the workspaces' return
//! reason codes.
//!
//! Owns the SQL for these records and the rules for creating, changing, rotating and
//! retiring them (`retire.rs`: delete, or archive what has history). It does not own how
//! they are used: ingest reads sources and products, delivery reads buyers and
//! subscriptions, each with the lookups it needs from here. An archived record is still
//! found by `find`/`get` (its history stays readable); each use that takes traffic asks
//! `is_archived` and treats it as unknown.

pub mod buyer;
pub mod container;
pub mod product;
pub mod retire;
pub mod return_reason;
pub(crate) mod rotation;
pub mod source;
pub mod subscription;
pub mod supplier;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod workspace;

use crate::db::DbError;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A referenced record does not exist: `kind` names what was looked for.
    #[error("unknown {kind} '{id}'")]
    NotFound { kind: &'static str, id: String },
    /// A record with this id (or slug) exists already.
    #[error("{kind} '{id}' exists already")]
    AlreadyExists { kind: &'static str, id: String },
    /// A value the caller gave is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// The record is archived: readable, but it cannot change or take traffic.
    #[error("{kind} '{id}' is archived; an archived record cannot change")]
    Archived { kind: &'static str, id: String },
    /// `delete` of a record that live records depend on; `dependents` names them and the
    /// way out.
    #[error("cannot delete {kind} '{id}': {dependents}")]
    HasDependents {
        kind: &'static str,
        id: String,
        dependents: String,
    },
    #[error(transparent)]
    Db(#[from] DbError),
}

impl ConfigError {
    /// A stable code for the error, printed under `--json` (`{"error": {"code", …}}`).
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::NotFound { .. } => "not_found",
            ConfigError::AlreadyExists { .. } => "already_exists",
            ConfigError::Invalid(_) => "invalid",
            ConfigError::Archived { .. } => "archived",
            ConfigError::HasDependents { .. } => "has_dependents",
            ConfigError::Db(_) => "database_error",
        }
    }
}

impl From<rusqlite::Error> for ConfigError {
    fn from(e: rusqlite::Error) -> Self {
        ConfigError::Db(DbError::Sqlite(e))
    }
}

/// Maps a primary-key or unique violation on insert to [`ConfigError::AlreadyExists`].
pub(crate) fn insert_error(e: rusqlite::Error, kind: &'static str, id: &str) -> ConfigError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
        {
            ConfigError::AlreadyExists {
                kind,
                id: id.to_string(),
            }
        }
        _ => ConfigError::from(e),
    }
}

impl From<crate::ids::InvalidId> for ConfigError {
    fn from(e: crate::ids::InvalidId) -> Self {
        ConfigError::Invalid(e.to_string())
    }
}

/// The id to use for a new record: the operator's (checked) or a generated one.
pub(crate) fn choose_id(given: Option<&str>, prefix: &str) -> Result<String, ConfigError> {
    match given {
        Some(id) => Ok(crate::ids::chosen(id)?),
        None => Ok(crate::ids::new(prefix)),
    }
}

/// The typed id to use for a new record: the operator's (checked) or a generated one.
pub(crate) fn choose<Id: crate::ids::ConfigId>(given: Option<&str>) -> Result<Id, ConfigError> {
    Ok(given.map_or_else(|| Ok(Id::generated()), Id::chosen)?)
}

/// Checks an operator-chosen secret or key: long enough to resist guessing.
pub(crate) fn check_given_secret(secret: &str) -> Result<(), ConfigError> {
    if secret.chars().count() < 16 {
        return Err(ConfigError::Invalid(
            "a secret must be at least 16 characters long".into(),
        ));
    }
    if secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ConfigError::Invalid(
            "a secret must not contain spaces or control characters".into(),
        ));
    }
    Ok(())
}

/// Whether a row with `id` exists in `table` (a fixed table name, never user input).
pub(crate) fn exists(
    conn: &rusqlite::Connection,
    table: &'static str,
    id: &str,
) -> rusqlite::Result<bool> {
    use rusqlite::OptionalExtension;
    conn.query_row(
        &format!("SELECT 1 FROM {table} WHERE id = ?1"),
        [id],
        |_| Ok(()),
    )
    .optional()
    .map(|found| found.is_some())
}

/// Serialises stored milliseconds as an ISO 8601 string.
pub(crate) fn serialize_time<S: serde::Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::clock::iso(*ms))
}

/// Serialises optional stored milliseconds as an ISO 8601 string (null when absent).
pub(crate) fn serialize_opt_time<S: serde::Serializer>(
    ms: &Option<i64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.serialize_str(&crate::clock::iso(*ms)),
        None => s.serialize_none(),
    }
}

/// Refuses a change to an archived record.
pub(crate) fn ensure_live(
    kind: &'static str,
    id: &str,
    archived_at: Option<i64>,
) -> Result<(), ConfigError> {
    match archived_at {
        Some(_) => Err(ConfigError::Archived {
            kind,
            id: id.to_string(),
        }),
        None => Ok(()),
    }
}

/// A new secret: the operator's (checked) or a random one with `prefix`.
pub(crate) fn new_secret(given: Option<&str>, prefix: &str) -> Result<String, ConfigError> {
    match given {
        Some(given) => {
            check_given_secret(given)?;
            Ok(given.to_string())
        }
        None => Ok(crate::secrets::generate(prefix)),
    }
}

/// Refuses a negative amount where only 0 and more make sense (prices, costs, limits).
pub(crate) fn check_not_negative(what: &str, cents: i64) -> Result<(), ConfigError> {
    if cents < 0 {
        return Err(ConfigError::Invalid(format!("{what} must not be negative")));
    }
    Ok(())
}

/// Checks a name given on create or update.
pub(crate) fn check_name(name: &str) -> Result<(), ConfigError> {
    if name.trim().is_empty() {
        return Err(ConfigError::Invalid("name must not be empty".into()));
    }
    Ok(())
}

/// Serialises stored cents as a JSON number with two decimals.
pub(crate) fn serialize_money<S: serde::Serializer>(cents: &i64, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&crate::money::to_json(*cents), s)
}

/// Serialises optional stored cents (null when absent).
pub(crate) fn serialize_opt_money<S: serde::Serializer>(
    cents: &Option<i64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match cents {
        Some(c) => serde::Serialize::serialize(&crate::money::to_json(*c), s),
        None => s.serialize_none(),
    }
}
