//! Retiring configuration records: `delete` of a workspace, channel, lead table, source,
//! product, buyer or supplier.
//!
//! The rule: a record that live records depend on is refused, naming them (a workspace with
//! channels, a product or buyer with subscriptions, a supplier of sources); a record that
//! nothing references is deleted; one with history (any row that references it: leads,
//! transactions, ledger rows, archived children) is archived instead. Whether history exists
//! is what SQLite's foreign keys say: the delete is tried and, when a reference refuses it,
//! the record is archived. So a table added later that references a record is covered
//! without a change here.

use rusqlite::{Connection, params};

use super::container::ContainerKind;
use super::{ConfigError, buyer, container, product, source, subscription, supplier, workspace};

/// What `delete` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    /// Gone; its id may be used again.
    Deleted,
    /// Kept with its history and hidden; its id is never used again.
    Archived,
}

impl Retired {
    pub fn as_str(self) -> &'static str {
        match self {
            Retired::Deleted => "deleted",
            Retired::Archived => "archived",
        }
    }
}

/// The record kinds that can be retired, each with its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Workspace,
    Container(ContainerKind),
    Source,
    Product,
    Buyer,
    Supplier,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Workspace => "workspace",
            Kind::Container(kind) => kind.as_str(),
            Kind::Source => "source",
            Kind::Product => "product",
            Kind::Buyer => "buyer",
            Kind::Supplier => "supplier",
        }
    }

    fn table(self) -> &'static str {
        match self {
            Kind::Workspace => "workspaces",
            Kind::Container(_) => "containers",
            Kind::Source => "sources",
            Kind::Product => "products",
            Kind::Buyer => "buyers",
            Kind::Supplier => "suppliers",
        }
    }
}

/// Deletes record `id` of `kind`, archives it when it has history, or refuses when live
/// records depend on it. Deleting an archived record again changes nothing.
pub fn delete(conn: &Connection, kind: Kind, id: &str) -> Result<Retired, ConfigError> {
    let archived_at = archived_at(conn, kind, id)?;
    if archived_at.is_some() {
        return Ok(Retired::Archived);
    }
    if let Some(dependents) = live_dependents(conn, kind, id)? {
        return Err(ConfigError::HasDependents {
            kind: kind.name(),
            id: id.to_string(),
            dependents,
        });
    }
    let table = kind.table();
    // SQLite undoes a statement that a foreign key refuses, and the job goes on.
    match conn.execute(&format!("DELETE FROM {table} WHERE id = ?1"), [id]) {
        Ok(_) => Ok(Retired::Deleted),
        Err(e) if is_foreign_key_error(&e) => {
            conn.execute(
                &format!("UPDATE {table} SET archived_at = ?2 WHERE id = ?1"),
                params![id, crate::clock::now_ms()],
            )?;
            Ok(Retired::Archived)
        }
        Err(e) => Err(e.into()),
    }
}

fn is_foreign_key_error(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY)
}

/// The record's `archived_at`; `NotFound` when there is no such record (of this kind).
fn archived_at(conn: &Connection, kind: Kind, id: &str) -> Result<Option<i64>, ConfigError> {
    Ok(match kind {
        Kind::Workspace => workspace::get(conn, id)?.archived_at,
        Kind::Container(container_kind) => container::get(conn, id, container_kind)?.archived_at,
        Kind::Source => source::get(conn, &id.into())?.archived_at,
        Kind::Product => product::get(conn, id)?.archived_at,
        Kind::Buyer => buyer::get(conn, &id.into())?.archived_at,
        Kind::Supplier => supplier::get(conn, &id.into())?.archived_at,
    })
}

/// What live records depend on record `id` of `kind`, as a phrase naming them and the way
/// out; `None` when nothing does.
fn live_dependents(conn: &Connection, kind: Kind, id: &str) -> Result<Option<String>, ConfigError> {
    let list = |ids: &[String]| ids.join(", ");
    Ok(match kind {
        Kind::Workspace => {
            let mut all = Vec::new();
            for container_kind in [ContainerKind::Channel, ContainerKind::Table] {
                for c in container::list(conn, container_kind, Some(id), false)? {
                    all.push(format!("{} {}", container_kind.as_str(), c.id));
                }
            }
            for p in product::list(conn, Some(id), false)? {
                all.push(format!("product {}", p.id));
            }
            for b in buyer::list(conn, Some(id), false)? {
                all.push(format!("buyer {}", b.id));
            }
            for s in supplier::list(conn, Some(id), false)? {
                all.push(format!("supplier {}", s.id));
            }
            (!all.is_empty())
                .then(|| format!("{} still belong to it; delete them first", list(&all)))
        }
        Kind::Container(_) => {
            let sources: Vec<String> = source::list(conn, Some(id), false)?
                .into_iter()
                .map(|s| s.id.to_string())
                .collect();
            (!sources.is_empty()).then(|| {
                format!(
                    "its sources {} still belong to it; delete them first",
                    list(&sources)
                )
            })
        }
        Kind::Source => None,
        Kind::Product => {
            let buyers: Vec<String> = subscription::subscriptions_to_product(conn, id)?
                .into_iter()
                .map(|s| s.buyer_id.to_string())
                .collect();
            (!buyers.is_empty()).then(|| {
                format!(
                    "buyers {} are subscribed to it; unsubscribe them first (buyer unsubscribe \
                     BUYER --product {id})",
                    list(&buyers)
                )
            })
        }
        Kind::Buyer => {
            let products = subscription::products_of_buyer(conn, &id.into())?;
            (!products.is_empty()).then(|| {
                format!(
                    "it is subscribed to {}; unsubscribe it first (buyer unsubscribe {id} \
                     --product PRODUCT)",
                    list(&products)
                )
            })
        }
        Kind::Supplier => {
            let mut stmt = conn.prepare(
                "SELECT id FROM sources WHERE supplier_id = ?1 AND archived_at IS NULL
                 ORDER BY id",
            )?;
            let sources = stmt
                .query_map([id], |row| row.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?;
            (!sources.is_empty()).then(|| {
                format!(
                    "sources {} buy from it; give them another supplier or delete them first",
                    list(&sources)
                )
            })
        }
    })
}
