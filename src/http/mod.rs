//! The HTTP surface: the server loop, the route table, request bodies, credentials and the
//! mapping of errors to responses.
//!
//! Owns everything that is about HTTP itself. It does not own what an endpoint does: each
//! handler lives in the module of its domain (`ingest`, `lifecycle`, `health`, …) and is
//! called from [`router`].

pub mod auth;
pub mod body;
pub mod error;
pub mod response;
pub mod router;
pub mod server;

pub use error::ApiError;
pub use server::{AppState, ServerConfig};

/// What handlers get: the request's head and body, and who sent it.
pub type Request = hyper::Request<hyper::body::Incoming>;
pub type Response = hyper::Response<http_body_util::Full<bytes::Bytes>>;
