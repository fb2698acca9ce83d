//! The stored integrations: `buyers.integration` (the checked document as JSON text, NULL
//! for the generic webhook) and `buyer_integration_secrets` (named values its headers
//! send).
//!
//! Owns every statement on those. A secret is kept in clear, like the buyer's signing
//! secret: it has to be sent as it is, so a hash would not do. It is protected as the
//! signing secret is: the database file is 0600, no command prints a value once stored
//! (`show` lists names, `preview` and attempt records mask them), and nothing logs one.

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::document::{IntegrationDocument, check_header_value, check_secret_name};
use super::{IntegrationDocument as Document, IntegrationError};
use crate::config::buyer::{self, Buyer};
use crate::to_value;

/// The live buyer `id`, for a change.
fn live_buyer(conn: &Connection, id: &crate::ids::BuyerId) -> Result<Buyer, IntegrationError> {
    let buyer =
        buyer::find(conn, id)?.ok_or_else(|| IntegrationError::BuyerNotFound(id.clone()))?;
    if buyer.is_archived() {
        return Err(IntegrationError::BuyerArchived(buyer.id));
    }
    Ok(buyer)
}

/// Checks `text` as an integration document and stores it as buyer `buyer_id`'s.
pub fn set(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    text: &str,
) -> Result<Value, IntegrationError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| IntegrationError::NotJson(e.to_string()))?;
    Document::parse(&value).map_err(|problems| IntegrationError::InvalidDocument {
        total: problems.total(),
        problems: problems.list,
    })?;
    let buyer = live_buyer(conn, buyer_id)?;
    conn.execute(
        "UPDATE buyers SET integration = ?2 WHERE id = ?1",
        params![buyer.id, value.to_string()],
    )?;
    show(conn, &buyer.id)
}

/// Back to the generic webhook; the integration's secrets are deleted with it.
pub fn reset(conn: &Connection, buyer_id: &crate::ids::BuyerId) -> Result<Value, IntegrationError> {
    let buyer = live_buyer(conn, buyer_id)?;
    conn.execute(
        "UPDATE buyers SET integration = NULL WHERE id = ?1",
        [&buyer.id],
    )?;
    conn.execute(
        "DELETE FROM buyer_integration_secrets WHERE buyer_id = ?1",
        [&buyer.id],
    )?;
    show(conn, &buyer.id)
}

/// Stores secret `name` of buyer `buyer_id` (a new value replaces the old one).
pub fn set_secret(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    name: &str,
    value: &str,
    now: i64,
) -> Result<Value, IntegrationError> {
    check_secret_name(name).map_err(IntegrationError::InvalidSecret)?;
    if value.is_empty() {
        return Err(IntegrationError::InvalidSecret(
            "the secret's value is empty".into(),
        ));
    }
    // The reason names the rule, never the value.
    check_header_value(value).map_err(|why| {
        IntegrationError::InvalidSecret(format!("the secret cannot be sent in a header: {why}"))
    })?;
    let buyer = live_buyer(conn, buyer_id)?;
    conn.execute(
        "INSERT INTO buyer_integration_secrets (buyer_id, name, value, updated_at)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (buyer_id, name) DO UPDATE SET value = ?3, updated_at = ?4",
        params![buyer.id, name, value, now],
    )?;
    Ok(to_value(SecretSet {
        buyer_id: &buyer.id,
        secret: name,
        updated_at: crate::clock::iso(now),
    }))
}

/// What `buyer integration secret set` stored: the name, never the value.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SecretSet<'a> {
    buyer_id: &'a crate::ids::BuyerId,
    secret: &'a str,
    updated_at: String,
}

/// A secret as `show` lists it: its name and when it was set, never its value.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretNameView<'a> {
    name: &'a str,
    updated_at: String,
}

/// The secret names and times of [`secret_names`] as `show` lists them.
pub(crate) fn secret_views(names: &[(String, i64)]) -> Vec<SecretNameView<'_>> {
    names
        .iter()
        .map(|(name, at)| SecretNameView {
            name,
            updated_at: crate::clock::iso(*at),
        })
        .collect()
}

/// `buyer integration show`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IntegrationShow<'a> {
    buyer_id: &'a crate::ids::BuyerId,
    /// `generic` (the signed webhook) or `mapped` (a document).
    kind: &'static str,
    url: &'a str,
    /// The operator's document as stored; null for the generic webhook.
    document: Value,
    secrets: Vec<SecretNameView<'a>>,
    missing_secrets: Vec<&'a str>,
}

/// The stored document of buyer `buyer_id` (`None`: generic, or no such buyer).
pub(crate) fn document_text(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
) -> rusqlite::Result<Option<String>> {
    Ok(conn
        .prepare_kept("SELECT integration FROM buyers WHERE id = ?1")?
        .query_row([buyer_id], |row| row.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// The parsed document of buyer `buyer_id`, `None` for the generic webhook.
pub fn document(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
) -> Result<Option<IntegrationDocument>, IntegrationError> {
    document_text(conn, buyer_id)?
        .map(|text| {
            IntegrationDocument::from_stored(&text).map_err(|why| IntegrationError::Stored {
                buyer_id: buyer_id.clone(),
                why,
            })
        })
        .transpose()
}

/// Buyer `buyer_id`'s secrets with their values, by name: what the outbox sends.
pub(crate) fn secrets(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
) -> rusqlite::Result<Vec<(String, String)>> {
    conn.prepare_kept(
        "SELECT name, value FROM buyer_integration_secrets WHERE buyer_id = ?1 ORDER BY name",
    )?
    .query_map([buyer_id], |row| Ok((row.get(0)?, row.get(1)?)))?
    .collect()
}

/// Buyer `buyer_id`'s secret names and when each was set: never the values.
pub fn secret_names(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
) -> rusqlite::Result<Vec<(String, i64)>> {
    conn.prepare_kept(
        "SELECT name, updated_at FROM buyer_integration_secrets WHERE buyer_id = ?1
         ORDER BY name",
    )?
    .query_map([buyer_id], |row| Ok((row.get(0)?, row.get(1)?)))?
    .collect()
}

/// `buyer integration show`: the kind, the document, the URL requests go to, and which
/// secrets are set or still missing. No secret value.
pub fn show(conn: &Connection, buyer_id: &crate::ids::BuyerId) -> Result<Value, IntegrationError> {
    let buyer = buyer::find(conn, buyer_id)?
        .ok_or_else(|| IntegrationError::BuyerNotFound(buyer_id.clone()))?;
    let text = document_text(conn, &buyer.id)?;
    let names = secret_names(conn, &buyer.id)?;
    let secrets = secret_views(&names);
    let Some(text) = text else {
        return Ok(to_value(IntegrationShow {
            buyer_id: &buyer.id,
            kind: "generic",
            url: &buyer.webhook_url,
            document: Value::Null,
            secrets,
            missing_secrets: Vec::new(),
        }));
    };
    let parsed =
        IntegrationDocument::from_stored(&text).map_err(|why| IntegrationError::Stored {
            buyer_id: buyer.id.clone(),
            why,
        })?;
    let missing = parsed.missing_secrets(|wanted| names.iter().any(|(name, _)| name == wanted));
    let document: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok(to_value(IntegrationShow {
        buyer_id: &buyer.id,
        kind: "mapped",
        url: parsed.url.as_deref().unwrap_or(&buyer.webhook_url),
        document,
        secrets,
        missing_secrets: missing,
    }))
}
