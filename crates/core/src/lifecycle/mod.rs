//! The transaction lifecycle after delivery (DESIGN.md sections 4 and 6): buyers
//! acknowledge, reject, mark payout pending, complete the payout or cancel; suppliers
//! answer lead cancellations (clawback).
//!
//! Owns the state machine (`state`), reading lifecycle bodies (`input`), finding and
//! authorising the transaction of a buyer call (`lookup`), applying a move with its money
//! and history (`apply`), the buyer calls (`buyer`), supplier cancellations (`clawback`
//! opens them, `supplier` takes the supplier's answer), the operator's void of a sale
//! (`void`), returns with their review (`returns`) and `LifecycleError`. The HTTP half
//! of the endpoints (headers, body, status) is `http::handlers::lifecycle`. It does not own the transaction record or its
//! history table (`delivery::transaction`), nor buyers and suppliers (`config`).

pub(crate) mod apply;
pub mod buyer;
pub mod clawback;
pub(crate) mod error;
pub mod input;
pub(crate) mod lookup;
pub mod refusal;
pub mod returns;
pub mod state;
pub mod supplier;
pub mod void;

pub use error::LifecycleError;
