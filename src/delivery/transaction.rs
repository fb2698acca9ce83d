//! The transaction record: what a delivery created, its commercial state, the delivery
//! state of its `lead.delivered` event, and the append-only history of every move.
//!
//! Owns the `transactions` and `transaction_history` SQL. It does not own the rules of the
//! moves: `delivery::deliver` creates a transaction, the lifecycle module moves it, and the
//! outbox records the delivery state of its event.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Value, json};

use crate::config::container::DeliveryMode;
use crate::db::stored::stored_enum;

stored_enum! {
    /// The commercial state of a transaction (DESIGN.md section 4).
    pub enum Status as "transaction status" {
        Delivered = "delivered",
        Acknowledged = "acknowledged",
        Rejected = "rejected",
        PayoutPending = "payout_pending",
        Paid = "paid",
        Cancelled = "cancelled",
    }
}

impl Status {
    /// Live transactions count against exclusivity and the multi-mode buyer limit; a
    /// rejected or cancelled one no longer holds its lead request.
    pub fn is_live(self) -> bool {
        !matches!(self, Status::Rejected | Status::Cancelled)
    }
}

stored_enum! {
    /// Where the transaction's `lead.delivered` event stands.
    pub enum DeliveryStatus as "transaction delivery status" {
        Pending = "pending",
        Sent = "sent",
        Failed = "failed",
    }
}

#[derive(Debug, Clone)]
pub struct Transaction {
    pub id: String,
    pub lead_request_id: String,
    pub lead_id: String,
    pub buyer_id: String,
    pub product_id: String,
    pub workspace_id: String,
    pub delivery_mode: DeliveryMode,
    pub buyer_price_cents: i64,
    pub supplier_cost_cents: i64,
    pub margin_cents: i64,
    /// What a prepaid buyer's balance was charged for this transaction (0 when postpaid),
    /// so a refund returns exactly that.
    pub charged_cents: i64,
    pub status: Status,
    pub partner_external_id: Option<String>,
    pub delivery_status: DeliveryStatus,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Transaction {
    /// The transaction as partners and the operator see it (camelCase, money as numbers).
    pub fn to_json(&self) -> Value {
        json!({
            "transactionId": self.id,
            "leadRequestId": self.lead_request_id,
            "leadId": self.lead_id,
            "buyerAccountId": self.buyer_id,
            "productId": self.product_id,
            "deliveryMode": self.delivery_mode.as_str(),
            "buyerPrice": crate::money::to_json(self.buyer_price_cents),
            "supplierCost": crate::money::to_json(self.supplier_cost_cents),
            "marginAmount": crate::money::to_json(self.margin_cents),
            "status": self.status.as_str(),
            "partnerExternalId": self.partner_external_id,
            "deliveryStatus": self.delivery_status.as_str(),
            "createdAt": crate::clock::iso(self.created_at),
            "updatedAt": crate::clock::iso(self.updated_at),
        })
    }
}

pub(crate) const COLUMNS: &str = "id, lead_request_id, lead_id, buyer_id, product_id, \
    workspace_id, delivery_mode, buyer_price_cents, supplier_cost_cents, margin_cents, \
    charged_cents, status, partner_external_id, delivery_status, created_at, updated_at";

pub(crate) fn from_row(row: &Row) -> rusqlite::Result<Transaction> {
    Ok(Transaction {
        id: row.get(0)?,
        lead_request_id: row.get(1)?,
        lead_id: row.get(2)?,
        buyer_id: row.get(3)?,
        product_id: row.get(4)?,
        workspace_id: row.get(5)?,
        delivery_mode: row.get(6)?,
        buyer_price_cents: row.get(7)?,
        supplier_cost_cents: row.get(8)?,
        margin_cents: row.get(9)?,
        charged_cents: row.get(10)?,
        status: row.get(11)?,
        partner_external_id: row.get(12)?,
        delivery_status: row.get(13)?,
        created_at: row.get(14)?,
        updated_at: row.get(15)?,
    })
}

pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Transaction>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM transactions WHERE id = ?1"))?
        .query_row([id], from_row)
        .optional()
}

/// Every transaction of a lead request, oldest first.
pub fn of_request(conn: &Connection, lead_request_id: &str) -> rusqlite::Result<Vec<Transaction>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM transactions WHERE lead_request_id = ?1 ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([lead_request_id], from_row)?;
    rows.collect()
}

/// What `transaction list` may narrow by; `None` means any.
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub buyer_id: Option<String>,
    pub lead_id: Option<String>,
    pub status: Option<Status>,
    pub limit: i64,
}

/// Transactions matching `filter`, newest first.
pub fn list(conn: &Connection, filter: &ListFilter) -> rusqlite::Result<Vec<Transaction>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM transactions
         WHERE (?1 IS NULL OR buyer_id = ?1)
           AND (?2 IS NULL OR lead_id = ?2)
           AND (?3 IS NULL OR status = ?3)
         ORDER BY created_at DESC, id DESC
         LIMIT ?4"
    ))?;
    let rows = stmt.query_map(
        params![
            filter.buyer_id,
            filter.lead_id,
            filter.status.map(Status::as_str),
            filter.limit
        ],
        from_row,
    )?;
    rows.collect()
}

/// One move in a transaction's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// `None` for the entry that created the transaction.
    pub from: Option<Status>,
    pub to: Status,
    pub actor: String,
    pub reason: Option<String>,
    pub at: i64,
}

impl HistoryEntry {
    pub fn to_json(&self) -> Value {
        json!({
            "from": self.from.map(Status::as_str),
            "to": self.to.as_str(),
            "actor": self.actor,
            "reason": self.reason,
            "at": crate::clock::iso(self.at),
        })
    }
}

/// Appends a move to the history. The history is append-only: nothing updates or deletes
/// its rows. `actor` says who moved it (`operator`, `auto-delivery`, `buyer:<id>`, …).
pub fn append_history(
    conn: &Connection,
    transaction_id: &str,
    from: Option<Status>,
    to: Status,
    actor: &str,
    reason: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO transaction_history (transaction_id, from_status, to_status, actor, reason, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        transaction_id,
        from.map(Status::as_str),
        to.as_str(),
        actor,
        reason,
        crate::clock::now_ms()
    ])?;
    Ok(())
}

/// The history of a transaction, in the order the moves happened.
pub fn history(conn: &Connection, transaction_id: &str) -> rusqlite::Result<Vec<HistoryEntry>> {
    let mut stmt = conn.prepare_cached(
        "SELECT from_status, to_status, actor, reason, at FROM transaction_history
         WHERE transaction_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([transaction_id], |row| {
        Ok(HistoryEntry {
            from: row.get(0)?,
            to: row.get(1)?,
            actor: row.get(2)?,
            reason: row.get(3)?,
            at: row.get(4)?,
        })
    })?;
    rows.collect()
}

/// Records the delivery state of the transaction's event (called by the outbox).
pub(crate) fn set_delivery_status(
    conn: &Connection,
    transaction_id: &str,
    status: DeliveryStatus,
    partner_external_id: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE transactions
         SET delivery_status = ?2,
             partner_external_id = coalesce(?3, partner_external_id),
             updated_at = ?4
         WHERE id = ?1",
    )?
    .execute(params![
        transaction_id,
        status.as_str(),
        partner_external_id,
        crate::clock::now_ms()
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_round_trip_and_liveness() {
        for &status in Status::ALL {
            assert_eq!(Status::parse(status.as_str()), Some(status));
        }
        assert_eq!(Status::parse("shipped"), None);
        assert!(Status::Delivered.is_live());
        assert!(Status::Paid.is_live());
        assert!(!Status::Rejected.is_live());
        assert!(!Status::Cancelled.is_live());
    }
}
