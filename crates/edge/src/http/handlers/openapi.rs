//! `GET /api/openapi.json`: the embedded document ([`crate::openapi::DOCUMENT`]).

use bytes::Bytes;
use http_body_util::Full;
use hyper::StatusCode;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};

use crate::http::Response;

pub(crate) fn get() -> Response {
    let document = Bytes::from_static(crate::openapi::DOCUMENT.as_bytes());
    let mut response = hyper::Response::new(Full::new(document));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // The document changes only with the binary; clients may keep it for a while.
    headers.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}
