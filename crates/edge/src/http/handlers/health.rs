//! `GET /api/health` (and HEAD): 200 with the outbox figures, or 503 while shutting down or
//! when the database cannot be read or a real write cannot be committed (`health::check`).

use hyper::StatusCode;

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
        &serde_json::to_value(Healthy {
            status: "ok",
            version: env!("CARGO_PKG_VERSION"),
            database: "ok",
            outbox: OutboxHealth {
                pending: figures.pending,
                failed: figures.failed,
                oldest_pending_seconds,
            },
            uptime_seconds: state.started.elapsed().as_secs(),
        })
        .expect("figures serialise"),
    ))
}

/// The body of a healthy `GET /api/health` (SPEC.md).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Healthy {
    status: &'static str,
    version: &'static str,
    database: &'static str,
    outbox: OutboxHealth,
    uptime_seconds: u64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OutboxHealth {
    pending: i64,
    failed: i64,
    oldest_pending_seconds: Option<i64>,
}
