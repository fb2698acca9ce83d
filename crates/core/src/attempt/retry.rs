//! An operator's retry of events (`outbox retry`, by id or `--buyer`; the console's
//! action): the outbox reopens each event whose sale still stands, and its transaction's
//! delivery status goes back to pending.

use rusqlite::Connection;

use crate::db::DbError;
use crate::delivery::transaction::{self, Status, Transaction};
use crate::outbox::store::{self as outbox, BuyerChunk, Event, OutboxError, Retryable};

/// Why an operator's retry of an event was refused.
#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    /// Unknown, or delivered already.
    #[error(transparent)]
    Event(OutboxError),
    /// The sale was taken back (the buyer's API refused it, the buyer rejected it, the
    /// operator voided it): sending the lead again would hand it over for nothing.
    #[error(
        "event '{id}' is of transaction '{transaction_id}', which is {status}; a sale taken \
         back is not sent again"
    )]
    TransactionEnded {
        id: crate::ids::EventId,
        transaction_id: crate::ids::TransactionId,
        status: Status,
    },
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<OutboxError> for RetryError {
    fn from(e: OutboxError) -> Self {
        match e {
            OutboxError::Db(e) => RetryError::Db(e),
            refused => RetryError::Event(refused),
        }
    }
}

impl From<rusqlite::Error> for RetryError {
    fn from(e: rusqlite::Error) -> Self {
        RetryError::Db(DbError::Sqlite(e))
    }
}

/// Makes failed or pending event `id` due now. A failed event starts the retry schedule
/// again; its transaction's delivery status goes back to pending. Refused for an event of
/// a sale taken back: the event stays as it is, its transaction untouched.
pub(crate) fn retry_event(
    conn: &Connection,
    id: &crate::ids::EventId,
    now: i64,
) -> Result<Event, RetryError> {
    let event = outbox::retryable(conn, id)?;
    if let Some(ended) = taken_back(conn, &event)? {
        return Err(RetryError::TransactionEnded {
            id: event.id,
            transaction_id: ended.id,
            status: ended.status,
        });
    }
    reopen(conn, &event, now)?;
    Ok(outbox::find(conn, id)?.ok_or_else(|| OutboxError::NotFound(id.clone()))?)
}

/// Makes due now the events of `chunk` that are failed, or pending and not in flight, as
/// [`retry_event`] does each of them: the events of a sale taken back stay as they are.
/// Returns how many events it retried and the last id it looked at (`None` when there were
/// none: the caller is done).
pub fn retry_buyer(
    conn: &Connection,
    chunk: &BuyerChunk,
    now: i64,
) -> rusqlite::Result<(usize, Option<String>)> {
    let (events, last) = outbox::retryable_of_buyer(conn, chunk, now)?;
    let mut retried = 0;
    for event in &events {
        if taken_back(conn, event)?.is_none() {
            reopen(conn, event, now)?;
            retried += 1;
        }
    }
    Ok((retried, last))
}

/// The transaction `event` delivers when that sale was taken back (rejected or cancelled).
fn taken_back(conn: &Connection, event: &Retryable) -> rusqlite::Result<Option<Transaction>> {
    let Some(id) = &event.transaction_id else {
        return Ok(None);
    };
    Ok(transaction::find(conn, id)?.filter(|t| !t.status.is_live()))
}

/// Reopens `event` in the outbox and applies what that says of its transaction.
fn reopen(conn: &Connection, event: &Retryable, now: i64) -> rusqlite::Result<()> {
    if let Some(fact) = outbox::reopen(conn, event, now)? {
        super::record::apply(conn, &fact)?;
    }
    Ok(())
}
