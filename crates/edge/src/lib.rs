//! leadrelay's edges: the HTTP server ([`http`]), the operator console ([`console`]), the
//! command line ([`cli`]), the service that runs them ([`service`]), the OpenAPI document,
//! and the outbound HTTP of the outbox and of bids ([`outbox`]). The only crate that speaks
//! HTTP; what it serves and sends is decided in the domain crate.

// Items are crate-visible unless a crate above names them (see the root crate's lib.rs).
#![warn(unreachable_pub)]

pub mod cli;
pub mod console;
pub mod http;
pub mod openapi;
pub mod outbox;
pub mod portal;
pub(crate) mod posting;
pub mod service;
pub(crate) mod web;

// The layers below, under the paths the modules use (`crate::config::buyer`).
use leadrelay_core::{
    accept, alerts, attempt, audit, audited, autodelivery, bids, caps, checks, config, delivery,
    health, ingest, integration, ledger, lifecycle, mapping, metrics, operators, ops, partners,
    ping, privacy, report, suppression, training,
};
use leadrelay_rules::{clock, duration, fields, money, outbound_url, ratelimit};
use leadrelay_store::{db, ids, logging, request_id};
