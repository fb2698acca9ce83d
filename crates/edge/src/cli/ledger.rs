//! `leadrelay ledger list`: the money ledger, oldest row first (DESIGN.md section 11).
//!
//! Reads through `ledger::query`; `--from`/`--to` are dates of the party's workspace's
//! time zone (`cli::period`).

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use super::output::Output;
use super::setup::open;
use crate::config::{buyer, supplier};
use crate::db::DbError;
use crate::ledger::{self, ListFilter};

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// List money moves, oldest first: funds, charges, price changes, refunds, supplier
    /// costs and reversals, adjustments.
    ///
    /// Example: leadrelay ledger list --buyer acme
    List {
        /// Only this buyer's rows.
        #[arg(long, conflicts_with = "supplier")]
        buyer: Option<crate::ids::BuyerId>,
        /// Only this supplier's rows.
        #[arg(long)]
        supplier: Option<crate::ids::SupplierId>,
        /// From this date (the workspace's time zone) or time (2026-11-23T10:00:00Z).
        #[arg(long, value_parser = super::period::bound)]
        from: Option<super::period::Bound>,
        /// Up to this date, included, or before this time.
        #[arg(long, value_parser = super::period::bound)]
        to: Option<super::period::Bound>,
        /// At most this many rows.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
        limit: i64,
    },
}

/// Why a listing with a period was refused (also `audit list`'s).
#[derive(Debug, thiserror::Error)]
pub(super) enum ListError {
    #[error("unknown {0} '{1}'")]
    NotFound(&'static str, String),
    #[error(transparent)]
    Period(#[from] super::period::EmptyPeriod),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for ListError {
    fn from(e: rusqlite::Error) -> Self {
        ListError::Db(DbError::Sqlite(e))
    }
}

pub(super) fn run(path: &Path, out: &Output, command: LedgerCommand) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    let LedgerCommand::List {
        buyer,
        supplier,
        from,
        to,
        limit,
    } = command;
    let listed = db.read_blocking(move |conn| {
        let mut workspace = None;
        if let Some(id) = &buyer {
            workspace = Some(
                buyer::find(conn, id)?
                    .ok_or_else(|| ListError::NotFound("buyer", id.to_string()))?
                    .workspace_id,
            );
        }
        if let Some(id) = &supplier {
            workspace = Some(
                supplier::find(conn, id)?
                    .ok_or_else(|| ListError::NotFound("supplier", id.to_string()))?
                    .workspace_id,
            );
        }
        let tz = super::period::zone(conn, workspace.as_deref())?;
        let (from_ms, to_ms) = super::period::range(&tz, from, to)?;
        let filter = ListFilter {
            buyer_id: buyer,
            supplier_id: supplier,
            from_ms,
            to_ms,
            limit,
            ..ListFilter::default()
        };
        Ok::<_, ListError>(ledger::query::list(conn, &filter)?)
    });
    db.close();
    let items: Vec<Value> = listed?.iter().map(|e| e.to_json()).collect();
    out.print_list(&items);
    Ok(ExitCode::SUCCESS)
}
