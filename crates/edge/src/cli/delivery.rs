//! Delivery commands: `deliver`, `transaction show|list|void`, `outbox list|show|retry`,
//! `buyer health`.
//!
//! Each opens the database, runs the domain function through the writer or the read pool
//! (safe while `serve` runs on the same file: the server's workers pick up new and retried
//! events at their next poll) and prints the result.

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;

use super::output::Output;
use super::setup::open;
use crate::attempt::RetryError;
use crate::db::DbError;
use crate::delivery::DeliveryOrder;
use crate::delivery::transaction::{self, ListFilter, Status};
use crate::outbox::store::{self, EventStatus};

#[derive(Debug, Args)]
pub struct DeliverArgs {
    /// The lead request (interest) to deliver, `lreq_…`.
    #[arg(long)]
    pub request: String,
    /// The buyer account to deliver it to.
    #[arg(long)]
    pub buyer: crate::ids::BuyerId,
    /// The buyer price; without it the buyer's subscription price applies.
    #[arg(long, value_parser = super::args::money)]
    pub price: Option<i64>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TransactionStatusArg {
    Delivered,
    Acknowledged,
    Rejected,
    /// Spelt as every output prints it.
    #[value(name = "payout_pending")]
    PayoutPending,
    Paid,
    Cancelled,
    /// Spelt as every output prints it.
    #[value(name = "return_requested")]
    ReturnRequested,
}

impl TransactionStatusArg {
    fn status(self) -> Status {
        match self {
            TransactionStatusArg::Delivered => Status::Delivered,
            TransactionStatusArg::Acknowledged => Status::Acknowledged,
            TransactionStatusArg::Rejected => Status::Rejected,
            TransactionStatusArg::PayoutPending => Status::PayoutPending,
            TransactionStatusArg::Paid => Status::Paid,
            TransactionStatusArg::Cancelled => Status::Cancelled,
            TransactionStatusArg::ReturnRequested => Status::ReturnRequested,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum TransactionCommand {
    /// Show a transaction with its history and its webhook events.
    #[command(after_help = "Example:\n  leadrelay transaction show txn_01J0000000000000000000000")]
    Show {
        /// The transaction's id.
        id: crate::ids::TransactionId,
    },
    /// List transactions, newest first.
    #[command(
        after_help = "Example:\n  leadrelay transaction list --buyer sunco --status payout_pending"
    )]
    List {
        /// Only this buyer's transactions.
        #[arg(long)]
        buyer: Option<crate::ids::BuyerId>,
        /// Only the transactions of this lead.
        #[arg(long)]
        lead: Option<String>,
        /// Only transactions in this state (as the output spells it).
        #[arg(long, value_enum)]
        status: Option<TransactionStatusArg>,
        /// Only the transactions of this source's leads.
        #[arg(long)]
        source: Option<crate::ids::SourceId>,
        /// Delivered from this date (the workspace's time zone) or time
        /// (2026-11-23T10:00:00Z).
        #[arg(long, value_parser = super::period::bound)]
        from: Option<super::period::Bound>,
        /// Delivered up to this date, included, or before this time.
        #[arg(long, value_parser = super::period::bound)]
        to: Option<super::period::Bound>,
        /// The next page: the transactions listed after this one (pass the last id shown).
        #[arg(long, value_name = "ID")]
        after: Option<crate::ids::TransactionId>,
        /// At most this many transactions.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=100_000))]
        limit: i64,
    },
    /// Print every matching transaction with all its fields (and its lead's source) as
    /// NDJSON or CSV, oldest first, streamed: no row limit, memory stays flat.
    #[command(
        after_help = "Example:\n  leadrelay transaction export --from 2026-11-01 --to 2026-11-30 --format csv"
    )]
    Export(super::export::ExportArgs),
    /// Take a sale back: a transaction that is not paid becomes cancelled (the reason in
    /// its history), a prepaid charge is refunded, its webhook event stops if not yet
    /// delivered, and its request is open again (deliver it again, or `lead reroute`).
    #[command(
        after_help = "Example:\n  leadrelay transaction void txn_01J0000000000000000000000 --reason 'endpoint down since monday'"
    )]
    Void {
        /// The transaction's id.
        id: crate::ids::TransactionId,
        /// Why the sale is voided; kept in the transaction's history.
        #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
        reason: String,
    },
    /// Returns: the review queue, a return filed for a buyer, the operator's decision.
    #[command(subcommand)]
    Return(super::returns::ReturnCommand),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EventStatusArg {
    Pending,
    Delivered,
    Failed,
    /// Never sent: its transaction was rejected or cancelled before its first attempt.
    Voided,
}

impl EventStatusArg {
    fn status(self) -> EventStatus {
        match self {
            EventStatusArg::Pending => EventStatus::Pending,
            EventStatusArg::Delivered => EventStatus::Delivered,
            EventStatusArg::Failed => EventStatus::Failed,
            EventStatusArg::Voided => EventStatus::Voided,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// List webhook events, newest first.
    #[command(after_help = "Example:\n  leadrelay outbox list --status failed")]
    List {
        /// Only events in this state.
        #[arg(long, value_enum)]
        status: Option<EventStatusArg>,
        /// At most this many events.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=100_000))]
        limit: i64,
    },
    /// Show an event: its body and every attempt (time, status, error, response excerpt).
    #[command(after_help = "Example:\n  leadrelay outbox show evt_01J0000000000000000000000")]
    Show {
        /// The event's id.
        id: crate::ids::EventId,
    },
    /// Make a failed or pending event due now (a failed one starts the retry schedule
    /// again), or, with --buyer, every such event of a buyer (and its next probe, if its
    /// endpoint is unhealthy).
    #[command(
        group(clap::ArgGroup::new("which").required(true).args(["id", "buyer"])),
        after_help = "Example:\n  leadrelay outbox retry evt_01J0000000000000000000000\n  leadrelay outbox retry --buyer sunco --status failed"
    )]
    Retry {
        /// The event's id.
        id: Option<crate::ids::EventId>,
        /// Every failed or pending event of this buyer.
        #[arg(long, conflicts_with = "id")]
        buyer: Option<crate::ids::BuyerId>,
        /// With --buyer: only the events in this status.
        #[arg(long, value_enum, requires = "buyer")]
        status: Option<RetryStatusArg>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RetryStatusArg {
    Pending,
    Failed,
}

pub(super) fn deliver(path: &Path, out: &Output, args: DeliverArgs) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    let actor = super::actor();
    let result = db.write_blocking(move |conn| {
        // Text that is not one of our request ids names no request.
        let lead_request_id = crate::ids::LeadRequestId::parse(&args.request)
            .ok_or_else(|| crate::delivery::DeliveryError::RequestNotFound(args.request.clone()))?;
        let delivered = crate::delivery::deliver(
            conn,
            &DeliveryOrder {
                lead_request_id,
                buyer_id: &args.buyer,
                price_cents: args.price,
                actor: "operator",
            },
        )?;
        let shown = delivered.to_json();
        let changes = crate::audit::Changes::new()
            .set("buyerId", Value::Null, args.buyer.as_str())
            .set("leadRequestId", Value::Null, args.request.as_str())
            .set("buyerPrice", Value::Null, shown["buyerPrice"].clone());
        let now = crate::clock::now_ms();
        let object = &delivered.transaction_id;
        crate::audit::record(
            conn,
            &actor,
            "transaction.deliver",
            object.as_str(),
            &changes,
            now,
        )?;
        Ok::<_, crate::delivery::DeliveryError>(delivered)
    });
    db.close();
    let delivered = result?;
    out.print(&delivered.to_json());
    Ok(ExitCode::SUCCESS)
}

/// A read that fails with a message when the record is missing.
#[derive(Debug, thiserror::Error)]
enum ShowError {
    #[error("unknown {0} '{1}'")]
    NotFound(&'static str, String),
    #[error(transparent)]
    Period(#[from] super::period::EmptyPeriod),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for ShowError {
    fn from(e: rusqlite::Error) -> Self {
        ShowError::Db(DbError::Sqlite(e))
    }
}

pub(super) fn transaction(
    path: &Path,
    out: &Output,
    command: TransactionCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        TransactionCommand::Return(command) => {
            db.close();
            return super::returns::transaction_return(path, out, command);
        }
        TransactionCommand::Show { id } => {
            let shown = db.read_blocking(|conn| {
                let txn = transaction::find(conn, &id)?
                    .ok_or_else(|| ShowError::NotFound("transaction", id.to_string()))?;
                let mut value = txn.to_json();
                let history: Vec<Value> = transaction::history(conn, &id)?
                    .iter()
                    .map(|entry| entry.to_json())
                    .collect();
                let events: Vec<Value> = store::of_transaction(conn, &id)?
                    .iter()
                    .map(|event| event.to_json())
                    .collect();
                let money = crate::ledger::ListFilter {
                    transaction_id: Some(id.clone()),
                    limit: i64::MAX,
                    ..Default::default()
                };
                let ledger: Vec<Value> = crate::ledger::query::list(conn, &money)?
                    .iter()
                    .map(|entry| entry.to_json())
                    .collect();
                value["history"] = Value::Array(history);
                value["events"] = Value::Array(events);
                value["ledger"] = Value::Array(ledger);
                Ok::<_, ShowError>(value)
            });
            db.close();
            out.print(&shown?);
        }
        TransactionCommand::Void { id, reason } => {
            let actor = super::actor();
            let voided = db.write_blocking(move |conn| {
                let now = crate::clock::now_ms();
                let before =
                    crate::delivery::transaction::find(conn, &id)?.map(|t| t.status.to_string());
                let voided = crate::lifecycle::void::void(conn, &id, &reason, now)?;
                let changes = crate::audit::Changes::new()
                    .set("status", before, voided.to_json()["status"].clone())
                    .set("reason", Value::Null, reason.as_str());
                crate::audit::record(conn, &actor, "transaction.void", id.as_str(), &changes, now)?;
                Ok::<_, crate::lifecycle::void::VoidError>(voided)
            });
            db.close();
            out.print(&voided?.to_json());
        }
        TransactionCommand::Export(args) => {
            let exported = super::export::transactions(&db, args);
            db.close();
            return exported;
        }
        TransactionCommand::List {
            buyer,
            lead,
            status,
            source,
            from,
            to,
            after,
            limit,
        } => {
            let listed = db.read_blocking(|conn| {
                let mut workspace = None;
                if let Some(id) = &buyer {
                    workspace = Some(
                        crate::config::buyer::find(conn, id)?
                            .ok_or_else(|| ShowError::NotFound("buyer", id.to_string()))?
                            .workspace_id,
                    );
                }
                if let Some(id) = &source {
                    workspace = Some(
                        crate::config::source::find(conn, id)?
                            .ok_or_else(|| ShowError::NotFound("source", id.to_string()))?
                            .workspace_id,
                    );
                }
                if let Some(id) = &after
                    && transaction::find(conn, id)?.is_none()
                {
                    return Err(ShowError::NotFound("transaction", id.to_string()));
                }
                // Text that is not one of our lead ids names a lead without transactions.
                let lead = match lead.as_deref().map(crate::ids::LeadId::parse) {
                    Some(None) => return Ok(Vec::new()),
                    Some(Some(id)) => Some(id),
                    None => None,
                };
                let tz = super::period::zone(conn, workspace.as_deref())?;
                let (from_ms, to_ms) = super::period::range(&tz, from, to)?;
                let filter = ListFilter {
                    buyer_id: buyer,
                    lead_id: lead,
                    status: status.map(TransactionStatusArg::status),
                    source_id: source,
                    from_ms,
                    to_ms,
                    after_id: after,
                    limit,
                };
                Ok::<_, ShowError>(transaction::list(conn, &filter)?)
            });
            db.close();
            let items: Vec<Value> = listed?.iter().map(|t| t.to_json()).collect();
            out.print_list(&items);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An event as `outbox show` shows it: with its URL, its payload (as JSON where it parses)
/// and every attempt.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ShownEvent<'a> {
    #[serde(flatten)]
    event: store::EventView<'a>,
    url: &'a str,
    payload: Value,
    attempt_log: Vec<store::AttemptView<'a>>,
}

pub(super) fn outbox(
    path: &Path,
    out: &Output,
    command: OutboxCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        OutboxCommand::List { status, limit } => {
            let listed = db.read_blocking(|conn| {
                store::list(conn, status.map(EventStatusArg::status), limit).map_err(DbError::from)
            });
            db.close();
            let items: Vec<Value> = listed?.iter().map(|e| e.to_json()).collect();
            out.print_list(&items);
        }
        OutboxCommand::Show { id } => {
            let shown = db.read_blocking(|conn| {
                let event = store::find(conn, &id)?
                    .ok_or_else(|| ShowError::NotFound("event", id.to_string()))?;
                let attempts = store::attempts(conn, &id)?;
                let shown = ShownEvent {
                    event: event.view(),
                    url: &event.url,
                    payload: serde_json::from_str(&event.payload)
                        .unwrap_or_else(|_| Value::String(event.payload.clone())),
                    attempt_log: attempts.iter().map(|a| a.view()).collect(),
                };
                Ok::<_, ShowError>(
                    serde_json::to_value(&shown).expect("a view is plain data and serialises"),
                )
            });
            db.close();
            out.print(&shown?);
        }
        OutboxCommand::Retry {
            id: Some(id),
            buyer: None,
            ..
        } => {
            let actor = super::actor();
            let retried = db.write_blocking(move |conn| {
                crate::audited::retry_event(conn, &actor, &id, crate::clock::now_ms())
            });
            db.close();
            let event: Result<_, RetryError> = retried;
            out.print(&event?.to_json());
        }
        OutboxCommand::Retry {
            buyer: Some(buyer),
            status,
            ..
        } => {
            let retried = retry_buyer(&db, &buyer, status);
            db.close();
            out.show(&RetriedForBuyer {
                buyer_account_id: buyer,
                retried: retried?,
            });
        }
        // clap's group requires one of the two and forbids both.
        OutboxCommand::Retry { .. } => unreachable!("clap requires an event id or --buyer"),
    }
    Ok(ExitCode::SUCCESS)
}

/// How many events one write job of `outbox retry --buyer` makes due, so a buyer with a
/// long backlog does not hold the server's writer for long.
const RETRY_CHUNK: usize = 1000;

/// Makes the buyer's failed and pending events (as `status` narrows) due now, chunk by
/// chunk, and lets its next probe go out now. Returns how many events it retried.
fn retry_buyer(
    db: &crate::db::Db,
    buyer: &crate::ids::BuyerId,
    status: Option<RetryStatusArg>,
) -> anyhow::Result<usize> {
    let wanted = buyer.clone();
    let known = db.read_blocking(move |conn| {
        crate::config::buyer::find(conn, &wanted).map_err(DbError::from)
    })?;
    if known.is_none() {
        anyhow::bail!("unknown buyer '{buyer}'");
    }
    let status = status.map(|s| match s {
        RetryStatusArg::Pending => EventStatus::Pending,
        RetryStatusArg::Failed => EventStatus::Failed,
    });
    let mut after = String::new();
    let mut total = 0;
    loop {
        let (buyer, from) = (buyer.clone(), after.clone());
        let actor = super::actor();
        let (retried, last) = db.write_blocking(move |conn| {
            let now = crate::clock::now_ms();
            let chunk = store::BuyerChunk {
                buyer_id: &buyer,
                status,
                after: &from,
                size: RETRY_CHUNK,
            };
            let chunk = crate::attempt::retry_buyer(conn, &chunk, now)?;
            if chunk.0 > 0 {
                let changes = crate::audit::Changes::new().set("retried", Value::Null, chunk.0);
                crate::audit::record(
                    conn,
                    &actor,
                    "outbox.retry_buyer",
                    buyer.as_str(),
                    &changes,
                    now,
                )?;
            }
            if chunk.1.is_none() {
                crate::outbox::health::probe_now(conn, &buyer, now)?;
            }
            Ok::<_, DbError>(chunk)
        })?;
        total += retried;
        match last {
            Some(last) => after = last,
            None => return Ok(total),
        }
    }
}

/// `buyer health [ID]`: one buyer's endpoint health, or every buyer's as a list.
pub(super) fn buyer_health(
    path: &Path,
    out: &Output,
    id: Option<crate::ids::BuyerId>,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    let wanted = id.clone();
    let read = db.read_blocking(move |conn| {
        crate::outbox::health::read(conn, wanted.as_ref(), crate::clock::now_ms())
            .map_err(DbError::from)
    });
    db.close();
    let found: Vec<Value> = read?.iter().map(|h| h.to_json()).collect();
    match id {
        Some(id) => match found.into_iter().next() {
            Some(one) => out.print(&one),
            None => anyhow::bail!("unknown buyer '{id}'"),
        },
        None => out.print_list(&found),
    }
    Ok(ExitCode::SUCCESS)
}

/// What `outbox retry --buyer` prints.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct RetriedForBuyer {
    buyer_account_id: crate::ids::BuyerId,
    retried: usize,
}
