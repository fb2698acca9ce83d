//! Reading a request body: content type, size limit, read timeout, JSON parsing; the
//! console's forms.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use serde_json::Value;

use super::Request;
use super::error::HttpError;

/// How long a client may take to send a whole body once its headers arrived. A client that
/// trickles a body (slowloris) is answered 408 and cut off.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads the whole body, refusing more than `limit` bytes (413) and non-JSON content types
/// (415). A missing content type is accepted: the interface is JSON-only, and many partner
/// tools omit the header.
pub(crate) async fn read_bytes(request: Request, limit: usize) -> Result<Bytes, HttpError> {
    let media_type = media_type(&request);
    if let Some(media_type) = media_type
        && media_type != "application/json"
        && !media_type.ends_with("+json")
    {
        return Err(HttpError::UnsupportedMediaType { media_type });
    }
    read_limited(request, limit).await
}

/// Reads an HTML form's body (`application/x-www-form-urlencoded`, which browsers always
/// name), refusing more than `limit` bytes (413) and any other content type (415).
pub(crate) async fn read_form(request: Request, limit: usize) -> Result<Bytes, HttpError> {
    match media_type(&request) {
        Some(media_type) if media_type == "application/x-www-form-urlencoded" => {
            read_limited(request, limit).await
        }
        other => Err(HttpError::NotAForm {
            media_type: other.unwrap_or_default(),
        }),
    }
}

/// The request's media type, lower-case without parameters, when it names one.
fn media_type(request: &Request) -> Option<String> {
    let content_type = request.headers().get(CONTENT_TYPE)?;
    let content_type = content_type.to_str().unwrap_or("").to_ascii_lowercase();
    Some(
        content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
    )
}

async fn read_limited(request: Request, limit: usize) -> Result<Bytes, HttpError> {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(HttpError::PayloadTooLarge { limit });
    }
    let body = Limited::new(request.into_body(), limit);
    match tokio::time::timeout(BODY_READ_TIMEOUT, body.collect()).await {
        Err(_) => Err(HttpError::BodyTimeout),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(HttpError::PayloadTooLarge { limit })
        }
        Ok(Err(e)) => Err(HttpError::BodyUnreadable(e.to_string())),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// Reads and drops what is left of a request body: at most `limit` bytes, within the body
/// read timeout. Call it before an answer given without reading the body (unknown path,
/// unknown source, wrong secret, rate limited): a socket closed with unread data in it makes
/// the kernel reset the connection, which can destroy the answer before the client has read
/// it, so a partner would see a connection error instead of a clear 401.
pub(crate) async fn discard(body: hyper::body::Incoming, limit: usize) {
    let drain = async {
        let mut body = body;
        let mut read = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return };
            if let Some(data) = frame.data_ref() {
                read += data.len();
                if read > limit {
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(BODY_READ_TIMEOUT, drain).await;
}

/// Parses bytes as JSON, 400 `invalid_json` with the position of the problem otherwise.
pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, HttpError> {
    serde_json::from_slice(bytes).map_err(|json| HttpError::InvalidJson { json })
}

/// [`read_bytes`] then [`parse_json`].
pub(crate) async fn read_json(request: Request, limit: usize) -> Result<Value, HttpError> {
    let bytes = read_bytes(request, limit).await?;
    parse_json(&bytes)
}
