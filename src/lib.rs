//! leadrelay: a lead-distribution appliance on one SQLite file.
//!
//! The binary (`main.rs`) only parses the command line and dispatches to [`cli`]. The
//! library holds everything else so that integration tests drive the real service: see
//! `ARCHITECTURE.md` for the map.

pub mod autodelivery;
pub mod caps;
pub mod cli;
pub mod clock;
pub mod config;
pub mod console;
pub mod db;
pub mod delivery;
pub mod duration;
pub mod health;
pub mod http;
pub mod ids;
pub mod ingest;
pub mod integration;
pub(crate) mod ledger;
pub mod lifecycle;
pub mod logging;
pub mod mapping;
pub mod metrics;
pub mod money;
pub mod openapi;
pub mod operators;
pub mod ops;
pub mod outbound_url;
pub mod outbox;
pub mod ping;
pub mod privacy;
pub mod ratelimit;
pub mod report;
pub mod request_id;
pub mod secrets;
pub mod service;
pub mod training;
