//! The HTTP surface: the server loop, the route table, the endpoints' handlers, request
//! bodies, credentials and the mapping of errors to responses.
//!
//! Owns everything that is about HTTP itself: a handler (in [`handlers`]) reads what the
//! request carries (path parameters, presented secrets, the body), calls its domain with
//! plain Rust values and turns the domain's answer into a response, or its error into one
//! through [`error::error_to_http_response`]. It does not own what an endpoint does: that
//! is the domain's (`ingest`, `lifecycle`, `health`, …), which knows nothing of HTTP.

pub(crate) mod auth;
pub mod body;
pub(crate) mod error;
pub(crate) mod examples;
mod handlers;
pub(crate) mod response;
pub mod router;
pub mod server;

pub use server::{AppState, ServerConfig};

/// What handlers get: the request's head and body, and who sent it.
pub type Request = hyper::Request<hyper::body::Incoming>;
pub type Response = hyper::Response<http_body_util::Full<bytes::Bytes>>;
