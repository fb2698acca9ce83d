//! `leadrelay ping list|show` (DESIGN.md section 14): pings as the operator sees them,
//! with their reservations and decision. Reads through `ping::store`; an accepted ping past
//! its time shows as expired even before the server's sweep has ended it.

use std::path::Path;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use serde_json::Value;

use super::output::Output;
use crate::db::DbError;
use crate::ping::store::{self, ListFilter, PingStatus};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PingStatusArg {
    Accepted,
    Rejected,
    Posted,
    Expired,
    Released,
}

impl PingStatusArg {
    fn status(self) -> PingStatus {
        match self {
            PingStatusArg::Accepted => PingStatus::Accepted,
            PingStatusArg::Rejected => PingStatus::Rejected,
            PingStatusArg::Posted => PingStatus::Posted,
            PingStatusArg::Expired => PingStatus::Expired,
            PingStatusArg::Released => PingStatus::Released,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum PingCommand {
    /// List pings, newest first.
    #[command(after_help = "Example:\n  leadrelay ping list --source web-form --status accepted")]
    List {
        /// Only this source's pings.
        #[arg(long)]
        source: Option<crate::ids::SourceId>,
        /// Only pings in this state (an accepted ping past its time is expired).
        #[arg(long, value_enum)]
        status: Option<PingStatusArg>,
        /// At most this many pings.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
        limit: i64,
    },
    /// Show one ping: its answer, reservations, decision (candidates and score) and bids.
    #[command(after_help = "Example:\n  leadrelay ping show png_01J0000000000000000000000")]
    Show {
        /// The ping's id (png_…).
        id: String,
    },
}

pub(super) fn run(path: &Path, out: &Output, command: PingCommand) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let now = crate::clock::now_ms();
    let result = match command {
        PingCommand::List {
            source,
            status,
            limit,
        } => db
            .read_blocking(|conn| {
                let filter = ListFilter {
                    source_id: source,
                    status: status.map(PingStatusArg::status),
                    limit,
                };
                Ok::<_, DbError>(store::list(conn, &filter, now)?)
            })
            .map(|pings| {
                let items: Vec<Value> = pings.iter().map(|p| p.to_json(now)).collect();
                out.print_list(&items);
                ExitCode::SUCCESS
            })
            .map_err(anyhow::Error::from),
        PingCommand::Show { id } => show(&db, out, &id, now),
    };
    db.close();
    result
}

fn show(db: &crate::db::Db, out: &Output, id: &str, now: i64) -> anyhow::Result<ExitCode> {
    let found = db.read_blocking(|conn| {
        let Some(ping) = store::find(conn, id)? else {
            return Ok::<_, DbError>(None);
        };
        let reservations = store::reservations(conn, id)?;
        let bids = crate::bids::shown(conn, crate::bids::Owner::Ping(id))?;
        Ok(Some((ping, reservations, bids)))
    })?;
    let Some((ping, reservations, bids)) = found else {
        anyhow::bail!("unknown ping '{id}'");
    };
    let mut shown = ping.to_json(now);
    shown["reservations"] = reservations.iter().map(|r| r.to_json()).collect();
    shown["bids"] = Value::Array(bids);
    shown["decision"] = ping
        .decision
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    shown["body"] = serde_json::from_str(&ping.body).unwrap_or(Value::Null);
    out.print(&shown);
    Ok(ExitCode::SUCCESS)
}
