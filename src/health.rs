//! The service's health (`GET /api/health`): whether the database can be read and
//! written, and how the outbox stands.
//!
//! Owns the checks. The answer's HTTP form, and whether the server is shutting down, are
//! the HTTP layer's (`http::handlers::health`).

use crate::db::{Db, DbError};

/// How the outbox stands; also read by `GET /metrics`.
pub struct OutboxFigures {
    pub pending: i64,
    pub failed: i64,
    pub oldest_pending_ms: Option<i64>,
}

pub fn outbox_figures(conn: &rusqlite::Connection) -> rusqlite::Result<OutboxFigures> {
    conn.query_row(
        "SELECT
            (SELECT count(*) FROM outbox_events WHERE status = 'pending'),
            (SELECT count(*) FROM outbox_events WHERE status = 'failed'),
            (SELECT min(created_at) FROM outbox_events WHERE status = 'pending')",
        [],
        |row| {
            Ok(OutboxFigures {
                pending: row.get(0)?,
                failed: row.get(1)?,
                oldest_pending_ms: row.get(2)?,
            })
        },
    )
}

/// Why the service cannot serve now.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unhealthy {
    #[error("shutting down")]
    ShuttingDown,
    #[error("database cannot be read: {0}")]
    Unreadable(DbError),
    #[error("database cannot be written: {0}")]
    Unwritable(DbError),
}

/// Reads the outbox figures through the read pool, then proves the writer alive: an empty
/// group transaction shows that the writer thread runs and can take the file's write lock,
/// without writing anything.
pub(crate) async fn check(db: &Db) -> Result<OutboxFigures, Unhealthy> {
    let figures = db
        .read(|conn| outbox_figures(conn).map_err(DbError::from))
        .await
        .map_err(Unhealthy::Unreadable)?;
    db.write(|_conn| Ok::<(), DbError>(()))
        .await
        .map_err(Unhealthy::Unwritable)?;
    Ok(figures)
}
