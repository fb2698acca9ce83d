//! The service's health (`GET /api/health`): whether the database can be read and
//! written, and how the outbox stands.
//!
//! Owns the checks. The answer's HTTP form, and whether the server is shutting down, are
//! the HTTP layer's (`http::handlers::health`).

use crate::db::{Db, DbError};
use crate::outbox::store::Figures;

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
pub(crate) async fn check(db: &Db) -> Result<Figures, Unhealthy> {
    let figures = db
        .read(|conn| crate::outbox::store::figures(conn).map_err(DbError::from))
        .await
        .map_err(Unhealthy::Unreadable)?;
    db.write(|_conn| Ok::<(), DbError>(()))
        .await
        .map_err(Unhealthy::Unwritable)?;
    Ok(figures)
}
