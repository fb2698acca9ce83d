//! One module per group of endpoints: the HTTP half of each endpoint.
//!
//! A handler reads what the request carries (path parameters, presented secrets, the
//! body), calls its domain with plain Rust values, and turns the domain's answer into a
//! response. It decides nothing the domain decides; its errors go back to the router,
//! which answers them through `error_to_http_response`.

pub(super) mod health;
pub(super) mod ingest;
pub(super) mod lifecycle;
pub(super) mod metrics;
pub(super) mod openapi;
pub(super) mod ping;
