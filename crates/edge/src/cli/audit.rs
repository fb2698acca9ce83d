//! `leadrelay audit list`: the audit log, oldest entry first (DESIGN.md section 23).
//!
//! Reads through `crate::audit`; `--from`/`--to` are dates of the only workspace's time zone
//! (UTC with several) or instants (`cli::period`). Nothing here writes: the log is
//! append-only, and no command edits or deletes an entry.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use super::output::Output;
use super::setup::open;
use crate::audit::{self, Filter};
use crate::db::DbError;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List audit entries, oldest first: who changed what, when, with old and new values.
    #[command(
        after_help = "Example:\n  leadrelay audit list --object sunco --action buyer. --json"
    )]
    List {
        /// Only entries about this object id (a buyer, source, transaction, …).
        #[arg(long)]
        object: Option<String>,
        /// Only entries by this actor (`cli:ana`, `operator:Ana`), or every actor of a kind
        /// given as a prefix ending in ':' (`operator:`, `api:buyer:`).
        #[arg(long)]
        actor: Option<String>,
        /// Only actions starting with this (`buyer.`, `transaction.return_approve`).
        #[arg(long, value_name = "PREFIX")]
        action: Option<String>,
        /// From this date or time (2026-11-23T10:00:00Z).
        #[arg(long, value_parser = super::period::bound)]
        from: Option<super::period::Bound>,
        /// Up to this date, included, or before this time.
        #[arg(long, value_parser = super::period::bound)]
        to: Option<super::period::Bound>,
    },
}

#[derive(Debug, thiserror::Error)]
enum ListError {
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

pub(super) fn run(path: &Path, out: &Output, command: AuditCommand) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    let AuditCommand::List {
        object,
        actor,
        action,
        from,
        to,
    } = command;
    let listed = db.read_blocking(move |conn| {
        let tz = super::period::zone(conn, None)?;
        let (from, to) = super::period::range(&tz, from, to)?;
        let filter = Filter {
            object_id: object,
            actor,
            action_prefix: action,
            from,
            to,
            newest: None,
        };
        Ok::<_, ListError>(audit::list(conn, &filter)?)
    });
    db.close();
    let items: Vec<Value> = listed?
        .iter()
        .map(|entry| serde_json::to_value(entry).expect("an entry serialises"))
        .collect();
    out.print_list(&items);
    Ok(ExitCode::SUCCESS)
}
