//! The transaction lifecycle after delivery (DESIGN.md sections 4 and 6).
//!
//! Being built: the state machine (`state`), reading lifecycle bodies (`input`) and
//! `LifecycleError`. The modules that need the transaction record of `delivery` join once
//! it has landed.

pub mod error;
pub mod input;
pub mod state;

pub use error::LifecycleError;
