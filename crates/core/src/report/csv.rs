//! CSV (RFC 4180: CRLF after each record, a field quoted when it holds a comma, a quote or
//! a line break, quotes doubled) on the `csv` crate: [`Writer`] is the one way leadrelay
//! writes CSV (reports, exports, the console's `/reports.csv`, any later download), and
//! [`write_report`] writes a report. Money has two decimals, never an exponent.
//!
//! Every cell is a [`Cell`]: a number leadrelay computed is written as it is, and text
//! (anything a partner or operator could have typed) that a spreadsheet would read as a
//! formula, a text starting with `=`, `+`, `-`, `@`, a tab or a carriage return, is made
//! inert with a leading `'` (OWASP's advice against CSV injection), so the one writer
//! decides it for every file.

use std::borrow::Cow;
use std::io::Write;

use super::{Figures, Report};

/// One field of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell<'a> {
    /// Text from anywhere: made inert when a spreadsheet would run it.
    Text(Cow<'a, str>),
    /// A number leadrelay wrote itself (a count, an amount, a rate): written as it is, a
    /// negative amount included.
    Number(String),
}

impl<'a> Cell<'a> {
    pub fn text(text: impl Into<Cow<'a, str>>) -> Self {
        Cell::Text(text.into())
    }

    pub fn number(number: impl ToString) -> Self {
        Cell::Number(number.to_string())
    }

    /// The bytes the file holds for this cell.
    fn written(&self) -> Cow<'_, str> {
        match self {
            Cell::Number(number) => Cow::Borrowed(number),
            Cell::Text(text) if starts_a_formula(text) => Cow::Owned(format!("'{text}")),
            Cell::Text(text) => Cow::Borrowed(text),
        }
    }
}

/// Whether a spreadsheet would take a text cell beginning like `text` for a formula.
fn starts_a_formula(text: &str) -> bool {
    matches!(
        text.as_bytes().first(),
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r')
    )
}

/// A CSV writer onto `out` with RFC 4180's record terminator, whose cells are [`Cell`]s.
pub struct Writer<W: Write> {
    csv: ::csv::Writer<W>,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Self {
        Writer {
            csv: ::csv::WriterBuilder::new()
                .terminator(::csv::Terminator::CRLF)
                .from_writer(out),
        }
    }

    /// A header line: the column names (text).
    pub fn header<'n>(&mut self, names: impl IntoIterator<Item = &'n str>) -> ::csv::Result<()> {
        self.record(names.into_iter().map(Cell::text))
    }

    /// One record.
    pub fn record<'c>(&mut self, cells: impl IntoIterator<Item = Cell<'c>>) -> ::csv::Result<()> {
        for cell in cells {
            self.csv.write_field(cell.written().as_bytes())?;
        }
        self.csv.write_record(None::<&[u8]>)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.csv.flush()
    }

    /// Flushes and hands back the output (a download built in memory).
    pub fn into_inner(self) -> std::io::Result<W> {
        self.csv.into_inner().map_err(|e| e.into_error())
    }
}

/// The report's columns after its `by` keys, named as in `--json`.
pub const COLUMNS: &[&str] = &[
    "received",
    "accepted",
    "duplicates",
    "rejected",
    "sold",
    "acknowledged",
    "returned",
    "paid",
    "revenue",
    "supplierCost",
    "margin",
    "returnRate",
];

/// A row's figures as CSV cells, in [`COLUMNS`]' order.
pub fn cells(f: &Figures) -> Vec<Cell<'static>> {
    fields(f).into_iter().map(Cell::Number).collect()
}

/// A row's figures as text, in [`COLUMNS`]' order (the text table prints them too).
pub fn fields(f: &Figures) -> Vec<String> {
    vec![
        f.received.to_string(),
        f.accepted.to_string(),
        f.duplicates.to_string(),
        f.rejected.to_string(),
        f.sold.to_string(),
        f.acknowledged.to_string(),
        f.returned.to_string(),
        f.paid.to_string(),
        crate::money::display(f.revenue_cents),
        crate::money::display(f.supplier_cost_cents),
        crate::money::display(f.margin_cents()),
        f.return_rate()
            .map(|r| format!("{r:.4}"))
            .unwrap_or_default(),
    ]
}

/// The report as CSV: a header (the `by` dimensions, then [`COLUMNS`]) and one record per
/// row; a dimension without a value (the buyer of lead counts) is an empty field. The
/// totals are not a record: a sum of the rows gives them.
pub fn write_report<W: Write>(out: W, report: &Report) -> ::csv::Result<()> {
    let mut csv = Writer::new(out);
    csv.header(
        report
            .query
            .by
            .iter()
            .map(|b| b.as_str())
            .chain(COLUMNS.iter().copied()),
    )?;
    for row in &report.rows {
        csv.record(
            row.keys
                .iter()
                .map(|k| Cell::text(k.as_deref().unwrap_or_default()))
                .chain(cells(&row.figures)),
        )?;
    }
    csv.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_commas_quotes_and_line_breaks_are_quoted_and_records_end_in_crlf() {
        let mut out = Vec::new();
        {
            let mut csv = Writer::new(&mut out);
            csv.header(["plain", "a,b", "say \"hi\"", "two\nlines", ""])
                .unwrap();
            csv.flush().unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\r\n"
        );
    }

    #[test]
    fn text_a_spreadsheet_would_run_is_inert_and_numbers_stay_numbers() {
        let mut out = Vec::new();
        {
            let mut csv = Writer::new(&mut out);
            csv.record(
                [
                    "=HYPERLINK(\"http://evil\",\"x\")",
                    "+1",
                    "-3",
                    "@SUM(A1)",
                    "\tx",
                    "\rx",
                    "a=b",
                    "",
                ]
                .into_iter()
                .map(Cell::text)
                .chain([Cell::number("-3.50"), Cell::number(7)]),
            )
            .unwrap();
            csv.flush().unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\",'+1,'-3,'@SUM(A1),'\tx,\"'\rx\",a=b,,-3.50,7\r\n"
        );
    }
}
