//! The two ingest endpoints: `POST /api/webhooks/channels/{channelId}/sources/{sourceId}/leads`
//! and `POST /api/webhooks/lead-tables/{tableId}/sources/{sourceId}/leads` (SPEC.md 4.2 and
//! 4.3), the HTTP half of `accept`.

use hyper::StatusCode;

use crate::accept::{self, Services};
use crate::config::container::ContainerKind;
use crate::http::error::Error;
use crate::http::router::Params;
use crate::http::{AppState, Request, Response, auth, body, response};
use crate::ingest::IngestError;
use crate::ingest::handler;

pub(crate) async fn channel(
    state: &AppState,
    request: Request,
    params: Params,
) -> Result<Response, Error> {
    post(state, request, ContainerKind::Channel, params).await
}

pub(crate) async fn table(
    state: &AppState,
    request: Request,
    params: Params,
) -> Result<Response, Error> {
    post(state, request, ContainerKind::Table, params).await
}

async fn post(
    state: &AppState,
    request: Request,
    kind: ContainerKind,
    params: Params,
) -> Result<Response, Error> {
    // Bid timeouts count from here: the partner waits from its request's arrival.
    let arrived = std::time::Instant::now();
    // The write place is held until the answer (dropped with `admitted`).
    let admitted = admit_and_read(state, request, kind, params).await?;
    let (admission, json, raw) = (admitted.admission, admitted.json, admitted.raw);
    let services = Services {
        db: &state.db,
        outbox: &state.outbox,
        metrics: &state.metrics,
        bids: &state.bids,
        checks: &state.checks,
        arrived,
    };
    let reply = accept::ingest(&services, admission, json, raw).await?;
    let status = if reply.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(response::json_bytes(status, reply.body))
}

/// A request a source sent, admitted and read: the place it holds among the write
/// requests (held until the answer), the source with its workspace's rules, the JSON and
/// its text.
pub(super) struct Admitted {
    pub(super) _place: tokio::sync::OwnedSemaphorePermit,
    pub(super) admission: leadrelay_core::ingest::kept::Admission,
    pub(super) json: serde_json::Value,
    pub(super) raw: Option<String>,
}

/// The admission path of every endpoint a source posts to (ingest and ping): a write place
/// (503 under overload), the source (404) and its secret (401) before the body is read,
/// then the body (limit, JSON).
pub(super) async fn admit_and_read(
    state: &AppState,
    request: Request,
    kind: ContainerKind,
    params: Params,
) -> Result<Admitted, Error> {
    let limit = state.config.body_limit;
    // Under overload a request is refused first, before anything is looked up or read, so
    // the time goes to the requests in progress; the place is held until the answer.
    let place = match state.admit_write() {
        Ok(place) => place,
        Err(e) => {
            body::discard(request.into_body(), limit).await;
            return Err(e.into());
        }
    };
    // Source (404) and secret (401) are decided before the body is read; the body is still
    // drained before such an answer so that the answer reaches the client.
    let admitted = match <[String; 2]>::try_from(params) {
        Ok([container_id, source_id]) => {
            let presented = auth::presented_secrets(request.headers());
            handler::admit(
                &state.db,
                &state.kept,
                kind,
                container_id,
                source_id,
                &presented,
            )
        }
        Err(_) => Err(IngestError::SourceNotFound),
    };
    let admission = match admitted {
        Ok(admission) => admission,
        Err(e) => {
            body::discard(request.into_body(), limit).await;
            return Err(e.into());
        }
    };
    let bytes = body::read_bytes(request, limit).await?;
    let json = body::parse_json(&bytes)?;
    // A body that parsed as JSON is UTF-8 text.
    let raw = std::str::from_utf8(&bytes).ok().map(str::to_string);
    Ok(Admitted {
        _place: place,
        admission,
        json,
        raw,
    })
}
