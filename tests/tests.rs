//! Integration tests: the real server on port 0 against a temp database, called with a real
//! HTTP client; the real binary for CLI tests. One binary, shared helpers in `util`.

mod util;

mod amounts;
mod autodelivery;
mod cli;
mod cli_help;
mod config;
mod console;
mod console_browser;
mod crash;
mod delivery;
mod delivery_conditions;
mod demo;
mod disclosure;
mod durations;
mod evaluator;
mod foundation;
mod hostile;
mod ingest;
mod ingest_access;
mod ingest_cli;
mod ingest_dedupe;
mod ingest_validation;
mod integration_delivery;
mod lifecycle;
mod mapping;
mod metrics;
mod money;
mod openapi;
mod ops;
mod outbox;
mod packaging;
mod ping;
mod privacy;
mod private_files;
mod production;
mod properties;
mod ratelimit;
mod readme;
mod report;
mod restore;
mod secrets_log;
mod state_machine;
mod supplier;
mod tidy;
