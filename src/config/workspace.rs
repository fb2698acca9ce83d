//! Workspaces: the tenant, with the time zone that caps and schedules count in.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{ConfigError, check_name, choose_id, ensure_live, insert_error};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    pub id: String,
    pub name: String,
    pub timezone: String,
    #[serde(serialize_with = "crate::config::serialize_time")]
    pub created_at: i64,
    #[serde(serialize_with = "crate::config::serialize_opt_time")]
    pub archived_at: Option<i64>,
}

impl Workspace {
    /// The workspace's time zone (UTC if the stored name is unknown to this build, which
    /// `check_timezone` prevents on every write).
    pub fn tz(&self) -> jiff::tz::TimeZone {
        jiff::tz::TimeZone::get(&self.timezone).unwrap_or(jiff::tz::TimeZone::UTC)
    }
}

pub struct NewWorkspace<'a> {
    pub id: Option<&'a str>,
    pub name: &'a str,
    pub timezone: &'a str,
}

/// An `update`: only the fields given change.
#[derive(Debug, Default)]
pub struct WorkspaceChanges {
    pub name: Option<String>,
    pub timezone: Option<String>,
}

const COLUMNS: &str = "id, name, timezone, created_at, archived_at";

fn from_row(row: &Row) -> rusqlite::Result<Workspace> {
    Ok(Workspace {
        id: row.get(0)?,
        name: row.get(1)?,
        timezone: row.get(2)?,
        created_at: row.get(3)?,
        archived_at: row.get(4)?,
    })
}

/// Checks an IANA time zone name against the bundled time zone database.
pub fn check_timezone(name: &str) -> Result<(), String> {
    jiff::tz::TimeZone::get(name)
        .map(|_| ())
        .map_err(|_| format!("unknown time zone '{name}': use an IANA name like Europe/Berlin"))
}

pub fn create(conn: &Connection, new: &NewWorkspace) -> Result<Workspace, ConfigError> {
    let id = choose_id(new.id, "ws")?;
    check_timezone(new.timezone).map_err(ConfigError::Invalid)?;
    check_name(new.name)?;
    let workspace = Workspace {
        id,
        name: new.name.to_string(),
        timezone: new.timezone.to_string(),
        created_at: crate::clock::now_ms(),
        archived_at: None,
    };
    conn.execute(
        "INSERT INTO workspaces (id, name, timezone, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![
            workspace.id,
            workspace.name,
            workspace.timezone,
            workspace.created_at
        ],
    )
    .map_err(|e| insert_error(e, "workspace", &workspace.id))?;
    Ok(workspace)
}

pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Workspace>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM workspaces WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

pub fn get(conn: &Connection, id: &str) -> Result<Workspace, ConfigError> {
    find(conn, id)?.ok_or_else(|| ConfigError::NotFound {
        kind: "workspace",
        id: id.to_string(),
    })
}

/// A workspace that takes new records: it exists and is not archived.
pub(crate) fn get_live(conn: &Connection, id: &str) -> Result<Workspace, ConfigError> {
    let workspace = get(conn, id)?;
    ensure_live("workspace", id, workspace.archived_at)?;
    Ok(workspace)
}

/// Workspaces in creation order; archived ones only with `all`.
pub fn list(conn: &Connection, all: bool) -> Result<Vec<Workspace>, ConfigError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM workspaces WHERE ?1 OR archived_at IS NULL
         ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([all], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn update(
    conn: &Connection,
    id: &str,
    changes: &WorkspaceChanges,
) -> Result<Workspace, ConfigError> {
    let mut workspace = get(conn, id)?;
    ensure_live("workspace", id, workspace.archived_at)?;
    if let Some(name) = &changes.name {
        check_name(name)?;
        workspace.name = name.clone();
    }
    if let Some(timezone) = &changes.timezone {
        check_timezone(timezone).map_err(ConfigError::Invalid)?;
        workspace.timezone = timezone.clone();
    }
    conn.execute(
        "UPDATE workspaces SET name = ?2, timezone = ?3 WHERE id = ?1",
        params![workspace.id, workspace.name, workspace.timezone],
    )?;
    if changes.timezone.is_some() {
        // Caps count in the local day and month: new windows, counted again.
        crate::caps::rebuild(conn, Some(&workspace.id), crate::clock::now_ms())?;
    }
    Ok(workspace)
}
