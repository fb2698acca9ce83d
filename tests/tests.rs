//! Integration tests: the real server on port 0 against a temp database, called with a real
//! HTTP client; the real binary for CLI tests. One binary, shared helpers in `util`.

mod util;

mod autodelivery;
mod cli;
mod delivery;
mod foundation;
mod ingest;
mod mapping;
mod metrics;
mod openapi;
mod ops;
mod outbox;
mod packaging;
mod ratelimit;
