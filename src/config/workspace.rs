//! Workspaces: the tenant, with the time zone that caps and schedules count in and how
//! long its leads are kept (retention; `privacy::purge` acts on it).

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::{ConfigError, choose_id, insert_error};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    pub id: String,
    pub name: String,
    pub timezone: String,
    #[serde(serialize_with = "crate::config::serialize_time")]
    pub created_at: i64,
}

pub struct NewWorkspace<'a> {
    pub id: Option<&'a str>,
    pub name: &'a str,
    pub timezone: &'a str,
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
    if new.name.trim().is_empty() {
        return Err(ConfigError::Invalid("name must not be empty".into()));
    }
    let workspace = Workspace {
        id,
        name: new.name.to_string(),
        timezone: new.timezone.to_string(),
        created_at: crate::clock::now_ms(),
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

pub fn get(conn: &Connection, id: &str) -> Result<Workspace, ConfigError> {
    conn.query_row(
        "SELECT id, name, timezone, created_at FROM workspaces WHERE id = ?1",
        [id],
        |row| {
            Ok(Workspace {
                id: row.get(0)?,
                name: row.get(1)?,
                timezone: row.get(2)?,
                created_at: row.get(3)?,
            })
        },
    )
    .optional()?
    .ok_or_else(|| ConfigError::NotFound {
        kind: "workspace",
        id: id.to_string(),
    })
}

/// Sets how long the workspace's leads are kept before `serve` purges them (`None`: for
/// ever).
pub fn set_retention(
    conn: &Connection,
    id: &str,
    retention: Option<std::time::Duration>,
) -> Result<(), ConfigError> {
    let millis = retention
        .map(|d| i64::try_from(d.as_millis()).map_err(|_| ConfigError::Invalid("the retention is too long".into())))
        .transpose()?;
    if millis == Some(0) {
        return Err(ConfigError::Invalid(
            "the retention must be longer than 0".into(),
        ));
    }
    let changed = conn.execute(
        "UPDATE workspaces SET retention_ms = ?2 WHERE id = ?1",
        params![id, millis],
    )?;
    if changed == 0 {
        return Err(ConfigError::NotFound {
            kind: "workspace",
            id: id.to_string(),
        });
    }
    Ok(())
}

/// How long the workspace's leads are kept (`None`: for ever).
pub fn retention(conn: &Connection, id: &str) -> Result<Option<std::time::Duration>, ConfigError> {
    let millis: Option<i64> = conn
        .query_row(
            "SELECT retention_ms FROM workspaces WHERE id = ?1",
            [id],
            |row| row.get(0),
        )
        .optional()?
        .ok_or_else(|| ConfigError::NotFound {
            kind: "workspace",
            id: id.to_string(),
        })?;
    Ok(millis.map(|ms| std::time::Duration::from_millis(ms.max(0) as u64)))
}
