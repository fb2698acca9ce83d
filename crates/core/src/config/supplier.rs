//! Suppliers: who a lead was bought from, with the API key they answer clawbacks with
//! (stored hashed, with the previous one during a rotation's overlap). An archived supplier's
//! key is refused.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::rotation::{Rotation, StoredSecret};
use super::source::Rotated;
use super::{ConfigError, check_name, choose, ensure_live, exists, insert_error, workspace};
use crate::ids::SupplierId;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Supplier {
    pub id: SupplierId,
    pub workspace_id: String,
    pub name: String,
    /// Never shown: only its hash is stored, and only compared.
    #[serde(skip)]
    pub key: StoredSecret,
    #[serde(serialize_with = "crate::config::serialize_time")]
    pub created_at: i64,
    #[serde(serialize_with = "crate::config::serialize_opt_time")]
    pub archived_at: Option<i64>,
}

impl Supplier {
    /// The supplier as shown to the operator: the record and, during a rotation's
    /// overlap, until when the previous key is accepted. Never a key or its hash.
    pub fn view(&self) -> SupplierView<'_> {
        SupplierView {
            supplier: self,
            previous_key_valid_until: self
                .key
                .previous_valid_until(crate::clock::now_ms())
                .map(crate::clock::iso),
        }
    }

    /// [`Supplier::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> serde_json::Value {
        crate::to_value(self.view())
    }
}

/// The supplier as shown to the operator (see [`Supplier::view`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SupplierView<'a> {
    #[serde(flatten)]
    supplier: &'a Supplier,
    previous_key_valid_until: Option<String>,
}

pub struct NewSupplier<'a> {
    pub id: Option<&'a str>,
    pub workspace_id: &'a str,
    pub name: &'a str,
    pub key: Option<&'a str>,
}

/// An `update`: only the fields given change.
#[derive(Debug, Default)]
pub struct SupplierChanges {
    pub name: Option<String>,
}

const COLUMNS: &str = "id, workspace_id, name, key_hash, created_at, archived_at, \
    previous_key_hash, previous_key_valid_until";

fn from_row(row: &Row) -> rusqlite::Result<Supplier> {
    Ok(Supplier {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        name: row.get(2)?,
        key: StoredSecret::from_columns(Some(row.get(3)?), row.get(6)?, row.get(7)?),
        created_at: row.get(4)?,
        archived_at: row.get(5)?,
    })
}

/// A new key: the operator's (checked) or a random one. A key that any supplier uses now
/// (or during an overlap) is refused, since the key alone says who is calling.
fn new_key(conn: &Connection, given: Option<&str>) -> Result<String, ConfigError> {
    let key = super::new_secret(given, "lrk_")?;
    let taken = conn
        .query_row(
            "SELECT 1 FROM suppliers WHERE key_hash = ?1 OR previous_key_hash = ?1",
            [crate::secrets::hash(&key)],
            |_| Ok(()),
        )
        .optional()?;
    if taken.is_some() {
        // Say so without saying whose.
        return Err(ConfigError::Invalid(
            "this key is already in use; choose another".into(),
        ));
    }
    Ok(key)
}

/// Creates a supplier; returns it with its key in clear (shown once).
pub fn create(conn: &Connection, new: &NewSupplier) -> Result<(Supplier, String), ConfigError> {
    let id: SupplierId = choose(new.id)?;
    check_name(new.name)?;
    workspace::get_live(conn, new.workspace_id)?;
    if exists(conn, "suppliers", id.as_str())? {
        return Err(ConfigError::AlreadyExists {
            kind: "supplier",
            id: id.to_string(),
        });
    }
    let key = new_key(conn, new.key)?;
    let created_at = crate::clock::now_ms();
    conn.execute(
        "INSERT INTO suppliers (id, workspace_id, name, key_hash, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            id,
            new.workspace_id,
            new.name,
            crate::secrets::hash(&key),
            created_at
        ],
    )
    .map_err(|e| insert_error(e, "supplier", id.as_str()))?;
    Ok((get(conn, &id)?, key))
}

pub fn find(conn: &Connection, id: &SupplierId) -> rusqlite::Result<Option<Supplier>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM suppliers WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

pub fn get(conn: &Connection, id: &SupplierId) -> Result<Supplier, ConfigError> {
    find(conn, id)?.ok_or_else(|| ConfigError::NotFound {
        kind: "supplier",
        id: id.to_string(),
    })
}

fn get_live(conn: &Connection, id: &SupplierId) -> Result<Supplier, ConfigError> {
    let supplier = get(conn, id)?;
    ensure_live("supplier", id.as_str(), supplier.archived_at)?;
    Ok(supplier)
}

/// The live supplier whose current key hashes to `key_hash`, or whose previous key does
/// while its overlap lasts at `now_ms`. The lookup is by hash, so timing reveals nothing
/// about the key itself.
pub fn find_by_key_hash(
    conn: &Connection,
    key_hash: &str,
    now_ms: i64,
) -> rusqlite::Result<Option<Supplier>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM suppliers
         WHERE archived_at IS NULL
           AND (key_hash = ?1 OR (previous_key_hash = ?1 AND previous_key_valid_until > ?2))"
    ))?
    .query_row(params![key_hash, now_ms], from_row)
    .optional()
}

/// Suppliers in creation order, of one workspace when given; archived ones only with `all`.
pub fn list(
    conn: &Connection,
    workspace_id: Option<&str>,
    all: bool,
) -> Result<Vec<Supplier>, ConfigError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM suppliers
         WHERE (?1 IS NULL OR workspace_id = ?1) AND (?2 OR archived_at IS NULL)
         ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map(params![workspace_id, all], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn update(
    conn: &Connection,
    id: &SupplierId,
    changes: &SupplierChanges,
) -> Result<Supplier, ConfigError> {
    let mut supplier = get_live(conn, id)?;
    if let Some(name) = &changes.name {
        check_name(name)?;
        supplier.name = name.clone();
    }
    conn.execute(
        "UPDATE suppliers SET name = ?2 WHERE id = ?1",
        params![supplier.id, supplier.name],
    )?;
    Ok(supplier)
}

/// Replaces the supplier's key with `given` or a new random one; the old one stays accepted
/// for `overlap` (none: cut off at once).
pub fn rotate_key(
    conn: &Connection,
    id: &SupplierId,
    given: Option<&str>,
    overlap: std::time::Duration,
) -> Result<Rotated<Supplier>, ConfigError> {
    let supplier = get_live(conn, id)?;
    let key = new_key(conn, given)?;
    let rotation = Rotation::of(supplier.key.current, overlap, crate::clock::now_ms());
    conn.execute(
        "UPDATE suppliers SET key_hash = ?2, previous_key_hash = ?3, previous_key_valid_until = ?4
         WHERE id = ?1",
        params![
            id,
            crate::secrets::hash(&key),
            rotation.previous_value(),
            rotation.previous_until()
        ],
    )?;
    Ok(Rotated {
        record: get(conn, id)?,
        secret: key,
        old_valid_until: rotation.old_valid_until,
    })
}
