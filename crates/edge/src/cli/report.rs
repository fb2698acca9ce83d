//! `leadrelay report`: the money report of DESIGN.md section 11, as a text table, `--json`
//! or `--csv`. Reads through `report::run`; decides only the defaults (the one workspace,
//! the last 7 local days, by day) and the printing.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use jiff::civil::Date;

use super::output::Output;
use super::setup::open;
use crate::report::{By, Report, ReportError, ReportQuery};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The workspace; may be left out when there is only one.
    #[arg(long)]
    workspace: Option<String>,
    /// First local date (YYYY-MM-DD, the workspace's time zone); default: 6 days before
    /// --to.
    #[arg(long, value_parser = date)]
    from: Option<Date>,
    /// Last local date, included; default: today in the workspace's time zone.
    #[arg(long, value_parser = date)]
    to: Option<Date>,
    /// Cut the rows by day, week, month, source, supplier, buyer or product; repeat for
    /// more (--by day --by buyer). Default: by day. `--by reason` alone counts the returns
    /// requested in the period per reason code.
    #[arg(long = "by", value_name = "DIMENSION", value_parser = dimension)]
    by: Vec<Dimension>,
    /// Print CSV (RFC 4180): a header line and one line per row.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

/// A `--by` value: a dimension of the money report, or `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dimension {
    Report(By),
    Reason,
}

fn dimension(text: &str) -> Result<Dimension, String> {
    if text == "reason" {
        return Ok(Dimension::Reason);
    }
    By::parse(text)
        .map(Dimension::Report)
        .map_err(|e| format!("{e}, or reason alone"))
}

/// A local date as `--from`/`--to` take it.
pub(crate) fn date(text: &str) -> Result<Date, String> {
    text.parse::<Date>()
        .map_err(|_| format!("expected a date like 2026-11-23, not '{text}'"))
}

#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error("there are {0} workspaces: name one with --workspace")]
    WhichWorkspace(usize),
    #[error("there is no workspace yet")]
    NoWorkspace,
    #[error("--by reason is a report of its own: give it without other dimensions")]
    ReasonWithOthers,
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
}

impl From<rusqlite::Error> for RunError {
    fn from(e: rusqlite::Error) -> Self {
        RunError::Report(e.into())
    }
}

pub(crate) fn run(path: &Path, out: &Output, args: ReportArgs) -> anyhow::Result<ExitCode> {
    let by_reason = args.by.contains(&Dimension::Reason);
    if by_reason && args.by.len() > 1 {
        return Err(RunError::ReasonWithOthers.into());
    }
    let db = open(path)?;
    if by_reason {
        let made = db.read_blocking(|conn| {
            let (workspace_id, from, to) = period(conn, &args)?;
            Ok::<_, RunError>(crate::lifecycle::returns::reason_report(
                conn,
                &workspace_id,
                from,
                to,
            )?)
        });
        db.close();
        let report = made?;
        if args.csv {
            crate::lifecycle::returns::write_reasons_csv(std::io::stdout().lock(), &report)?;
        } else if out.is_json() {
            out.print(&report.to_json());
        } else {
            print!("{}", reason_table(&report));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let made = db.read_blocking(|conn| {
        let (workspace_id, from, to) = period(conn, &args)?;
        let by: Vec<By> = args
            .by
            .iter()
            .filter_map(|d| match d {
                Dimension::Report(by) => Some(*by),
                Dimension::Reason => None,
            })
            .collect();
        let by = if by.is_empty() { vec![By::Day] } else { by };
        let query = ReportQuery {
            workspace_id,
            from,
            to,
            by,
        };
        Ok::<_, RunError>(crate::report::run(conn, &query)?)
    });
    db.close();
    let report = made?;
    if args.csv {
        let stdout = std::io::stdout();
        crate::report::csv::write_report(stdout.lock(), &report)?;
    } else if out.is_json() {
        out.print(&report.to_json());
    } else {
        print!("{}", table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// The workspace and the local dates of a report: the one workspace when none is named,
/// the last 7 local days by default.
fn period(
    conn: &rusqlite::Connection,
    args: &ReportArgs,
) -> Result<(String, Date, Date), RunError> {
    let workspace_id = match args.workspace.clone() {
        Some(id) => id,
        None => only_workspace(conn)?,
    };
    let tz = crate::caps::timezone_of(conn, &workspace_id)?;
    let today = jiff::Timestamp::now().to_zoned(tz).date();
    let to = args.to.unwrap_or(today);
    let from = args
        .from
        .unwrap_or_else(|| to.checked_sub(jiff::Span::new().days(6)).unwrap_or(to));
    Ok((workspace_id, from, to))
}

/// The returns per reason code as a text table, with a totals line.
fn reason_table(report: &crate::lifecycle::returns::ReasonReport) -> String {
    use crate::lifecycle::returns::ReasonReport;
    let mut lines: Vec<Vec<String>> = vec![
        ["reason", "label"]
            .into_iter()
            .chain(ReasonReport::COLUMNS)
            .map(str::to_string)
            .collect(),
    ];
    for (label, count) in &report.rows {
        let mut line = vec![
            count.reason_code.clone(),
            label.clone().unwrap_or_else(|| "-".into()),
        ];
        line.extend(ReasonReport::figures(count).iter().map(i64::to_string));
        lines.push(line);
    }
    let mut totals = vec!["total".to_string(), String::new()];
    totals.extend(report.totals().iter().map(i64::to_string));
    lines.push(totals);
    let heading = format!(
        "workspace {} ({}), returns requested {} to {}\n",
        report.workspace_id, report.timezone, report.from, report.to
    );
    aligned(heading, &lines, 2)
}

/// `heading`, then `lines` as columns two spaces apart, the first `keys` left-aligned and
/// the figures after them right-aligned.
fn aligned(heading: String, lines: &[Vec<String>], keys: usize) -> String {
    let widths: Vec<usize> = (0..lines.first().map_or(0, Vec::len))
        .map(|column| lines.iter().map(|l| l[column].len()).max().unwrap_or(0))
        .collect();
    let mut text = heading;
    for line in lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(at, (cell, width))| {
                if at < keys {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

/// The workspace when there is only one (archived ones left out).
fn only_workspace(conn: &rusqlite::Connection) -> Result<String, RunError> {
    let ids: Vec<String> = conn
        .prepare("SELECT id FROM workspaces WHERE archived_at IS NULL ORDER BY id")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    match ids.len() {
        0 => Err(RunError::NoWorkspace),
        1 => Ok(ids.into_iter().next().expect("the list has one id")),
        n => Err(RunError::WhichWorkspace(n)),
    }
}

/// The report as an aligned text table: a heading line, a header, one line per row and
/// a totals line.
fn table(report: &Report) -> String {
    let header: Vec<String> = report
        .query
        .by
        .iter()
        .map(|b| b.as_str().to_string())
        .chain(crate::report::csv::COLUMNS.iter().map(|c| c.to_string()))
        .collect();
    let mut lines = vec![header];
    for row in &report.rows {
        lines.push(
            row.keys
                .iter()
                .map(|k| k.clone().unwrap_or_else(|| "-".into()))
                .chain(crate::report::csv::fields(&row.figures))
                .collect(),
        );
    }
    let mut totals: Vec<String> = report.query.by.iter().map(|_| String::new()).collect();
    if let Some(first) = totals.first_mut() {
        *first = "total".into();
    }
    totals.extend(crate::report::csv::fields(&report.totals));
    lines.push(totals);
    let heading = format!(
        "workspace {} ({}), {} to {}\n",
        report.query.workspace_id, report.timezone, report.query.from, report.query.to
    );
    aligned(heading, &lines, report.query.by.len())
}
