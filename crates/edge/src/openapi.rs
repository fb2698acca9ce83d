//! The OpenAPI 3.1 description of the whole HTTP interface: `openapi.json` at the
//! repository root, embedded in the binary and served at `GET /api/openapi.json` by
//! `http::handlers::openapi`.
//!
//! Owns the embedded document. The document itself is written by hand beside `SPEC.md` and
//! `DESIGN.md`; a test keeps its paths and methods equal to the router's `ROUTES`.

/// The document, exactly as committed.
pub const DOCUMENT: &str = include_str!("../../../openapi.json");

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
