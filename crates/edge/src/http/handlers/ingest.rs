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
use crate::ingest::kept::StampCheck;

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
    let admitted = admit_and_read(state, request, kind, params, Lookup::Kept).await?;
    let services = |stamp| Services {
        db: &state.db,
        outbox: &state.outbox,
        metrics: &state.metrics,
        bids: &state.bids,
        checks: &state.checks,
        arrived,
        stamp,
    };
    // A request admitted on the kept copy has the copy's stamp still to confirm.
    let stamp = match admitted.again {
        Some(_) => StampCheck::kept(admitted.admission.stamp),
        None => StampCheck::read_now(),
    };
    let answered = accept::ingest(
        &services(&stamp),
        admitted.admission,
        admitted.json,
        admitted.raw,
    )
    .await;
    let answered = match admitted.again {
        Some(again) if stale(&answered, &stamp, state)? => {
            // The kept copy was out of date and nothing was written or asked: once more,
            // on the source as the file has it now.
            let presented: Vec<&str> = again.presented.iter().map(String::as_str).collect();
            let admission = handler::admit(
                &state.db,
                &state.kept,
                kind,
                again.container_id,
                again.source_id,
                &presented,
            )?;
            let json = body::parse_json(&again.bytes)?;
            let raw = std::str::from_utf8(&again.bytes).ok().map(str::to_string);
            let read_now = StampCheck::read_now();
            accept::ingest(&services(&read_now), admission, json, raw).await
        }
        _ => answered,
    };
    let reply = answered?;
    let status = if reply.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(response::json_bytes(status, reply.body))
}

/// Whether a request answered on the kept copy must run again: its stamp moved before it
/// wrote (`Stale`), or it answered without writing and the stamp is no longer the copy's.
fn stale<T>(
    answered: &Result<T, IngestError>,
    stamp: &StampCheck,
    state: &AppState,
) -> Result<bool, IngestError> {
    if matches!(answered, Err(IngestError::Stale)) {
        return Ok(true);
    }
    match stamp.confirm(&state.db) {
        Ok(()) => Ok(false),
        Err(IngestError::Stale) => Ok(true),
        Err(e) => Err(e),
    }
}

/// How a request's source is found: on the kept copy when it admits the request (ingest,
/// whose writer job confirms the copy), or read from the file (the ping, whose answer
/// rests on what it reads).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Lookup {
    Kept,
    File,
}

/// An admitted request: its write place among the requests in progress (held until the
/// answer), the source with its workspace's rules, the JSON and its text.
pub(super) struct Admitted {
    pub(super) _place: tokio::sync::OwnedSemaphorePermit,
    pub(super) admission: leadrelay_core::ingest::kept::Admission,
    pub(super) json: serde_json::Value,
    pub(super) raw: Option<String>,
    /// What running the request again needs, when it was admitted on the kept copy.
    pub(super) again: Option<Again>,
}

/// The path's ids, the presented secrets and the body of a request admitted on the kept
/// copy, to admit it again from the file.
pub(super) struct Again {
    container_id: String,
    source_id: String,
    presented: Vec<String>,
    bytes: hyper::body::Bytes,
}

/// The admission path of every endpoint a source posts to (ingest and ping): a write place
/// (503 under overload), the source (404) and its secret (401) before the body is read,
/// then the body (limit, JSON).
pub(super) async fn admit_and_read(
    state: &AppState,
    request: Request,
    kind: ContainerKind,
    params: Params,
    lookup: Lookup,
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
            let kept = (lookup == Lookup::Kept)
                .then(|| {
                    handler::admit_kept(&state.kept, kind, &container_id, &source_id, &presented)
                })
                .flatten();
            match kept {
                Some(admission) => {
                    let again = (
                        container_id,
                        source_id,
                        presented.iter().map(|s| s.to_string()).collect(),
                    );
                    Ok((admission, Some(again)))
                }
                None => handler::admit(
                    &state.db,
                    &state.kept,
                    kind,
                    container_id,
                    source_id,
                    &presented,
                )
                .map(|admission| (admission, None)),
            }
        }
        Err(_) => Err(IngestError::SourceNotFound),
    };
    let (admission, again) = match admitted {
        Ok(admitted) => admitted,
        Err(e) => {
            body::discard(request.into_body(), limit).await;
            return Err(e.into());
        }
    };
    let bytes = body::read_bytes(request, limit).await?;
    let json = body::parse_json(&bytes)?;
    // A body that parsed as JSON is UTF-8 text.
    let raw = std::str::from_utf8(&bytes).ok().map(str::to_string);
    let again = again.map(|(container_id, source_id, presented)| Again {
        container_id,
        source_id,
        presented,
        bytes,
    });
    Ok(Admitted {
        _place: place,
        admission,
        json,
        raw,
        again,
    })
}
