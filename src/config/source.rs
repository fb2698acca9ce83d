//! Sources: where partners post leads. Each belongs to one channel or lead table and has an
//! ingest secret (stored hashed), an optional supplier and cost, a duplicate rule and a
//! partner-native mapping (draft and published).

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Value, json};

use super::container::{self, ContainerKind};
use super::{ConfigError, choose_id, exists, insert_error};
use crate::db::stored::stored_enum;

/// The fields a duplicate rule may compare.
pub const DEDUPE_FIELDS: &[&str] = &["email", "phone"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DedupeScope {
    /// The source's own channel or lead table.
    Container,
    Workspace,
}

stored_enum! {
    /// What a duplicate match does to the new lead.
    pub enum DedupeAction as "duplicate action" {
        Review = "review",
        Reject = "reject",
    }
}

stored_enum! {
    /// `sources.dedupe_scope` as stored: the container's kind by name, or the workspace.
    pub(crate) enum StoredScope as "duplicate scope" {
        Channel = "channel",
        Table = "table",
        Workspace = "workspace",
    }
}

#[derive(Debug, Clone)]
pub struct DedupeRule {
    /// Empty: no duplicate rule.
    pub fields: Vec<String>,
    pub scope: DedupeScope,
    pub action: DedupeAction,
    pub window_days: i64,
}

#[derive(Debug, Clone)]
pub struct Source {
    pub id: String,
    pub container_id: String,
    pub container_kind: ContainerKind,
    pub workspace_id: String,
    pub name: String,
    pub secret_hash: Option<String>,
    pub supplier_id: Option<String>,
    pub supplier_cost_cents: Option<i64>,
    pub dedupe: DedupeRule,
    pub mapping_draft: Option<String>,
    pub mapping_draft_at: Option<i64>,
    pub mapping_published: Option<String>,
    pub mapping_published_at: Option<i64>,
    pub mapping_version: i64,
    pub enabled: bool,
    pub created_at: i64,
}

impl Source {
    /// The ingest path of SPEC.md section 4.2 or 4.3 for this source.
    pub fn webhook_path(&self) -> String {
        webhook_path(self.container_kind, &self.container_id, &self.id)
    }

    /// The source as shown to the operator. Never includes the secret or its hash.
    pub fn to_json(&self) -> Value {
        let scope = match self.dedupe.scope {
            DedupeScope::Container => self.container_kind.as_str(),
            DedupeScope::Workspace => "workspace",
        };
        json!({
            "id": self.id,
            self.container_kind.id_key(): self.container_id,
            "workspaceId": self.workspace_id,
            "name": self.name,
            "hasSecret": self.secret_hash.is_some(),
            "supplierId": self.supplier_id,
            "supplierCost": self.supplier_cost_cents.map(crate::money::to_json),
            "dedupe": {
                "fields": self.dedupe.fields,
                "scope": scope,
                "action": self.dedupe.action.as_str(),
                "windowDays": self.dedupe.window_days,
            },
            "mapping": {
                "version": self.mapping_version,
                "hasDraft": self.mapping_draft.is_some(),
                "published": self.mapping_published.is_some(),
            },
            "enabled": self.enabled,
            "webhookPath": self.webhook_path(),
            "createdAt": crate::clock::iso(self.created_at),
        })
    }
}

pub fn webhook_path(kind: ContainerKind, container_id: &str, source_id: &str) -> String {
    match kind {
        ContainerKind::Channel => {
            format!("/api/webhooks/channels/{container_id}/sources/{source_id}/leads")
        }
        ContainerKind::Table => {
            format!("/api/webhooks/lead-tables/{container_id}/sources/{source_id}/leads")
        }
    }
}

pub struct NewSource<'a> {
    pub id: Option<&'a str>,
    pub container_id: &'a str,
    pub container_kind: ContainerKind,
    pub name: &'a str,
    /// `None`: no secret. `Some(None)`: generate one. `Some(Some(s))`: use `s`.
    pub secret: Option<Option<&'a str>>,
    pub supplier_id: Option<&'a str>,
    pub supplier_cost_cents: Option<i64>,
    /// `None` means the default (email, phone); an empty list turns the rule off.
    pub dedupe_fields: Option<Vec<String>>,
    /// "channel", "table" or "workspace"; `None` means the source's container.
    pub dedupe_scope: Option<&'a str>,
    pub dedupe_action: DedupeAction,
    pub dedupe_window_days: i64,
}

/// A created source and its secret in clear, which is shown once and never stored.
pub struct CreatedSource {
    pub source: Source,
    pub secret: Option<String>,
}

const COLUMNS: &str = "s.id, s.container_id, c.kind, c.workspace_id, s.name, s.secret_hash, \
    s.supplier_id, s.supplier_cost_cents, s.dedupe_fields, s.dedupe_scope, s.dedupe_action, \
    s.dedupe_window_days, s.mapping_draft, s.mapping_draft_at, s.mapping_published, \
    s.mapping_published_at, s.mapping_version, s.enabled, s.created_at";

fn from_row(row: &Row) -> rusqlite::Result<Source> {
    let fields: String = row.get(8)?;
    let scope: StoredScope = row.get(9)?;
    Ok(Source {
        id: row.get(0)?,
        container_id: row.get(1)?,
        container_kind: row.get(2)?,
        workspace_id: row.get(3)?,
        name: row.get(4)?,
        secret_hash: row.get(5)?,
        supplier_id: row.get(6)?,
        supplier_cost_cents: row.get(7)?,
        dedupe: DedupeRule {
            fields: fields
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect(),
            scope: match scope {
                StoredScope::Workspace => DedupeScope::Workspace,
                StoredScope::Channel | StoredScope::Table => DedupeScope::Container,
            },
            action: row.get(10)?,
            window_days: row.get(11)?,
        },
        mapping_draft: row.get(12)?,
        mapping_draft_at: row.get(13)?,
        mapping_published: row.get(14)?,
        mapping_published_at: row.get(15)?,
        mapping_version: row.get(16)?,
        enabled: row.get(17)?,
        created_at: row.get(18)?,
    })
}

/// Checks a list of duplicate-rule fields; `["none"]` means no rule.
pub fn parse_dedupe_fields(text: &str) -> Result<Vec<String>, String> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut fields = Vec::new();
    for field in text.split(',').map(str::trim) {
        if !DEDUPE_FIELDS.contains(&field) {
            return Err(format!(
                "unknown duplicate field '{field}': use email, phone, both, or none"
            ));
        }
        if !fields.iter().any(|f| f == field) {
            fields.push(field.to_string());
        }
    }
    Ok(fields)
}

pub fn create(conn: &Connection, new: &NewSource) -> Result<CreatedSource, ConfigError> {
    let id = choose_id(new.id, "src")?;
    if new.name.trim().is_empty() {
        return Err(ConfigError::Invalid("name must not be empty".into()));
    }
    let container = container::get(conn, new.container_id, new.container_kind)?;
    let scope = match new.dedupe_scope {
        None => DedupeScope::Container,
        Some("workspace") => DedupeScope::Workspace,
        Some(s) if s == container.kind.as_str() => DedupeScope::Container,
        Some(s) => {
            return Err(ConfigError::Invalid(format!(
                "duplicate scope '{s}' does not fit a source of a {}: use {} or workspace",
                container.kind.as_str(),
                container.kind.as_str()
            )));
        }
    };
    if let Some(supplier) = new.supplier_id {
        let supplier_workspace: Option<String> = conn
            .query_row(
                "SELECT workspace_id FROM suppliers WHERE id = ?1",
                [supplier],
                |r| r.get(0),
            )
            .optional()?;
        if supplier_workspace.as_deref() != Some(container.workspace_id.as_str()) {
            return Err(ConfigError::NotFound {
                kind: "supplier",
                id: supplier.to_string(),
            });
        }
    }
    if new.dedupe_window_days < 0 {
        return Err(ConfigError::Invalid(
            "duplicate window must not be negative".into(),
        ));
    }
    let secret = match new.secret {
        None => None,
        Some(None) => Some(crate::secrets::generate("lrs_")),
        Some(Some(given)) => {
            super::check_given_secret(given)?;
            Some(given.to_string())
        }
    };
    let fields = new
        .dedupe_fields
        .clone()
        .unwrap_or_else(|| DEDUPE_FIELDS.iter().map(|f| f.to_string()).collect());
    let scope_text = match scope {
        DedupeScope::Container => container.kind.as_str(),
        DedupeScope::Workspace => "workspace",
    };
    conn.execute(
        "INSERT INTO sources (id, container_id, name, secret_hash, supplier_id,
            supplier_cost_cents, dedupe_fields, dedupe_scope, dedupe_action, dedupe_window_days,
            created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            id,
            container.id,
            new.name,
            secret.as_deref().map(crate::secrets::hash),
            new.supplier_id,
            new.supplier_cost_cents,
            fields.join(","),
            scope_text,
            new.dedupe_action.as_str(),
            new.dedupe_window_days,
            crate::clock::now_ms(),
        ],
    )
    .map_err(|e| insert_error(e, "source", &id))?;
    Ok(CreatedSource {
        source: get(conn, &id)?,
        secret,
    })
}

/// Cached statement: ingest looks a source up on every request.
pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Source>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM sources s JOIN containers c ON c.id = s.container_id
         WHERE s.id = ?1"
    ))?
    .query_row([id], from_row)
    .optional()
}

pub fn get(conn: &Connection, id: &str) -> Result<Source, ConfigError> {
    find(conn, id)?.ok_or_else(|| ConfigError::NotFound {
        kind: "source",
        id: id.to_string(),
    })
}

pub fn list(conn: &Connection) -> Result<Vec<Source>, ConfigError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM sources s JOIN containers c ON c.id = s.container_id
         ORDER BY s.created_at, s.id"
    ))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Replaces the source's secret with `given` or a new random one; returns it in clear.
pub fn rotate_secret(
    conn: &Connection,
    id: &str,
    given: Option<&str>,
) -> Result<(Source, String), ConfigError> {
    if !exists(conn, "sources", id)? {
        return Err(ConfigError::NotFound {
            kind: "source",
            id: id.to_string(),
        });
    }
    let secret = match given {
        Some(given) => {
            super::check_given_secret(given)?;
            given.to_string()
        }
        None => crate::secrets::generate("lrs_"),
    };
    conn.execute(
        "UPDATE sources SET secret_hash = ?2 WHERE id = ?1",
        params![id, crate::secrets::hash(&secret)],
    )?;
    Ok((get(conn, id)?, secret))
}

/// Disables a source: its ingest path answers 404 from the next request on.
pub fn disable(conn: &Connection, id: &str) -> Result<Source, ConfigError> {
    let changed = conn.execute("UPDATE sources SET enabled = 0 WHERE id = ?1", [id])?;
    if changed == 0 {
        return Err(ConfigError::NotFound {
            kind: "source",
            id: id.to_string(),
        });
    }
    get(conn, id)
}

/// The supplier of source `id`, who is paid the supplier cost of its leads; `None` when it
/// has none (or there is no such source).
pub(crate) fn supplier_of(conn: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT supplier_id FROM sources WHERE id = ?1")?
        .query_row([id], |row| row.get(0))
        .optional()?
        .flatten())
}
