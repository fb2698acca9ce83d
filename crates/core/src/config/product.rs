//! Products: what a lead is interested in, with the fields an interest answers. An archived
//! product is unknown to ingest (`unknown_product`) and takes no subscriptions.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use super::{ConfigError, check_name, choose_id, ensure_live, insert_error, workspace};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldDef {
    pub name: String,
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_values: Option<Vec<String>>,
}

impl FieldDef {
    /// Parses `NAME[:required][=A|B|C]`, e.g. `roof:required=tile|flat`.
    pub fn parse(text: &str) -> Result<FieldDef, String> {
        let (head, allowed) = match text.split_once('=') {
            Some((head, values)) => {
                let values: Vec<String> = values.split('|').map(|v| v.trim().to_string()).collect();
                if values.iter().any(String::is_empty) {
                    return Err(format!("field '{text}': allowed values must not be empty"));
                }
                (head, Some(values))
            }
            None => (text, None),
        };
        let (name, required) = match head.split_once(':') {
            Some((name, "required")) => (name, true),
            Some((_, other)) => {
                return Err(format!(
                    "field '{text}': expected NAME[:required][=A|B], not ':{other}'"
                ));
            }
            None => (head, false),
        };
        let name = name.trim();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "field '{text}': a field name uses letters, digits, '_' or '-'"
            ));
        }
        Ok(FieldDef {
            name: name.to_string(),
            required,
            allowed_values: allowed,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Product {
    pub id: String,
    pub workspace_id: String,
    pub slug: String,
    pub name: String,
    pub fields: Vec<FieldDef>,
    #[serde(
        rename = "supplierCost",
        serialize_with = "crate::config::serialize_opt_money"
    )]
    pub default_supplier_cost_cents: Option<i64>,
    #[serde(serialize_with = "crate::config::serialize_time")]
    pub created_at: i64,
    #[serde(serialize_with = "crate::config::serialize_opt_time")]
    pub archived_at: Option<i64>,
    /// Whether any subscription to it prices by bid: read with the product (one index
    /// probe), so that ingest and pings ask for bids only where someone bids and a lead
    /// of any other product pays no read for it.
    #[serde(skip)]
    pub(crate) bid_subscriptions: bool,
}

impl Product {
    pub fn is_archived(&self) -> bool {
        self.archived_at.is_some()
    }
}

pub struct NewProduct<'a> {
    pub id: Option<&'a str>,
    pub workspace_id: &'a str,
    pub slug: &'a str,
    pub name: &'a str,
    pub fields: Vec<FieldDef>,
    pub default_supplier_cost_cents: Option<i64>,
}

/// An `update`: only the fields given change. `fields` replaces the whole list;
/// `Some(None)` clears the supplier cost.
#[derive(Debug, Default)]
pub struct ProductChanges {
    pub slug: Option<String>,
    pub name: Option<String>,
    pub fields: Option<Vec<FieldDef>>,
    pub default_supplier_cost_cents: Option<Option<i64>>,
}

const COLUMNS: &str = "id, workspace_id, slug, name, fields, default_supplier_cost_cents, created_at, archived_at, \
     EXISTS (SELECT 1 FROM subscriptions s WHERE s.product_id = products.id \
             AND s.pricing = 'bid')";

fn from_row(row: &Row) -> rusqlite::Result<Product> {
    let fields: String = row.get(4)?;
    Ok(Product {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        slug: row.get(2)?,
        name: row.get(3)?,
        fields: serde_json::from_str(&fields).unwrap_or_default(),
        default_supplier_cost_cents: row.get(5)?,
        created_at: row.get(6)?,
        archived_at: row.get(7)?,
        bid_subscriptions: row.get(8)?,
    })
}

fn check_slug(slug: &str) -> Result<(), ConfigError> {
    if !crate::ids::is_valid(slug) {
        return Err(ConfigError::Invalid(format!(
            "invalid slug '{slug}': use letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

fn check_fields(fields: &[FieldDef]) -> Result<(), ConfigError> {
    for (index, field) in fields.iter().enumerate() {
        if fields[..index].iter().any(|f| f.name == field.name) {
            return Err(ConfigError::Invalid(format!(
                "field '{}' is defined twice",
                field.name
            )));
        }
    }
    Ok(())
}

/// Refuses a slug that another product of the workspace has (an archived one keeps its
/// slug, as its id, so old leads still name it).
fn check_slug_free(conn: &Connection, workspace_id: &str, slug: &str) -> Result<(), ConfigError> {
    match find_by_slug(conn, workspace_id, slug)? {
        Some(_) => Err(ConfigError::AlreadyExists {
            kind: "product slug",
            id: slug.to_string(),
        }),
        None => Ok(()),
    }
}

pub fn create(conn: &Connection, new: &NewProduct) -> Result<Product, ConfigError> {
    let id = choose_id(new.id, "prod")?;
    check_slug(new.slug)?;
    check_name(new.name)?;
    check_fields(&new.fields)?;
    if let Some(cost) = new.default_supplier_cost_cents {
        super::check_not_negative("supplier cost", cost)?;
    }
    workspace::get_live(conn, new.workspace_id)?;
    check_slug_free(conn, new.workspace_id, new.slug)?;
    let product = Product {
        id,
        workspace_id: new.workspace_id.to_string(),
        slug: new.slug.to_string(),
        name: new.name.to_string(),
        fields: new.fields.clone(),
        default_supplier_cost_cents: new.default_supplier_cost_cents,
        created_at: crate::clock::now_ms(),
        archived_at: None,
        bid_subscriptions: false,
    };
    conn.execute(
        "INSERT INTO products (id, workspace_id, slug, name, fields, default_supplier_cost_cents,
            created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            product.id,
            product.workspace_id,
            product.slug,
            product.name,
            serde_json::to_string(&product.fields).expect("field definitions serialise"),
            product.default_supplier_cost_cents,
            product.created_at
        ],
    )
    .map_err(|e| insert_error(e, "product", &product.id))?;
    Ok(product)
}

/// Cached statement (also for `find_by_slug`): ingest resolves products on every request.
pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Product>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM products WHERE id = ?1"))?
        .query_row([id], from_row)
        .optional()
}

pub fn find_by_slug(
    conn: &Connection,
    workspace_id: &str,
    slug: &str,
) -> rusqlite::Result<Option<Product>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM products WHERE workspace_id = ?1 AND slug = ?2"
    ))?
    .query_row([workspace_id, slug], from_row)
    .optional()
}

/// A product of `workspace_id` named by id or by slug (archived ones too: the caller
/// decides whether an archived product will do).
pub fn resolve(
    conn: &Connection,
    workspace_id: &str,
    id_or_slug: &str,
) -> Result<Product, ConfigError> {
    if let Some(product) = find(conn, id_or_slug)?
        && product.workspace_id == workspace_id
    {
        return Ok(product);
    }
    find_by_slug(conn, workspace_id, id_or_slug)?.ok_or_else(|| ConfigError::NotFound {
        kind: "product",
        id: id_or_slug.to_string(),
    })
}

pub fn get(conn: &Connection, id: &str) -> Result<Product, ConfigError> {
    find(conn, id)?.ok_or_else(|| ConfigError::NotFound {
        kind: "product",
        id: id.to_string(),
    })
}

/// Products in creation order, of one workspace when given; archived ones only with `all`.
pub fn list(
    conn: &Connection,
    workspace_id: Option<&str>,
    all: bool,
) -> Result<Vec<Product>, ConfigError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM products
         WHERE (?1 IS NULL OR workspace_id = ?1) AND (?2 OR archived_at IS NULL)
         ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map(params![workspace_id, all], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The live (not archived) products of `workspace_id`, in creation order.
pub fn live_in(conn: &Connection, workspace_id: &str) -> rusqlite::Result<Vec<Product>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM products
         WHERE workspace_id = ?1 AND archived_at IS NULL ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([workspace_id], from_row)?;
    rows.collect()
}

/// Changes the given fields of product `id`; ingest validates against them from the next
/// request on. A field that a subscription's filter names cannot be removed.
pub fn update(
    conn: &Connection,
    id: &str,
    changes: &ProductChanges,
) -> Result<Product, ConfigError> {
    let mut product = get(conn, id)?;
    ensure_live("product", id, product.archived_at)?;
    if let Some(slug) = &changes.slug
        && *slug != product.slug
    {
        check_slug(slug)?;
        check_slug_free(conn, &product.workspace_id, slug)?;
        product.slug = slug.clone();
    }
    if let Some(name) = &changes.name {
        check_name(name)?;
        product.name = name.clone();
    }
    if let Some(fields) = &changes.fields {
        check_fields(fields)?;
        super::subscription::check_fields_kept(conn, &product.id, fields)?;
        product.fields = fields.clone();
    }
    if let Some(cost) = changes.default_supplier_cost_cents {
        if let Some(cents) = cost {
            super::check_not_negative("supplier cost", cents)?;
        }
        product.default_supplier_cost_cents = cost;
    }
    conn.execute(
        "UPDATE products SET slug = ?2, name = ?3, fields = ?4, default_supplier_cost_cents = ?5
         WHERE id = ?1",
        params![
            product.id,
            product.slug,
            product.name,
            serde_json::to_string(&product.fields).expect("field definitions serialise"),
            product.default_supplier_cost_cents
        ],
    )?;
    Ok(product)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_field_definitions() {
        assert_eq!(
            FieldDef::parse("roof:required=tile|flat").unwrap(),
            FieldDef {
                name: "roof".into(),
                required: true,
                allowed_values: Some(vec!["tile".into(), "flat".into()])
            }
        );
        assert!(!FieldDef::parse("size").unwrap().required);
        for bad in ["", ":required", "a:maybe", "a b", "x=a||b"] {
            assert!(FieldDef::parse(bad).is_err(), "{bad}");
        }
    }
}
