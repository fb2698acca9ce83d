//! `leadrelay alert target|rule|list` (DESIGN.md section 23): where a workspace's alerts
//! go, which rules it watches, and the alerts themselves. The tables are `alerts::store`'s;
//! `serve` evaluates the rules and sends the messages (`outbox::alert`).

use std::path::Path;
use std::process::ExitCode;

use clap::{ArgGroup, Subcommand};
use serde_json::Value;

use super::output::Output;
use crate::alerts::{self, Measure, Rule, RuleSetting, TargetKind, store};
use crate::db::Db;

#[derive(Debug, Subcommand)]
pub enum AlertCommand {
    /// Where a workspace's alert messages go: webhooks and email addresses.
    #[command(subcommand)]
    Target(TargetCommand),
    /// The conditions a workspace is alerted about.
    #[command(subcommand)]
    Rule(RuleCommand),
    /// Alerts, newest first: open (firing) and resolved.
    #[command(after_help = "Example:\n  leadrelay alert list --open")]
    List {
        /// Only this workspace's alerts.
        #[arg(long)]
        workspace: Option<String>,
        /// Only the alerts that are firing now.
        #[arg(long)]
        open: bool,
        /// At most this many alerts.
        #[arg(long, default_value_t = 100)]
        limit: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum TargetCommand {
    /// Add a webhook (a POST of `{"text", "alert"}`, signed like our events; its signing
    /// secret is printed once) or an email address (sent through `serve --smtp-url`).
    #[command(
        group(ArgGroup::new("to").required(true).args(["webhook", "email"])),
        after_help = "Example:\n  leadrelay alert target add --workspace acme --webhook https://chat.example/hooks/T01/B02"
    )]
    Add {
        /// The workspace whose alerts it gets.
        #[arg(long)]
        workspace: String,
        /// A webhook URL (the same rules as a buyer's webhook URL).
        #[arg(long)]
        webhook: Option<String>,
        /// An email address.
        #[arg(long)]
        email: Option<String>,
    },
    /// The targets: id, kind, address (never the signing secret).
    #[command(after_help = "Example:\n  leadrelay alert target list --workspace acme")]
    List {
        /// Only this workspace's targets.
        #[arg(long)]
        workspace: Option<String>,
    },
    /// Remove a target.
    #[command(
        after_help = "Example:\n  leadrelay alert target remove alt_01JD3QZ8X1T5B2C4D6E8F0G2H4"
    )]
    Remove {
        /// The target's id.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum RuleCommand {
    /// Switch a rule on (or change it): buyer_endpoint_down, cap_reached, balance_low,
    /// source_silent, outbox_backlog, disk_low, return_rate_high.
    #[command(
        after_help = "Example:\n  leadrelay alert rule set --workspace acme balance_low --threshold 100"
    )]
    Set {
        /// The workspace it watches.
        #[arg(long)]
        workspace: String,
        /// The rule.
        #[arg(value_parser = rule)]
        rule: Rule,
        /// balance_low: an amount (required); disk_low: free space in percent (default 10);
        /// return_rate_high: returns in percent of the last 7 days' sales (default 20).
        #[arg(long)]
        threshold: Option<String>,
        /// How long the condition must hold: buyer_endpoint_down (default 5m),
        /// source_silent (1h), outbox_backlog (15m).
        #[arg(long = "for", value_parser = for_duration)]
        for_: Option<i64>,
    },
    /// The rules switched on, with their thresholds and durations.
    #[command(after_help = "Example:\n  leadrelay alert rule list --workspace acme")]
    List {
        /// Only this workspace's rules.
        #[arg(long)]
        workspace: Option<String>,
    },
    /// Switch a rule off; its open alerts resolve.
    #[command(after_help = "Example:\n  leadrelay alert rule remove --workspace acme disk_low")]
    Remove {
        /// The workspace.
        #[arg(long)]
        workspace: String,
        /// The rule.
        #[arg(value_parser = rule)]
        rule: Rule,
    },
}

fn rule(text: &str) -> Result<Rule, String> {
    Rule::parse(text).ok_or_else(|| format!("one of: {}", Rule::NAMES.join(", ")))
}

fn for_duration(text: &str) -> Result<i64, String> {
    let duration = crate::duration::parse(text).map_err(|e| e.to_string())?;
    i64::try_from(duration.as_millis()).map_err(|_| format!("duration '{text}' is too long"))
}

pub(super) fn run(path: &Path, out: &Output, command: AlertCommand) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let result = match command {
        AlertCommand::Target(command) => target(&db, out, command),
        AlertCommand::Rule(command) => rule_command(&db, out, command),
        AlertCommand::List {
            workspace,
            open,
            limit,
        } => {
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            let alerts = db.read_blocking(|conn| {
                if open {
                    let open = store::open(conn, workspace.as_deref())?;
                    Ok(open.into_iter().rev().take(limit).collect::<Vec<_>>())
                } else {
                    store::list(conn, workspace.as_deref(), limit)
                }
            })?;
            let shown: Vec<Value> = alerts.iter().map(alerts::Alert::to_json).collect();
            out.print_list(&shown);
            Ok(ExitCode::SUCCESS)
        }
    };
    db.close();
    result
}

/// A target as `alert target add` shows it: with its signing secret, shown once (the
/// receiver verifies the messages' signatures with it); email targets have none.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AddedTarget<'a> {
    #[serde(flatten)]
    target: alerts::TargetView<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signing_secret: Option<&'a str>,
}

fn target(db: &Db, out: &Output, command: TargetCommand) -> anyhow::Result<ExitCode> {
    match command {
        TargetCommand::Add {
            workspace,
            webhook,
            email,
        } => {
            let (kind, address) = match (webhook, email) {
                (Some(url), _) => (TargetKind::Webhook, url),
                (_, Some(email)) => (TargetKind::Email, email),
                (None, None) => unreachable!("clap requires --webhook or --email"),
            };
            let target = db.write_blocking(move |conn| {
                store::add_target(conn, &workspace, kind, &address, crate::clock::now_ms())
            })?;
            out.show(&AddedTarget {
                target: target.view(),
                signing_secret: target.signing_secret.as_deref(),
            });
        }
        TargetCommand::List { workspace } => {
            let targets = db.read_blocking(|conn| store::targets(conn, workspace.as_deref()))?;
            let shown: Vec<Value> = targets.iter().map(alerts::Target::to_json).collect();
            out.print_list(&shown);
        }
        TargetCommand::Remove { id } => {
            db.write_blocking(move |conn| store::remove_target(conn, &id))?;
            out.show(&super::output::Removed { removed: true });
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn rule_command(db: &Db, out: &Output, command: RuleCommand) -> anyhow::Result<ExitCode> {
    match command {
        RuleCommand::Set {
            workspace,
            rule,
            threshold,
            for_,
        } => {
            let setting = RuleSetting {
                workspace_id: workspace,
                rule,
                threshold: threshold_of(rule, threshold.as_deref())?,
                for_ms: match (rule.default_for_ms(), for_) {
                    (None, Some(_)) => {
                        anyhow::bail!("{rule} takes no --for: its condition fires when it starts")
                    }
                    (default, given) => given.or(default),
                },
            };
            let shown = setting.to_json();
            db.write_blocking(move |conn| store::set_rule(conn, &setting, crate::clock::now_ms()))?;
            out.print(&shown);
        }
        RuleCommand::List { workspace } => {
            let rules = db.read_blocking(|conn| store::rules(conn, workspace.as_deref()))?;
            let shown: Vec<Value> = rules.iter().map(RuleSetting::to_json).collect();
            out.print_list(&shown);
        }
        RuleCommand::Remove { workspace, rule } => {
            let removed =
                db.write_blocking(move |conn| store::remove_rule(conn, &workspace, rule))?;
            out.show(&super::output::Removed { removed });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The stored threshold of `rule` from `--threshold`: cents, basis points, or none.
fn threshold_of(rule: Rule, given: Option<&str>) -> anyhow::Result<Option<i64>> {
    Ok(match (rule.measure(), given) {
        (Measure::None, Some(_)) => anyhow::bail!("{rule} takes no --threshold"),
        (Measure::None, None) => None,
        (Measure::Money, None) => anyhow::bail!("{rule} needs --threshold AMOUNT"),
        (Measure::Money, Some(text)) => {
            Some(crate::money::parse_cents(text).map_err(|e| anyhow::anyhow!("--threshold: {e}"))?)
        }
        (Measure::Percent, None) => rule.default_threshold(),
        (Measure::Percent, Some(text)) => Some(alerts::parse_percent(text)?),
    })
}
