//! leadrelay: a lead-distribution appliance on one SQLite file.
//!
//! The binary (`main.rs`) only parses the command line and dispatches to [`cli`]. The
//! crates under `crates/` hold everything else, bottom to top: `leadrelay-rules` (types
//! and pure functions), `leadrelay-store` (the database handle), `leadrelay-core` (the
//! table owners and writer jobs) and `leadrelay-edge` (HTTP, console, CLI). This library
//! re-exports their modules under one name so that the integration tests, benchmarks and
//! fuzz targets drive the real service as `leadrelay::…`: see `ARCHITECTURE.md`.

pub use leadrelay_core::{accept, config, delivery, ingest, mapping, privacy, report};
pub use leadrelay_edge::{cli, console, http, openapi, outbox, portal, service};
pub use leadrelay_rules::{clock, ratelimit, secrets};
pub use leadrelay_store::{db, ids, logging};
