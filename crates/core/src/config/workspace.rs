//! Workspaces: the tenant, with the time zone that caps and schedules count in and how
//! long its leads are kept (retention; `privacy::purge` acts on it).

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
    /// How long its leads are kept before `serve` purges them (`None`: for ever); shown in
    /// the one duration syntax (`180d`).
    #[serde(rename = "retention", serialize_with = "serialize_retention")]
    pub retention_ms: Option<i64>,
}

fn serialize_retention<S: serde::Serializer>(ms: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.serialize_str(&crate::duration::format(std::time::Duration::from_millis(
            (*ms).max(0) as u64,
        ))),
        None => s.serialize_none(),
    }
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
    pub retention: Option<std::time::Duration>,
}

/// An `update`: only the fields given change.
#[derive(Debug, Default)]
pub struct WorkspaceChanges {
    pub name: Option<String>,
    pub timezone: Option<String>,
    /// `Some(None)`: keep leads for ever from now on.
    pub retention: Option<Option<std::time::Duration>>,
}

const COLUMNS: &str = "id, name, timezone, created_at, archived_at, retention_ms";

fn from_row(row: &Row) -> rusqlite::Result<Workspace> {
    Ok(Workspace {
        id: row.get(0)?,
        name: row.get(1)?,
        timezone: row.get(2)?,
        created_at: row.get(3)?,
        archived_at: row.get(4)?,
        retention_ms: row.get(5)?,
    })
}

/// A retention as stored: whole milliseconds, more than 0.
fn retention_ms(retention: Option<std::time::Duration>) -> Result<Option<i64>, ConfigError> {
    let Some(retention) = retention else {
        return Ok(None);
    };
    match i64::try_from(retention.as_millis()) {
        Ok(0) => Err(ConfigError::Invalid(
            "the retention must be longer than 0".into(),
        )),
        Ok(ms) => Ok(Some(ms)),
        Err(_) => Err(ConfigError::Invalid("the retention is too long".into())),
    }
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
        retention_ms: retention_ms(new.retention)?,
    };
    conn.execute(
        "INSERT INTO workspaces (id, name, timezone, created_at, retention_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            workspace.id,
            workspace.name,
            workspace.timezone,
            workspace.created_at,
            workspace.retention_ms
        ],
    )
    .map_err(|e| insert_error(e, "workspace", &workspace.id))?;
    super::return_reason::seed(conn, &workspace.id, workspace.created_at)?;
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
    if let Some(retention) = changes.retention {
        workspace.retention_ms = retention_ms(retention)?;
    }
    conn.execute(
        "UPDATE workspaces SET name = ?2, timezone = ?3, retention_ms = ?4 WHERE id = ?1",
        params![
            workspace.id,
            workspace.name,
            workspace.timezone,
            workspace.retention_ms
        ],
    )?;
    if changes.timezone.is_some() {
        // Caps count in the local day and month: new windows, counted again.
        crate::caps::rebuild(conn, Some(&workspace.id), crate::clock::now_ms())?;
    }
    Ok(workspace)
}
