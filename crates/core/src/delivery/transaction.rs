//! The transaction record: what a delivery created, its commercial state, the delivery
//! state of its `lead.delivered` event, and the append-only history of every move.
//!
//! Owns the `transactions` and `transaction_history` tables: every write to them is a
//! function here ([`create`], [`move_to`], [`set_price`], [`clear_charge`],
//! [`reverse_supplier_cost`], [`set_delivery_status`]), and each one that changes the
//! commercial state or the amounts appends to the history in the same call. It does not own
//! the rules of the moves: `delivery::deliver` decides a transaction, the lifecycle module
//! decides its moves, the outbox the delivery state of its event; the money those moves
//! move is the ledger's. Every write that changes what a transaction counts for in the
//! reports (its state, price or supplier cost) tells `report` in the same call
//! ([`count`]), so the report aggregate moves in the job of the change.

use crate::db::PrepareKept;
use std::collections::HashSet;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde::Serialize;
use serde_json::Value;

use crate::config::container::DeliveryMode;
use crate::db::stored::stored_enum;
use crate::ids::{LeadId, LeadRequestId, SourceId, TransactionId};
use crate::report::{Counted, Standing};

stored_enum! {
    /// The commercial state of a transaction (DESIGN.md section 4).
    pub enum Status as "transaction status" {
        Delivered = "delivered",
        Acknowledged = "acknowledged",
        Rejected = "rejected",
        PayoutPending = "payout_pending",
        Paid = "paid",
        Cancelled = "cancelled",
        /// A buyer's return waits for the operator's review (DESIGN.md section 19). Still
        /// a sale: it holds its request and its cap place until the return is approved.
        ReturnRequested = "return_requested",
    }
}

impl Status {
    /// Live transactions count against exclusivity and the multi-mode buyer limit; a
    /// rejected or cancelled one no longer holds its lead request.
    pub fn is_live(self) -> bool {
        !matches!(self, Status::Rejected | Status::Cancelled)
    }

    /// Where a transaction in this status stands in the reports.
    fn standing(self) -> Standing {
        match self {
            // A pending return is still a sale, not yet acknowledged or returned.
            Status::Delivered | Status::ReturnRequested => Standing::Delivered,
            Status::Acknowledged | Status::PayoutPending => Standing::Acknowledged,
            Status::Paid => Standing::Paid,
            Status::Rejected | Status::Cancelled => Standing::Returned,
        }
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
    pub id: TransactionId,
    pub lead_request_id: LeadRequestId,
    pub lead_id: LeadId,
    pub buyer_id: crate::ids::BuyerId,
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
    /// The winning bid that priced it (ping/post): its bid request and the buyer's bid id.
    pub bid: Option<BidRef>,
}

/// A winning bid as a transaction and its event name it (DESIGN.md section 14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BidRef {
    pub bid_request_id: String,
    pub bid_id: Option<String>,
}

impl BidRef {
    pub(crate) fn view(&self) -> BidRefView<'_> {
        BidRefView {
            bid_request_id: &self.bid_request_id,
            bid_id: self.bid_id.as_deref(),
        }
    }
}

/// A winning bid as a transaction and its event show it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BidRefView<'a> {
    bid_request_id: &'a str,
    bid_id: Option<&'a str>,
}

/// The transaction as partners and the operator see it (camelCase, money as numbers).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransactionView<'a> {
    transaction_id: &'a TransactionId,
    #[serde(flatten)]
    sale: SaleView<'a>,
    status: &'static str,
    partner_external_id: Option<&'a str>,
    delivery_status: &'static str,
    created_at: String,
    updated_at: String,
    bid: Option<BidRefView<'a>>,
}

/// What was sold to whom and for how much: the keys a transaction and the `deliver`
/// command's output (`delivery::deliver::Delivered`) share.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SaleView<'a> {
    pub(crate) lead_request_id: LeadRequestId,
    pub(crate) lead_id: LeadId,
    pub(crate) buyer_account_id: &'a str,
    pub(crate) product_id: &'a str,
    pub(crate) delivery_mode: &'static str,
    pub(crate) buyer_price: f64,
    pub(crate) supplier_cost: f64,
    pub(crate) margin_amount: f64,
}

impl Transaction {
    pub fn view(&self) -> TransactionView<'_> {
        TransactionView {
            transaction_id: &self.id,
            sale: SaleView {
                lead_request_id: self.lead_request_id,
                lead_id: self.lead_id,
                buyer_account_id: self.buyer_id.as_str(),
                product_id: &self.product_id,
                delivery_mode: self.delivery_mode.as_str(),
                buyer_price: crate::money::as_f64(self.buyer_price_cents),
                supplier_cost: crate::money::as_f64(self.supplier_cost_cents),
                margin_amount: crate::money::as_f64(self.margin_cents),
            },
            status: self.status.as_str(),
            partner_external_id: self.partner_external_id.as_deref(),
            delivery_status: self.delivery_status.as_str(),
            created_at: crate::clock::iso(self.created_at),
            updated_at: crate::clock::iso(self.updated_at),
            bid: self.bid.as_ref().map(BidRef::view),
        }
    }

    /// [`Transaction::view`] as a JSON value, for callers that keep or compare one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

pub(crate) const COLUMNS: &str = "id, lead_request_id, lead_id, buyer_id, product_id, \
    workspace_id, delivery_mode, buyer_price_cents, supplier_cost_cents, margin_cents, \
    charged_cents, status, partner_external_id, delivery_status, created_at, updated_at, \
    bid_request_id, bid_id";

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
        bid: row
            .get::<_, Option<String>>(16)?
            .map(|bid_request_id| -> rusqlite::Result<BidRef> {
                Ok(BidRef {
                    bid_request_id,
                    bid_id: row.get(17)?,
                })
            })
            .transpose()?,
    })
}

pub fn find(conn: &Connection, id: &TransactionId) -> rusqlite::Result<Option<Transaction>> {
    // Built once: every lifecycle call reads its transaction in its writer job.
    static SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {COLUMNS} FROM transactions WHERE id = ?1"));
    conn.prepare_kept(&SQL)?
        .query_row([id], from_row)
        .optional()
}

/// Every transaction of a lead request, oldest first.
pub fn of_request(
    conn: &Connection,
    lead_request_id: LeadRequestId,
) -> rusqlite::Result<Vec<Transaction>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM transactions WHERE lead_request_id = ?1 ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([lead_request_id], from_row)?;
    rows.collect()
}

/// What `transaction list` and `transaction export` may narrow by; `None` means any.
/// Times are `[from, to)` in ms, of the delivery (`created_at`).
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub buyer_id: Option<crate::ids::BuyerId>,
    pub lead_id: Option<LeadId>,
    pub status: Option<Status>,
    /// Only the transactions of this source's leads.
    pub source_id: Option<SourceId>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// Only the transactions after this one in the list's order (newest first: older
    /// ones), for paging with the last id of the previous page.
    pub after_id: Option<TransactionId>,
    /// At most this many (`list` only).
    pub limit: i64,
}

impl ListFilter {
    /// The WHERE conditions (each a constant of this function, so the SQL holds no input)
    /// and their values in order. Rows are inserted by the one writer in creation order,
    /// so the list's order is (created_at, rowid), the order each time index ends in.
    fn conditions(&self) -> (String, Vec<SqlValue>) {
        let mut sql = vec!["1"];
        let mut values: Vec<SqlValue> = Vec::new();
        if let Some(buyer_id) = &self.buyer_id {
            sql.push("t.buyer_id = ?");
            values.push(buyer_id.clone().into());
        }
        if let Some(lead_id) = self.lead_id {
            sql.push("t.lead_id = ?");
            values.push(rusqlite::types::Value::from(lead_id));
        }
        if let Some(status) = self.status {
            sql.push("t.status = ?");
            values.push(status.as_str().to_string().into());
        }
        if let Some(source_id) = &self.source_id {
            sql.push("EXISTS (SELECT 1 FROM leads l WHERE l.id = t.lead_id AND l.source_id = ?)");
            values.push(source_id.clone().into());
        }
        if let Some(from) = self.from_ms {
            sql.push("t.created_at >= ?");
            values.push(from.into());
        }
        if let Some(to) = self.to_ms {
            sql.push("t.created_at < ?");
            values.push(to.into());
        }
        if let Some(after) = &self.after_id {
            // The time bound is the index range; the row value then orders the
            // transactions of that same millisecond by rowid.
            sql.push(
                "t.created_at <= (SELECT created_at FROM transactions WHERE id = ?) \
                 AND (t.created_at, t.rowid) < (SELECT created_at, rowid FROM transactions WHERE id = ?)",
            );
            values.push(after.clone().into());
            values.push(after.clone().into());
        }
        (sql.join(" AND "), values)
    }

    /// The statement reading the matching transactions ([`COLUMNS`], then the lead's
    /// source) in time order, `direction` `ASC` or `DESC`, at most `limit` of them, and its
    /// values. A buyer, a status or a lead is an index search of its own
    /// (`transactions_buyer_created`, `transactions_status_created`, `transactions_lead`);
    /// without one, each workspace's range of `transactions_workspace_created` is read in
    /// time order and the ranges are merged (a compound SELECT ordered by its result
    /// columns is merged as its arms come, so a limit stops the walk), never a scan and
    /// sort of every transaction.
    fn query(
        &self,
        conn: &Connection,
        direction: &'static str,
        limit: Option<i64>,
    ) -> rusqlite::Result<(String, Vec<SqlValue>)> {
        let (conditions, condition_values) = self.conditions();
        let limit_clause = if limit.is_some() { " LIMIT ?" } else { "" };
        let mut values: Vec<SqlValue> = Vec::new();
        let sql = if self.buyer_id.is_some() || self.status.is_some() || self.lead_id.is_some() {
            values.extend(condition_values);
            format!(
                "SELECT {COLUMNS}, (SELECT l.source_id FROM leads l WHERE l.id = t.lead_id)
                 FROM transactions t WHERE {conditions}
                 ORDER BY t.created_at {direction}, t.rowid {direction}{limit_clause}"
            )
        } else {
            let workspaces: Vec<String> = conn
                .prepare_kept("SELECT id FROM workspaces ORDER BY id")?
                .query_map([], |row| row.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            if workspaces.is_empty() {
                // No workspace, no transaction: a statement that reads none.
                return Ok((
                    format!("SELECT {COLUMNS}, NULL FROM transactions t WHERE 0"),
                    Vec::new(),
                ));
            }
            let arm = format!(
                "SELECT {COLUMNS}, (SELECT l.source_id FROM leads l WHERE l.id = t.lead_id), \
                 t.created_at AS k_at, t.rowid AS k_row \
                 FROM transactions t WHERE t.workspace_id = ? AND {conditions}"
            );
            let mut arms = Vec::new();
            for workspace in workspaces {
                values.push(workspace.into());
                values.extend(condition_values.iter().cloned());
                arms.push(arm.as_str());
            }
            let arms = arms.join(" UNION ALL ");
            format!("{arms} ORDER BY k_at {direction}, k_row {direction}{limit_clause}")
        };
        if let Some(limit) = limit {
            values.push(limit.into());
        }
        Ok((sql, values))
    }
}

/// Transactions matching `filter`, newest first, at most `filter.limit`.
pub fn list(conn: &Connection, filter: &ListFilter) -> rusqlite::Result<Vec<Transaction>> {
    let (sql, values) = filter.query(conn, "DESC", Some(filter.limit))?;
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(values), from_row)?;
    rows.collect()
}

/// Every transaction matching `filter` (its `limit` aside), oldest first, handed to `each`
/// with its lead's source as it is read: one statement, so memory stays what one
/// transaction takes however many match (`transaction export`). `each` may stop the walk
/// with its error.
pub fn for_each<E: From<rusqlite::Error>>(
    conn: &Connection,
    filter: &ListFilter,
    mut each: impl FnMut(&Transaction, &SourceId) -> Result<(), E>,
) -> Result<(), E> {
    let (sql, values) = filter.query(conn, "ASC", None)?;
    let mut stmt = conn.prepare(&sql)?;
    let source_at = COLUMNS.split(',').count();
    let mut rows = stmt.query(params_from_iter(values))?;
    while let Some(row) = rows.next()? {
        let transaction = from_row(row)?;
        let source_id: SourceId = row.get(source_at)?;
        each(&transaction, &source_id)?;
    }
    Ok(())
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

/// One move of a transaction's history as `transaction show` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryEntryView<'a> {
    from: Option<&'static str>,
    to: &'static str,
    actor: &'a str,
    reason: Option<&'a str>,
    at: String,
}

impl HistoryEntry {
    pub fn view(&self) -> HistoryEntryView<'_> {
        HistoryEntryView {
            from: self.from.map(Status::as_str),
            to: self.to.as_str(),
            actor: &self.actor,
            reason: self.reason.as_deref(),
            at: crate::clock::iso(self.at),
        }
    }

    /// [`HistoryEntry::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// Appends a move to the history. The history is append-only: nothing updates or deletes
/// its rows. `actor` says who moved it (`operator`, `auto-delivery`, `buyer:<id>`, …).
fn append_history(
    conn: &Connection,
    transaction_id: &TransactionId,
    from: Option<Status>,
    to: Status,
    actor: &str,
    reason: Option<&str>,
    at: i64,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "INSERT INTO transaction_history (transaction_id, from_status, to_status, actor, reason, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        transaction_id,
        from,
        to,
        actor,
        reason,
        at
    ])?;
    Ok(())
}

/// A transaction to write: what `delivery::deliver` decided.
#[derive(Debug, Clone)]
pub(crate) struct NewTransaction<'a> {
    pub id: &'a TransactionId,
    pub lead_request_id: LeadRequestId,
    pub lead_id: LeadId,
    pub buyer_id: &'a crate::ids::BuyerId,
    pub product_id: &'a str,
    pub workspace_id: &'a str,
    /// The lead's source (the reports count a transaction under it).
    pub source_id: &'a SourceId,
    pub delivery_mode: DeliveryMode,
    pub buyer_price_cents: i64,
    pub supplier_cost_cents: i64,
    pub margin_cents: i64,
    pub charged_cents: i64,
    /// The cap windows of the workspace when the caller has them at hand (auto-delivery);
    /// otherwise they are worked out from the workspace's time zone.
    pub cap_windows: Option<crate::caps::Windows>,
    /// The winning bid that priced it, if a bid did.
    pub bid: Option<&'a BidRef>,
    /// The caller knows the request has no transaction yet (auto-delivery of a lead stored
    /// in the same job): its supplier cost counts in the reports as it is, without a look
    /// for an earlier one that bought the lead.
    pub first_of_request: bool,
}

/// Writes a new transaction, `delivered` with its event pending, and the history entry that
/// starts it, and counts it against the buyer's caps for the product and in the reports.
pub(crate) fn create(
    conn: &Connection,
    new: &NewTransaction,
    actor: &str,
    now: i64,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "INSERT INTO transactions (id, lead_request_id, lead_id, buyer_id, product_id,
            workspace_id, delivery_mode, buyer_price_cents, supplier_cost_cents, margin_cents,
            charged_cents, status, delivery_status, created_at, updated_at, bid_request_id,
            bid_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14, ?15, ?16)",
    )?
    .execute(params![
        new.id,
        new.lead_request_id,
        new.lead_id,
        new.buyer_id,
        new.product_id,
        new.workspace_id,
        new.delivery_mode,
        new.buyer_price_cents,
        new.supplier_cost_cents,
        new.margin_cents,
        new.charged_cents,
        Status::Delivered,
        DeliveryStatus::Pending,
        now,
        new.bid.map(|b| b.bid_request_id.as_str()),
        new.bid.and_then(|b| b.bid_id.as_deref()),
    ])?;
    let windows = match new.cap_windows {
        Some(windows) if windows.contains(now) => windows,
        _ => crate::caps::Windows::at(now, &crate::caps::timezone_of(conn, new.workspace_id)?),
    };
    crate::caps::count(conn, new.buyer_id, new.product_id, &windows)?;
    append_history(conn, new.id, None, Status::Delivered, actor, None, now)?;
    let supplier_cost_cents = if new.first_of_request {
        new.supplier_cost_cents
    } else {
        report_cost(conn, new.id, new.supplier_cost_cents)?
    };
    count(
        conn,
        None,
        &Counted {
            workspace_id: new.workspace_id,
            source_id: new.source_id,
            buyer_id: new.buyer_id,
            product_id: new.product_id,
            delivered_at: now,
            standing: Status::Delivered.standing(),
            buyer_price_cents: new.buyer_price_cents,
            supplier_cost_cents,
        },
    )
}

/// The supplier cost transaction `id` (carrying `supplier_cost_cents`) counts for in the
/// reports: its own when it bought the lead, i.e. no earlier transaction of its request
/// carries one; 0 when it took the cost over from a rejected or cancelled one, which
/// bought nothing new (`delivery::deliver` posts the cost to the supplier's ledger once).
/// Stable while the transaction lives: costs change only when a confirmed cancellation
/// sets them all to 0 ([`reverse_supplier_cost`]).
fn report_cost(
    conn: &Connection,
    id: &TransactionId,
    supplier_cost_cents: i64,
) -> rusqlite::Result<i64> {
    if supplier_cost_cents == 0 {
        return Ok(0);
    }
    let taken_over: bool = conn
        .prepare_kept(
            "SELECT EXISTS (SELECT 1 FROM transactions t JOIN transactions e
                              ON e.lead_request_id = t.lead_request_id
                            WHERE t.id = ?1 AND e.supplier_cost_cents > 0
                              AND (e.created_at, e.rowid) < (t.created_at, t.rowid))",
        )?
        .query_row([id], |row| row.get(0))?;
    Ok(if taken_over { 0 } else { supplier_cost_cents })
}

/// Tells the reports what a write did to a transaction (`before`: `None` when it is new):
/// the one place this module calls `report`.
fn count(conn: &Connection, before: Option<&Counted>, after: &Counted) -> rusqlite::Result<()> {
    crate::report::transaction_changed(conn, before, after)
}

/// The source of lead `lead_id`: where the reports count its transactions.
fn source_of_lead(conn: &Connection, lead_id: LeadId) -> rusqlite::Result<SourceId> {
    conn.prepare_kept("SELECT source_id FROM leads WHERE id = ?1")?
        .query_row([lead_id], |row| row.get(0))
}

/// Transaction `id` as stored with its lead's source, for a write that tells the reports
/// what it was before.
fn stored(conn: &Connection, id: &TransactionId) -> rusqlite::Result<(Transaction, SourceId)> {
    let transaction = find(conn, id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    let source_id = source_of_lead(conn, transaction.lead_id)?;
    Ok((transaction, source_id))
}

impl Transaction {
    /// The transaction as the reports count it, under its lead's `source_id`.
    fn counted<'a>(
        &'a self,
        conn: &Connection,
        source_id: &'a SourceId,
    ) -> rusqlite::Result<Counted<'a>> {
        Ok(Counted {
            workspace_id: &self.workspace_id,
            source_id,
            buyer_id: &self.buyer_id,
            product_id: &self.product_id,
            delivered_at: self.created_at,
            standing: self.status.standing(),
            buyer_price_cents: self.buyer_price_cents,
            supplier_cost_cents: report_cost(conn, &self.id, self.supplier_cost_cents)?,
        })
    }
}

/// Moves the transaction from `from` to `to` and appends the move to its history. A live
/// transaction that ends (rejected, cancelled) gives its place of the buyer's caps back;
/// the reports count it in its new state.
pub(crate) fn move_to(
    conn: &Connection,
    id: &TransactionId,
    from: Status,
    to: Status,
    actor: &str,
    reason: Option<&str>,
    now: i64,
) -> rusqlite::Result<()> {
    let moved = conn
        .prepare_cached(&format!(
            "UPDATE transactions SET status = ?2, updated_at = ?3 WHERE id = ?1
             RETURNING {COLUMNS}"
        ))?
        .query_row(params![id, to, now], from_row)?;
    if from.is_live() && !to.is_live() {
        crate::caps::uncount(
            conn,
            &moved.workspace_id,
            &moved.buyer_id,
            &moved.product_id,
            moved.created_at,
        )?;
    }
    append_history(conn, id, Some(from), to, actor, reason, now)?;
    let source_id = source_of_lead(conn, moved.lead_id)?;
    let after = moved.counted(conn, &source_id)?;
    let before = Counted {
        standing: from.standing(),
        ..after
    };
    count(conn, Some(&before), &after)
}

/// Sets the buyer price (the margin follows: price less supplier cost) and what a prepaid
/// balance was charged for it.
pub(crate) fn set_price(
    conn: &Connection,
    id: &TransactionId,
    buyer_price_cents: i64,
    charged_cents: i64,
) -> rusqlite::Result<()> {
    let (was, source_id) = stored(conn, id)?;
    conn.prepare_kept(
        "UPDATE transactions
         SET buyer_price_cents = ?2, margin_cents = ?2 - supplier_cost_cents, charged_cents = ?3
         WHERE id = ?1",
    )?
    .execute(params![id, buyer_price_cents, charged_cents])?;
    let before = was.counted(conn, &source_id)?;
    let after = Counted {
        buyer_price_cents,
        ..before
    };
    count(conn, Some(&before), &after)
}

/// Removes the free-text reasons from transaction `id`'s history for an erasure (a
/// buyer's or an operator's words about a lead may name its person); every move, its
/// actor and time stay. Returns how many entries had one.
pub(crate) fn erase_reasons(conn: &Connection, id: &TransactionId) -> rusqlite::Result<u64> {
    let changed = conn
        .prepare_kept(
            "UPDATE transaction_history SET reason = NULL
             WHERE transaction_id = ?1 AND reason IS NOT NULL",
        )?
        .execute([id])?;
    Ok(changed as u64)
}

/// The ids of the transactions of lead `lead_id` (an erasure's walk).
pub(crate) fn ids_of_lead(
    conn: &Connection,
    lead_id: LeadId,
) -> rusqlite::Result<Vec<TransactionId>> {
    let mut stmt =
        conn.prepare_kept("SELECT id FROM transactions WHERE lead_id = ?1 ORDER BY id")?;
    let rows = stmt.query_map([lead_id], |row| row.get(0))?;
    rows.collect()
}

/// Records that the prepaid charge was returned (a refund).
pub(crate) fn clear_charge(conn: &Connection, id: &TransactionId) -> rusqlite::Result<()> {
    conn.prepare_kept("UPDATE transactions SET charged_cents = 0 WHERE id = ?1")?
        .execute([id])?;
    Ok(())
}

/// Sets the transaction's supplier cost to 0 and its margin to its buyer price, and notes
/// `reason` in its history (an entry that keeps the state: from and to are the same).
/// Several transactions of one request are reversed newest first: what one counts for in
/// the reports depends on the earlier ones still carrying their cost ([`report_cost`]).
pub(crate) fn reverse_supplier_cost(
    conn: &Connection,
    transaction: &Transaction,
    actor: &str,
    reason: &str,
    now: i64,
) -> rusqlite::Result<()> {
    // As stored: the caller's copy may be older than a move made earlier in the same job.
    let (was, source_id) = stored(conn, &transaction.id)?;
    conn.prepare_kept(
        "UPDATE transactions SET supplier_cost_cents = 0, margin_cents = buyer_price_cents,
            updated_at = ?2
         WHERE id = ?1",
    )?
    .execute(params![transaction.id, now])?;
    append_history(
        conn,
        &transaction.id,
        Some(transaction.status),
        transaction.status,
        actor,
        Some(reason),
        now,
    )?;
    let before = was.counted(conn, &source_id)?;
    let after = Counted {
        supplier_cost_cents: 0,
        ..before
    };
    count(conn, Some(&before), &after)
}

/// How many transactions were delivered to `buyer_id` in `[from, to)` (ms), whatever
/// became of them: the base of the buyer's return cap.
pub(crate) fn delivered_to_buyer(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    from: i64,
    to: i64,
) -> rusqlite::Result<i64> {
    conn.prepare_kept(
        "SELECT count(*) FROM transactions
         WHERE buyer_id = ?1 AND created_at >= ?2 AND created_at < ?3",
    )?
    .query_row(params![buyer_id, from, to], |row| row.get(0))
}

/// Every transaction of a lead, oldest first.
pub(crate) fn of_lead(conn: &Connection, lead_id: LeadId) -> rusqlite::Result<Vec<Transaction>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM transactions WHERE lead_id = ?1 ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([lead_id], from_row)?;
    rows.collect()
}

/// How many transactions a lead has, and how many of them ended without a sale (rejected
/// or cancelled).
pub(crate) fn void_tally(conn: &Connection, lead_id: LeadId) -> rusqlite::Result<(i64, i64)> {
    conn.prepare_kept(
        "SELECT count(*), count(*) FILTER (WHERE status IN ('rejected', 'cancelled'))
         FROM transactions WHERE lead_id = ?1",
    )?
    .query_row([lead_id], |row| Ok((row.get(0)?, row.get(1)?)))
}

/// The buyers that hold any transaction of the request, whatever its state.
pub(crate) fn buyers_of_request(
    conn: &Connection,
    lead_request_id: LeadRequestId,
) -> rusqlite::Result<HashSet<crate::ids::BuyerId>> {
    let mut stmt =
        conn.prepare_kept("SELECT buyer_id FROM transactions WHERE lead_request_id = ?1")?;
    let rows = stmt.query_map([lead_request_id], |row| row.get(0))?;
    rows.collect()
}

/// The history of a transaction, in the order the moves happened.
pub fn history(
    conn: &Connection,
    transaction_id: &TransactionId,
) -> rusqlite::Result<Vec<HistoryEntry>> {
    let mut stmt = conn.prepare_kept(
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

/// Records the delivery state of the transaction's event (the outbox's fact, applied by
/// `attempt`).
pub(crate) fn set_delivery_status(
    conn: &Connection,
    transaction_id: &TransactionId,
    status: DeliveryStatus,
    partner_external_id: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "UPDATE transactions
         SET delivery_status = ?2,
             partner_external_id = coalesce(?3, partner_external_id),
             updated_at = ?4
         WHERE id = ?1",
    )?
    .execute(params![
        transaction_id,
        status,
        partner_external_id,
        crate::clock::now_ms()
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_shows_its_keys_in_the_documented_order() {
        let transaction = Transaction {
            id: "txn_1".into(),
            lead_request_id: "lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9".parse().unwrap(),
            lead_id: "lead_01JD7Q4N9V3X8K2M5P6R7S8T9W".parse().unwrap(),
            buyer_id: "b".into(),
            product_id: "p".into(),
            workspace_id: "w".into(),
            delivery_mode: DeliveryMode::Exclusive,
            buyer_price_cents: 2500,
            supplier_cost_cents: 1250,
            margin_cents: 1250,
            charged_cents: 0,
            status: Status::Delivered,
            partner_external_id: None,
            delivery_status: DeliveryStatus::Pending,
            created_at: 0,
            updated_at: 1,
            bid: Some(BidRef {
                bid_request_id: "bq_1".into(),
                bid_id: None,
            }),
        };
        assert_eq!(
            transaction.to_json().to_string(),
            r#"{"transactionId":"txn_1","leadRequestId":"lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9","#
                .to_string()
                + r#""leadId":"lead_01JD7Q4N9V3X8K2M5P6R7S8T9W","#
                + r#""buyerAccountId":"b","productId":"p","deliveryMode":"exclusive","#
                + r#""buyerPrice":25.0,"supplierCost":12.5,"marginAmount":12.5,"#
                + r#""status":"delivered","partnerExternalId":null,"deliveryStatus":"pending","#
                + r#""createdAt":"1970-01-01T00:00:00.000Z","updatedAt":"1970-01-01T00:00:00.001Z","#
                + r#""bid":{"bidRequestId":"bq_1","bidId":null}}"#
        );
    }

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

    #[test]
    fn every_status_stands_somewhere_in_the_reports() {
        let table = [
            (Status::Delivered, Standing::Delivered),
            (Status::Acknowledged, Standing::Acknowledged),
            (Status::PayoutPending, Standing::Acknowledged),
            (Status::Paid, Standing::Paid),
            (Status::Rejected, Standing::Returned),
            (Status::Cancelled, Standing::Returned),
            (Status::ReturnRequested, Standing::Delivered),
        ];
        assert_eq!(table.len(), Status::ALL.len());
        for (status, standing) in table {
            assert_eq!(status.standing(), standing, "{status:?}");
            assert_eq!(
                status.is_live(),
                standing != Standing::Returned,
                "{status:?}"
            );
        }
    }

    #[test]
    fn every_filter_is_an_index_search_never_a_scan_of_every_transaction() {
        let dir = tempfile::tempdir().expect("a temp dir can be made");
        let path = dir.path().join("plans.db");
        crate::db::Db::open(&path)
            .expect("the database opens")
            .close();
        let conn = Connection::open(&path).expect("the file opens");
        for workspace in ["w1", "w2"] {
            conn.execute(
                "INSERT INTO workspaces (id, name, created_at) VALUES (?1, ?1, 0)",
                [workspace],
            )
            .unwrap();
        }
        let cases = [
            ListFilter {
                source_id: Some("src".into()),
                from_ms: Some(1),
                to_ms: Some(2),
                ..ListFilter::default()
            },
            ListFilter {
                after_id: Some("txn".into()),
                ..ListFilter::default()
            },
            ListFilter {
                buyer_id: Some("buyer".into()),
                from_ms: Some(1),
                ..ListFilter::default()
            },
            ListFilter {
                status: Some(Status::Paid),
                after_id: Some("txn".into()),
                ..ListFilter::default()
            },
        ];
        for filter in cases {
            for (direction, limit) in [("DESC", Some(50)), ("ASC", None)] {
                let (sql, values) = filter.query(&conn, direction, limit).unwrap();
                let steps = crate::db::query_plan(&conn, &sql, params_from_iter(values));
                assert!(
                    steps.iter().all(|s| !s.starts_with("SCAN")),
                    "{filter:?}: every read is an index search: {steps:?}"
                );
                assert!(
                    !steps.iter().any(|s| s.contains("TEMP B-TREE FOR ORDER BY")),
                    "{filter:?}: read in the index's order, not sorted: {steps:?}"
                );
            }
        }
    }
}
