//! Delivery: turning a lead request and a buyer into a transaction (DESIGN.md section 3).
//!
//! Owns the rules of a delivery (exclusive and multi mode, buyer status, subscription or
//! operator price, prepaid balance, workspace), its economics (buyer price, supplier cost,
//! margin, the prepaid charge), the transaction record and its history, and the body of the
//! `lead.delivered` event. It does not own choosing buyers (auto-delivery does, and calls
//! [`deliver`] for each one it picks), moving a transaction after delivery (lifecycle), or
//! sending the event (the outbox, which gets the event in the same SQLite transaction).

mod deliver;
pub(crate) mod event;
pub mod preview;
pub mod transaction;

pub use deliver::{Delivered, DeliveryOrder, deliver};
pub(crate) use deliver::{DeliveryTerms, Known, LeadDelivery, deliver_known, deliver_lead};

use crate::db::DbError;
use crate::ids::{LeadId, LeadRequestId};
use crate::money::display;

/// Why a delivery was refused. A refusal writes nothing.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("unknown lead request '{0}'")]
    RequestNotFound(String),
    #[error("unknown buyer '{0}'")]
    BuyerNotFound(crate::ids::BuyerId),
    /// The buyer belongs to another workspace than the lead.
    #[error("buyer '{buyer_id}' is not in the lead's workspace '{workspace_id}'")]
    OtherWorkspace {
        buyer_id: crate::ids::BuyerId,
        workspace_id: String,
    },
    /// The lead is cancelled or has a supplier cancellation pending.
    #[error("lead '{lead_id}' is {status} and cannot be delivered")]
    LeadNotActive { lead_id: LeadId, status: String },
    /// The lead's person was erased (or the lead purged): there is nobody to deliver.
    #[error("lead '{0}' was erased and cannot be delivered")]
    LeadErased(LeadId),
    /// The lead's email or phone is suppressed (stored flagged, DESIGN.md 22): never sold.
    #[error("lead '{0}' has a suppressed email or phone and cannot be delivered")]
    LeadSuppressed(LeadId),
    #[error("buyer '{0}' is paused")]
    BuyerPaused(crate::ids::BuyerId),
    /// No subscription to the product and no price given.
    #[error(
        "buyer '{buyer_id}' is not subscribed to product '{product_id}'; give a price with --price"
    )]
    NotSubscribed {
        buyer_id: crate::ids::BuyerId,
        product_id: String,
    },
    /// Exclusive mode: the request has a live transaction already.
    #[error(
        "lead request '{lead_request_id}' is exclusive and already delivered (transaction '{transaction_id}')"
    )]
    AlreadyDelivered {
        lead_request_id: LeadRequestId,
        transaction_id: crate::ids::TransactionId,
    },
    /// The buyer has had this lead request already (in either mode, also when that
    /// transaction was rejected or cancelled).
    #[error(
        "buyer '{buyer_id}' already had lead request '{lead_request_id}' (transaction '{transaction_id}')"
    )]
    AlreadyDeliveredToBuyer {
        lead_request_id: LeadRequestId,
        buyer_id: crate::ids::BuyerId,
        transaction_id: crate::ids::TransactionId,
    },
    /// Multi mode: the container's maximum number of buyers hold the request already.
    #[error("lead request '{lead_request_id}' already went to its maximum of {max_buyers} buyers")]
    MaxBuyersReached {
        lead_request_id: LeadRequestId,
        max_buyers: i64,
    },
    /// A prepaid buyer's balance plus credit limit does not cover the price.
    #[error(
        "buyer '{buyer_id}' has {} available (balance plus credit limit), less than the price {}",
        display(*.available_cents),
        display(*.price_cents)
    )]
    InsufficientBalance {
        buyer_id: crate::ids::BuyerId,
        available_cents: i64,
        price_cents: i64,
    },
    #[error("invalid price {}: it must not be negative", display(*.0))]
    InvalidPrice(i64),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl DeliveryError {
    /// A short machine-readable code: auto-delivery's reason when it is refused.
    pub fn code(&self) -> &'static str {
        match self {
            DeliveryError::RequestNotFound(_) => "lead_request_not_found",
            DeliveryError::BuyerNotFound(_) => "buyer_not_found",
            DeliveryError::OtherWorkspace { .. } => "buyer_in_other_workspace",
            DeliveryError::LeadNotActive { .. } => "lead_not_active",
            DeliveryError::LeadErased(_) => "lead_erased",
            DeliveryError::LeadSuppressed(_) => "lead_suppressed",
            DeliveryError::BuyerPaused(_) => "buyer_paused",
            DeliveryError::NotSubscribed { .. } => "not_subscribed",
            DeliveryError::AlreadyDelivered { .. } => "already_delivered",
            DeliveryError::AlreadyDeliveredToBuyer { .. } => "already_delivered_to_buyer",
            DeliveryError::MaxBuyersReached { .. } => "max_buyers_reached",
            DeliveryError::InsufficientBalance { .. } => "insufficient_balance",
            DeliveryError::InvalidPrice(_) => "invalid_price",
            DeliveryError::Db(_) => "database_error",
        }
    }
}

impl From<rusqlite::Error> for DeliveryError {
    fn from(e: rusqlite::Error) -> Self {
        DeliveryError::Db(DbError::Sqlite(e))
    }
}
