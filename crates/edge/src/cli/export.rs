//! `leadrelay lead export` and `transaction export` (DESIGN.md section 11): every matching
//! record with all its fields on stdout, as NDJSON (one JSON object a line) or CSV (RFC
//! 4180, a header line first), streamed: one record is read, written and dropped before
//! the next, so memory stays flat whatever the count, and there is no row limit.
//!
//! Owns the export flags and the two record layouts (the JSON of `lead show` and of
//! `transaction show` without history; CSV columns named by the JSON keys, nested objects
//! as JSON text). The reads are `ingest::view::for_each` and `transaction::for_each`.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::Value;

use super::period::{self, Bound};
use crate::db::{Db, DbError};
use crate::delivery::transaction::{self, Transaction};
use crate::ingest::model::StoredLead;
use crate::ingest::view::{self, LeadFilter};
use crate::report::csv::{Cell, Writer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// One JSON object a line.
    Ndjson,
    /// RFC 4180: a header line, then one line a record.
    Csv,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// From this date (the workspace's time zone) or time (2026-11-23T10:00:00Z).
    #[arg(long, value_parser = period::bound)]
    from: Option<Bound>,
    /// To this date, included, or this time, excluded.
    #[arg(long, value_parser = period::bound)]
    to: Option<Bound>,
    /// Only the records of this source('s leads).
    #[arg(long)]
    source: Option<crate::ids::SourceId>,
    /// One JSON object a line (ndjson), or RFC 4180 CSV with a header line (csv).
    #[arg(long, value_enum, default_value = "ndjson")]
    format: Format,
}

#[derive(Debug, thiserror::Error)]
enum ExportError {
    #[error("unknown source '{0}'")]
    UnknownSource(String),
    #[error(transparent)]
    Period(#[from] period::EmptyPeriod),
    #[error("cannot write the export: {0}")]
    Write(#[from] io::Error),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for ExportError {
    fn from(e: rusqlite::Error) -> Self {
        ExportError::Db(DbError::Sqlite(e))
    }
}

impl From<csv::Error> for ExportError {
    fn from(e: csv::Error) -> Self {
        ExportError::Write(e.into())
    }
}

/// The lead CSV's own columns: the keys of `lead show --json` but `requests` (they are
/// [`REQUEST_COLUMNS`]), one level of `person` and `consent` spelt `person.email`; other
/// objects and arrays are JSON text in their column.
const LEAD_COLUMNS: &[&str] = &[
    "id",
    "sourceId",
    "channelId",
    "tableId",
    "workspaceId",
    "externalId",
    "status",
    "person.firstName",
    "person.lastName",
    "person.email",
    "person.phone",
    "person.street",
    "person.houseNumber",
    "person.postalCode",
    "person.city",
    "person.country",
    "consent.status",
    "consent.legalBasis",
    "consent.capturedAt",
    "consent.textVersion",
    "capture",
    "additionalProperties",
    "qualityStatus",
    "qualityReasons",
    "duplicateStatus",
    "duplicateMatch",
    "checks",
    "createdAt",
    "erased",
    "erasedAt",
];

/// The lead CSV's columns after the lead's own: one record per lead request and sale of
/// it (a request sold to several buyers in multi mode has a record per buyer, one not
/// sold a record with the sale's columns empty, a lead without requests one record with
/// these columns empty). `returned` is a sale the buyer rejected
/// or cancelled. The request's trace (its auto-delivery decision) is in the NDJSON only.
const REQUEST_COLUMNS: &[&str] = &[
    "requestId",
    "productSlug",
    "requestStatus",
    "transactionId",
    "transactionStatus",
    "buyerId",
    "buyerPrice",
    "deliveredAt",
    "returned",
];

/// The transaction CSV's columns: the keys of its export JSON (`bid` as JSON text).
const TRANSACTION_COLUMNS: &[&str] = &[
    "transactionId",
    "leadRequestId",
    "leadId",
    "sourceId",
    "workspaceId",
    "buyerAccountId",
    "productId",
    "deliveryMode",
    "buyerPrice",
    "supplierCost",
    "marginAmount",
    "chargedAmount",
    "status",
    "partnerExternalId",
    "deliveryStatus",
    "createdAt",
    "updatedAt",
    "bid",
];

/// The transaction's fields as the export has them: `transaction show`'s, with its
/// workspace, its lead's source and what a prepaid balance was charged.
fn transaction_json(transaction: &Transaction, source_id: &crate::ids::SourceId) -> Value {
    serde_json::to_value(ExportedTransaction {
        transaction: transaction.view(),
        workspace_id: &transaction.workspace_id,
        source_id,
        charged_amount: crate::money::as_f64(transaction.charged_cents),
    })
    .expect("a view is plain data and serialises")
}

/// A transaction as the export has it (see [`transaction_json`]).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ExportedTransaction<'a> {
    #[serde(flatten)]
    transaction: transaction::TransactionView<'a>,
    workspace_id: &'a str,
    source_id: &'a crate::ids::SourceId,
    charged_amount: f64,
}

/// The value at a CSV column's key (`person.email`: one level down) as a cell: text as
/// it is, null as nothing, numbers as numbers, booleans as JSON prints them, objects and
/// arrays as compact JSON text.
fn field<'a>(record: &'a Value, column: &str) -> Cell<'a> {
    let value = match column.split_once('.') {
        Some((outer, inner)) => &record[outer][inner],
        None => &record[column],
    };
    match value {
        Value::Null => Cell::text(""),
        Value::String(text) => Cell::text(text.as_str()),
        Value::Number(number) => Cell::number(number),
        other => Cell::text(other.to_string()),
    }
}

/// Where the records go: NDJSON lines or CSV records on `out`.
enum Sink<W: Write> {
    Ndjson(W),
    Csv(Box<Writer<W>>, &'static [&'static str]),
}

impl<W: Write> Sink<W> {
    fn new(out: W, format: Format, columns: &'static [&'static str]) -> Result<Self, ExportError> {
        Ok(match format {
            Format::Ndjson => Sink::Ndjson(out),
            Format::Csv => {
                let mut csv = Writer::new(out);
                csv.header(columns.iter().copied())?;
                Sink::Csv(Box::new(csv), columns)
            }
        })
    }

    fn write(&mut self, record: &Value) -> Result<(), ExportError> {
        match self {
            Sink::Ndjson(out) => {
                serde_json::to_writer(&mut *out, record).map_err(io::Error::from)?;
                out.write_all(b"\n")?;
            }
            Sink::Csv(csv, columns) => {
                csv.record(columns.iter().map(|c| field(record, c)))?;
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<(), ExportError> {
        match self {
            Sink::Ndjson(mut out) => out.flush()?,
            Sink::Csv(mut csv, _) => csv.flush()?,
        }
        Ok(())
    }
}

/// What the export's source narrows to, and the time zone its dates are read in (the
/// source's workspace's).
fn scope(
    conn: &rusqlite::Connection,
    args: &ExportArgs,
) -> Result<(Option<i64>, Option<i64>), ExportError> {
    let workspace = match &args.source {
        Some(id) => Some(
            crate::config::source::find(conn, id)?
                .ok_or_else(|| ExportError::UnknownSource(id.to_string()))?
                .workspace_id,
        ),
        None => None,
    };
    let tz = period::zone(conn, workspace.as_deref())?;
    Ok(period::range(&tz, args.from, args.to)?)
}

/// Runs `walk` onto stdout; a reader that goes away (`| head`) ends the export quietly.
fn to_stdout(
    walk: impl FnOnce(&mut BufWriter<io::StdoutLock<'static>>) -> Result<(), ExportError>,
) -> anyhow::Result<ExitCode> {
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    match walk(&mut out).and_then(|()| out.flush().map_err(ExportError::from)) {
        Err(ExportError::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e.into()),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

/// The lead's records in the lead CSV: its own cells, then a request's and its sale's.
fn write_lead_rows<W: Write>(
    conn: &rusqlite::Connection,
    csv: &mut Writer<W>,
    lead: &StoredLead,
) -> Result<(), ExportError> {
    let shown = lead.to_json();
    let own: Vec<Cell> = LEAD_COLUMNS.iter().map(|c| field(&shown, c)).collect();
    // The requests as `lead show` has them: their id, product slug and status.
    let requests = shown["requests"].as_array().map_or(&[][..], Vec::as_slice);
    if requests.is_empty() {
        let none = std::iter::repeat_n(Cell::text(""), REQUEST_COLUMNS.len());
        csv.record(own.iter().cloned().chain(none))?;
    }
    // `shown["requests"]` is `lead.requests`, one for one, in order.
    for (request, stored) in requests.iter().zip(&lead.requests) {
        let request_cells = [
            field(request, "id"),
            field(request, "productSlug"),
            field(request, "status"),
        ];
        let sales = transaction::of_request(conn, stored.id)?;
        if sales.is_empty() {
            let unsold = std::iter::repeat_n(Cell::text(""), REQUEST_COLUMNS.len() - 3);
            csv.record(
                own.iter()
                    .cloned()
                    .chain(request_cells.clone())
                    .chain(unsold),
            )?;
        }
        for sale in &sales {
            let sale_cells = [
                Cell::text(sale.id.as_str()),
                Cell::text(sale.status.as_str()),
                Cell::text(sale.buyer_id.as_str()),
                Cell::number(crate::money::display(sale.buyer_price_cents)),
                Cell::text(crate::clock::iso(sale.created_at)),
                Cell::text(if sale.status.is_live() {
                    "false"
                } else {
                    "true"
                }),
            ];
            csv.record(
                own.iter()
                    .cloned()
                    .chain(request_cells.clone())
                    .chain(sale_cells),
            )?;
        }
    }
    Ok(())
}

pub(crate) fn leads(db: &Db, args: ExportArgs) -> anyhow::Result<ExitCode> {
    to_stdout(|out| {
        db.read_blocking(|conn| {
            let (from_ms, to_ms) = scope(conn, &args)?;
            let filter = LeadFilter {
                source_id: args.source.clone(),
                from_ms,
                to_ms,
                ..LeadFilter::default()
            };
            match args.format {
                Format::Ndjson => {
                    let mut sink = Sink::new(out, args.format, LEAD_COLUMNS)?;
                    view::for_each(conn, &filter, |lead| sink.write(&lead.to_json()))?;
                    sink.finish()
                }
                Format::Csv => {
                    let mut csv = Writer::new(out);
                    csv.header(LEAD_COLUMNS.iter().chain(REQUEST_COLUMNS).copied())?;
                    view::for_each(conn, &filter, |lead| write_lead_rows(conn, &mut csv, lead))?;
                    Ok(csv.flush()?)
                }
            }
        })
    })
}

pub(crate) fn transactions(db: &Db, args: ExportArgs) -> anyhow::Result<ExitCode> {
    to_stdout(|out| {
        db.read_blocking(|conn| {
            let (from_ms, to_ms) = scope(conn, &args)?;
            let filter = transaction::ListFilter {
                source_id: args.source.clone(),
                from_ms,
                to_ms,
                ..transaction::ListFilter::default()
            };
            let mut sink = Sink::new(out, args.format, TRANSACTION_COLUMNS)?;
            transaction::for_each(conn, &filter, |t, source_id| {
                sink.write(&transaction_json(t, source_id))
            })?;
            sink.finish()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The keys of `record`, one level of `person` and `consent` down.
    fn keys(record: &Value) -> Vec<String> {
        let mut found = Vec::new();
        for (key, value) in record.as_object().unwrap() {
            match (key.as_str(), value) {
                ("person" | "consent", Value::Object(inner)) => {
                    found.extend(inner.keys().map(|k| format!("{key}.{k}")))
                }
                _ => found.push(key.clone()),
            }
        }
        found
    }

    #[test]
    fn every_field_of_a_lead_and_a_transaction_has_a_csv_column() {
        let lead = crate::autodelivery::testing::lead(&[("email", "a@example.org")]);
        for key in keys(&lead.to_json()) {
            assert!(
                LEAD_COLUMNS.contains(&key.as_str()) || key == "requests",
                "no column for {key}"
            );
        }
        let conn = crate::autodelivery::testing::database();
        crate::autodelivery::testing::add_buyer(
            &conn,
            "b",
            &crate::autodelivery::testing::BuyerFixture::default(),
        );
        crate::autodelivery::testing::add_transaction(
            &conn,
            crate::autodelivery::testing::request_id(),
            "b",
            "solar",
            "delivered",
            0,
        );
        let filter = transaction::ListFilter {
            limit: 1,
            ..transaction::ListFilter::default()
        };
        let stored = transaction::list(&conn, &filter).unwrap().remove(0);
        for key in keys(&transaction_json(&stored, &"src".into())) {
            assert!(
                TRANSACTION_COLUMNS.contains(&key.as_str()),
                "no column for {key}"
            );
        }
    }

    #[test]
    fn a_field_is_text_as_is_and_nested_values_as_json() {
        let record = json!({"a": "x,y", "n": null, "p": {"email": "e"}, "r": [1], "b": true});
        assert_eq!(field(&record, "a"), Cell::text("x,y"));
        assert_eq!(field(&record, "n"), Cell::text(""));
        assert_eq!(field(&record, "p.email"), Cell::text("e"));
        assert_eq!(field(&record, "r"), Cell::text("[1]"));
        assert_eq!(field(&record, "b"), Cell::text("true"));
        assert_eq!(field(&record, "missing"), Cell::text(""));
    }
}
