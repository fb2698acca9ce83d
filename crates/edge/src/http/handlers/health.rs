//! `GET /api/health` (and HEAD): 200 with the outbox figures, or 503 while shutting down or
//! when the database cannot be read or a real write cannot be committed (`health::check`).

use hyper::StatusCode;
use serde_json::json;

use crate::health::{self, Unhealthy};
use crate::http::error::Error;
use crate::http::{AppState, Response, response};

pub(crate) async fn get(state: &AppState) -> Result<Response, Error> {
    if state.is_shutting_down() {
        return Err(Unhealthy::ShuttingDown.into());
    }
    let figures = health::check(&state.db, &state.health).await?;
    // A call that raced the start of shutdown answers like one that came after it, so a
    // load balancer stops sending traffic to an instance that is draining.
    if state.is_shutting_down() {
        return Err(Unhealthy::ShuttingDown.into());
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
