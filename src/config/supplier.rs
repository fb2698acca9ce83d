//! Suppliers: who a lead was bought from, with the API key they answer clawbacks with.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::{ConfigError, choose_id, exists, insert_error};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Supplier {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    #[serde(skip)]
    pub key_hash: String,
    #[serde(serialize_with = "crate::config::serialize_time")]
    pub created_at: i64,
}

pub struct NewSupplier<'a> {
    pub id: Option<&'a str>,
    pub workspace_id: &'a str,
    pub name: &'a str,
    pub key: Option<&'a str>,
}

/// Creates a supplier; returns it with its key in clear (shown once).
pub fn create(conn: &Connection, new: &NewSupplier) -> Result<(Supplier, String), ConfigError> {
    let id = choose_id(new.id, "sup")?;
    if new.name.trim().is_empty() {
        return Err(ConfigError::Invalid("name must not be empty".into()));
    }
    if !exists(conn, "workspaces", new.workspace_id)? {
        return Err(ConfigError::NotFound {
            kind: "workspace",
            id: new.workspace_id.to_string(),
        });
    }
    let key = match new.key {
        Some(given) => {
            super::check_given_secret(given)?;
            given.to_string()
        }
        None => crate::secrets::generate("lrk_"),
    };
    let supplier = Supplier {
        id,
        workspace_id: new.workspace_id.to_string(),
        name: new.name.to_string(),
        key_hash: crate::secrets::hash(&key),
        created_at: crate::clock::now_ms(),
    };
    if exists(conn, "suppliers", &supplier.id)? {
        return Err(ConfigError::AlreadyExists {
            kind: "supplier",
            id: supplier.id,
        });
    }
    conn.execute(
        "INSERT INTO suppliers (id, workspace_id, name, key_hash, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            supplier.id,
            supplier.workspace_id,
            supplier.name,
            supplier.key_hash,
            supplier.created_at
        ],
    )
    // The id is free, so a unique violation is the key's hash. Say so without saying whose.
    .map_err(|e| match insert_error(e, "supplier", &supplier.id) {
        ConfigError::AlreadyExists { .. } => {
            ConfigError::Invalid("this key is already in use; choose another".into())
        }
        other => other,
    })?;
    Ok((supplier, key))
}

pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Supplier>> {
    conn.query_row(
        "SELECT id, workspace_id, name, key_hash, created_at FROM suppliers WHERE id = ?1",
        [id],
        |row| {
            Ok(Supplier {
                id: row.get(0)?,
                workspace_id: row.get(1)?,
                name: row.get(2)?,
                key_hash: row.get(3)?,
                created_at: row.get(4)?,
            })
        },
    )
    .optional()
}

/// The supplier whose key hashes to `key_hash`. The lookup is by hash, so timing reveals
/// nothing about the key itself.
pub fn find_by_key_hash(conn: &Connection, key_hash: &str) -> rusqlite::Result<Option<Supplier>> {
    conn.query_row(
        "SELECT id, workspace_id, name, key_hash, created_at FROM suppliers WHERE key_hash = ?1",
        [key_hash],
        |row| {
            Ok(Supplier {
                id: row.get(0)?,
                workspace_id: row.get(1)?,
                name: row.get(2)?,
                key_hash: row.get(3)?,
                created_at: row.get(4)?,
            })
        },
    )
    .optional()
}
