//! `leadrelay evaluator show|set|history`: the built-in evaluator's weights of a workspace,
//! their versions, and the score thresholds of its channels and lead tables.
//!
//! Owns the flags and the printing; the model is `autodelivery::evaluator`, the weights'
//! storage and versions `autodelivery::weights`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use rusqlite::Connection;
use serde_json::{Value, json};

use super::output::Output;
use super::setup::open;
use crate::autodelivery::evaluator::{self, DEFAULT_WEIGHTS, Weights};
use crate::autodelivery::weights::{self, Current, Origin};
use crate::config::ConfigError;

#[derive(Debug, Subcommand)]
pub enum EvaluatorCommand {
    /// Show the weights a workspace scores leads with, and its containers' thresholds.
    Show {
        #[arg(long)]
        workspace: String,
    },
    /// Change a workspace's weights: some by name, all from a file, back to the defaults, or
    /// back to an earlier version. Every change is kept as a new version.
    Set {
        #[arg(long)]
        workspace: String,
        #[command(flatten)]
        change: WeightChange,
    },
    /// Every version of a workspace's weights, newest first: when, how (set, reset, train,
    /// restore) and the weights.
    History {
        #[arg(long)]
        workspace: String,
    },
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct WeightChange {
    /// NAME=NUMBER, e.g. validPhone=2.5 or intercept=-2; repeat for several. The other
    /// weights keep their current values.
    #[arg(long = "weight", value_parser = weight)]
    weights: Vec<(String, f64)>,
    /// A JSON object of weights ({"intercept": -3, "validEmail": 1.5, …}); names it leaves
    /// out take their defaults.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Go back to the built-in defaults.
    #[arg(long)]
    reset: bool,
    /// Go back to version N of `evaluator history` (recorded as a new version).
    #[arg(long, value_name = "N")]
    version: Option<i64>,
}

/// Parses and checks `NAME=NUMBER` while the command line is read (a usage error otherwise).
fn weight(text: &str) -> Result<(String, f64), String> {
    let (name, number) = text
        .split_once('=')
        .ok_or_else(|| format!("weight '{text}': expected NAME=NUMBER"))?;
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("weight '{text}': '{number}' is not a number"))?;
    let name = name.trim().to_string();
    let mut scratch = DEFAULT_WEIGHTS;
    scratch.set(&name, value)?;
    Ok((name, value))
}

pub fn run(path: &Path, out: &Output, command: EvaluatorCommand) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    let shown = match command {
        EvaluatorCommand::Show { workspace } => db.read_blocking(|conn| describe(conn, &workspace)),
        EvaluatorCommand::History { workspace } => {
            db.read_blocking(move |conn| history(conn, &workspace))
        }
        EvaluatorCommand::Set { workspace, change } => {
            let replacement = match &change.file {
                Some(file) => Some(read_file(file)?),
                None => None,
            };
            let now = crate::clock::now_ms();
            db.write_blocking(move |conn| {
                if change.reset {
                    weights::change(conn, &workspace, None, Origin::Reset, None, now)?;
                } else if let Some(version) = change.version {
                    weights::restore(conn, &workspace, version, now)?;
                } else {
                    let mut weights = match replacement {
                        Some(replacement) => replacement,
                        None => load(conn, &workspace)?.weights,
                    };
                    for (name, value) in &change.weights {
                        weights.set(name, *value).map_err(ConfigError::Invalid)?;
                    }
                    weights::change(conn, &workspace, Some(&weights), Origin::Set, None, now)?;
                }
                describe(conn, &workspace)
            })
        }
    };
    db.close();
    out.print(&shown?);
    Ok(ExitCode::SUCCESS)
}

/// The weights of a file: every name it gives, the defaults for the rest.
fn read_file(file: &Path) -> anyhow::Result<Weights> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    let mut weights = DEFAULT_WEIGHTS;
    weights
        .merge_json(&value)
        .map_err(|why| anyhow::anyhow!("{}: {why}", file.display()))?;
    Ok(weights)
}

fn load(conn: &Connection, workspace: &str) -> Result<Current, ConfigError> {
    weights::current(conn, workspace)?.ok_or_else(|| ConfigError::NotFound {
        kind: "workspace",
        id: workspace.to_string(),
    })
}

/// `{"workspaceId", "current": N | null, "versions": [version…]}`, newest first.
fn history(conn: &Connection, workspace: &str) -> Result<Value, ConfigError> {
    let versions = weights::history(conn, workspace)?;
    Ok(json!({
        "workspaceId": workspace,
        "current": versions.first().map(|v| v.version),
        "versions": versions.iter().map(weights::Version::to_json).collect::<Vec<_>>(),
    }))
}

/// `{"workspaceId", "model", "version", "custom", "weights", "defaults", "thresholds":
/// [{"containerId", "kind", "autoDelivery", "scoreThreshold"}]}`; `version` is null while
/// the workspace never changed its weights.
fn describe(conn: &Connection, workspace: &str) -> Result<Value, ConfigError> {
    let Current {
        weights,
        custom,
        version,
    } = load(conn, workspace)?;
    let mut stmt = conn.prepare(
        "SELECT id, kind, auto_delivery, score_threshold FROM containers
         WHERE workspace_id = ?1 ORDER BY kind, id",
    )?;
    let thresholds = stmt
        .query_map([workspace], |row| {
            Ok(json!({
                "containerId": row.get::<_, String>(0)?,
                "kind": row.get::<_, String>(1)?,
                "autoDelivery": row.get::<_, bool>(2)?,
                "scoreThreshold": row.get::<_, i64>(3)?,
            }))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "workspaceId": workspace,
        "model": evaluator::MODEL,
        "version": version,
        "custom": custom,
        "weights": weights.to_json(),
        "defaults": DEFAULT_WEIGHTS.to_json(),
        "thresholds": thresholds,
    }))
}
