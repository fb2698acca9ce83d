//! Products: what a lead is interested in, with the fields an interest answers.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use super::{ConfigError, choose_id, exists, insert_error};

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
}

pub struct NewProduct<'a> {
    pub id: Option<&'a str>,
    pub workspace_id: &'a str,
    pub slug: &'a str,
    pub name: &'a str,
    pub fields: Vec<FieldDef>,
    pub default_supplier_cost_cents: Option<i64>,
}

const COLUMNS: &str =
    "id, workspace_id, slug, name, fields, default_supplier_cost_cents, created_at";

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
    })
}

pub fn create(conn: &Connection, new: &NewProduct) -> Result<Product, ConfigError> {
    let id = choose_id(new.id, "prod")?;
    if !crate::ids::is_valid(new.slug) {
        return Err(ConfigError::Invalid(format!(
            "invalid slug '{}': use letters, digits, '-', '_' or '.'",
            new.slug
        )));
    }
    if new.name.trim().is_empty() {
        return Err(ConfigError::Invalid("name must not be empty".into()));
    }
    for (index, field) in new.fields.iter().enumerate() {
        if new.fields[..index].iter().any(|f| f.name == field.name) {
            return Err(ConfigError::Invalid(format!(
                "field '{}' is defined twice",
                field.name
            )));
        }
    }
    if !exists(conn, "workspaces", new.workspace_id)? {
        return Err(ConfigError::NotFound {
            kind: "workspace",
            id: new.workspace_id.to_string(),
        });
    }
    if find_by_slug(conn, new.workspace_id, new.slug)?.is_some() {
        return Err(ConfigError::AlreadyExists {
            kind: "product slug",
            id: new.slug.to_string(),
        });
    }
    let product = Product {
        id,
        workspace_id: new.workspace_id.to_string(),
        slug: new.slug.to_string(),
        name: new.name.to_string(),
        fields: new.fields.clone(),
        default_supplier_cost_cents: new.default_supplier_cost_cents,
        created_at: crate::clock::now_ms(),
    };
    conn.execute(
        &format!("INSERT INTO products ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
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

/// A product of `workspace_id` named by id or by slug.
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
