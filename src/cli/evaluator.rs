//! `leadrelay evaluator show|set`: the built-in evaluator's weights of a workspace, and the
//! score thresholds of its channels and lead tables.
//!
//! Owns the flags and the printing; the model, its weights and their storage are
//! `autodelivery::evaluator`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use rusqlite::Connection;
use serde_json::{Value, json};

use super::output::Output;
use super::setup::open;
use crate::autodelivery::evaluator::{self, DEFAULT_WEIGHTS, Weights};
use crate::config::ConfigError;

#[derive(Debug, Subcommand)]
pub enum EvaluatorCommand {
    /// Show the weights a workspace scores leads with, and its containers' thresholds.
    #[command(after_help = "Example:\n  leadrelay evaluator show --workspace acme")]
    Show {
        /// The workspace.
        #[arg(long)]
        workspace: String,
    },
    /// Change a workspace's weights: some by name, all from a file, or back to the defaults.
    #[command(
        after_help = "Example:\n  leadrelay evaluator set --workspace acme --weight validPhone=2.5 --weight intercept=-2"
    )]
    Set {
        /// The workspace.
        #[arg(long)]
        workspace: String,
        #[command(flatten)]
        change: WeightChange,
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
        EvaluatorCommand::Set { workspace, change } => {
            let replacement = match &change.file {
                Some(file) => Some(read_file(file)?),
                None => None,
            };
            db.write_blocking(move |conn| {
                let (mut weights, _) = load(conn, &workspace)?;
                if change.reset {
                    evaluator::store(conn, &workspace, None)?;
                } else {
                    if let Some(replacement) = replacement {
                        weights = replacement;
                    }
                    for (name, value) in &change.weights {
                        weights.set(name, *value).map_err(ConfigError::Invalid)?;
                    }
                    evaluator::store(conn, &workspace, Some(&weights))?;
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

fn load(conn: &Connection, workspace: &str) -> Result<(Weights, bool), ConfigError> {
    evaluator::load(conn, workspace)?.ok_or_else(|| ConfigError::NotFound {
        kind: "workspace",
        id: workspace.to_string(),
    })
}

/// `{"workspaceId", "model", "custom", "weights", "defaults", "thresholds": [{"containerId",
/// "kind", "autoDelivery", "scoreThreshold"}]}`.
fn describe(conn: &Connection, workspace: &str) -> Result<Value, ConfigError> {
    let (weights, custom) = load(conn, workspace)?;
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
        "custom": custom,
        "weights": weights.to_json(),
        "defaults": DEFAULT_WEIGHTS.to_json(),
        "thresholds": thresholds,
    }))
}
