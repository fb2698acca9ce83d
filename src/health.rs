//! `GET /api/health`: whether the database can be read and written, and how the outbox
//! stands.

use hyper::StatusCode;
use serde_json::json;

use crate::db::DbError;
use crate::http::{ApiError, AppState, Response, response};

pub async fn handle(state: &AppState) -> Result<Response, ApiError> {
    if state.is_shutting_down() {
        return Ok(unavailable("shutting down"));
    }
    let figures = match state
        .db
        .read(|conn| crate::outbox::store::figures(conn).map_err(DbError::from))
        .await
    {
        Ok(figures) => figures,
        Err(e) => return Ok(unavailable(&format!("database cannot be read: {e}"))),
    };
    // A write probe through the writer thread: an empty group transaction proves the writer
    // is alive and can take the file's write lock, without writing anything.
    if let Err(e) = state.db.write(|_conn| Ok::<(), DbError>(())).await {
        return Ok(unavailable(&format!("database cannot be written: {e}")));
    }
    // A call that raced the start of shutdown answers like one that came after it, so a
    // load balancer stops sending traffic to an instance that is draining.
    if state.is_shutting_down() {
        return Ok(unavailable("shutting down"));
    }
    let now = crate::clock::now_ms();
    let oldest_pending_seconds = figures
        .oldest_pending_ms
        .map(|created| ((now - created).max(0)) / 1000);
    Ok(response::json(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "database": "ok",
            "outbox": {
                "pending": figures.pending,
                "failed": figures.failed,
                "oldestPendingSeconds": oldest_pending_seconds,
            },
            "uptimeSeconds": state.started.elapsed().as_secs(),
        }),
    ))
}

fn unavailable(reason: &str) -> Response {
    let mut response = response::json(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({"status": "unavailable", "reason": reason}),
    );
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}
