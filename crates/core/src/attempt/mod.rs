//! The use case that records an attempt (DESIGN.md section 24): what the outbox's senders
//! finished, applied in the outbox's writer job, and the operator's retry of events.
//!
//! Composes the owners in the caller's job: `outbox::store` records each attempt and
//! moves its event, and returns facts ([`record_all`]: the transaction's delivery status,
//! a buyer API's refusal); this module applies them through `delivery::transaction`
//! (`set_delivery_status`), and on a refusal takes the sale back (`lifecycle::refusal`)
//! and lets the waterfall offer the lead to the next buyer (`waterfall`). An operator's
//! retry ([`retry_event`], [`retry_buyer`]) reopens events through the outbox after
//! checking here that their sale was not taken back, and sets the transaction's delivery
//! status back to pending.
//!
//! Owns no table and makes no network call: the sends are the edge's (`outbox::worker`,
//! `outbox::sender`), the rows those of the owners named above.

mod record;
mod retry;
#[cfg(test)]
mod tests;

pub use record::{Recorded, record_all};
pub(crate) use retry::retry_event;
pub use retry::{RetryError, retry_buyer};
