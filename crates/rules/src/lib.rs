//! leadrelay's rules: the types and pure functions every layer shares. Money, time and
//! durations, secrets, the rule for outbound URLs, rate limits, the normalisation of
//! contact fields, the calendar windows of caps and the metrics' histogram. No SQLite, no HTTP, no tokio: the
//! crates above own storage and I/O.

// Items are crate-visible unless a crate above names them (see the root crate's lib.rs).
#![warn(unreachable_pub)]

pub mod clock;
pub mod duration;
pub mod fields;
pub mod histogram;
pub mod money;
pub mod normalize;
pub mod outbound_url;
pub mod problem;
pub mod ratelimit;
pub mod schedule;
pub mod secrets;
pub mod windows;
