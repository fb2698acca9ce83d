//! `leadrelay lead erase`, `lead erasures`, `purge` and `vacuum`: the operator's commands of
//! DESIGN.md section 12. The work is `privacy`'s and `ops::vacuum`'s; this file parses flags,
//! asks for confirmation and prints.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::{ArgGroup, Args};
use serde_json::Value;

use super::output::Output;
use crate::db::Db;
use crate::privacy::{self, Selector, purge};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("person").required(true).args(["lead", "email", "phone"])))]
pub struct EraseArgs {
    /// Erase this lead.
    #[arg(long)]
    pub lead: Option<String>,
    /// Erase every lead with this email (matched trimmed and lower-cased, as the duplicate
    /// rule compares).
    #[arg(long)]
    pub email: Option<String>,
    /// Erase every lead with this phone number (matched by its digits).
    #[arg(long)]
    pub phone: Option<String>,
    /// Erase without asking for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// A note for the erasure log, e.g. the request's ticket number (never the email or
    /// phone itself).
    #[arg(long)]
    pub reason: Option<String>,
    /// Also put the erased person's email and phone on their workspace's suppression list
    /// (reason `erased`): a later lead of theirs is refused.
    #[arg(long)]
    pub suppress: bool,
}

#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Purge leads created longer ago than this (e.g. 180d, 12h), and delete the pings
    /// that never became a lead.
    #[arg(long, value_parser = super::args::age)]
    pub older_than: std::time::Duration,
    /// Only this workspace's leads (default: every workspace).
    #[arg(long)]
    pub workspace: Option<String>,
    /// Count what would be purged, change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Who runs the command, as the erasure log names them: `operator:<login name>`.
fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default();
    if user.is_empty() {
        "operator".to_string()
    } else {
        format!("operator:{user}")
    }
}

pub(super) fn erase(db: &Db, out: &Output, args: EraseArgs) -> anyhow::Result<ExitCode> {
    let selector = match (args.lead, args.email, args.phone) {
        (Some(id), _, _) => Selector::lead(&id)?,
        (_, Some(email), _) => Selector::email(&email)?,
        (_, _, Some(phone)) => Selector::phone(&phone)?,
        (None, None, None) => unreachable!("clap requires one of --lead, --email, --phone"),
    };
    let reason = args.reason.as_deref();
    if !args.yes {
        let matching = db.read_blocking(|conn| privacy::matching(conn, &selector))?;
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "{matching} lead(s) match; refusing to erase without --yes (there is no \
                 terminal to ask on)"
            );
        }
        eprint!(
            "erase the person from {matching} lead(s), their events and attempts? this \
             cannot be undone. type yes: "
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            anyhow::bail!("not erased");
        }
    }
    let report = privacy::erase(
        db,
        selector,
        &operator(),
        &super::actor(),
        reason,
        args.suppress,
    )?;
    out.show(&Erased {
        erasure_id: &report.erasure_id,
        by: report.selector,
        leads: report.counts.leads,
        records: report.counts.to_json(),
        noop: report.counts.leads == 0,
        already_erased: report.already_erased,
        wal_checkpointed: report.checkpointed,
        others_with_same_contact: (report.others_with_same_contact > 0)
            .then_some(report.others_with_same_contact),
    });
    if !out.is_json() {
        if report.counts.leads == 0 {
            eprintln!(
                "nothing to erase: no lead holds it (erased before, or never stored); logged"
            );
        }
        if report.others_with_same_contact > 0 {
            eprintln!(
                "note: {} other lead(s) share this lead's email or phone; erase them with \
                 --email or --phone",
                report.others_with_same_contact
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn erasures(db: &Db, out: &Output, limit: u64) -> anyhow::Result<ExitCode> {
    let rows = db.read_blocking(|conn| {
        privacy::log(conn, usize::try_from(limit).unwrap_or(usize::MAX))
            .map_err(crate::db::DbError::from)
    })?;
    let shown: Vec<Value> = rows.iter().map(privacy::Erasure::to_json).collect();
    out.print_list(&shown);
    Ok(ExitCode::SUCCESS)
}

pub(super) fn purge(path: &Path, out: &Output, args: PurgeArgs) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let age = i64::try_from(args.older_than.as_millis()).unwrap_or(i64::MAX);
    let cutoff = crate::clock::now_ms().saturating_sub(age);
    let trigger = purge::Trigger::Operator {
        actor: operator(),
        by: super::actor(),
    };
    let result = purge::purge(
        &db,
        args.workspace.as_deref(),
        cutoff,
        &trigger,
        args.dry_run,
        &purge::Cancel::default(),
    );
    let checkpointed = match (&result, args.dry_run) {
        (Ok(report), false) if report.counts.leads > 0 || report.pings > 0 => {
            db.checkpoint_truncate().ok()
        }
        _ => None,
    };
    db.close();
    let report = result?;
    out.show(&Purged {
        leads: report.counts.leads,
        pings: report.pings,
        dry_run: report.dry_run,
        older_than: crate::duration::format(args.older_than),
        cutoff: crate::clock::iso(cutoff),
        records: report.counts.to_json(),
        erasure_ids: &report.erasure_ids,
        pages_freed: report.vacuumed_pages,
        wal_checkpointed: checkpointed,
    });
    Ok(ExitCode::SUCCESS)
}

pub(super) fn vacuum(path: &Path, out: &Output) -> anyhow::Result<ExitCode> {
    let report = crate::ops::vacuum::vacuum(path)?;
    out.show(&Vacuumed {
        database: report.database.display().to_string(),
        bytes_before: report.bytes_before,
        bytes_after: report.bytes_after,
        bodies_compressed: report.bodies_compressed,
        decisions_compressed: report.traces_compressed,
        auto_vacuum: "incremental",
        duration_ms: u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
    });
    Ok(ExitCode::SUCCESS)
}

/// What `lead erase` prints; `othersWithSameContact` only when there are some.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Erased<'a> {
    erasure_id: &'a str,
    by: &'a str,
    leads: u64,
    records: Value,
    noop: bool,
    already_erased: bool,
    wal_checkpointed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    others_with_same_contact: Option<u64>,
}

/// What `purge` prints.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Purged<'a> {
    leads: u64,
    pings: u64,
    dry_run: bool,
    older_than: String,
    cutoff: String,
    records: Value,
    erasure_ids: &'a [String],
    pages_freed: i64,
    wal_checkpointed: Option<bool>,
}

/// What `vacuum` prints.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Vacuumed {
    database: String,
    bytes_before: u64,
    bytes_after: u64,
    bodies_compressed: usize,
    decisions_compressed: usize,
    auto_vacuum: &'static str,
    duration_ms: u64,
}
