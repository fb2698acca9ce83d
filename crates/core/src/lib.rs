//! leadrelay's domain: the owners of the tables and the writer jobs that compose them.
//! Configuration (workspaces, sources, products, buyers), ingest, delivery and
//! auto-delivery, caps, the ledger, the lifecycle, the outbox's events, reports, ping/post
//! and bids, privacy, operators, operations on the file, training. No HTTP server or
//! client: the edge crate serves these and sends what they decide.

// Items are crate-visible unless a crate above names them (see the root crate's lib.rs).
#![warn(unreachable_pub)]

pub mod accept;
pub mod alerts;
pub mod attempt;
pub mod audit;
pub mod audited;
pub mod autodelivery;
pub mod bids;
pub mod caps;
pub mod checks;
pub mod config;
pub mod delivery;
pub mod health;
pub mod ingest;
pub mod integration;
pub mod ledger;
pub mod lifecycle;
pub mod mapping;
pub mod metrics;
pub mod operators;
pub mod ops;
pub mod outbox;
pub mod partners;
pub mod ping;
pub mod portal;
pub mod privacy;
pub mod report;
pub mod suppression;
pub mod training;
pub mod waterfall;

// The layers below, under the paths the modules use (`crate::money::Cents`).
use leadrelay_rules::{clock, duration, money, outbound_url, secrets};
use leadrelay_store::{db, ids, logging, request_id};

/// A `#[derive(Serialize)]` view as a JSON value, for callers that print, store or compare
/// one. The views hold strings, numbers, options and JSON values, which always serialise.
pub fn to_value(view: impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(view).expect("a view of strings, numbers and JSON values serialises")
}
