//! leadrelay: a lead-distribution appliance on one SQLite file.
//!
//! The binary (`main.rs`) only parses the command line and dispatches to [`cli`]. The
//! library holds everything else so that integration tests drive the real service: see
//! `ARCHITECTURE.md` for the map.

// Items are crate-visible unless the binary or tests/ name them: with every item `pub`,
// the compiler cannot report dead code. clippy's -D warnings makes this an error in CI;
// tools/visibility.sh applies the lint's suggestions after a merge opened things up.
#![warn(unreachable_pub)]

pub(crate) mod autodelivery;
pub(crate) mod bids;
pub(crate) mod caps;
pub mod cli;
pub mod clock;
pub mod config;
pub mod console;
pub mod db;
pub mod delivery;
pub(crate) mod duration;
pub(crate) mod health;
pub mod http;
pub mod ids;
pub mod ingest;
pub(crate) mod integration;
pub(crate) mod ledger;
pub(crate) mod lifecycle;
pub mod logging;
pub mod mapping;
pub(crate) mod metrics;
pub(crate) mod money;
pub mod openapi;
pub(crate) mod operators;
pub(crate) mod ops;
pub(crate) mod outbound_url;
pub mod outbox;
pub(crate) mod ping;
pub mod privacy;
pub mod ratelimit;
pub(crate) mod report;
pub(crate) mod request_id;
pub mod secrets;
pub mod service;
pub(crate) mod training;
