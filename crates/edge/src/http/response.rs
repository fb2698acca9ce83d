//! Building responses: JSON for the API, HTML for the operator console, any other text
//! (the metrics).

use bytes::Bytes;
use http_body_util::Full;
use hyper::StatusCode;
use hyper::header::{CONTENT_TYPE, HeaderValue};

use super::Response;

/// A JSON response with the given status.
pub(crate) fn json(status: StatusCode, body: &serde_json::Value) -> Response {
    let bytes = serde_json::to_vec(body).expect("a serde_json::Value always serialises");
    json_bytes(status, bytes)
}

/// A response with the given status and an already serialised JSON body.
pub(crate) fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response {
    text(status, "application/json", bytes)
}

/// An HTML page with the given status.
pub(crate) fn html(status: StatusCode, page: String) -> Response {
    text(status, "text/html; charset=utf-8", page.into_bytes())
}

/// A body of `content_type` with the given status.
pub(crate) fn text(status: StatusCode, content_type: &'static str, bytes: Vec<u8>) -> Response {
    let mut response = hyper::Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
