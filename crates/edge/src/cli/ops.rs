//! `leadrelay backup`, `check` and `restore`: the operator's commands on the database file.
//! The work is in `ops::backup`, `ops::check` and `ops::restore`; this file parses flags
//! and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::output::Output;
use crate::ops::{backup, check, restore};

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The file to write the copy to.
    #[arg(long)]
    pub out: PathBuf,
    /// Replace FILE when it exists already.
    #[arg(long)]
    pub force: bool,
}

pub(super) fn backup(db: &Path, out: &Output, args: BackupArgs) -> anyhow::Result<ExitCode> {
    super::setup::require_database(db)?;
    let report = backup::backup(db, &args.out, args.force)?;
    out.show(&BackedUp {
        database: db.display().to_string(),
        out: report.out.display().to_string(),
        bytes: report.bytes,
        pages: report.pages,
        schema_version: report.schema_version,
        duration_ms: u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
    });
    Ok(ExitCode::SUCCESS)
}

/// What `backup` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BackedUp {
    database: String,
    out: String,
    bytes: u64,
    pages: u64,
    schema_version: i64,
    duration_ms: u64,
}

/// What `restore` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Restored {
    database: String,
    from: String,
    kept_as: Option<String>,
    bytes: u64,
    pages: u64,
    schema_version: i64,
    duration_ms: u64,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup to put in place of the database (checked first).
    #[arg(long, value_name = "BACKUP")]
    pub from: PathBuf,
    /// Replace DB.before-restore when an earlier restore left one.
    #[arg(long)]
    pub force: bool,
}

pub(super) fn restore(db: &Path, out: &Output, args: RestoreArgs) -> anyhow::Result<ExitCode> {
    let report = restore::restore(db, &args.from, args.force)?;
    out.show(&Restored {
        database: report.database.display().to_string(),
        from: report.from.display().to_string(),
        kept_as: report.kept.map(|kept| kept.display().to_string()),
        bytes: report.bytes,
        pages: report.pages,
        schema_version: report.schema_version,
        duration_ms: u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
    });
    Ok(ExitCode::SUCCESS)
}

/// Exit code 0 when the file is sound, 1 with the list of problems otherwise.
pub(super) fn check(db: &Path, out: &Output) -> anyhow::Result<ExitCode> {
    super::setup::require_database(db)?;
    let report = check::check(db)?;
    if out.is_json() {
        out.print(&serde_json::to_value(&report).expect("the check report serialises"));
    } else {
        print_text(&report);
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_text(report: &check::CheckReport) {
    println!("database: {}", report.database);
    let version = match report.schema_version {
        Some(version) => format!(
            "{version} (this binary: {})",
            report.expected_schema_version
        ),
        None => "-".to_string(),
    };
    println!("schema version: {version}");
    println!("integrity: {}", report.integrity.join("; "));
    if report.foreign_key_violations == 0 {
        println!("foreign keys: ok");
    } else {
        println!("foreign keys: {} violations", report.foreign_key_violations);
        for violation in &report.foreign_keys {
            let rowid = violation.rowid.map_or("-".to_string(), |r| r.to_string());
            println!(
                "  {} row {rowid} points at a missing {} row",
                violation.table, violation.parent
            );
        }
    }
    // Every check `--json` reports, each on its own line: a clean file says so for each.
    let count = |n: usize, what: &str| match n {
        0 => "ok".to_string(),
        n => format!("{n} {what}"),
    };
    println!(
        "schema objects: {}",
        count(report.missing_objects.len(), "missing")
    );
    println!(
        "states: {}",
        count(report.unknown_states.len(), "unknown value(s)")
    );
    println!(
        "balances: {}",
        count(
            report.balance_mismatch_count(),
            "buyer(s) not matching their ledger"
        )
    );
    println!(
        "report: {}",
        count(report.report_mismatches, "row(s) not matching a recount")
    );
    if report.ok {
        println!("result: ok");
    } else {
        println!("result: {} problem(s)", report.problems.len());
        for problem in &report.problems {
            println!("  - {problem}");
        }
    }
}
