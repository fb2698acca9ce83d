//! The operator's configuration: workspaces, channels and lead tables (containers),
//! sources, products, buyers with their subscriptions, and suppliers.
//!
//! Owns the SQL for these records and the rules for creating and changing them. It does not
//! own how they are used: ingest reads sources and products, delivery reads buyers and
//! subscriptions, each with the lookups it needs from here.

pub mod buyer;
pub mod container;
pub mod product;
pub mod source;
pub mod supplier;
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
    #[error(transparent)]
    Db(#[from] DbError),
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

/// The id to use for a new record: the operator's (checked) or a generated one.
pub(crate) fn choose_id(given: Option<&str>, prefix: &str) -> Result<String, ConfigError> {
    match given {
        Some(id) if crate::ids::is_valid(id) => Ok(id.to_string()),
        Some(id) => Err(ConfigError::Invalid(format!(
            "invalid id '{id}': use 1 to 64 letters, digits, '-', '_' or '.'"
        ))),
        None => Ok(crate::ids::new(prefix)),
    }
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
