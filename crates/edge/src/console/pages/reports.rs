//! `/reports` and `/reports.csv`: the report of DESIGN.md section 11, shown as a table with
//! its totals and downloaded as CSV.
//!
//! The report is the `report` module's (`report::run` on the aggregate the writer keeps)
//! and the CSV is `report::csv::write_report`, byte for byte what `leadrelay report --csv`
//! prints; this page owns only the form (`workspace`, `from`, `to`, `by` repeated, with
//! the CLI's defaults: the only or first workspace, the last 7 local days, by day), the
//! names it shows beside the ids, and how bad input is answered (the form again with the
//! problems, 400).

use std::collections::HashMap;

use hyper::StatusCode;
use hyper::header::{CONTENT_DISPOSITION, HeaderValue};
use jiff::civil::Date;
use maud::{Markup, html};
use rusqlite::Connection;

use crate::console::layout::{self, Zone, money, rate};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::http::error::Error;
use crate::http::{Response, response};
use crate::report::{By, Figures, Report, ReportError, ReportQuery};

/// The most periods (days, weeks or months) one report may show here: 10 years of days is
/// still a page a browser shows, and a mistyped year (`0026-11-01`) is answered with a
/// message instead of a table of 700,000 days. Without a period dimension the rows are
/// sources, buyers and products, whatever the dates.
const MAX_PERIODS: i64 = 3660;

/// How many `by` choices the form offers (the dimensions nest in the order chosen).
const BY_SLOTS: usize = 3;

/// The form's fields as sent (empty ones as absent).
#[derive(Debug, Default, Clone)]
struct Asked {
    workspace: Option<String>,
    from: Option<String>,
    to: Option<String>,
    by: Vec<String>,
}

impl Asked {
    fn parse(query: &str) -> Asked {
        let mut asked = Asked::default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            let value = value.trim().to_string();
            if value.is_empty() {
                continue;
            }
            match &*name {
                "workspace" => asked.workspace = Some(value),
                "from" => asked.from = Some(value),
                "to" => asked.to = Some(value),
                "by" => asked.by.push(value),
                _ => {}
            }
        }
        asked
    }

    /// The dates and dimensions, or what is wrong with them (each naming its field).
    fn check(&self) -> Result<Checked, Vec<String>> {
        let mut problems = Vec::new();
        let mut date = |field: &str, text: &Option<String>| -> Option<Date> {
            let text = text.as_deref()?;
            match text.parse::<Date>() {
                Ok(date) => Some(date),
                Err(_) => {
                    problems.push(format!(
                        "{field}: expected a date like 2026-11-23, not '{text}'"
                    ));
                    None
                }
            }
        };
        let from = date("from", &self.from);
        let to = date("to", &self.to);
        let mut by = Vec::new();
        for text in &self.by {
            match By::parse(text) {
                Ok(b) if by.contains(&b) => problems.push(format!("by: {text} is chosen twice")),
                Ok(b) => by.push(b),
                Err(message) => problems.push(format!("by: {message}")),
            }
        }
        if problems.is_empty() {
            Ok((from, to, by))
        } else {
            Err(problems)
        }
    }
}

/// The form's dates (`None`: the default) and dimensions, read.
type Checked = (Option<Date>, Option<Date>, Vec<By>);

/// A workspace the form offers.
struct Workspace {
    id: String,
    name: String,
}

/// What a request made: the report (with the names of its ids), or the problems.
struct Made {
    zone: Zone,
    workspaces: Vec<Workspace>,
    /// The form's values as resolved (defaults filled in when the input was good).
    shown: Asked,
    outcome: Result<(Report, Names), Vec<String>>,
    /// The period's returns: the return rate per source, supplier and buyer, and the
    /// returns per reason code (DESIGN.md section 19).
    returns: Option<Returns>,
}

/// The returns section of the page, for the workspace and period of the report.
struct Returns {
    /// A report by source, one by supplier and one by buyer.
    rates: Vec<(By, Report)>,
    names: Names,
    reasons: crate::lifecycle::returns::ReasonReport,
}

/// Reads the returns section for `query`'s workspace and dates.
fn returns(conn: &Connection, query: &ReportQuery) -> Result<Returns, ReportError> {
    let dimensions = [By::Source, By::Supplier, By::Buyer];
    let mut rates = Vec::new();
    for by in dimensions {
        let cut = ReportQuery {
            by: vec![by],
            ..query.clone()
        };
        rates.push((by, crate::report::run(conn, &cut)?));
    }
    Ok(Returns {
        rates,
        names: names(conn, &dimensions)?,
        reasons: crate::lifecycle::returns::reason_report(
            conn,
            &query.workspace_id,
            query.from,
            query.to,
        )?,
    })
}

/// Names of the ids a report's rows carry, by dimension.
type Names = HashMap<By, HashMap<String, String>>;

/// Reads the workspaces, resolves the defaults and runs the report, in one read job.
fn make(conn: &Connection, asked: &Asked, now_ms: i64) -> Result<Made, DbError> {
    let zone = Zone::of(conn)?;
    let workspaces: Vec<Workspace> = conn
        .prepare_cached("SELECT id, name FROM workspaces WHERE archived_at IS NULL ORDER BY id")?
        .query_map([], |row| {
            Ok(Workspace {
                id: row.get(0)?,
                name: row.get(1)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let mut shown = asked.clone();
    let outcome = (|| -> Result<(Report, Names), Problem> {
        let (from, to, by) = asked.check()?;
        let workspace_id = match (&asked.workspace, workspaces.first()) {
            (Some(id), _) => id.clone(),
            (None, Some(first)) => first.id.clone(),
            (None, None) => {
                return Err(Problem::Input(vec![
                    "there is no workspace yet: leadrelay workspace create adds one".into(),
                ]));
            }
        };
        let tz = crate::caps::timezone_of(conn, &workspace_id).map_err(DbError::from)?;
        let today = jiff::Timestamp::from_millisecond(now_ms)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
            .to_zoned(tz)
            .date();
        let to = to.unwrap_or(today);
        let from = from.unwrap_or_else(|| to.checked_sub(jiff::Span::new().days(6)).unwrap_or(to));
        let by = if by.is_empty() { vec![By::Day] } else { by };
        shown = Asked {
            workspace: Some(workspace_id.clone()),
            from: Some(from.to_string()),
            to: Some(to.to_string()),
            by: by.iter().map(|b| b.as_str().to_string()).collect(),
        };
        let days = from.until(to).map_or(0, |span| i64::from(span.get_days()));
        let step = [(By::Day, 1), (By::Week, 7), (By::Month, 28)]
            .into_iter()
            .find(|(b, _)| by.contains(b));
        if let Some((b, step_days)) = step
            && days / step_days >= MAX_PERIODS
        {
            return Err(Problem::Input(vec![format!(
                "from {from} to {to} by {} is more than {MAX_PERIODS} rows: choose a shorter \
                 period or a longer step (week, month)",
                b.as_str()
            )]));
        }
        let query = ReportQuery {
            workspace_id,
            from,
            to,
            by,
        };
        let report = crate::report::run(conn, &query).map_err(|e| match e {
            ReportError::Db(e) => Problem::Db(DbError::from(e)),
            other => Problem::Input(vec![other.to_string().replace("--by", "by")]),
        })?;
        let names = names(conn, &report.query.by).map_err(DbError::from)?;
        Ok((report, names))
    })();
    let outcome = match outcome {
        Ok(made) => Ok(made),
        Err(Problem::Input(problems)) => Err(problems),
        Err(Problem::Db(e)) => return Err(e),
    };
    let returns = match &outcome {
        Ok((report, _)) => match returns(conn, &report.query) {
            Ok(returns) => Some(returns),
            Err(ReportError::Db(e)) => return Err(DbError::from(e)),
            // The same workspace and dates made the report just now: nothing else can
            // refuse them.
            Err(_) => None,
        },
        Err(_) => None,
    };
    Ok(Made {
        zone,
        workspaces,
        shown,
        outcome,
        returns,
    })
}

/// Why a report was not made: the operator's input, or the file.
enum Problem {
    Input(Vec<String>),
    Db(DbError),
}

impl From<Vec<String>> for Problem {
    fn from(problems: Vec<String>) -> Problem {
        Problem::Input(problems)
    }
}

impl From<DbError> for Problem {
    fn from(e: DbError) -> Problem {
        Problem::Db(e)
    }
}

/// The names of every source, supplier, buyer and product the dimensions show (a few
/// hundred rows at most: configuration, not data).
fn names(conn: &Connection, by: &[By]) -> rusqlite::Result<Names> {
    let mut names = Names::new();
    for b in by {
        let sql = match b {
            By::Source => "SELECT id, name FROM sources",
            By::Supplier => "SELECT id, name FROM suppliers",
            By::Buyer => "SELECT id, name FROM buyers",
            By::Product => "SELECT id, name FROM products",
            By::Day | By::Week | By::Month => continue,
        };
        let found = conn
            .prepare_cached(sql)?
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        names.insert(*b, found);
    }
    Ok(names)
}

/// `GET /reports`.
pub(crate) async fn get(db: &Db, operator: &Session, query: &str) -> Result<Response, Error> {
    let asked = Asked::parse(query);
    let now = crate::clock::now_ms();
    let made = db.read(move |conn| make(conn, &asked, now)).await?;
    Ok(page(operator, &made))
}

/// `GET /reports.csv`: the same report as `leadrelay report --csv`, as a download; bad
/// input gets the form page with the problems (400), as `/reports` does.
pub(crate) async fn csv(db: &Db, operator: &Session, query: &str) -> Result<Response, Error> {
    let asked = Asked::parse(query);
    let now = crate::clock::now_ms();
    let made = db.read(move |conn| make(conn, &asked, now)).await?;
    let Ok((report, _)) = &made.outcome else {
        return Ok(page(operator, &made));
    };
    let mut bytes = Vec::new();
    crate::report::csv::write_report(&mut bytes, report)
        .expect("writing CSV into memory cannot fail");
    let mut answer = response::text(StatusCode::OK, "text/csv; charset=utf-8", bytes);
    // Workspace ids and dates hold only letters, digits, `-`, `_` and `.`
    // (`ids::is_valid`), so the name needs no escaping.
    let filename = format!(
        "attachment; filename=\"leadrelay-report-{}-{}-{}.csv\"",
        report.query.workspace_id, report.query.from, report.query.to
    );
    let value = HeaderValue::from_str(&filename)
        .unwrap_or_else(|_| HeaderValue::from_static("attachment; filename=\"report.csv\""));
    answer.headers_mut().insert(CONTENT_DISPOSITION, value);
    Ok(answer)
}

/// The page: the form, then the report or the problems (400).
fn page(operator: &Session, made: &Made) -> Response {
    let status = if made.outcome.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let body = html! {
        (form(made))
        @match &made.outcome {
            Ok((report, names)) => {
                (table(report, names))
                @if let Some(returns) = &made.returns { (returns_section(returns)) }
            }
            Err(problems) => {
                div class="problems" id="report-problems" role="alert" {
                    @for problem in problems { p class="problem" { (problem) } }
                }
            }
        }
    };
    layout::page(status, "Reports", "/reports", operator, &made.zone, body)
}

fn form(made: &Made) -> Markup {
    let shown = &made.shown;
    let chosen = |slot: usize| shown.by.get(slot).map(String::as_str).unwrap_or("");
    html! {
        form class="report" method="get" action="/reports" id="report-form" {
            @if made.workspaces.len() > 1 {
                label {
                    "Workspace "
                    select name="workspace" {
                        @for ws in &made.workspaces {
                            option value=(ws.id) selected[shown.workspace.as_deref() == Some(&*ws.id)] {
                                (ws.name) " (" (ws.id) ")"
                            }
                        }
                    }
                }
            }
            label { "From " input type="date" name="from" value=(shown.from.as_deref().unwrap_or("")); }
            label { "To " input type="date" name="to" value=(shown.to.as_deref().unwrap_or("")); }
            @for slot in 0..BY_SLOTS {
                label {
                    @if slot == 0 { "By " } @else { "then " }
                    select name="by" {
                        option value="" selected[chosen(slot).is_empty()] { "–" }
                        @for b in By::ALL {
                            option value=(b.as_str()) selected[chosen(slot) == b.as_str()] { (b.as_str()) }
                        }
                    }
                }
            }
            button type="submit" { "Show" }
        }
    }
}

/// The query string that asks for `report` again (the CSV link).
fn query_of(report: &Report) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("workspace", &report.query.workspace_id);
    query.append_pair("from", &report.query.from.to_string());
    query.append_pair("to", &report.query.to.to_string());
    for b in &report.query.by {
        query.append_pair("by", b.as_str());
    }
    query.finish()
}

/// The column headings after the `by` keys, in `report::csv::COLUMNS`' order.
const HEADINGS: [&str; 12] = [
    "Received",
    "Accepted",
    "Duplicates",
    "Rejected",
    "Sold",
    "Acknowledged",
    "Returned",
    "Paid",
    "Revenue",
    "Supplier cost",
    "Margin",
    "Return rate",
];

fn table(report: &Report, names: &Names) -> Markup {
    let by = &report.query.by;
    html! {
        p class="note" id="report-heading" {
            "Workspace " strong { (report.query.workspace_id) } " (" (report.timezone) "), "
            (report.query.from) " to " (report.query.to) ", by "
            (by.iter().map(|b| b.as_str()).collect::<Vec<_>>().join(", ")) ". "
            a href={ "/reports.csv?" (query_of(report)) } download id="report-csv" { "Download CSV" }
        }
        div class="scroll" {
            table class="list numbers" id="report" {
                thead { tr {
                    @for b in by { th { (b.as_str()) } }
                    @for heading in HEADINGS { th class="n" { (heading) } }
                } }
                tbody {
                    @for row in &report.rows {
                        tr class="row" {
                            @for (b, key) in by.iter().zip(&row.keys) {
                                @if matches!(b, By::Day | By::Week | By::Month) {
                                    td class="period" { (key_cell(*b, key.as_deref(), names)) }
                                } @else {
                                    td { (key_cell(*b, key.as_deref(), names)) }
                                }
                            }
                            (figure_cells(&row.figures))
                        }
                    }
                }
                tfoot {
                    tr class="total" {
                        th scope="row" colspan=(by.len().max(1)) { "Total" }
                        (figure_cells(&report.totals))
                    }
                }
            }
        }
        @if report.rows.is_empty() {
            (layout::none_yet("Nothing in this period."))
        }
        p class="note" {
            "Received counts every lead a source sent (accepted, duplicates, rejected by \
             validation); sold, revenue and margin count transactions on the day they were \
             delivered. Returned: rejected or cancelled by the buyer; revenue leaves them out."
        }
    }
}

/// Return rates per source, supplier and buyer, and the returns per reason code.
fn returns_section(returns: &Returns) -> Markup {
    html! {
        h2 id="returns" { "Returns" }
        div class="scroll" {
            table class="list numbers" id="return-rates" {
                thead { tr {
                    th { "By" } th { "Of" }
                    th class="n" { "Sold" } th class="n" { "Returned" } th class="n" { "Return rate" }
                } }
                tbody {
                    @for (by, report) in &returns.rates {
                        @for row in &report.rows {
                            @if row.figures.sold > 0 {
                                tr class="row" {
                                    td { (by.as_str()) }
                                    td { (key_cell(*by, row.keys[0].as_deref(), &returns.names)) }
                                    td class="n" { (row.figures.sold) }
                                    td class="n" { (row.figures.returned) }
                                    td class="n" { (rate(row.figures.returned, row.figures.sold)) }
                                }
                            }
                        }
                    }
                }
            }
        }
        div class="scroll" {
            table class="list numbers" id="return-reasons" {
                thead { tr {
                    th { "Reason" }
                    th class="n" { "Requested" } th class="n" { "Pending" }
                    th class="n" { "Approved" } th class="n" { "Denied" }
                } }
                tbody {
                    @for (label, count) in &returns.reasons.rows {
                        tr class="row" {
                            td {
                                (label.as_deref().unwrap_or(&count.reason_code))
                                " " span class="id" { (count.reason_code) }
                            }
                            td class="n" { (count.requested) }
                            td class="n" { (count.pending) }
                            td class="n" { (count.approved) }
                            td class="n" { (count.denied) }
                        }
                    }
                }
            }
        }
        @if returns.reasons.rows.is_empty() {
            (layout::none_yet("No returns requested in this period."))
        }
        p class="note" {
            "Return rate: transactions returned (rejected or cancelled by the buyer, approved \
             returns) per transaction sold in the period. A return waiting for review counts \
             once it is approved; the reasons count every return requested."
        }
    }
}

/// A dimension's value: a period as named, an id with its name, `–` where the row has none
/// (the buyer of lead counts).
fn key_cell(by: By, key: Option<&str>, names: &Names) -> Markup {
    let Some(key) = key else {
        return html! { span class="none" { "–" } };
    };
    match names.get(&by).and_then(|n| n.get(key)) {
        Some(name) if name != key => html! { (name) " " span class="id" { (key) } },
        _ => html! { (key) },
    }
}

fn figure_cells(f: &Figures) -> Markup {
    html! {
        td class="n" { (f.received) }
        td class="n" { (f.accepted) }
        td class="n" { (f.duplicates) }
        td class="n" { (f.rejected) }
        td class="n" { (f.sold) }
        td class="n" { (f.acknowledged) }
        td class="n" { (f.returned) }
        td class="n" { (f.paid) }
        td class="n" { (money(f.revenue_cents)) }
        td class="n" { (money(f.supplier_cost_cents)) }
        td class="n" { (money(f.margin_cents())) }
        td class="n" { (rate(f.returned, f.sold)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_reads_repeated_dimensions_in_order_and_ignores_empty_fields() {
        let asked = Asked::parse("from=2026-11-01&to=&by=buyer&by=&by=day&x=1");
        assert_eq!(asked.from.as_deref(), Some("2026-11-01"));
        assert_eq!(asked.to, None);
        assert_eq!(asked.by, ["buyer", "day"]);
        let (from, to, by) = asked.check().unwrap();
        assert_eq!(from, Some(jiff::civil::date(2026, 11, 1)));
        assert_eq!(to, None);
        assert_eq!(by, [By::Buyer, By::Day]);
    }

    #[test]
    fn every_bad_field_is_named() {
        let problems = Asked::parse("from=2026-13-01&to=soon&by=hour&by=day&by=day")
            .check()
            .unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].starts_with("from: expected a date"));
        assert!(problems[1].contains("not 'soon'"));
        assert!(problems[2].starts_with("by: unknown dimension 'hour'"));
        assert_eq!(problems[3], "by: day is chosen twice");
    }
}
