//! Reading the ledger: rows by party and time, a party's sum, a lead's supplier money, and
//! the buyers whose cached balance is not the sum of their rows (for `leadrelay check`).

use crate::db::PrepareKept;
use rusqlite::{Connection, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::Kind;

/// A ledger row as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: i64,
    pub at: i64,
    pub workspace_id: String,
    pub buyer_id: Option<crate::ids::BuyerId>,
    pub supplier_id: Option<crate::ids::SupplierId>,
    pub transaction_id: Option<crate::ids::TransactionId>,
    pub kind: Kind,
    pub amount_cents: i64,
    pub reason: Option<String>,
    pub actor: String,
}

impl Entry {
    /// The row as `ledger list --json` prints it (DESIGN.md section 11).
    pub fn view(&self) -> EntryView<'_> {
        EntryView {
            id: self.id,
            at: crate::clock::iso(self.at),
            kind: self.kind.as_str(),
            workspace_id: &self.workspace_id,
            buyer_id: self.buyer_id.as_ref(),
            supplier_id: self.supplier_id.as_ref(),
            transaction_id: self.transaction_id.as_ref(),
            amount: crate::money::as_f64(self.amount_cents),
            reason: self.reason.as_deref(),
            actor: &self.actor,
        }
    }

    /// [`Entry::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// A ledger row as `ledger list --json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryView<'a> {
    id: i64,
    at: String,
    kind: &'static str,
    workspace_id: &'a str,
    buyer_id: Option<&'a crate::ids::BuyerId>,
    supplier_id: Option<&'a crate::ids::SupplierId>,
    transaction_id: Option<&'a crate::ids::TransactionId>,
    amount: f64,
    reason: Option<&'a str>,
    actor: &'a str,
}

const COLUMNS: &str = "id, at, workspace_id, buyer_id, supplier_id, transaction_id, kind, \
    amount_cents, reason, actor";

fn from_row(row: &Row) -> rusqlite::Result<Entry> {
    Ok(Entry {
        id: row.get(0)?,
        at: row.get(1)?,
        workspace_id: row.get(2)?,
        buyer_id: row.get(3)?,
        supplier_id: row.get(4)?,
        transaction_id: row.get(5)?,
        kind: row.get(6)?,
        amount_cents: row.get(7)?,
        reason: row.get(8)?,
        actor: row.get(9)?,
    })
}

/// What `ledger list` narrows by; `None` means any. Times are `[from, to)` in ms.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub buyer_id: Option<crate::ids::BuyerId>,
    pub supplier_id: Option<crate::ids::SupplierId>,
    pub transaction_id: Option<crate::ids::TransactionId>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    pub limit: i64,
}

/// Rows matching `filter`, oldest first (a statement reads top to bottom). Each narrowing
/// has its own statement so that SQLite uses its index: by buyer or supplier and time, by
/// transaction, by time.
pub fn list(conn: &Connection, filter: &ListFilter) -> rusqlite::Result<Vec<Entry>> {
    const RANGE: &str = "at >= coalesce(?2, -9223372036854775808) \
        AND at < coalesce(?3, 9223372036854775807) ORDER BY at, id LIMIT ?4";
    let (sql, party) = match (
        &filter.buyer_id,
        &filter.supplier_id,
        &filter.transaction_id,
    ) {
        (Some(buyer), _, _) => (
            format!("SELECT {COLUMNS} FROM ledger_entries WHERE buyer_id = ?1 AND {RANGE}"),
            Some(buyer.as_str()),
        ),
        (None, Some(supplier), _) => (
            format!("SELECT {COLUMNS} FROM ledger_entries WHERE supplier_id = ?1 AND {RANGE}"),
            Some(supplier.as_str()),
        ),
        (None, None, Some(transaction)) => (
            format!("SELECT {COLUMNS} FROM ledger_entries WHERE transaction_id = ?1 AND {RANGE}"),
            Some(transaction.as_str()),
        ),
        (None, None, None) => (
            format!("SELECT {COLUMNS} FROM ledger_entries WHERE ?1 IS NULL AND {RANGE}"),
            None,
        ),
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![party, filter.from_ms, filter.to_ms, filter.limit],
        from_row,
    )?;
    rows.collect()
}

/// A buyer's balance as its ledger says: the sum of its rows.
#[cfg(test)]
pub(crate) fn buyer_balance(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
) -> rusqlite::Result<i64> {
    conn.prepare_kept(
        "SELECT coalesce(sum(amount_cents), 0) FROM ledger_entries WHERE buyer_id = ?1",
    )?
    .query_row([buyer_id], |row| row.get(0))
}

/// What the operator owes a supplier as its ledger says.
#[cfg(test)]
pub(crate) fn supplier_balance(
    conn: &Connection,
    supplier_id: &crate::ids::SupplierId,
) -> rusqlite::Result<i64> {
    conn.prepare_kept(
        "SELECT coalesce(sum(amount_cents), 0) FROM ledger_entries WHERE supplier_id = ?1",
    )?
    .query_row([supplier_id], |row| row.get(0))
}

/// What one supplier holds from one transaction of a lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SupplierHolding {
    pub workspace_id: String,
    pub supplier_id: crate::ids::SupplierId,
    pub transaction_id: crate::ids::TransactionId,
    pub amount_cents: i64,
}

/// The supplier money on the transactions of `lead_id` that is not reversed yet: per
/// supplier and transaction, the sum of its rows, where it is not 0.
pub(crate) fn supplier_holdings_of_lead(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
) -> rusqlite::Result<Vec<SupplierHolding>> {
    let mut stmt = conn.prepare_kept(
        "SELECT e.workspace_id, e.supplier_id, e.transaction_id, sum(e.amount_cents)
         FROM transactions t JOIN ledger_entries e ON e.transaction_id = t.id
         WHERE t.lead_id = ?1 AND e.supplier_id IS NOT NULL
         GROUP BY e.workspace_id, e.supplier_id, e.transaction_id
         HAVING sum(e.amount_cents) <> 0
         ORDER BY e.transaction_id, e.supplier_id",
    )?;
    let rows = stmt.query_map([lead_id], |row| {
        Ok(SupplierHolding {
            workspace_id: row.get(0)?,
            supplier_id: row.get(1)?,
            transaction_id: row.get(2)?,
            amount_cents: row.get(3)?,
        })
    })?;
    rows.collect()
}

/// A buyer whose cached balance is not the sum of its ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BalanceMismatch {
    pub buyer_id: crate::ids::BuyerId,
    pub cached_cents: i64,
    pub ledger_cents: i64,
}

impl BalanceMismatch {
    /// The line `check` prints for it.
    pub(crate) fn problem(&self) -> String {
        format!(
            "buyer '{}': balance {} differs from the sum of its ledger {} (by {})",
            self.buyer_id,
            crate::money::display(self.cached_cents),
            crate::money::display(self.ledger_cents),
            crate::money::display(self.cached_cents.saturating_sub(self.ledger_cents)),
        )
    }
}

/// Every buyer whose `balance_cents` is not the sum of its rows (one pass over the buyer
/// index of the ledger).
pub(crate) fn balance_mismatches(conn: &Connection) -> rusqlite::Result<Vec<BalanceMismatch>> {
    let mut stmt = conn.prepare(
        "SELECT b.id, b.balance_cents, coalesce(l.total, 0)
         FROM buyers b
         LEFT JOIN (SELECT buyer_id, sum(amount_cents) AS total FROM ledger_entries
                    WHERE buyer_id IS NOT NULL GROUP BY buyer_id) l ON l.buyer_id = b.id
         WHERE b.balance_cents IS NOT coalesce(l.total, 0)
         ORDER BY b.id",
    )?;
    let rows = stmt.query_map([], |row| {
        Ok(BalanceMismatch {
            buyer_id: row.get(0)?,
            cached_cents: row.get(1)?,
            ledger_cents: row.get(2)?,
        })
    })?;
    rows.collect()
}
