//! CSV (RFC 4180: CRLF after each record, a field quoted when it holds a comma, a quote or
//! a line break, quotes doubled) on the `csv` crate: [`writer`] is the one way leadrelay
//! writes CSV (reports, exports, the console's `/reports.csv`), and [`write_report`] writes
//! a report. Money has two decimals, never an exponent.

use std::io::Write;

use super::{Figures, Report};

/// A CSV writer onto `out` with RFC 4180's record terminator.
pub fn writer<W: Write>(out: W) -> ::csv::Writer<W> {
    ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::CRLF)
        .from_writer(out)
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

/// A row's figures as CSV fields, in [`COLUMNS`]' order.
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
    let mut csv = writer(out);
    let header: Vec<&str> = report
        .query
        .by
        .iter()
        .map(|b| b.as_str())
        .chain(COLUMNS.iter().copied())
        .collect();
    csv.write_record(&header)?;
    for row in &report.rows {
        let record: Vec<String> = row
            .keys
            .iter()
            .map(|k| k.clone().unwrap_or_default())
            .chain(fields(&row.figures))
            .collect();
        csv.write_record(&record)?;
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
            let mut csv = writer(&mut out);
            csv.write_record(["plain", "a,b", "say \"hi\"", "two\nlines", ""])
                .unwrap();
            csv.flush().unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\r\n"
        );
    }
}
