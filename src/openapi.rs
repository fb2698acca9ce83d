//! The OpenAPI 3.1 description of the whole HTTP interface: `openapi.json` at the
//! repository root, embedded in the binary and served at `GET /api/openapi.json`.
//!
//! Owns serving the document. The document itself is written by hand beside `SPEC.md` and
//! `DESIGN.md`; a test keeps its paths and methods equal to the router's `ROUTES`.

use bytes::Bytes;
use http_body_util::Full;
use hyper::StatusCode;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};

use crate::http::Response;

/// The document, exactly as committed.
pub const DOCUMENT: &str = include_str!("../openapi.json");

pub fn handle() -> Response {
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(DOCUMENT.as_bytes())));
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

#[cfg(test)]
mod tests {
    #[test]
    fn document_is_json_for_the_crate_version() {
        let document: serde_json::Value =
            serde_json::from_str(super::DOCUMENT).expect("openapi.json is valid JSON");
        assert_eq!(document["openapi"], "3.1.0");
        assert_eq!(document["info"]["version"], env!("CARGO_PKG_VERSION"));
    }
}
