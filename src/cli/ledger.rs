//! `leadrelay ledger list`: the money ledger, oldest row first (DESIGN.md section 11).
//!
//! Reads through `ledger::query`; the `--from`/`--to` dates of the design are left to the
//! reporting work, the query already narrows by time.

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
        buyer: Option<String>,
        /// Only this supplier's rows.
        #[arg(long)]
        supplier: Option<String>,
        /// At most this many rows.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
        limit: i64,
    },
}

#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("unknown {0} '{1}'")]
    NotFound(&'static str, String),
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
        limit,
    } = command;
    let listed = db.read_blocking(move |conn| {
        if let Some(id) = &buyer
            && buyer::find(conn, id)?.is_none()
        {
            return Err(ListError::NotFound("buyer", id.clone()));
        }
        if let Some(id) = &supplier
            && supplier::find(conn, id)?.is_none()
        {
            return Err(ListError::NotFound("supplier", id.clone()));
        }
        let filter = ListFilter {
            buyer_id: buyer,
            supplier_id: supplier,
            limit,
            ..ListFilter::default()
        };
        Ok(ledger::query::list(conn, &filter)?)
    });
    db.close();
    let items: Vec<Value> = listed?.iter().map(|e| e.to_json()).collect();
    out.print_list(&items);
    Ok(ExitCode::SUCCESS)
}
