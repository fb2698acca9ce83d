//! `leadrelay evaluator show|set|history|train`: the built-in evaluator's weights of a
//! workspace, their versions, training them on buyers' outcomes, and the score thresholds
//! of its channels and lead tables.
//!
//! Owns the flags and the printing; the model is `autodelivery::evaluator`, the weights'
//! storage and versions `autodelivery::weights`, training `training`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

use super::output::Output;
use super::setup::open;
use crate::autodelivery::evaluator::{self, DEFAULT_WEIGHTS, Weights};
use crate::autodelivery::features::{GROUPS, Group};
use crate::autodelivery::weights::{self, Current, Origin};
use crate::config::ConfigError;
use crate::training::{self, DEFAULT_MIN_PER_LABEL, DEFAULT_MIN_ROWS, Report, dataset};

#[derive(Debug, Subcommand)]
pub enum EvaluatorCommand {
    /// Show the weights a workspace scores leads with, and its containers' thresholds.
    #[command(after_help = "Example:\n  leadrelay evaluator show --workspace acme")]
    Show {
        /// The workspace.
        #[arg(long)]
        workspace: String,
    },
    /// Change a workspace's weights: some by name, all from a file, back to the defaults, or
    /// back to an earlier version. Every change is kept as a new version.
    #[command(after_help = "Example:
  leadrelay evaluator set --workspace acme --weight validPhone=2.5 --weight intercept=-2
  leadrelay evaluator set --workspace acme --weight source:landing=0.4
  leadrelay evaluator set --workspace acme --version 3")]
    Set {
        /// The workspace.
        #[arg(long)]
        workspace: String,
        #[command(flatten)]
        change: WeightChange,
    },
    /// Every version of a workspace's weights, newest first: when, how (set, reset, train,
    /// restore) and the weights.
    #[command(after_help = "Example:\n  leadrelay evaluator history --workspace acme")]
    History {
        /// The workspace.
        #[arg(long)]
        workspace: String,
    },
    /// Fit the weights on buyers' outcomes (acknowledged, payout pending or paid: good;
    /// rejected or cancelled: bad) and compare them with the weights in use on the latest
    /// 20% of outcomes, held out. Changes nothing without --apply.
    #[command(
        after_help = "Example:\n  leadrelay evaluator train --workspace acme\n  leadrelay evaluator train --workspace acme --since 180d --product solar --apply"
    )]
    Train(TrainArgs),
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// The workspace.
    #[arg(long)]
    workspace: String,
    /// Learn from transactions delivered within this time: 30d, 90d, 365d.
    #[arg(long, default_value = "90d", value_parser = crate::duration::parse)]
    since: Duration,
    /// Only transactions of this product (id or slug).
    #[arg(long)]
    product: Option<String>,
    /// The feature groups to learn weights for, comma-separated (the others get 0): base
    /// (the seven contact and consent features), duplicatesSeen, source, answer,
    /// hourOfDay. Default: all.
    #[arg(long, value_delimiter = ',', value_parser = group)]
    features: Vec<Group>,
    /// Refuse with fewer labelled transactions than this.
    #[arg(long, default_value_t = DEFAULT_MIN_ROWS)]
    min_rows: usize,
    /// Refuse with fewer good, or fewer bad, transactions than this.
    #[arg(long, default_value_t = DEFAULT_MIN_PER_LABEL)]
    min_per_label: usize,
    /// Make the trained weights the workspace's, as a new version (`evaluator set
    /// --version N` goes back).
    #[arg(long)]
    apply: bool,
}

fn group(text: &str) -> Result<Group, String> {
    Group::from_name(text.trim()).ok_or_else(|| {
        let known: Vec<&str> = GROUPS.iter().map(|g| g.name()).collect();
        format!("unknown feature group '{text}': use {}", known.join(", "))
    })
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
    // The number follows the last `=`: a category's name may hold one (`answer:roof=flat`).
    let (name, number) = text
        .rsplit_once('=')
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

pub(super) fn run(
    path: &Path,
    out: &Output,
    command: EvaluatorCommand,
) -> anyhow::Result<ExitCode> {
    if let EvaluatorCommand::Train(args) = command {
        return train(path, out, args);
    }
    let db = open(path)?;
    let shown = match command {
        EvaluatorCommand::Train(_) => unreachable!("handled above"),
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
            let actor = super::actor();
            db.write_blocking(move |conn| {
                let before = describe(conn, &workspace)?;
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
                let after = describe(conn, &workspace)?;
                crate::audit::record_diff(
                    conn,
                    &actor,
                    "evaluator.set",
                    &workspace,
                    &before,
                    &after,
                    now,
                )?;
                Ok(after)
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
    Ok(to_value(HistoryView {
        workspace_id: workspace,
        current: versions.first().map(|v| v.version),
        versions: versions.iter().map(weights::Version::view).collect(),
    }))
}

/// `evaluator history --json` (see [`history`]).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct HistoryView<'a> {
    workspace_id: &'a str,
    current: Option<i64>,
    versions: Vec<weights::VersionView<'a>>,
}

/// `evaluator show --json` (see [`describe`]).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DescribeView<'a> {
    workspace_id: &'a str,
    model: &'static str,
    version: Option<i64>,
    custom: bool,
    weights: Value,
    defaults: Value,
    thresholds: Vec<ThresholdView>,
}

/// A container's auto-delivery threshold as `evaluator show --json` lists it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ThresholdView {
    container_id: String,
    kind: String,
    auto_delivery: bool,
    score_threshold: i64,
}

fn to_value(view: impl serde::Serialize) -> Value {
    serde_json::to_value(view).expect("a view is plain data and serialises")
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
            Ok(ThresholdView {
                container_id: row.get(0)?,
                kind: row.get(1)?,
                auto_delivery: row.get(2)?,
                score_threshold: row.get(3)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(to_value(DescribeView {
        workspace_id: workspace,
        model: evaluator::MODEL,
        version,
        custom,
        weights: weights.to_json(),
        defaults: DEFAULT_WEIGHTS.to_json(),
        thresholds,
    }))
}

/// `evaluator train`: read on the pool, fit here, apply in one writer job.
fn train(path: &Path, out: &Output, args: TrainArgs) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    let now = crate::clock::now_ms();
    let since_ms = now.saturating_sub(i64::try_from(args.since.as_millis()).unwrap_or(i64::MAX));
    let groups = if args.features.is_empty() {
        GROUPS.to_vec()
    } else {
        args.features.clone()
    };
    let workspace = args.workspace.clone();
    let product = args.product.clone();
    let read_groups = groups.clone();
    let reading = std::time::Instant::now();
    let loaded = db.read_blocking(move |conn| {
        let current = load(conn, &workspace)?;
        let product_id = match &product {
            Some(product) => Some(crate::config::product::resolve(conn, &workspace, product)?.id),
            None => None,
        };
        let selection = dataset::Selection {
            workspace_id: workspace.clone(),
            since_ms,
            product_id: product_id.clone(),
        };
        let data = dataset::load(conn, &selection, &read_groups, &current.weights)?;
        Ok::<_, ConfigError>((current, product_id, data))
    });
    let (current, product_id, data) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            db.close();
            return Err(e.into());
        }
    };
    let read_ms = reading.elapsed().as_millis();
    let limits = training::Limits {
        min_rows: args.min_rows,
        min_per_label: args.min_per_label,
    };
    let fitting = std::time::Instant::now();
    let trained = training::train(data, &limits);
    if let Ok(report) = &trained {
        log::info!(
            "training: read {} rows in {read_ms} ms, fitted {} weights in {} ms ({} iterations)",
            report.rows,
            report.weights.to_json().as_object().map_or(0, |w| w.len()),
            fitting.elapsed().as_millis(),
            report.iterations
        );
    }
    let report = match trained {
        Ok(report) => report,
        Err(e) => {
            db.close();
            return Err(e.into());
        }
    };
    let trained = TrainedView {
        report: report.view(),
        workspace_id: &args.workspace,
        since: crate::clock::iso(since_ms),
        product: product_id.as_deref(),
        features: groups.iter().map(|g| g.name()).collect(),
        current_version: current.version,
    };
    let detail = serde_json::to_value(&trained).expect("a training report serialises");
    let mut applied = None;
    if args.apply {
        let detail = detail.clone();
        let workspace = args.workspace.clone();
        let weights = report.weights.clone();
        let actor = super::actor();
        let version = db.write_blocking(move |conn| {
            let version = weights::change(
                conn,
                &workspace,
                Some(&weights),
                Origin::Train,
                Some(&detail),
                now,
            )?;
            let changes = crate::audit::Changes::new().set("version", Value::Null, version);
            crate::audit::record(
                conn,
                &actor,
                "evaluator.train_apply",
                &workspace,
                &changes,
                now,
            )?;
            Ok::<_, ConfigError>(version)
        });
        match version {
            Ok(version) => applied = Some(version),
            Err(e) => {
                db.close();
                return Err(e.into());
            }
        }
    }
    db.close();
    let shown = serde_json::to_value(AppliedView {
        trained,
        applied: applied.is_some(),
        version: applied,
    })
    .expect("a training report serialises");
    if out.is_json() {
        out.print(&shown);
    } else {
        print!(
            "{}",
            train_text(&args.workspace, &report, &shown, current.version, applied)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The side-by-side comparison `evaluator train` prints without `--json`.
fn train_text(
    workspace: &str,
    report: &Report,
    shown: &Value,
    current_version: Option<i64>,
    applied: Option<i64>,
) -> String {
    let mut text = String::new();
    let product = match shown["product"].as_str() {
        Some(product) => format!(", product {product}"),
        None => String::new(),
    };
    text.push_str(&format!(
        "workspace {workspace}{product}: {} labelled transactions since {} ({} good, {} bad)\n",
        report.rows,
        shown["since"].as_str().unwrap_or("-"),
        report.good,
        report.bad
    ));
    text.push_str(&format!(
        "fitted on the first {}, compared on the latest {} (held out)\n",
        report.training, report.holdout
    ));
    if report.without_features > 0 || report.unreadable > 0 {
        text.push_str(&format!(
            "left out: {} without stored features (delivered by hand or before features \
             were stored), {} unreadable\n",
            report.without_features, report.unreadable
        ));
    }
    let version = match current_version {
        Some(version) => format!("current (v{version})"),
        None => "current".to_string(),
    };
    text.push_str(&format!(
        "\n{:<28}{:>14}{:>10}\n",
        "holdout", version, "trained"
    ));
    let (c, t) = (&report.current, &report.trained);
    let rows = [
        ("AUC", format!("{:.3}", c.auc), format!("{:.3}", t.auc)),
        (
            "log loss",
            format!("{:.3}", c.log_loss),
            format!("{:.3}", t.log_loss),
        ),
        (
            "good leads at threshold",
            percent(c.good_passing),
            percent(t.good_passing),
        ),
        (
            "bad leads at threshold",
            percent(c.bad_passing),
            percent(t.bad_passing),
        ),
    ];
    for (name, current, trained) in rows {
        text.push_str(&format!("{name:<28}{current:>14}{trained:>10}\n"));
    }
    text.push_str("\ntrained weights:\n");
    if let Some(weights) = report.weights.to_json().as_object() {
        for (name, weight) in weights {
            let weight = weight.as_f64().unwrap_or(0.0);
            text.push_str(&format!("  {name:<36}{weight:>9.4}\n"));
        }
    }
    text.push('\n');
    match applied {
        Some(version) => text.push_str(&format!(
            "applied as version {version} (leadrelay evaluator history; set --version {} goes back)\n",
            version - 1
        )),
        None => text.push_str("not applied: run again with --apply to score leads with these weights\n"),
    }
    text
}

fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// What `evaluator train` found, with what it was trained on (kept with the weights it
/// made when applied).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TrainedView<'a> {
    #[serde(flatten)]
    report: training::ReportView,
    workspace_id: &'a str,
    since: String,
    product: Option<&'a str>,
    features: Vec<&'static str>,
    current_version: Option<i64>,
}

/// What `evaluator train` prints: the training and whether its weights were applied.
#[derive(Serialize)]
struct AppliedView<'a> {
    #[serde(flatten)]
    trained: TrainedView<'a>,
    applied: bool,
    version: Option<i64>,
}
