//! The outbox's outbound HTTP: the worker threads that claim due events and send them
//! ([`start`]), the webhook sender and its connector, and the bid client. Everything else
//! of the outbox (its table, schedule, breaker, signing, figures) is the domain crate's
//! `outbox`, re-exported here so that `outbox::…` names one module.

pub use leadrelay_core::outbox::*;

pub mod alert;
pub mod bid;
pub(crate) mod check;
mod connect;
mod pool;
pub(crate) mod sender;
pub(crate) mod test_event;
mod worker;

pub use worker::{Workers, start};
