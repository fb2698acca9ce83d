//! The stored check steps: `check_steps` (the checked document as JSON text, by name, in a
//! workspace) and `check_step_secrets` (named values its headers send).
//!
//! Owns every statement on those. A secret is kept in clear and protected as a buyer
//! integration's secret is (`integration::store`): it has to be sent as it is; no command
//! prints a value once stored, and nothing logs one.

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::CheckError;
use super::document::CheckDocument;
use super::run::Step;
use crate::integration::document::{check_header_value, check_secret_name};
use crate::integration::store::{SecretNameView, secret_views};
use crate::to_value;

const NAME_MAX: usize = 64;

/// A step's name: it is also a part of a filter's field (`check.NAME.KEY`), so no dots.
fn check_name(name: &str) -> Result<(), CheckError> {
    let ok = !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(CheckError::InvalidName(name.to_string()))
    }
}

fn parsed(name: &str, text: &str) -> Result<CheckDocument, CheckError> {
    CheckDocument::from_stored(text).map_err(|why| CheckError::Stored {
        name: name.to_string(),
        why,
    })
}

/// Checks `text` as a step document and stores it as step `name` of `workspace_id` (a new
/// document replaces the step's old one).
pub fn set(
    conn: &Connection,
    workspace_id: &str,
    name: &str,
    text: &str,
    now: i64,
) -> Result<Value, CheckError> {
    check_name(name)?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| CheckError::NotJson(e.to_string()))?;
    CheckDocument::parse(&value).map_err(|problems| CheckError::InvalidDocument {
        total: problems.total(),
        problems: problems.list,
    })?;
    if crate::config::workspace::find(conn, workspace_id)?.is_none() {
        return Err(CheckError::WorkspaceNotFound(workspace_id.to_string()));
    }
    if let Some((owner, _)) = stored(conn, name)?
        && owner != workspace_id
    {
        return Err(CheckError::OtherWorkspace {
            name: name.to_string(),
            workspace_id: owner,
        });
    }
    conn.execute(
        "INSERT INTO check_steps (name, workspace_id, document, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?4)
         ON CONFLICT (name) DO UPDATE SET document = ?3, updated_at = ?4",
        params![name, workspace_id, value.to_string(), now],
    )?;
    show(conn, name)
}

/// The workspace and document text of step `name`.
fn stored(conn: &Connection, name: &str) -> rusqlite::Result<Option<(String, String)>> {
    conn.prepare_kept("SELECT workspace_id, document FROM check_steps WHERE name = ?1")?
        .query_row([name], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
}

/// Removes step `name` and its secrets.
pub fn remove(conn: &Connection, name: &str) -> Result<Value, CheckError> {
    if stored(conn, name)?.is_none() {
        return Err(CheckError::NotFound(name.to_string()));
    }
    conn.execute(
        "DELETE FROM check_step_secrets WHERE step_name = ?1",
        [name],
    )?;
    conn.execute("DELETE FROM check_steps WHERE name = ?1", [name])?;
    Ok(to_value(Removed {
        name,
        removed: true,
    }))
}

/// What `check-step remove` did.
#[derive(Serialize)]
struct Removed<'a> {
    name: &'a str,
    removed: bool,
}

/// What `check-step secret set` stored: the name, never the value.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SecretSet<'a> {
    name: &'a str,
    secret: &'a str,
    updated_at: String,
}

/// `check-step show`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StepShow<'a> {
    name: &'a str,
    workspace_id: &'a str,
    /// The operator's document as stored.
    document: Value,
    secrets: Vec<SecretNameView<'a>>,
    missing_secrets: Vec<&'a str>,
}

/// A step as `check-step list` shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StepLine<'a> {
    name: &'a str,
    workspace_id: &'a str,
    url: Option<&'a Value>,
    on_fail: Value,
    on_error: Value,
}

/// Stores secret `key` of step `name` (a new value replaces the old one).
pub fn set_secret(
    conn: &Connection,
    name: &str,
    key: &str,
    value: &str,
    now: i64,
) -> Result<Value, CheckError> {
    check_secret_name(key).map_err(CheckError::InvalidSecret)?;
    if value.is_empty() {
        return Err(CheckError::InvalidSecret(
            "the secret's value is empty".into(),
        ));
    }
    // The reason names the rule, never the value.
    check_header_value(value).map_err(|why| {
        CheckError::InvalidSecret(format!("the secret cannot be sent in a header: {why}"))
    })?;
    if stored(conn, name)?.is_none() {
        return Err(CheckError::NotFound(name.to_string()));
    }
    conn.execute(
        "INSERT INTO check_step_secrets (step_name, name, value, updated_at)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (step_name, name) DO UPDATE SET value = ?3, updated_at = ?4",
        params![name, key, value, now],
    )?;
    Ok(to_value(SecretSet {
        name,
        secret: key,
        updated_at: crate::clock::iso(now),
    }))
}

/// Step `name`'s secrets with their values: what its requests send.
fn secrets(conn: &Connection, name: &str) -> rusqlite::Result<Vec<(String, String)>> {
    conn.prepare_kept(
        "SELECT name, value FROM check_step_secrets WHERE step_name = ?1 ORDER BY name",
    )?
    .query_map([name], |row| Ok((row.get(0)?, row.get(1)?)))?
    .collect()
}

/// Step `name`, ready to run (`check-step preview`).
pub fn find(conn: &Connection, name: &str) -> Result<Step, CheckError> {
    let (_, text) = stored(conn, name)?.ok_or_else(|| CheckError::NotFound(name.to_string()))?;
    Ok(Step {
        name: name.to_string(),
        document: parsed(name, &text)?,
        secrets: secrets(conn, name)?,
    })
}

/// The steps of `workspace_id`, ready to run, in name order: what ingest runs for each of
/// its leads. One indexed read; none for a workspace without steps.
pub fn for_workspace(conn: &Connection, workspace_id: &str) -> Result<Vec<Step>, CheckError> {
    let rows: Vec<(String, String)> = conn
        .prepare_kept(
            "SELECT name, document FROM check_steps WHERE workspace_id = ?1 ORDER BY name",
        )?
        .query_map([workspace_id], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    rows.into_iter()
        .map(|(name, text)| {
            Ok(Step {
                document: parsed(&name, &text)?,
                secrets: secrets(conn, &name)?,
                name,
            })
        })
        .collect()
}

/// Whether step `name` exists (`--require-check`, `check.NAME.KEY` filters name one).
pub fn exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    Ok(stored(conn, name)?.is_some())
}

/// `check-step show`: the document and which secrets are set or still missing. No
/// secret value.
pub fn show(conn: &Connection, name: &str) -> Result<Value, CheckError> {
    let (workspace_id, text) =
        stored(conn, name)?.ok_or_else(|| CheckError::NotFound(name.to_string()))?;
    let document = parsed(name, &text)?;
    let names: Vec<(String, i64)> = conn
        .prepare_kept(
            "SELECT name, updated_at FROM check_step_secrets WHERE step_name = ?1 ORDER BY name",
        )?
        .query_map([name], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let missing = document
        .request
        .missing_secrets(|wanted| names.iter().any(|(name, _)| name == wanted));
    Ok(to_value(StepShow {
        name,
        workspace_id: &workspace_id,
        document: serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        secrets: secret_views(&names),
        missing_secrets: missing,
    }))
}

/// `check-step list`: the steps, of one workspace or all, with their URL and actions.
pub fn list(conn: &Connection, workspace_id: Option<&str>) -> Result<Vec<Value>, CheckError> {
    let rows: Vec<(String, String, String)> = conn
        .prepare_kept(
            "SELECT name, workspace_id, document FROM check_steps
             WHERE ?1 IS NULL OR workspace_id = ?1 ORDER BY name",
        )?
        .query_map([workspace_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    rows.into_iter()
        .map(|(name, workspace_id, text)| {
            let document: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            Ok(to_value(StepLine {
                name: &name,
                workspace_id: &workspace_id,
                url: document.get("url"),
                // An action the document leaves out is the default it runs with.
                on_fail: document.get("onFail").cloned().unwrap_or("reject".into()),
                on_error: document.get("onError").cloned().unwrap_or("flag".into()),
            }))
        })
        .collect()
}
