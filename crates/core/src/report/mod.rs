//! Reports (DESIGN.md section 11): what came in, what sold and what it earned, per day,
//! week or month of the workspace's time zone and per source, supplier, buyer or product,
//! from an aggregate the writer keeps current.
//!
//! Owns the `report_buckets` and `report_days` tables (`buckets.rs`: their writes, hooks
//! the owners of leads and transactions call in the job of their change, and the recount
//! `check` compares them with) and the report made from them ([`run`]; `csv.rs` writes one
//! as CSV). A bucket row is one workspace × quarter hour (UTC) × source × buyer × product:
//! quarter hours because every time zone's offset is a multiple of 15 minutes, so a bucket
//! lies in one local day whatever zone the workspace has when the report is read. A day row
//! is the same per UTC day (migration 19). A report reads the whole UTC days of each of
//! its periods from the days and the quarter hours at the periods' edges from the buckets
//! ([`buckets::spans`]), each a range of the primary key, so it costs what the period's
//! rows cost, not what the file holds. It does not own leads, transactions or money: it
//! only counts them.
//!
//! Lead-side figures (received, accepted, duplicates, rejected) count on the quarter hour
//! the lead was received, under its source and the product of its first interest, with no
//! buyer. Transaction-side figures count on the quarter hour the transaction was delivered,
//! under its lead's source, its buyer and product. The supplier of a row is its source's
//! supplier as configured when the report is read.

pub mod buckets;
pub mod csv;

use crate::db::PrepareKept;
use std::collections::HashMap;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

pub(crate) use buckets::{
    Counted, Received, Standing, leads_received, mismatches, transaction_changed,
};
pub use buckets::{ROLLUP, Rollup};

/// The counters and sums of a report row (and of a bucket row, and of the totals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Leads received: accepted + duplicates + rejected.
    pub received: i64,
    /// Stored as unique.
    pub accepted: i64,
    /// Matched an earlier lead (kept for review, or dropped under a `reject` rule).
    pub duplicates: i64,
    /// Failed validation (not stored).
    pub rejected: i64,
    /// Received but not stored (failed validation, rejected duplicates): what `check`
    /// cannot recount. Not a report column.
    pub(crate) dropped: i64,
    /// Transactions delivered.
    pub sold: i64,
    /// Transactions acknowledged, payout pending or paid.
    pub acknowledged: i64,
    /// Transactions the buyer rejected or cancelled (a void is a cancellation).
    pub returned: i64,
    pub paid: i64,
    /// Buyer prices of the transactions neither rejected nor cancelled.
    pub revenue_cents: i64,
    /// Supplier costs of the leads sold, each once (on the transaction that bought it)
    /// whatever the buyer did, until the supplier's confirmed cancellation reverses it: what
    /// the suppliers' ledgers hold.
    pub supplier_cost_cents: i64,
}

impl Figures {
    fn add(&mut self, other: &Figures) {
        self.received += other.received;
        self.accepted += other.accepted;
        self.duplicates += other.duplicates;
        self.rejected += other.rejected;
        self.dropped += other.dropped;
        self.sold += other.sold;
        self.acknowledged += other.acknowledged;
        self.returned += other.returned;
        self.paid += other.paid;
        self.revenue_cents += other.revenue_cents;
        self.supplier_cost_cents += other.supplier_cost_cents;
    }

    fn minus(&self, other: &Figures) -> Figures {
        Figures {
            received: self.received - other.received,
            accepted: self.accepted - other.accepted,
            duplicates: self.duplicates - other.duplicates,
            rejected: self.rejected - other.rejected,
            dropped: self.dropped - other.dropped,
            sold: self.sold - other.sold,
            acknowledged: self.acknowledged - other.acknowledged,
            returned: self.returned - other.returned,
            paid: self.paid - other.paid,
            revenue_cents: self.revenue_cents - other.revenue_cents,
            supplier_cost_cents: self.supplier_cost_cents - other.supplier_cost_cents,
        }
    }

    fn is_zero(&self) -> bool {
        *self == Figures::default()
    }

    pub fn margin_cents(&self) -> i64 {
        self.revenue_cents - self.supplier_cost_cents
    }

    /// Returned transactions per transaction sold, to four decimals; `None` when none sold.
    pub(crate) fn return_rate(&self) -> Option<f64> {
        (self.sold > 0).then(|| {
            let rate = self.returned as f64 / self.sold as f64;
            (rate * 10_000.0).round() / 10_000.0
        })
    }

    /// The report's columns as JSON (`--json`), money as JSON numbers like every amount.
    pub(crate) fn view(self) -> FiguresView {
        FiguresView {
            received: self.received,
            accepted: self.accepted,
            duplicates: self.duplicates,
            rejected: self.rejected,
            sold: self.sold,
            acknowledged: self.acknowledged,
            returned: self.returned,
            paid: self.paid,
            revenue: crate::money::as_f64(self.revenue_cents),
            supplier_cost: crate::money::as_f64(self.supplier_cost_cents),
            margin: crate::money::as_f64(self.margin_cents()),
            return_rate: self.return_rate(),
        }
    }
}

/// The columns of a report row or its totals.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FiguresView {
    received: i64,
    accepted: i64,
    duplicates: i64,
    rejected: i64,
    sold: i64,
    acknowledged: i64,
    returned: i64,
    paid: i64,
    revenue: f64,
    supplier_cost: f64,
    margin: f64,
    return_rate: Option<f64>,
}

/// A dimension a report is cut by (`--by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum By {
    Day,
    Week,
    Month,
    Source,
    Supplier,
    Buyer,
    Product,
}

impl By {
    pub const ALL: [By; 7] = [
        By::Day,
        By::Week,
        By::Month,
        By::Source,
        By::Supplier,
        By::Buyer,
        By::Product,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            By::Day => "day",
            By::Week => "week",
            By::Month => "month",
            By::Source => "source",
            By::Supplier => "supplier",
            By::Buyer => "buyer",
            By::Product => "product",
        }
    }

    /// `--by`'s value (and the console's `by` parameter).
    pub fn parse(text: &str) -> Result<By, String> {
        By::ALL
            .into_iter()
            .find(|by| by.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "unknown dimension '{text}': use day, week, month, source, supplier, buyer \
                     or product"
                )
            })
    }

    fn is_time(self) -> bool {
        matches!(self, By::Day | By::Week | By::Month)
    }
}

/// What to report: one workspace's local dates `from` to `to` (both included), cut by
/// `by` in that order (none: one row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportQuery {
    pub workspace_id: String,
    pub from: Date,
    pub to: Date,
    pub by: Vec<By>,
}

/// One row: its value of each `by` dimension (in the query's order; `None` where the row
/// has none, e.g. the buyer of lead counts, or the supplier of a source without one) and
/// its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRow {
    pub keys: Vec<Option<String>>,
    pub figures: Figures,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub query: ReportQuery,
    /// The workspace's time zone the dates are in.
    pub timezone: String,
    pub rows: Vec<ReportRow>,
    pub totals: Figures,
}

impl Report {
    /// `{"from", "to", "by", "rows", "totals"}` (DESIGN.md section 11) with the workspace
    /// and its time zone; each row has its `by` keys, then every column.
    pub fn view(&self) -> ReportView<'_> {
        ReportView {
            workspace_id: &self.query.workspace_id,
            timezone: &self.timezone,
            from: self.query.from.to_string(),
            to: self.query.to.to_string(),
            by: self.query.by.iter().map(|b| b.as_str()).collect(),
            rows: self
                .rows
                .iter()
                .map(|row| ReportRowView {
                    keys: RowKeys {
                        by: &self.query.by,
                        keys: &row.keys,
                    },
                    figures: row.figures.view(),
                })
                .collect(),
            totals: self.totals.view(),
        }
    }

    /// [`Report::view`] as a JSON value, for callers that print one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// `report --json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportView<'a> {
    workspace_id: &'a str,
    timezone: &'a str,
    from: String,
    to: String,
    by: Vec<&'static str>,
    rows: Vec<ReportRowView<'a>>,
    totals: FiguresView,
}

/// A row: its key under each `by` dimension's name, then the columns.
#[derive(Debug, Serialize)]
pub struct ReportRowView<'a> {
    #[serde(flatten)]
    keys: RowKeys<'a>,
    #[serde(flatten)]
    figures: FiguresView,
}

/// A row's keys, named by the query's dimensions (which the query decides, so a map).
#[derive(Debug)]
struct RowKeys<'a> {
    by: &'a [By],
    keys: &'a [Option<String>],
}

impl Serialize for RowKeys<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.by.iter().map(|by| by.as_str()).zip(self.keys))
    }
}

/// Why a report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("unknown workspace '{0}'")]
    UnknownWorkspace(String),
    #[error("the report starts ({from}) after it ends ({to})")]
    Backwards { from: Date, to: Date },
    #[error("--by {0} is given twice")]
    Repeated(&'static str),
    #[error(transparent)]
    Db(#[from] rusqlite::Error),
}

/// The workspace's time zone: its name and the zone (UTC when the bundled database no
/// longer knows the name).
fn timezone(conn: &Connection, workspace_id: &str) -> Result<(String, TimeZone), ReportError> {
    let name: String = conn
        .prepare_kept("SELECT timezone FROM workspaces WHERE id = ?1")?
        .query_row([workspace_id], |row| row.get(0))
        .optional()?
        .ok_or_else(|| ReportError::UnknownWorkspace(workspace_id.to_string()))?;
    let zone = TimeZone::get(&name).unwrap_or(TimeZone::UTC);
    Ok((name, zone))
}

/// The start of local `date` in `tz`, in ms UTC.
fn start_of(date: Date, tz: &TimeZone) -> i64 {
    date.to_zoned(tz.clone())
        .map(|z| z.timestamp().as_millisecond())
        // Only the last dates jiff knows fail; a report cannot reach past them.
        .unwrap_or(i64::MAX)
}

/// The first day of the period of `by` (a time dimension) that holds `date`: the date
/// itself, its week's Monday (ISO 8601 weeks) or the first of its month.
fn period_start(by: By, date: Date) -> Date {
    match by {
        By::Week => {
            let back = i64::from(date.weekday().to_monday_zero_offset());
            date.checked_sub(jiff::Span::new().days(back))
                .unwrap_or(date)
        }
        By::Month => date.first_of_month(),
        _ => date,
    }
}

/// How a period of `by` is named: `2026-11-23` for a day or a week (its Monday),
/// `2026-11` for a month.
fn period_name(by: By, start: Date) -> String {
    match by {
        By::Month => format!("{:04}-{:02}", start.year(), start.month()),
        _ => start.to_string(),
    }
}

/// The periods of `by` that overlap `from`..=`to`, by their first day, in order.
fn periods(by: By, from: Date, to: Date) -> Vec<Date> {
    let mut found = Vec::new();
    let mut day = period_start(by, from);
    while day <= to {
        found.push(day);
        let next = match by {
            By::Week => day.checked_add(jiff::Span::new().days(7)),
            By::Month => day.checked_add(jiff::Span::new().months(1)),
            _ => day.tomorrow(),
        };
        match next {
            Ok(next) => day = next,
            Err(_) => break,
        }
    }
    found
}

/// The number of the period of `by` holding `date`, counted from the one holding `from`
/// (0): days, weeks or months later.
fn period_offset(by: By, from: Date, date: Date) -> u32 {
    let (first, this) = (period_start(by, from), period_start(by, date));
    let offset = match by {
        By::Month => {
            (i64::from(this.year()) * 12 + i64::from(this.month()))
                - (i64::from(first.year()) * 12 + i64::from(first.month()))
        }
        _ => {
            let days = first
                .until(this)
                .map_or(0, |span| i64::from(span.get_days()));
            if by == By::Week { days / 7 } else { days }
        }
    };
    u32::try_from(offset).unwrap_or(0)
}

/// The first day of period number `offset` of `by` from the one holding `from`
/// ([`period_offset`] the other way).
fn period_at(by: By, from: Date, offset: u32) -> Date {
    let first = period_start(by, from);
    let span = match by {
        By::Day => jiff::Span::new().days(i64::from(offset)),
        By::Week => jiff::Span::new().weeks(i64::from(offset)),
        _ => jiff::Span::new().months(i64::from(offset)),
    };
    first.checked_add(span).unwrap_or(first)
}

/// Names the values of one dimension by small numbers while the rows are read, so that
/// grouping costs no allocation per row. 0 is "none".
struct Names {
    ids: HashMap<String, u32>,
    names: Vec<Option<String>>,
}

impl Default for Names {
    fn default() -> Names {
        Names {
            ids: HashMap::new(),
            names: vec![None],
        }
    }
}

impl Names {
    fn id(&mut self, name: Option<&str>) -> u32 {
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            return 0;
        };
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(name.to_string(), id);
        self.names.push(Some(name.to_string()));
        id
    }
}

/// The sums a report reads of the bucket rows, in the order of [`Figures`]' fields.
const SUMS: &str = "sum(received), sum(accepted), sum(duplicates), sum(rejected), sum(dropped), \
    sum(sold), sum(acknowledged), sum(returned), sum(paid), sum(revenue_cents), \
    sum(supplier_cost_cents)";

/// The statement summing one range of the aggregate's table of `grain` for dimensions `by`
/// (values: the workspace, the start and the end of the range), and the columns it groups
/// by, first in each row. It groups by the shortest prefix of the primary key after the
/// workspace (`bucket` or `day`, `source_id, buyer_id, product_id`) that holds every column
/// the dimensions need: the rows come in that order, so SQLite sums each group as it reads
/// it, with no sort. (Grouping by the needed columns alone, `GROUP BY buyer_id`, sorted the
/// whole period's rows first: 3.6 times the time of a report by day.) The time is never
/// needed itself: [`run`] reads each period's ranges on their own ([`segments`]) and adds
/// the groups up by the dimensions' values.
fn bucket_query(by: &[By], grain: buckets::Grain) -> (String, Vec<&'static str>) {
    let (table, time) = grain.table();
    let needs = |dims: &[By]| by.iter().any(|b| dims.contains(b));
    let deepest = [
        (needs(&[By::Source, By::Supplier]), 2),
        (needs(&[By::Buyer]), 3),
        (needs(&[By::Product]), 4),
    ]
    .into_iter()
    .filter_map(|(wanted, depth)| wanted.then_some(depth))
    .max()
    .unwrap_or(0);
    let columns = [time, "source_id", "buyer_id", "product_id"][..deepest].to_vec();
    let sql = if columns.is_empty() {
        format!(
            "SELECT {SUMS} FROM {table}
             WHERE workspace_id = ?1 AND {time} >= ?2 AND {time} < ?3"
        )
    } else {
        // Each name is a constant of the list above.
        let list = columns.join(", ");
        format!(
            "SELECT {list}, {SUMS} FROM {table}
             WHERE workspace_id = ?1 AND {time} >= ?2 AND {time} < ?3
             GROUP BY {list}"
        )
    };
    (sql, columns)
}

/// The report's range cut where any of its time dimensions' periods starts: each part is
/// (its first local date, its start and its end in ms UTC) and lies in one period of each.
/// Without a time dimension, the whole range.
fn segments(query: &ReportQuery, tz: &TimeZone, start: i64, end: i64) -> Vec<(Date, i64, i64)> {
    let mut firsts = vec![query.from];
    for by in query.by.iter().filter(|b| b.is_time()) {
        firsts.extend(
            periods(*by, query.from, query.to)
                .into_iter()
                .filter(|first| *first > query.from),
        );
    }
    firsts.sort();
    firsts.dedup();
    let starts: Vec<i64> = firsts
        .iter()
        .enumerate()
        .map(|(at, date)| if at == 0 { start } else { start_of(*date, tz) })
        .collect();
    firsts
        .iter()
        .zip(&starts)
        .enumerate()
        .map(|(at, (date, from))| (*date, *from, starts.get(at + 1).copied().unwrap_or(end)))
        .collect()
}

/// Grouped column `at` of `row` (then the next) as SQLite holds its text, without a copy
/// per row; `None` when the dimensions do not ask for it.
fn grouped_text<'r>(
    row: &'r rusqlite::Row,
    at: &mut usize,
    wanted: bool,
) -> rusqlite::Result<Option<&'r str>> {
    let value = row.get_ref(*at)?.as_str()?;
    *at += 1;
    Ok(wanted.then_some(value))
}

/// Makes the report: cuts the range into the workspace's local days, weeks and months
/// ([`segments`]), reads each part's whole UTC days and edge quarter hours
/// ([`buckets::spans`]), sums them in SQLite by a prefix of the key ([`bucket_query`]) and
/// adds those sums up by the dimensions' values. When every dimension is a period, every
/// period of the range has a row, also one without data.
/// The workspace's time zone (its name and the zone) and the UTC range `[start, end)` in ms
/// of its local dates `from` to `to`, both included: what a report of those dates reads.
pub fn local_range(
    conn: &Connection,
    workspace_id: &str,
    from: Date,
    to: Date,
) -> Result<(String, TimeZone, i64, i64), ReportError> {
    if from > to {
        return Err(ReportError::Backwards { from, to });
    }
    let (timezone_name, tz) = timezone(conn, workspace_id)?;
    let start = start_of(from, &tz);
    let end = to.tomorrow().map_or(i64::MAX, |next| start_of(next, &tz));
    Ok((timezone_name, tz, start, end))
}

pub fn run(conn: &Connection, query: &ReportQuery) -> Result<Report, ReportError> {
    for (at, by) in query.by.iter().enumerate() {
        if query.by[..at].contains(by) {
            return Err(ReportError::Repeated(by.as_str()));
        }
    }
    let (timezone_name, tz, start, end) =
        local_range(conn, &query.workspace_id, query.from, query.to)?;
    let needs = |dims: &[By]| query.by.iter().any(|b| dims.contains(b));
    let suppliers: HashMap<String, Option<String>> = if needs(&[By::Supplier]) {
        let mut stmt = conn.prepare_kept("SELECT id, supplier_id FROM sources")?;
        let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    } else {
        HashMap::new()
    };

    // Dimension values by number: a period by its first day's offset in `days`, the
    // others by `Names`.
    let mut names: HashMap<By, Names> = HashMap::new();
    let mut grouped: HashMap<[u32; 7], Figures> = HashMap::new();
    let mut totals = Figures::default();
    let (quarter_sql, columns) = bucket_query(&query.by, buckets::Grain::QuarterHour);
    let (day_sql, _) = bucket_query(&query.by, buckets::Grain::Day);
    let mut quarter_stmt = conn.prepare(&quarter_sql)?;
    let mut day_stmt = conn.prepare(&day_sql)?;
    for (date, from, to) in segments(query, &tz, start, end) {
        let mut period_key = [0u32; 7];
        for (slot, by) in period_key.iter_mut().zip(&query.by) {
            if by.is_time() {
                *slot = period_offset(*by, query.from, date);
            }
        }
        for span in buckets::spans(from, to) {
            let stmt = match span.grain {
                buckets::Grain::QuarterHour => &mut quarter_stmt,
                buckets::Grain::Day => &mut day_stmt,
            };
            let mut rows = stmt.query(params![query.workspace_id, span.from, span.to])?;
            while let Some(row) = rows.next()? {
                // The time column (when grouped) is not a dimension's value.
                let mut at = usize::from(!columns.is_empty());
                let source_id = if columns.contains(&"source_id") {
                    grouped_text(row, &mut at, needs(&[By::Source, By::Supplier]))?
                } else {
                    None
                };
                let buyer_id = if columns.contains(&"buyer_id") {
                    grouped_text(row, &mut at, needs(&[By::Buyer]))?
                } else {
                    None
                };
                let product_id = if columns.contains(&"product_id") {
                    grouped_text(row, &mut at, needs(&[By::Product]))?
                } else {
                    None
                };
                let sum = |at: &mut usize| -> rusqlite::Result<i64> {
                    let value: Option<i64> = row.get(*at)?;
                    *at += 1;
                    Ok(value.unwrap_or(0))
                };
                let figures = Figures {
                    received: sum(&mut at)?,
                    accepted: sum(&mut at)?,
                    duplicates: sum(&mut at)?,
                    rejected: sum(&mut at)?,
                    dropped: sum(&mut at)?,
                    sold: sum(&mut at)?,
                    acknowledged: sum(&mut at)?,
                    returned: sum(&mut at)?,
                    paid: sum(&mut at)?,
                    revenue_cents: sum(&mut at)?,
                    supplier_cost_cents: sum(&mut at)?,
                };
                if figures.is_zero() {
                    continue;
                }
                let mut key = period_key;
                for (slot, by) in key.iter_mut().zip(&query.by) {
                    *slot = match by {
                        By::Day | By::Week | By::Month => *slot,
                        By::Source => names.entry(By::Source).or_default().id(source_id),
                        By::Supplier => {
                            let supplier = source_id
                                .and_then(|s| suppliers.get(s))
                                .and_then(|s| s.as_deref());
                            names.entry(By::Supplier).or_default().id(supplier)
                        }
                        By::Buyer => names.entry(By::Buyer).or_default().id(buyer_id),
                        By::Product => names.entry(By::Product).or_default().id(product_id),
                    };
                }
                grouped.entry(key).or_default().add(&figures);
                totals.add(&figures);
            }
        }
    }

    if !query.by.is_empty() && query.by.iter().all(|b| b.is_time()) {
        // Every period of the range gets a row; several time dimensions (--by month
        // --by day) nest, so a row per day names its week and month too.
        let finest = [By::Day, By::Week, By::Month]
            .into_iter()
            .find(|b| query.by.contains(b))
            .expect("every dimension is a period, and there is one");
        for first in periods(finest, query.from, query.to) {
            let date = first.max(query.from);
            let mut key = [0u32; 7];
            for (slot, by) in key.iter_mut().zip(&query.by) {
                *slot = period_offset(*by, query.from, date);
            }
            grouped.entry(key).or_default();
        }
    }

    let name = |by: By, id: u32| -> Option<String> {
        match by {
            By::Day | By::Week | By::Month => Some(period_name(by, period_at(by, query.from, id))),
            _ => names
                .get(&by)
                .and_then(|n| n.names.get(id as usize).cloned().flatten()),
        }
    };
    let mut rows: Vec<ReportRow> = grouped
        .into_iter()
        .map(|(key, figures)| ReportRow {
            keys: query
                .by
                .iter()
                .zip(key)
                .map(|(by, id)| name(*by, id))
                .collect(),
            figures,
        })
        .collect();
    // Periods in time order (their names sort so), the others by id, "none" first.
    rows.sort_by(|a, b| a.keys.cmp(&b.keys));
    Ok(Report {
        query: query.clone(),
        timezone: timezone_name,
        rows,
        totals,
    })
}

/// The figures of every workspace from `start` to `end` (ms UTC, both on quarter hours, as
/// local midnights are): what a report of those times would total, read from the whole
/// UTC days' rows and the quarter hours at the edges ([`buckets::spans`]). The console's
/// overview reads its days so, so its money is the report's.
pub fn totals_between(conn: &Connection, start: i64, end: i64) -> rusqlite::Result<Figures> {
    let mut totals = Figures::default();
    for span in buckets::spans(start, end) {
        let (table, time) = span.grain.table();
        // The table and column names are constants of `Grain::table`.
        let sql = format!(
            "SELECT {SUMS} FROM {table}
             WHERE workspace_id IN (SELECT id FROM workspaces) AND {time} >= ?1 AND {time} < ?2"
        );
        let figures = conn
            .prepare_cached(&sql)?
            .query_row(params![span.from, span.to], |row| {
                let get = |at: usize| -> rusqlite::Result<i64> {
                    Ok(row.get::<_, Option<i64>>(at)?.unwrap_or(0))
                };
                Ok(Figures {
                    received: get(0)?,
                    accepted: get(1)?,
                    duplicates: get(2)?,
                    rejected: get(3)?,
                    dropped: get(4)?,
                    sold: get(5)?,
                    acknowledged: get(6)?,
                    returned: get(7)?,
                    paid: get(8)?,
                    revenue_cents: get(9)?,
                    supplier_cost_cents: get(10)?,
                })
            })?;
        totals.add(&figures);
    }
    Ok(totals)
}

#[cfg(test)]
mod tests;
