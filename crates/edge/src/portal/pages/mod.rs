//! The portal's pages, one module per side: what each page reads (through
//! `leadrelay_core::portal`, in one trip to the read pool) and the HTML it shows.

pub(super) mod buyer;
pub(super) mod supplier;

use hyper::StatusCode;
use hyper::header::{CONTENT_DISPOSITION, HeaderValue};

use crate::db::{Db, DbError};
use crate::http::error::Error;
use crate::http::{Response, response};
use crate::ledger::query::Entry;
use crate::report::csv::{Cell, Writer};

/// The session's party as `me` reads it (`None` once it is gone), and what `read` reads
/// with it, in one trip to the read pool.
pub(super) async fn with_party<I, M: Send + 'static, T: Send + 'static>(
    db: &Db,
    party_id: &I,
    me: fn(&rusqlite::Connection, &I) -> rusqlite::Result<Option<M>>,
    read: impl FnOnce(&rusqlite::Connection, &M) -> rusqlite::Result<T> + Send + 'static,
) -> Result<Option<(M, T)>, Error>
where
    I: ?Sized + ToOwned + 'static,
    I::Owned: Send + 'static,
{
    let party_id = party_id.to_owned();
    Ok(db
        .read(move |conn| {
            let Some(me) = me(conn, std::borrow::Borrow::borrow(&party_id))? else {
                return Ok::<_, DbError>(None);
            };
            let found = read(conn, &me)?;
            Ok(Some((me, found)))
        })
        .await?)
}

/// The value of `name` in a query string, trimmed; `None` when absent or empty.
pub(super) fn query_value(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// A CSV download named `filename` (a constant of the caller).
pub(super) fn csv_response(out: Writer<Vec<u8>>, filename: &'static str) -> Response {
    let bytes = out
        .into_inner()
        .expect("flushing CSV into memory cannot fail");
    let mut answer = response::text(StatusCode::OK, "text/csv; charset=utf-8", bytes);
    let value = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\""))
        .expect("the file name is a constant");
    answer.headers_mut().insert(CONTENT_DISPOSITION, value);
    answer
}

/// A month's statement: its ledger rows as CSV.
pub(super) fn statement(entries: &[Entry]) -> Response {
    let mut out = Writer::new(Vec::new());
    let mut write = || -> csv::Result<()> {
        out.header(["at", "kind", "transactionId", "amount", "reason"])?;
        for entry in entries {
            out.record([
                Cell::text(crate::clock::iso(entry.at)),
                Cell::text(entry.kind.as_str()),
                Cell::text(entry.transaction_id.as_ref().map_or("", |id| id.as_str())),
                Cell::number(crate::money::display(entry.amount_cents)),
                Cell::text(entry.reason.as_deref().unwrap_or("")),
            ])?;
        }
        Ok(())
    };
    write().expect("writing CSV into memory cannot fail");
    csv_response(out, "statement.csv")
}
