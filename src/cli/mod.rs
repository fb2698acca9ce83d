//! The command line: clap definitions and dispatch to one function per command.
//!
//! Owns parsing flags into values and printing results (text or `--json`). It does not own
//! the rules: those live in the domain modules (`config`, `ingest`, `delivery`, …), which
//! the commands call through the database's writer and read pool, like the server does.

mod args;
mod delivery;
mod demo;
mod evaluator;
mod lead;
mod ledger;
mod mapping;
mod operator;
mod ops;
mod output;
mod ping;
mod serve;
mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use args::*;
pub use delivery::{DeliverArgs, OutboxCommand, TransactionCommand};
pub use lead::LeadCommand;
pub use operator::OperatorCommand;
pub use ops::{BackupArgs, RestoreArgs};
pub use output::Output;

#[derive(Debug, Parser)]
#[command(
    name = "leadrelay",
    version,
    about = "Lead-distribution appliance on one SQLite file"
)]
pub struct Cli {
    /// The database file; created and migrated when missing.
    #[arg(
        long,
        global = true,
        env = "LEADRELAY_DB",
        default_value = "leadrelay.db"
    )]
    pub db: PathBuf,

    /// Print one JSON object or array on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create (or migrate) the database file and exit.
    Init,
    /// Run the HTTP server and the delivery workers.
    Serve(ServeArgs),
    /// Copy the database to FILE while the server keeps running (a consistent snapshot).
    Backup(BackupArgs),
    /// Check the database file: integrity, foreign keys, schema version, known states,
    /// balances equal to their ledger. Exit code 1 when something is wrong. Read-only;
    /// leaves no file behind.
    Check,
    /// Replace the database with a checked copy of BACKUP, keeping the old file as
    /// DB.before-restore. Refused while a server or another command uses the database.
    Restore(RestoreArgs),
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
    Deliver(DeliverArgs),
    /// Transactions created by deliveries.
    #[command(subcommand)]
    Transaction(TransactionCommand),
    /// Outbound webhook events and their attempts.
    #[command(subcommand)]
    Outbox(OutboxCommand),
    /// The money ledger: every fund, charge, refund, price change and supplier cost.
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
    /// Create a sample setup and print copy-paste commands for the whole flow.
    Demo(demo::DemoArgs),
    /// Partner-native mappings of a source: set a draft, preview, publish, show.
    #[command(subcommand)]
    Mapping(mapping::MappingCommand),
    /// Leads as ingest stored them.
    #[command(subcommand)]
    Lead(lead::LeadCommand),
    /// Operators of the web console and their login tokens.
    #[command(subcommand)]
    Operator(OperatorCommand),
    /// Pings (ping/post): what partners asked, what was reserved, what was posted.
    #[command(subcommand)]
    Ping(ping::PingCommand),
}

/// Runs the parsed command. Errors are printed by `main` as `error: …` with exit code 1.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let out = Output::new(cli.json);
    match cli.command {
        Command::Init => setup::init(&cli.db, &out),
        Command::Serve(args) => serve::run(&cli.db, args),
        Command::Backup(args) => ops::backup(&cli.db, &out, args),
        Command::Check => ops::check(&cli.db, &out),
        Command::Restore(args) => ops::restore(&cli.db, &out, args),
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
        Command::Outbox(command) => delivery::outbox(&cli.db, &out, command),
        Command::Ledger(command) => ledger::run(&cli.db, &out, command),
        Command::Demo(args) => demo::run(&cli.db, &out, args),
        Command::Mapping(command) => mapping::run(&cli.db, &out, command),
        Command::Lead(command) => lead::run(&cli.db, &out, command),
        Command::Operator(command) => operator::run(&cli.db, &out, command),
        Command::Ping(command) => ping::run(&cli.db, &out, command),
    }
}
