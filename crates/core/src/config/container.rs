//! Channels and lead tables: containers of sources with their delivery settings.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{ConfigError, check_name, choose_id, ensure_live, insert_error, workspace};
use crate::db::stored::stored_enum;

stored_enum! {
    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum ContainerKind as "container kind" {
        Channel = "channel",
        Table = "table",
    }
}

impl ContainerKind {
    /// The key that names a container of this kind in JSON (`channelId` or `tableId`).
    pub fn id_key(self) -> &'static str {
        match self {
            ContainerKind::Channel => "channelId",
            ContainerKind::Table => "tableId",
        }
    }

    /// Auto-delivery is on by default for channels and off for lead tables (DESIGN.md 1).
    pub fn default_auto_delivery(self) -> bool {
        self == ContainerKind::Channel
    }
}

stored_enum! {
    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum DeliveryMode as "delivery mode" {
        Exclusive = "exclusive",
        Multi = "multi",
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub id: String,
    pub workspace_id: String,
    pub kind: ContainerKind,
    pub name: String,
    pub auto_delivery: bool,
    pub delivery_mode: DeliveryMode,
    pub max_buyers: i64,
    pub score_threshold: i64,
    /// How long an accepted ping holds its reservations (`--ping-ttl`).
    #[serde(rename = "pingTtl", serialize_with = "serialize_duration_ms")]
    pub ping_ttl_ms: i64,
    /// Whether a lead refused by a buyer's API goes on to the next buyer (DESIGN.md 18).
    pub waterfall: bool,
    /// How many times at most a request falls to the next buyer.
    pub waterfall_max: i64,
    #[serde(serialize_with = "crate::config::serialize_time")]
    pub created_at: i64,
    #[serde(serialize_with = "crate::config::serialize_opt_time")]
    pub archived_at: Option<i64>,
}

pub struct NewContainer<'a> {
    pub id: Option<&'a str>,
    pub workspace_id: &'a str,
    pub kind: ContainerKind,
    pub name: &'a str,
    pub auto_delivery: Option<bool>,
    pub delivery_mode: DeliveryMode,
    pub max_buyers: i64,
    pub score_threshold: i64,
    /// `None`: the default, [`DEFAULT_PING_TTL_MS`].
    pub ping_ttl_ms: Option<i64>,
    /// `None` takes the defaults: on, at most [`DEFAULT_WATERFALL_MAX`] steps.
    pub waterfall: Option<bool>,
    pub waterfall_max: Option<i64>,
}

/// How long an accepted ping holds its reservations unless the container says otherwise.
pub const DEFAULT_PING_TTL_MS: i64 = 120_000;

fn serialize_duration_ms<S: serde::Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::duration::format(std::time::Duration::from_millis(
        u64::try_from(*ms).unwrap_or(0),
    )))
}

/// How many steps a waterfall takes at most unless the container says otherwise.
pub const DEFAULT_WATERFALL_MAX: i64 = 5;

/// An `update`: only the fields given change.
#[derive(Debug, Default)]
pub struct ContainerChanges {
    pub name: Option<String>,
    pub auto_delivery: Option<bool>,
    pub delivery_mode: Option<DeliveryMode>,
    pub max_buyers: Option<i64>,
    pub score_threshold: Option<i64>,
    pub ping_ttl_ms: Option<i64>,
    pub waterfall: Option<bool>,
    pub waterfall_max: Option<i64>,
}

const COLUMNS: &str = "id, workspace_id, kind, name, auto_delivery, delivery_mode, max_buyers, \
                       score_threshold, created_at, archived_at, ping_ttl_ms, waterfall, \
                       waterfall_max";

fn from_row(row: &Row) -> rusqlite::Result<Container> {
    Ok(Container {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        kind: row.get(2)?,
        name: row.get(3)?,
        auto_delivery: row.get(4)?,
        delivery_mode: row.get(5)?,
        max_buyers: row.get(6)?,
        score_threshold: row.get(7)?,
        created_at: row.get(8)?,
        archived_at: row.get(9)?,
        ping_ttl_ms: row.get(10)?,
        waterfall: row.get(11)?,
        waterfall_max: row.get(12)?,
    })
}

/// The rules on delivery settings, for create and update.
fn check_settings(
    max_buyers: i64,
    score_threshold: i64,
    waterfall_max: i64,
) -> Result<(), ConfigError> {
    if !(1..=100).contains(&waterfall_max) {
        return Err(ConfigError::Invalid(
            "waterfall max must be 1 to 100".into(),
        ));
    }
    if !(1..=100).contains(&max_buyers) {
        return Err(ConfigError::Invalid("max buyers must be 1 to 100".into()));
    }
    if !(0..=100).contains(&score_threshold) {
        return Err(ConfigError::Invalid(
            "score threshold must be 0 to 100".into(),
        ));
    }
    Ok(())
}

pub fn create(conn: &Connection, new: &NewContainer) -> Result<Container, ConfigError> {
    let prefix = match new.kind {
        ContainerKind::Channel => "ch",
        ContainerKind::Table => "tbl",
    };
    let id = choose_id(new.id, prefix)?;
    check_name(new.name)?;
    let waterfall_max = new.waterfall_max.unwrap_or(DEFAULT_WATERFALL_MAX);
    check_settings(new.max_buyers, new.score_threshold, waterfall_max)?;
    workspace::get_live(conn, new.workspace_id)?;
    let container = Container {
        id,
        workspace_id: new.workspace_id.to_string(),
        kind: new.kind,
        name: new.name.to_string(),
        auto_delivery: new
            .auto_delivery
            .unwrap_or(new.kind.default_auto_delivery()),
        delivery_mode: new.delivery_mode,
        max_buyers: new.max_buyers,
        score_threshold: new.score_threshold,
        ping_ttl_ms: new.ping_ttl_ms.unwrap_or(DEFAULT_PING_TTL_MS),
        waterfall: new.waterfall.unwrap_or(true),
        waterfall_max,
        created_at: crate::clock::now_ms(),
        archived_at: None,
    };
    conn.execute(
        "INSERT INTO containers (id, workspace_id, kind, name, auto_delivery, delivery_mode,
            max_buyers, score_threshold, created_at, ping_ttl_ms, waterfall, waterfall_max)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            container.id,
            container.workspace_id,
            container.kind.as_str(),
            container.name,
            container.auto_delivery,
            container.delivery_mode.as_str(),
            container.max_buyers,
            container.score_threshold,
            container.created_at,
            container.ping_ttl_ms,
            container.waterfall,
            container.waterfall_max
        ],
    )
    .map_err(|e| insert_error(e, container.kind.as_str(), &container.id))?;
    Ok(container)
}

pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Container>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM containers WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

/// The container `id` of the given kind; a container of the other kind counts as unknown.
pub fn get(conn: &Connection, id: &str, kind: ContainerKind) -> Result<Container, ConfigError> {
    match find(conn, id)? {
        Some(container) if container.kind == kind => Ok(container),
        _ => Err(ConfigError::NotFound {
            kind: kind.as_str(),
            id: id.to_string(),
        }),
    }
}

/// Containers of `kind` in creation order, of one workspace when given; archived ones only
/// with `all`.
pub fn list(
    conn: &Connection,
    kind: ContainerKind,
    workspace_id: Option<&str>,
    all: bool,
) -> Result<Vec<Container>, ConfigError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM containers
         WHERE kind = ?1 AND (?2 IS NULL OR workspace_id = ?2) AND (?3 OR archived_at IS NULL)
         ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map(params![kind.as_str(), workspace_id, all], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Changes the given settings of container `id` of `kind`; the server applies them from
/// the next lead on.
pub fn update(
    conn: &Connection,
    id: &str,
    kind: ContainerKind,
    changes: &ContainerChanges,
) -> Result<Container, ConfigError> {
    let mut container = get(conn, id, kind)?;
    ensure_live(kind.as_str(), id, container.archived_at)?;
    if let Some(name) = &changes.name {
        check_name(name)?;
        container.name = name.clone();
    }
    if let Some(on) = changes.auto_delivery {
        container.auto_delivery = on;
    }
    if let Some(mode) = changes.delivery_mode {
        container.delivery_mode = mode;
    }
    if let Some(max) = changes.max_buyers {
        container.max_buyers = max;
    }
    if let Some(threshold) = changes.score_threshold {
        container.score_threshold = threshold;
    }
    if let Some(ttl) = changes.ping_ttl_ms {
        container.ping_ttl_ms = ttl;
    }
    if let Some(on) = changes.waterfall {
        container.waterfall = on;
    }
    if let Some(max) = changes.waterfall_max {
        container.waterfall_max = max;
    }
    check_settings(
        container.max_buyers,
        container.score_threshold,
        container.waterfall_max,
    )?;
    conn.execute(
        "UPDATE containers SET name = ?2, auto_delivery = ?3, delivery_mode = ?4,
            max_buyers = ?5, score_threshold = ?6, ping_ttl_ms = ?7, waterfall = ?8,
            waterfall_max = ?9
         WHERE id = ?1",
        params![
            container.id,
            container.name,
            container.auto_delivery,
            container.delivery_mode.as_str(),
            container.max_buyers,
            container.score_threshold,
            container.ping_ttl_ms,
            container.waterfall,
            container.waterfall_max
        ],
    )?;
    Ok(container)
}
