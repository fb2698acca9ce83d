//! `POST /api/ping/channels/{channelId}/sources/{sourceId}` (DESIGN.md section 14): the
//! HTTP half of `ping::answer`. Admission and body reading are the ingest endpoints' own
//! (`ingest::admit_and_read`): same 404/401 order, body limit and JSON errors.

use hyper::StatusCode;

use super::ingest::{Lookup, admit_and_read};
use crate::config::container::ContainerKind;
use crate::http::error::Error;
use crate::http::router::Params;
use crate::http::{AppState, Request, Response, response};

pub(crate) async fn post(
    state: &AppState,
    request: Request,
    params: Params,
) -> Result<Response, Error> {
    // The bid timeouts count from here: the partner waits from its request's arrival.
    let arrived = std::time::Instant::now();
    // The write place is held until the answer (dropped with `admitted`).
    let admitted =
        admit_and_read(state, request, ContainerKind::Channel, params, Lookup::File).await?;
    let (source, json) = (admitted.admission.source, admitted.json);
    let source = std::sync::Arc::unwrap_or_clone(source);
    let answer = crate::ping::answer(
        &state.db,
        &state.metrics,
        &state.bids,
        source,
        json,
        arrived,
    )
    .await?;
    Ok(response::json(StatusCode::OK, &answer))
}
