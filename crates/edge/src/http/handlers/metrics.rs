//! `GET /metrics`: gathers the figures that live elsewhere (outbox depth from the database,
//! delivery attempts from the outbox workers, the writer's group sizes and queue, the rate
//! limiter's table, open connections, the process's `/proc` figures) and answers the
//! Prometheus text.
//!
//! With `serve --metrics off` the path answers 404 exactly like an unknown path.

use hyper::StatusCode;

use crate::db::DbError;
use crate::http::error::{Error, HttpError};
use crate::http::{AppState, Response};
use crate::logging::Repeated;
use crate::metrics::{
    BuyerGauges, CONTENT_TYPE as PROMETHEUS_TEXT, ConnectionGauges, DeliveryGauges, Gauges,
    OutboxGauges,
};

pub(crate) async fn get(state: &AppState, path: &str) -> Result<Response, Error> {
    if !state.config.metrics_endpoint {
        return Err(HttpError::NoSuchPath {
            path: path.to_string(),
        }
        .into());
    }
    let outbox = match state
        .db
        .read(|conn| crate::outbox::store::figures(conn).map_err(DbError::from))
        .await
    {
        Ok(figures) => {
            let now = crate::clock::now_ms();
            Some(OutboxGauges {
                pending: figures.pending,
                failed: figures.failed,
                oldest_pending_seconds: figures
                    .oldest_pending_ms
                    .map(|created| (now - created).max(0) / 1000),
            })
        }
        Err(e) => {
            // The rest of the scrape is still worth having; the missing outbox series and
            // the health check tell the operator that the database is the problem.
            static UNAVAILABLE: Repeated = Repeated::new();
            if let Some(repeats) = UNAVAILABLE.admit() {
                log::warn!("metrics: outbox figures unavailable: {e}{repeats}");
            }
            None
        }
    };
    let gauges = Gauges {
        outbox,
        writer: state.db.writer_stats(),
        rate_limited_clients: state.rate_limiter.as_ref().map(|l| l.tracked_clients()),
        deliveries: {
            let counts = state.outbox.counts();
            DeliveryGauges {
                delivered: counts.delivered,
                retry: counts.retried,
                failed: counts.failed,
            }
        },
        buyers: state
            .outbox
            .buyer_figures()
            .into_iter()
            .map(|b| BuyerGauges {
                buyer_id: b.buyer_id,
                unhealthy: b.unhealthy,
                in_flight: b.in_flight,
                attempts: [b.delivered, b.retried, b.failed],
                duration_ms: b.latency,
            })
            .collect(),
        connections: ConnectionGauges {
            open: state.open_connections(),
            max: state.config.max_connections,
            write_requests: state.write_requests_in_progress(),
            max_write_requests: state.config.max_write_requests,
        },
        process: crate::metrics::process::read(),
    };
    let body = state.metrics.render(&gauges);
    Ok(crate::http::response::text(
        StatusCode::OK,
        PROMETHEUS_TEXT,
        body.into_bytes(),
    ))
}
