//! A workspace's evaluator weights: the ones in use, and every set it had before.
//!
//! Owns `workspaces.evaluator_weights` (the weights ingest scores with, read in the same
//! query as the container's settings; NULL means the built-in defaults) and
//! `evaluator_versions` (the history, numbered from 1 per workspace). Every change goes
//! through [`change`], which writes the column and appends a version in the same writer
//! job, so the highest version always holds the weights in use. The first change of a
//! workspace first records what it had until then as version 1 (`initial`: the defaults,
//! or weights set before versions existed), so going back to the beginning is always
//! possible. The model and the weights' JSON are `evaluator`.

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::evaluator::{self, Weights};
use crate::config::ConfigError;
use crate::db::stored::stored_enum;

stored_enum! {
    /// How a version of the weights came to be.
    pub enum Origin as "evaluator version origin" {
        /// What the workspace had before its first recorded change.
        Initial = "initial",
        /// `evaluator set --weight/--file`.
        Set = "set",
        /// `evaluator set --reset`: the built-in defaults.
        Reset = "reset",
        /// `evaluator train --apply`.
        Train = "train",
        /// `evaluator set --version N`: an earlier version again.
        Restore = "restore",
    }
}

/// The weights a workspace scores with now.
#[derive(Debug, Clone, PartialEq)]
pub struct Current {
    pub weights: Weights,
    /// Whether they are the workspace's own (else the built-in defaults).
    pub custom: bool,
    /// The version in use; `None` while the workspace never changed its weights.
    pub version: Option<i64>,
}

/// The weights of `workspace_id` now; `None` when the workspace does not exist.
pub fn current(conn: &Connection, workspace_id: &str) -> rusqlite::Result<Option<Current>> {
    let stored: Option<(Option<String>, Option<i64>)> = conn
        .prepare_kept(
            "SELECT evaluator_weights,
                    (SELECT max(version) FROM evaluator_versions WHERE workspace_id = ?1)
             FROM workspaces WHERE id = ?1",
        )?
        .query_row([workspace_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(stored.map(|(text, version)| {
        let (weights, custom) = evaluator::from_stored(workspace_id, text.as_deref());
        Current {
            weights,
            custom,
            version,
        }
    }))
}

/// One entry of the history.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub version: i64,
    /// `None` for the built-in defaults.
    pub weights: Option<Weights>,
    pub origin: Origin,
    pub detail: Option<Value>,
    pub created_at: i64,
}

impl Version {
    /// `{"version", "createdAt", "origin", "custom", "weights", "detail"?}`; the defaults'
    /// weights are shown as they are now.
    pub fn view(&self) -> VersionView<'_> {
        VersionView {
            version: self.version,
            created_at: crate::clock::iso(self.created_at),
            origin: self.origin.as_str(),
            custom: self.weights.is_some(),
            weights: self.weights.clone().unwrap_or_default().to_json(),
            detail: self.detail.as_ref(),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a version always serialises")
    }
}

/// A [`Version`] as `evaluator history` shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionView<'a> {
    version: i64,
    created_at: String,
    origin: &'static str,
    custom: bool,
    /// By factor name: the features' fixed names and the categories' (`Weights::to_json`).
    weights: Value,
    /// What made the version (free-form: a restore's source, a training's figures).
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a Value>,
}

/// The detail of a version that restores an earlier one.
#[derive(Serialize)]
struct Restored {
    restored: i64,
}

/// Makes `weights` (`None`: the defaults) the workspace's weights and records them as a
/// new version; returns its number. Run inside one writer job.
pub fn change(
    conn: &Connection,
    workspace_id: &str,
    weights: Option<&Weights>,
    origin: Origin,
    detail: Option<&Value>,
    now_ms: i64,
) -> Result<i64, ConfigError> {
    let Some(before) = current(conn, workspace_id)? else {
        return Err(ConfigError::NotFound {
            kind: "workspace",
            id: workspace_id.to_string(),
        });
    };
    let mut version = before.version.unwrap_or(0);
    if version == 0 {
        version = 1;
        let had = before.custom.then_some(&before.weights);
        insert(
            conn,
            workspace_id,
            version,
            had,
            Origin::Initial,
            None,
            now_ms,
        )?;
    }
    version += 1;
    insert(conn, workspace_id, version, weights, origin, detail, now_ms)?;
    conn.prepare_kept("UPDATE workspaces SET evaluator_weights = ?2 WHERE id = ?1")?
        .execute(params![workspace_id, weights.map(stored_text)])?;
    Ok(version)
}

/// Makes version `version` the workspace's weights again, as a new version.
pub fn restore(
    conn: &Connection,
    workspace_id: &str,
    version: i64,
    now_ms: i64,
) -> Result<i64, ConfigError> {
    let Some(earlier) = find(conn, workspace_id, version)? else {
        if current(conn, workspace_id)?.is_none() {
            return Err(ConfigError::NotFound {
                kind: "workspace",
                id: workspace_id.to_string(),
            });
        }
        return Err(ConfigError::Invalid(format!(
            "workspace '{workspace_id}' has no evaluator version {version} \
             (see leadrelay evaluator history)"
        )));
    };
    change(
        conn,
        workspace_id,
        earlier.weights.as_ref(),
        Origin::Restore,
        Some(&serde_json::to_value(Restored { restored: version }).expect("a number serialises")),
        now_ms,
    )
}

/// Every version of the workspace's weights, newest first; empty while it never changed
/// them. `NotFound` when the workspace does not exist.
pub fn history(conn: &Connection, workspace_id: &str) -> Result<Vec<Version>, ConfigError> {
    if current(conn, workspace_id)?.is_none() {
        return Err(ConfigError::NotFound {
            kind: "workspace",
            id: workspace_id.to_string(),
        });
    }
    let mut statement = conn.prepare(
        "SELECT version, weights, origin, detail, created_at FROM evaluator_versions
         WHERE workspace_id = ?1 ORDER BY version DESC",
    )?;
    let rows = statement.query_map([workspace_id], |row| read(workspace_id, row))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

fn find(conn: &Connection, workspace_id: &str, version: i64) -> rusqlite::Result<Option<Version>> {
    conn.prepare_kept(
        "SELECT version, weights, origin, detail, created_at FROM evaluator_versions
         WHERE workspace_id = ?1 AND version = ?2",
    )?
    .query_row(params![workspace_id, version], |row| {
        read(workspace_id, row)
    })
    .optional()
}

fn read(workspace_id: &str, row: &rusqlite::Row) -> rusqlite::Result<Version> {
    let text: Option<String> = row.get(1)?;
    let detail: Option<String> = row.get(3)?;
    Ok(Version {
        version: row.get(0)?,
        weights: text
            .as_deref()
            .map(|text| evaluator::from_stored(workspace_id, Some(text)).0),
        origin: row.get(2)?,
        // Written by `change` from a JSON value.
        detail: detail.and_then(|d| serde_json::from_str(&d).ok()),
        created_at: row.get(4)?,
    })
}

fn insert(
    conn: &Connection,
    workspace_id: &str,
    version: i64,
    weights: Option<&Weights>,
    origin: Origin,
    detail: Option<&Value>,
    now_ms: i64,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "INSERT INTO evaluator_versions (workspace_id, version, weights, origin, detail, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        workspace_id,
        version,
        weights.map(stored_text),
        origin,
        detail.map(Value::to_string),
        now_ms
    ])?;
    Ok(())
}

fn stored_text(weights: &Weights) -> String {
    weights.to_json().to_string()
}

#[cfg(test)]
mod tests {
    use super::super::evaluator::DEFAULT_WEIGHTS;
    use super::*;
    use serde_json::json;

    fn names(weights: f64) -> Weights {
        let mut w = DEFAULT_WEIGHTS;
        w.set("names", weights).unwrap();
        w
    }

    #[test]
    fn every_change_is_a_version_and_the_first_records_the_start() {
        let conn = super::super::testing::database();
        assert_eq!(
            current(&conn, "ws").unwrap(),
            Some(Current {
                weights: DEFAULT_WEIGHTS,
                custom: false,
                version: None
            })
        );
        assert_eq!(history(&conn, "ws").unwrap(), []);

        assert_eq!(
            change(&conn, "ws", Some(&names(2.0)), Origin::Set, None, 10).unwrap(),
            2
        );
        let now = current(&conn, "ws").unwrap().unwrap();
        assert_eq!(
            (now.weights, now.custom, now.version),
            (names(2.0), true, Some(2))
        );
        assert_eq!(
            change(&conn, "ws", None, Origin::Reset, None, 20).unwrap(),
            3
        );
        let trained = json!({"rows": 300});
        change(
            &conn,
            "ws",
            Some(&names(3.0)),
            Origin::Train,
            Some(&trained),
            30,
        )
        .unwrap();

        let versions = history(&conn, "ws").unwrap();
        let summary: Vec<(i64, Option<Weights>, Origin)> = versions
            .iter()
            .map(|v| (v.version, v.weights.clone(), v.origin))
            .collect();
        assert_eq!(
            summary,
            [
                (4, Some(names(3.0)), Origin::Train),
                (3, None, Origin::Reset),
                (2, Some(names(2.0)), Origin::Set),
                (1, None, Origin::Initial),
            ]
        );
        assert_eq!(versions[0].detail, Some(trained));
        assert_eq!(versions[0].to_json()["custom"], true);
        assert_eq!(versions[1].to_json()["weights"], DEFAULT_WEIGHTS.to_json());

        assert_eq!(restore(&conn, "ws", 2, 40).unwrap(), 5);
        let now = current(&conn, "ws").unwrap().unwrap();
        assert_eq!((now.weights, now.version), (names(2.0), Some(5)));
        assert_eq!(
            history(&conn, "ws").unwrap()[0].detail,
            Some(json!({"restored": 2}))
        );
        restore(&conn, "ws", 1, 50).unwrap();
        assert!(
            !current(&conn, "ws").unwrap().unwrap().custom,
            "back to the start"
        );
        assert_eq!(history(&conn, "other").unwrap(), [], "per workspace");
    }

    #[test]
    fn weights_set_before_versions_existed_become_version_one() {
        let conn = super::super::testing::database();
        conn.execute(
            "UPDATE workspaces SET evaluator_weights = ?1 WHERE id = 'ws'",
            [stored_text(&names(4.0))],
        )
        .unwrap();
        change(&conn, "ws", None, Origin::Reset, None, 10).unwrap();
        restore(&conn, "ws", 1, 20).unwrap();
        assert_eq!(current(&conn, "ws").unwrap().unwrap().weights, names(4.0));
    }

    #[test]
    fn unknown_workspaces_and_versions_are_refused() {
        let conn = super::super::testing::database();
        assert!(matches!(
            change(&conn, "nope", None, Origin::Reset, None, 1),
            Err(ConfigError::NotFound { .. })
        ));
        assert!(matches!(
            restore(&conn, "nope", 1, 1),
            Err(ConfigError::NotFound { .. })
        ));
        assert!(matches!(
            history(&conn, "nope"),
            Err(ConfigError::NotFound { .. })
        ));
        let missing = restore(&conn, "ws", 7, 1).unwrap_err().to_string();
        assert!(missing.contains("no evaluator version 7"), "{missing}");
        assert_eq!(
            current(&conn, "ws").unwrap().unwrap().version,
            None,
            "nothing written"
        );
    }
}
