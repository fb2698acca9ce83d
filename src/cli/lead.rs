//! `leadrelay lead …`: what ingest stored, as the operator reads it.
//!
//! Owns the `lead` subcommands' flags and printing. The reads are `ingest::view`'s. New
//! lead commands (cancellation, delivery decisions) are added as variants of
//! [`LeadCommand`] with a match arm in [`run`].

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use super::output::Output;
use crate::db::DbError;
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
    List {
        /// Only the leads of this source.
        #[arg(long)]
        source: Option<String>,
        /// At most this many leads.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        limit: u64,
    },
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

pub(super) fn run(path: &Path, out: &Output, command: LeadCommand) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let result = match command {
        LeadCommand::Show { id, body } => show(&db, out, &id, body),
        LeadCommand::List { source, limit } => list(&db, out, source.as_deref(), limit),
        LeadCommand::Cancel { id, reason } => cancel(&db, out, id, reason),
        LeadCommand::Reroute { id } => reroute(&db, out, id),
        LeadCommand::Erase(args) => super::privacy::erase(&db, out, args),
        LeadCommand::Erasures { limit } => super::privacy::erasures(&db, out, limit),
    };
    db.close();
    result
}

fn show(db: &crate::db::Db, out: &Output, id: &str, with_body: bool) -> anyhow::Result<ExitCode> {
    let (lead, raw, bids) = db.read_blocking(|conn| {
        let lead = view::find(conn, id).map_err(DbError::from)?;
        let raw = if with_body {
            view::raw_body(conn, id)?
        } else {
            None
        };
        // The bids asked for its auto-delivered requests (DESIGN.md section 14).
        let mut bids = Vec::new();
        for request in lead.iter().flat_map(|lead| &lead.requests) {
            bids.extend(
                crate::bids::shown(conn, crate::bids::Owner::Request(&request.id))
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

fn list(
    db: &crate::db::Db,
    out: &Output,
    source: Option<&str>,
    limit: u64,
) -> anyhow::Result<ExitCode> {
    let leads = db.read_blocking(|conn| {
        if let Some(source) = source
            && crate::config::source::find(conn, source)?.is_none()
        {
            return Ok(None);
        }
        Ok::<_, DbError>(Some(view::list(conn, source, limit as usize)?))
    })?;
    let Some(leads) = leads else {
        anyhow::bail!("unknown source '{}'", source.unwrap_or_default());
    };
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
    let opened = db.write_blocking(move |conn| {
        crate::lifecycle::clawback::open_by_operator(conn, &id, &reason, crate::clock::now_ms())
    })?;
    out.print(&opened.to_json());
    Ok(ExitCode::SUCCESS)
}

fn reroute(db: &crate::db::Db, out: &Output, id: String) -> anyhow::Result<ExitCode> {
    let decided = db.write_blocking(move |conn| {
        crate::autodelivery::reroute(conn, &id, crate::clock::now_ms())
    })?;
    out.print(&decided.to_operator_json());
    Ok(ExitCode::SUCCESS)
}
