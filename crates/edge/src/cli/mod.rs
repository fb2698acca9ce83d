//! The command line: clap definitions and dispatch to one function per command.
//!
//! Owns parsing flags into values, printing results (text or `--json`) and errors (text, or
//! one JSON object on stderr under `--json`; exit code 2 for bad usage, 1 for a refused
//! operation). It does not own the rules: those live in the domain modules (`config`,
//! `ingest`, `delivery`, …), which the commands call through the database's writer and read
//! pool, like the server does.

mod alert;
mod args;
mod audit;
mod check_step;
mod delivery;
mod demo;
mod evaluator;
mod export;
mod integration;
mod lead;
mod ledger;
mod mapping;
mod operator;
mod ops;
mod output;
mod partner_user;
mod period;
mod ping;
mod privacy;
mod report;
mod returns;
mod serve;
mod setup;
mod suppression;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use args::*;
pub use delivery::{DeliverArgs, OutboxCommand, TransactionCommand};
pub use lead::LeadCommand;
pub use operator::OperatorCommand;
pub use ops::{BackupArgs, RestoreArgs};
pub use output::Output;
pub use privacy::{EraseArgs, PurgeArgs};
pub use setup::NoDatabase;

/// The heading of the flags every command takes, shown after the command's own options so
/// that `buyer create --help` lists its own flags together.
const GLOBAL: &str = "Global options";

#[derive(Debug, Parser)]
#[command(
    name = "leadrelay",
    version,
    about = "Lead-distribution appliance on one SQLite file",
    after_help = "Example:\n  leadrelay --db /var/lib/leadrelay/leadrelay.db source list --json"
)]
pub struct Cli {
    /// The database file. Only init, serve and demo create it when missing.
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "LEADRELAY_DB",
        default_value = "leadrelay.db"
    )]
    pub db: PathBuf,

    /// Print one JSON object or array on stdout instead of text (and errors as JSON on
    /// stderr).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,

    /// How long to wait for another process's write lock on the database (the running
    /// server's, a backup's) before giving up with "database is busy" (e.g. 30s, 2m).
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "LEADRELAY_BUSY_TIMEOUT",
        default_value = "30s",
        value_parser = args::positive_duration
    )]
    pub busy_timeout: std::time::Duration,

    /// Print only the value at PATH of the JSON output, as plain text: keys and array
    /// indexes joined by '.' (e.g. id, 0.id, transactionId).
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "PATH")]
    pub get: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create (or migrate) the database file and exit.
    #[command(after_help = "Example:\n  leadrelay --db /var/lib/leadrelay/leadrelay.db init")]
    Init,
    /// Run the HTTP server and the delivery workers.
    Serve(ServeArgs),
    /// Copy the database to FILE while the server keeps running (a consistent snapshot).
    #[command(
        after_help = "Example:\n  leadrelay backup --out /var/backups/leadrelay-2026-01-31.db"
    )]
    Backup(BackupArgs),
    /// Check the database file: integrity, foreign keys, schema version, known states,
    /// balances equal to their ledger, the report aggregate equal to a recount. Exit code 1 when something is wrong. Read-only;
    /// leaves no file behind.
    #[command(after_help = "Example:\n  leadrelay check --json")]
    Check,
    /// Replace the database with a checked copy of BACKUP, keeping the old file as
    /// DB.before-restore. Refused while a server or another command uses the database.
    #[command(
        after_help = "Example:\n  leadrelay restore --from /var/backups/leadrelay-2026-01-31.db"
    )]
    Restore(RestoreArgs),
    /// Purge leads older than an age by hand (as `serve` does with a workspace's
    /// retention): each becomes a tombstone, like an erasure; ids, statuses and money stay.
    #[command(
        after_help = "Example:\n  leadrelay purge --older-than 180d --workspace acme --dry-run"
    )]
    Purge(PurgeArgs),
    /// Give the database's free space back to the file system and pack it (also compresses
    /// raw bodies stored by older versions). Refused while a server or another command uses
    /// the database.
    #[command(after_help = "Example:\n  leadrelay --db /var/lib/leadrelay/leadrelay.db vacuum")]
    Vacuum,
    /// Workspaces (tenants).
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Channels (containers of sources, auto-delivery on by default).
    #[command(subcommand)]
    Channel(ContainerCommand),
    /// Lead tables (containers of sources, auto-delivery off by default).
    #[command(subcommand)]
    Table(ContainerCommand),
    /// Sources: where partners post leads.
    #[command(subcommand)]
    Source(SourceCommand),
    /// Products that leads are interested in.
    #[command(subcommand)]
    Product(ProductCommand),
    /// Buyer accounts, their subscriptions and balances.
    #[command(subcommand)]
    Buyer(BuyerCommand),
    /// Suppliers that leads are bought from.
    #[command(subcommand)]
    Supplier(SupplierCommand),
    /// The built-in lead evaluator's weights per workspace.
    #[command(subcommand)]
    Evaluator(evaluator::EvaluatorCommand),
    /// Deliver a lead request to a buyer: creates the transaction and its webhook event.
    #[command(
        after_help = "Example:\n  leadrelay deliver --request lreq_01J0000000000000000000000 --buyer sunco --price 30"
    )]
    Deliver(DeliverArgs),
    /// Transactions created by deliveries.
    #[command(subcommand)]
    Transaction(TransactionCommand),
    /// A workspace's return reason codes.
    #[command(subcommand)]
    ReturnReason(returns::ReturnReasonCommand),
    /// Outbound webhook events and their attempts.
    #[command(subcommand)]
    Outbox(OutboxCommand),
    /// The money ledger: every fund, charge, refund, price change and supplier cost.
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
    /// Create a sample setup and print copy-paste commands for the whole flow.
    #[command(
        after_help = "Example:\n  leadrelay --db /tmp/demo.db demo --webhook-url http://127.0.0.1:9100/leads"
    )]
    Demo(demo::DemoArgs),
    /// Partner-native mappings of a source: set a draft, preview, publish, show.
    #[command(subcommand)]
    Mapping(mapping::MappingCommand),
    /// Leads as ingest stored them.
    #[command(subcommand)]
    Lead(lead::LeadCommand),
    /// The audit log: every change of configuration or money, with who made it.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Operators of the web console and their login tokens.
    #[command(subcommand)]
    Operator(OperatorCommand),
    /// Pings (ping/post): what partners asked, what was reserved, what was posted.
    #[command(subcommand)]
    Ping(ping::PingCommand),
    /// Suppression lists: contacts never sold again, stored as keyed hashes only.
    #[command(subcommand)]
    Suppression(suppression::SuppressionCommand),
    /// Alerts: targets (webhooks, email), rules, and the alerts that fired.
    #[command(subcommand)]
    Alert(alert::AlertCommand),
    /// Third-party check steps: outside services asked about each lead before it is stored.
    #[command(subcommand)]
    CheckStep(check_step::CheckStepCommand),
    /// What came in, what sold and what it earned, per day, week or month of the
    /// workspace's time zone and per source, supplier, buyer or product (default: the last
    /// 7 days by day). Read from an aggregate the server keeps current: fast on any file.
    #[command(
        after_help = "Example:\n  leadrelay report --from 2026-11-01 --to 2026-11-30 --by day --by buyer --csv"
    )]
    Report(report::ReportArgs),
}

/// The flags that take an amount: a negative one must be written `--price=-5`, since clap
/// reads a word starting with `-` after a flag as another flag.
const AMOUNT_FLAGS: &[&str] = &[
    "--price",
    "--amount",
    "--credit-limit",
    "--supplier-cost",
    "--min-price",
    "--max-price",
];

/// Parses the command line of this process. A usage error is printed (as JSON on stderr
/// under `--json`) and ends the process with exit code 2; `--help` and `--version` print
/// and end it with 0.
pub fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match parse_from(&args) {
        Ok(cli) => cli,
        Err(Usage::Clap(e)) if !e.use_stderr() => e.exit(),
        Err(usage) => {
            let json = wants_json(&args);
            match usage {
                Usage::Clap(e) if !json => e.exit(),
                Usage::Clap(e) => output::print_error(true, "usage", &clap_message(&e)),
                Usage::NegativeAmount(message) => output::print_error(json, "usage", &message),
                Usage::OutOfRange(message) => {
                    // Refused rather than misused: the syntax is right, the value is not
                    // one leadrelay takes (DESIGN.md section 11: exit 1).
                    output::print_error(json, "out_of_range", &message);
                    std::process::exit(1)
                }
            }
            std::process::exit(2)
        }
    }
}

/// Why a command line is not a command.
#[derive(Debug)]
pub enum Usage {
    Clap(clap::Error),
    /// `--price -5`: the message says how to write it.
    NegativeAmount(String),
    /// An amount past ±1,000,000,000.00: a refused operation (exit 1), not a usage error.
    OutOfRange(String),
}

/// Parses `args` (the program name first).
pub fn parse_from(args: &[std::ffi::OsString]) -> Result<Cli, Usage> {
    for pair in args.windows(2) {
        let (flag, value) = (pair[0].to_string_lossy(), pair[1].to_string_lossy());
        let negative = value
            .strip_prefix('-')
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit() || c == '.'));
        if AMOUNT_FLAGS.contains(&flag.as_ref()) && negative {
            // Only an adjustment's amount may be negative: anywhere else the advice to
            // write `--price=-3` would only lead to the next refusal.
            let adjustment = flag == "--amount" && args.iter().any(|a| a == "adjust");
            return Err(Usage::NegativeAmount(if adjustment {
                format!("write negative amounts as {flag}={value}")
            } else {
                format!("{flag} must not be negative; {}", args::DEBIT_HINT)
            }));
        }
    }
    for amount in amount_values(args) {
        if let Err(e @ crate::money::AmountError::OutOfRange(_)) =
            crate::money::parse_signed_cents(&amount)
        {
            return Err(Usage::OutOfRange(e.to_string()));
        }
    }
    let matches = Cli::command()
        .try_get_matches_from(args)
        .map_err(Usage::Clap)?;
    Cli::from_arg_matches(&matches).map_err(Usage::Clap)
}

/// The values given to amount flags, as `--price 5` or `--price=5`, before a `--`.
fn amount_values(args: &[std::ffi::OsString]) -> Vec<String> {
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut values = Vec::new();
    for (at, word) in words.iter().enumerate() {
        if AMOUNT_FLAGS.contains(&word.as_str()) {
            values.extend(words.get(at + 1).cloned());
        } else if let Some((flag, value)) = word.split_once('=')
            && AMOUNT_FLAGS.contains(&flag)
        {
            values.push(value.to_string());
        }
    }
    values
}

/// Whether `--json` is among the words before a `--`.
fn wants_json(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// clap's message without its `error: ` prefix and usage footer.
fn clap_message(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let first = rendered
        .split("\n\n")
        .next()
        .unwrap_or(&rendered)
        .trim()
        .to_string();
    first.strip_prefix("error: ").unwrap_or(&first).to_string()
}

/// Prints a command's error (as JSON on stderr under `--json`) and gives its exit code, 1:
/// the operation was refused or failed (usage errors end in [`parse`] with 2).
pub fn report(error: &anyhow::Error, json: bool) -> ExitCode {
    let code = error_code(error);
    output::print_error(json, code, &format!("{error:#}"));
    ExitCode::FAILURE
}

/// A stable code for an error: the domain's own where it has one.
fn error_code(error: &anyhow::Error) -> &'static str {
    if let Some(e) = error.downcast_ref::<crate::config::ConfigError>() {
        return e.code();
    }
    if let Some(e) = error.downcast_ref::<crate::lifecycle::LifecycleError>() {
        return e.code();
    }
    if let Some(crate::lifecycle::void::VoidError::Lifecycle(e)) = error.downcast_ref() {
        return e.code();
    }
    if let Some(e) = error.downcast_ref::<crate::alerts::AlertError>() {
        return e.code();
    }
    if error.downcast_ref::<NoDatabase>().is_some() {
        return "no_database";
    }
    if error.downcast_ref::<crate::db::DbError>().is_some() {
        return "database_error";
    }
    "failed"
}

/// Who runs this command, for the audit log: `cli:` and the operating-system user (`USER`,
/// else `LOGNAME`, else `uid<N>` where the process's user id can be read, else `unknown`).
pub(crate) fn actor() -> crate::audit::Actor {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .or_else(process_uid)
        .unwrap_or_else(|| "unknown".to_string());
    crate::audit::Actor::Cli(user)
}

/// `uid<N>` of this process, where `/proc` tells it (a service or a cron job may run with
/// no `USER` set).
fn process_uid() -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self")
            .ok()
            .map(|m| format!("uid{}", m.uid()))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Runs the parsed command. Errors are printed by `main` through [`report`].
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let out = Output::new(cli.json, cli.get);
    crate::db::set_busy_timeout(cli.busy_timeout);
    match cli.command {
        Command::Init => setup::init(&cli.db, &out),
        Command::Serve(args) => serve::run(&cli.db, args),
        Command::Backup(args) => ops::backup(&cli.db, &out, args),
        Command::Check => ops::check(&cli.db, &out),
        Command::Restore(args) => ops::restore(&cli.db, &out, args),
        Command::Purge(args) => privacy::purge(&cli.db, &out, args),
        Command::Vacuum => privacy::vacuum(&cli.db, &out),
        Command::Workspace(command) => setup::workspace(&cli.db, &out, command),
        Command::Channel(command) => setup::container(
            &cli.db,
            &out,
            crate::config::container::ContainerKind::Channel,
            command,
        ),
        Command::Table(command) => setup::container(
            &cli.db,
            &out,
            crate::config::container::ContainerKind::Table,
            command,
        ),
        Command::Source(command) => setup::source(&cli.db, &out, command),
        Command::Product(command) => setup::product(&cli.db, &out, command),
        Command::Buyer(command) => setup::buyer(&cli.db, &out, command),
        Command::Supplier(command) => setup::supplier(&cli.db, &out, command),
        Command::Evaluator(command) => evaluator::run(&cli.db, &out, command),
        Command::Deliver(args) => delivery::deliver(&cli.db, &out, args),
        Command::Transaction(command) => delivery::transaction(&cli.db, &out, command),
        Command::ReturnReason(command) => returns::reason(&cli.db, &out, command),
        Command::Outbox(command) => delivery::outbox(&cli.db, &out, command),
        Command::Ledger(command) => ledger::run(&cli.db, &out, command),
        Command::Demo(args) => demo::run(&cli.db, &out, args),
        Command::Mapping(command) => mapping::run(&cli.db, &out, command),
        Command::Lead(command) => lead::run(&cli.db, &out, command),
        Command::Operator(command) => operator::run(&cli.db, &out, command),
        Command::Audit(command) => audit::run(&cli.db, &out, command),
        Command::Ping(command) => ping::run(&cli.db, &out, command),
        Command::Report(args) => report::run(&cli.db, &out, args),
        Command::Suppression(command) => suppression::run(&cli.db, &out, command),
        Command::Alert(command) => alert::run(&cli.db, &out, command),
        Command::CheckStep(command) => check_step::run(&cli.db, &out, command),
    }
}
