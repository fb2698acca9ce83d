//! `leadrelay lead …`: what ingest stored, as the operator reads it.
//!
//! Owns the `lead` subcommands' flags and printing. The reads are `ingest::view`'s. New
//! lead commands (cancellation, delivery decisions) are added as variants of
//! [`LeadCommand`] with a match arm in [`run`].

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::Value;

use super::output::Output;
use crate::db::DbError;
use crate::ingest::status::LeadStatus;
use crate::ingest::view;

#[derive(Debug, Subcommand)]
pub enum LeadCommand {
    /// Show one lead: person, consent, capture, additional properties, quality, duplicate
    /// status, lifecycle status and its requests with their products and answers.
    #[command(after_help = "Example:\n  leadrelay lead show lead_01J0000000000000000000000 --body")]
    Show {
        /// The lead's id.
        id: String,
        /// Also print the raw body the lead came in (the batch item for a batch).
        #[arg(long)]
        body: bool,
    },
    /// List leads, newest first.
    #[command(after_help = "Example:\n  leadrelay lead list --source landing --limit 10")]
    List(ListArgs),
    /// Print every matching lead with all its fields and requests (as `lead show`) as
    /// NDJSON or CSV, oldest first, streamed: no row limit, memory stays flat.
    #[command(
        after_help = "Example:\n  leadrelay lead export --source landing --from 2026-11-01 --format ndjson"
    )]
    Export(super::export::ExportArgs),
    /// Erase a person (GDPR Art. 17, CCPA): their leads become tombstones, and every event
    /// body, attempt excerpt and free-text reason made from them loses the person. Ids,
    /// times, products, statuses and money stay. Logged (never the erased values);
    /// erasing again changes nothing.
    #[command(
        after_help = "Example:\n  leadrelay lead erase --email ann@example.org --yes --reason 'ticket 4711'"
    )]
    Erase(super::privacy::EraseArgs),
    /// The erasure log: every erasure and purge run, newest first.
    #[command(after_help = "Example:\n  leadrelay lead erasures --limit 20")]
    Erasures {
        /// At most this many entries.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        limit: u64,
    },
    /// Open a supplier cancellation (clawback) for a lead by hand: the lead becomes
    /// `cancellation_pending` until its source's supplier confirms or disputes it.
    #[command(
        after_help = "Example:\n  leadrelay lead cancel lead_01J0000000000000000000000 --reason 'fake contact data'"
    )]
    Cancel {
        /// The lead's id.
        id: String,
        /// Why the lead is taken back; kept with the cancellation.
        #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
        reason: String,
    },
    /// Run automated delivery again for the lead's requests that no live transaction holds
    /// (after `transaction void`), leaving out every buyer that held them before. Prints
    /// each decision as `lead show` does.
    #[command(after_help = "Example:\n  leadrelay lead reroute lead_01J0000000000000000000000")]
    Reroute {
        /// The lead's id.
        id: String,
    },
}

/// `lead list`'s flags.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only the leads of this source.
    #[arg(long)]
    source: Option<crate::ids::SourceId>,
    /// Only the leads sold to this buyer (with a transaction of it, in any state).
    #[arg(long)]
    buyer: Option<crate::ids::BuyerId>,
    /// Only the leads in this state (as the output spells it).
    #[arg(long, value_parser = lead_status)]
    status: Option<LeadStatus>,
    /// Received from this date (the workspace's time zone) or time (2026-11-23T10:00:00Z).
    #[arg(long, value_parser = super::period::bound)]
    from: Option<super::period::Bound>,
    /// Received up to this date, included, or before this time.
    #[arg(long, value_parser = super::period::bound)]
    to: Option<super::period::Bound>,
    /// The next page: the leads listed after this one (pass the last id shown).
    #[arg(long, value_name = "ID")]
    after: Option<String>,
    /// At most this many leads.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    limit: u64,
}

fn lead_status(text: &str) -> Result<LeadStatus, String> {
    LeadStatus::parse(text).ok_or_else(|| {
        let known: Vec<&str> = LeadStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown lead status '{text}': use {}", known.join(", "))
    })
}

pub(super) fn run(path: &Path, out: &Output, command: LeadCommand) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let result = match command {
        LeadCommand::Show { id, body } => show(&db, out, &id, body),
        LeadCommand::List(args) => list(&db, out, args),
        LeadCommand::Cancel { id, reason } => cancel(&db, out, id, reason),
        LeadCommand::Reroute { id } => reroute(&db, out, id),
        LeadCommand::Erase(args) => super::privacy::erase(&db, out, args),
        LeadCommand::Erasures { limit } => super::privacy::erasures(&db, out, limit),
        LeadCommand::Export(args) => super::export::leads(&db, args),
    };
    db.close();
    result
}

fn show(db: &crate::db::Db, out: &Output, id: &str, with_body: bool) -> anyhow::Result<ExitCode> {
    // Text that is not one of our lead ids names no lead.
    let Some(lead_id) = crate::ids::LeadId::parse(id) else {
        anyhow::bail!("unknown lead '{id}'");
    };
    let (lead, raw, bids) = db.read_blocking(|conn| {
        let lead = view::find(conn, lead_id).map_err(DbError::from)?;
        let raw = if with_body {
            view::raw_body(conn, lead_id)?
        } else {
            None
        };
        // The bids asked for its auto-delivered requests (DESIGN.md section 14).
        let mut bids = Vec::new();
        for request in lead.iter().flat_map(|lead| &lead.requests) {
            bids.extend(
                crate::bids::shown(conn, crate::bids::Owner::Request(request.id))
                    .map_err(DbError::from)?,
            );
        }
        Ok::<_, view::ViewError>((lead, raw, bids))
    })?;
    let Some(lead) = lead else {
        anyhow::bail!("unknown lead '{id}'");
    };
    let mut shown = lead.to_json();
    if !bids.is_empty() {
        shown["bids"] = Value::Array(bids);
    }
    if with_body {
        // The body as it came, parsed so that `--json` prints it as JSON, not as a string.
        shown["body"] = raw
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(Value::Null);
    }
    out.print(&shown);
    Ok(ExitCode::SUCCESS)
}

fn list(db: &crate::db::Db, out: &Output, args: ListArgs) -> anyhow::Result<ExitCode> {
    let leads = db.read_blocking(|conn| {
        let mut workspace = None;
        if let Some(id) = &args.source {
            match crate::config::source::find(conn, id)? {
                Some(source) => workspace = Some(source.workspace_id),
                None => return Ok(Err(format!("unknown source '{id}'"))),
            }
        }
        if let Some(id) = &args.buyer {
            match crate::config::buyer::find(conn, id)? {
                Some(buyer) => workspace = Some(buyer.workspace_id),
                None => return Ok(Err(format!("unknown buyer '{id}'"))),
            }
        }
        let after = match args.after.as_deref() {
            Some(text) => match crate::ids::LeadId::parse(text) {
                Some(id) if view::find(conn, id)?.is_some() => Some(id),
                _ => return Ok(Err(format!("unknown lead '{text}'"))),
            },
            None => None,
        };
        let tz = super::period::zone(conn, workspace.as_deref())?;
        let (from_ms, to_ms) = match super::period::range(&tz, args.from, args.to) {
            Ok(range) => range,
            Err(empty) => return Ok(Err(empty.to_string())),
        };
        let filter = view::LeadFilter {
            source_id: args.source.clone(),
            buyer_id: args.buyer.clone(),
            status: args.status,
            from_ms,
            to_ms,
            after_id: after,
        };
        Ok::<_, DbError>(Ok(view::list(conn, &filter, args.limit as usize)?))
    })?;
    let leads = leads.map_err(anyhow::Error::msg)?;
    let shown: Vec<Value> = leads
        .iter()
        .map(crate::ingest::model::StoredLead::summary_json)
        .collect();
    out.print_list(&shown);
    Ok(ExitCode::SUCCESS)
}

fn cancel(
    db: &crate::db::Db,
    out: &Output,
    id: String,
    reason: String,
) -> anyhow::Result<ExitCode> {
    let actor = super::actor();
    let opened = db.write_blocking(move |conn| {
        let now = crate::clock::now_ms();
        // Text that is not one of our lead ids names no lead.
        let lead_id =
            crate::ids::LeadId::parse(&id).ok_or(crate::lifecycle::LifecycleError::LeadNotFound)?;
        let opened = crate::lifecycle::clawback::open_by_operator(conn, lead_id, &reason, now)?;
        let changes =
            crate::audit::Changes::new().set("reason", serde_json::Value::Null, reason.as_str());
        crate::audit::record(conn, &actor, "lead.cancel", &id, &changes, now)?;
        Ok::<_, crate::lifecycle::LifecycleError>(opened)
    })?;
    out.print(&opened.to_json());
    Ok(ExitCode::SUCCESS)
}

fn reroute(db: &crate::db::Db, out: &Output, id: String) -> anyhow::Result<ExitCode> {
    let actor = super::actor();
    let decided = db.write_blocking(move |conn| {
        let now = crate::clock::now_ms();
        // Text that is not one of our lead ids names no lead.
        let lead_id = crate::ids::LeadId::parse(&id)
            .ok_or_else(|| crate::autodelivery::RerouteError::NotFound(id.clone()))?;
        let decided = crate::autodelivery::reroute(conn, lead_id, now)?;
        let changes = crate::audit::diff(&serde_json::Value::Null, &decided.to_operator_json());
        crate::audit::record(conn, &actor, "lead.reroute", &id, &changes, now)?;
        Ok::<_, crate::autodelivery::RerouteError>(decided)
    })?;
    out.print(&decided.to_operator_json());
    Ok(ExitCode::SUCCESS)
}
