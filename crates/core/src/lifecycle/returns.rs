//! Returns (DESIGN.md section 19): a buyer's claim that a delivered lead is bad, made by its
//! cancellation (partner-cancellation, or the operator's `transaction return request`).
//!
//! Owns the `returns` table (one return per transaction, ever) and the rules around a
//! return: its reason code (`config::return_reason::resolve`), the buyer's return cap
//! (`state::return_cap_allows`), a denied return not asked again, and the operator's
//! decision on a pending one with the `transaction.return_decided` event it sends, and
//! `report --by reason` (the owner's report query, over the local dates `report` cuts). It does
//! not move money or transactions itself: an approval ends the sale through
//! `apply::end_sale`, exactly as a cancellation under `auto` review does; a denial moves the
//! transaction back through its owner. Everything here runs inside one writer job, so a
//! return racing another return, a payout or another decision is decided on what the
//! job reads, never on an earlier read.

use crate::db::PrepareKept;
use std::collections::HashMap;

use jiff::civil::Date;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::apply;
use super::error::LifecycleError;
use super::state::{self, Status};
use crate::config::buyer::{Buyer, ReturnReview};
use crate::config::return_reason;
use crate::db::stored::stored_enum;
use crate::delivery::transaction::{self, Transaction};
use crate::report::ReportError;

stored_enum! {
    /// Where a return stands: waiting for the operator, or decided.
    pub enum ReturnStatus as "return status" {
        Pending = "pending",
        Approved = "approved",
        Denied = "denied",
    }
}

/// The operator's decision on a pending return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Deny,
}

impl Decision {
    fn status(self) -> ReturnStatus {
        match self {
            Decision::Approve => ReturnStatus::Approved,
            Decision::Deny => ReturnStatus::Denied,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Return {
    pub transaction_id: crate::ids::TransactionId,
    pub buyer_id: crate::ids::BuyerId,
    pub reason_code: String,
    pub reason: Option<String>,
    pub status: ReturnStatus,
    /// Where a denial puts the transaction back.
    pub previous_status: Status,
    pub requested_at: i64,
    pub decided_at: Option<i64>,
    pub note: Option<String>,
}

/// A return as the review queue shows it (`transaction return list --json`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReturnView<'a> {
    transaction_id: &'a crate::ids::TransactionId,
    buyer_id: &'a crate::ids::BuyerId,
    reason_code: &'a str,
    reason: Option<&'a str>,
    requested_at: String,
    status: &'static str,
    decided_at: Option<String>,
    note: Option<&'a str>,
}

impl Return {
    pub fn view(&self) -> ReturnView<'_> {
        ReturnView {
            transaction_id: &self.transaction_id,
            buyer_id: &self.buyer_id,
            reason_code: &self.reason_code,
            reason: self.reason.as_deref(),
            requested_at: crate::clock::iso(self.requested_at),
            status: self.status.as_str(),
            decided_at: self.decided_at.map(crate::clock::iso),
            note: self.note.as_deref(),
        }
    }

    /// [`Return::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a return view serialises")
    }
}

/// The columns the code reads; `workspace_id`, `requested_by` and `decided_by` are kept
/// for the operator reading the table and for the queue's filter.
const COLUMNS: &str = "transaction_id, buyer_id, reason_code, reason, status, previous_status, \
    requested_at, decided_at, note";

fn from_row(row: &Row) -> rusqlite::Result<Return> {
    Ok(Return {
        transaction_id: row.get(0)?,
        buyer_id: row.get(1)?,
        reason_code: row.get(2)?,
        reason: row.get(3)?,
        status: row.get(4)?,
        previous_status: row.get(5)?,
        requested_at: row.get(6)?,
        decided_at: row.get(7)?,
        note: row.get(8)?,
    })
}

/// The return of transaction `id`, if one was ever requested.
pub fn find(conn: &Connection, id: &crate::ids::TransactionId) -> rusqlite::Result<Option<Return>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM returns WHERE transaction_id = ?1"
    ))?
    .query_row([id], from_row)
    .optional()
}

/// Removes the free text of transaction `id`'s return (the buyer's reason, the operator's
/// note) for an erasure: a person's words may name the person. The code, the decision and
/// the times stay. Returns how many returns had any.
pub(crate) fn erase_reasons(
    conn: &Connection,
    id: &crate::ids::TransactionId,
) -> rusqlite::Result<u64> {
    let changed = conn
        .prepare_kept(
            "UPDATE returns SET reason = NULL, note = NULL
             WHERE transaction_id = ?1 AND (reason IS NOT NULL OR note IS NOT NULL)",
        )?
        .execute([id])?;
    Ok(changed as u64)
}

/// What the review queue may narrow by; `None` means any.
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub workspace_id: Option<String>,
    pub status: Option<ReturnStatus>,
    pub limit: i64,
}

/// Returns in the order they were requested.
pub fn list(conn: &Connection, filter: &ListFilter) -> rusqlite::Result<Vec<Return>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM returns
         WHERE (?1 IS NULL OR workspace_id = ?1) AND (?2 IS NULL OR status = ?2)
         ORDER BY requested_at, transaction_id LIMIT ?3"
    ))?
    .query_map(
        params![filter.workspace_id, filter.status, filter.limit],
        from_row,
    )?
    .collect()
}

/// A return's count per reason code over `[from, to)` of the request times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasonCount {
    pub reason_code: String,
    pub requested: i64,
    pub pending: i64,
    pub approved: i64,
    pub denied: i64,
}

/// The workspace's returns requested in `[from, to)`, per reason code (`report --by
/// reason`).
pub(crate) fn by_reason(
    conn: &Connection,
    workspace_id: &str,
    from: i64,
    to: i64,
) -> rusqlite::Result<Vec<ReasonCount>> {
    conn.prepare_kept(
        "SELECT reason_code, count(*), sum(status = 'pending'), sum(status = 'approved'),
                sum(status = 'denied')
         FROM returns
         WHERE workspace_id = ?1 AND requested_at >= ?2 AND requested_at < ?3
         GROUP BY reason_code ORDER BY reason_code",
    )?
    .query_map(params![workspace_id, from, to], |row| {
        Ok(ReasonCount {
            reason_code: row.get(0)?,
            requested: row.get(1)?,
            pending: row.get(2)?,
            approved: row.get(3)?,
            denied: row.get(4)?,
        })
    })?
    .collect()
}

/// `report --by reason` (DESIGN.md section 19): the workspace's returns requested on the
/// local dates `from` to `to` (both included), per reason code, with each code's label
/// (none for a code removed since). Read from the returns themselves, which are few.
#[derive(Debug, Clone)]
pub struct ReasonReport {
    pub workspace_id: String,
    pub timezone: String,
    pub from: Date,
    pub to: Date,
    pub rows: Vec<(Option<String>, ReasonCount)>,
}

impl ReasonReport {
    /// The counted columns, in order.
    pub const COLUMNS: [&'static str; 4] = ["requested", "pending", "approved", "denied"];

    pub fn figures(count: &ReasonCount) -> [i64; 4] {
        [count.requested, count.pending, count.approved, count.denied]
    }

    pub fn totals(&self) -> [i64; 4] {
        self.rows.iter().fold([0; 4], |mut sum, (_, count)| {
            for (total, n) in sum.iter_mut().zip(Self::figures(count)) {
                *total += n;
            }
            sum
        })
    }

    pub fn view(&self) -> ReasonReportView<'_> {
        let [requested, pending, approved, denied] = self.totals();
        ReasonReportView {
            workspace_id: &self.workspace_id,
            timezone: &self.timezone,
            from: self.from.to_string(),
            to: self.to.to_string(),
            by: ["reason"],
            rows: self
                .rows
                .iter()
                .map(|(label, count)| ReasonRowView {
                    reason: &count.reason_code,
                    label: label.as_deref(),
                    figures: ReasonFigures {
                        requested: count.requested,
                        pending: count.pending,
                        approved: count.approved,
                        denied: count.denied,
                    },
                })
                .collect(),
            totals: ReasonFigures {
                requested,
                pending,
                approved,
                denied,
            },
        }
    }

    /// [`ReasonReport::view`] as a JSON value, for callers that print one.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a reason report view serialises")
    }
}

/// `report --by reason --json`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasonReportView<'a> {
    workspace_id: &'a str,
    timezone: &'a str,
    from: String,
    to: String,
    by: [&'static str; 1],
    rows: Vec<ReasonRowView<'a>>,
    totals: ReasonFigures,
}

/// One reason code's line of [`ReasonReportView`].
#[derive(Debug, Clone, Serialize)]
pub struct ReasonRowView<'a> {
    reason: &'a str,
    label: Option<&'a str>,
    #[serde(flatten)]
    figures: ReasonFigures,
}

/// The counted columns of a reason report line, named as [`ReasonReport::COLUMNS`].
#[derive(Debug, Clone, Serialize)]
pub struct ReasonFigures {
    requested: i64,
    pending: i64,
    approved: i64,
    denied: i64,
}

/// The [`ReasonReport`] of `workspace_id` for the local dates `from` to `to`.
pub fn reason_report(
    conn: &Connection,
    workspace_id: &str,
    from: Date,
    to: Date,
) -> Result<ReasonReport, ReportError> {
    let (timezone, _, start, end) = crate::report::local_range(conn, workspace_id, from, to)?;
    let labels: HashMap<String, String> = return_reason::codes(conn, workspace_id)?
        .into_iter()
        .map(|r| (r.code, r.label))
        .collect();
    let rows = by_reason(conn, workspace_id, start, end)?
        .into_iter()
        .map(|count| (labels.get(&count.reason_code).cloned(), count))
        .collect();
    Ok(ReasonReport {
        workspace_id: workspace_id.to_string(),
        timezone,
        from,
        to,
        rows,
    })
}

/// A `report --by reason` as CSV: a header line and one line per reason code.
pub fn write_reasons_csv<W: std::io::Write>(out: W, report: &ReasonReport) -> csv::Result<()> {
    use crate::report::csv::{Cell, Writer};
    let mut csv = Writer::new(out);
    csv.header(["reason", "label"].into_iter().chain(ReasonReport::COLUMNS))?;
    for (label, count) in &report.rows {
        let cells = [
            Cell::text(count.reason_code.as_str()),
            Cell::text(label.as_deref().unwrap_or_default()),
        ];
        let figures = ReasonReport::figures(count).into_iter().map(Cell::number);
        csv.record(cells.into_iter().chain(figures))?;
    }
    csv.flush()?;
    Ok(())
}

/// The returns of `buyer_id` requested in `[from, to)` that count against its cap: pending
/// and approved ones (a denied return was no return).
fn counted_returns(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    from: i64,
    to: i64,
) -> rusqlite::Result<i64> {
    conn.prepare_kept(
        "SELECT count(*) FROM returns
         WHERE buyer_id = ?1 AND requested_at >= ?2 AND requested_at < ?3 AND status <> 'denied'",
    )?
    .query_row(params![buyer_id, from, to], |row| row.get(0))
}

/// What a return says and who asks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claim<'a> {
    /// `reasonCode`, checked against the workspace's list.
    pub reason_code: Option<&'a str>,
    /// The free text, kept as it is (and matched to a code when no code is given).
    pub reason: Option<&'a str>,
    pub actor: &'a str,
}

/// How a filed return goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Review {
    /// The buyer's review is `auto`: the caller ends the sale now.
    Now,
    /// The buyer's review is `manual`: the transaction waits in `return_requested`.
    Pending,
}

/// Files the return of `current` (a live transaction the cancellation may move, inside its
/// window) for `buyer`: refuses a transaction whose return was denied, a reason code not on
/// the workspace's list and a return past the buyer's cap; otherwise records it (approved
/// at once under `auto` review, pending under `manual`). Nothing is written when it
/// refuses.
pub(super) fn file(
    conn: &Connection,
    current: &Transaction,
    buyer: &Buyer,
    claim: &Claim,
    now: i64,
) -> Result<Review, LifecycleError> {
    if let Some(earlier) = find(conn, &current.id)? {
        return Err(match earlier.status {
            ReturnStatus::Denied => LifecycleError::ReturnDenied,
            // A pending return holds the transaction in `return_requested` and an approved
            // one ended it, so the state machine answers before this; kept total.
            status => LifecycleError::ReturnAlreadyDecided {
                status: status.to_string(),
            },
        });
    }
    let reason_code =
        return_reason::resolve(conn, &current.workspace_id, claim.reason_code, claim.reason)?
            .map_err(|unknown| LifecycleError::UnknownReasonCode {
                given: unknown.given,
                valid: unknown.valid,
            })?;
    if let Some(cap_bp) = buyer.return_cap_bp {
        let tz = crate::caps::timezone_of(conn, &current.workspace_id)?;
        let (from, to) = crate::caps::Windows::at(now, &tz).month;
        let returned = counted_returns(conn, &buyer.id, from, to)?;
        let delivered = transaction::delivered_to_buyer(conn, &buyer.id, from, to)?;
        if !state::return_cap_allows(cap_bp, returned, delivered) {
            return Err(LifecycleError::ReturnCapReached {
                cap_bp,
                returned,
                delivered,
            });
        }
    }
    let (review, status, decided) = match buyer.return_review {
        ReturnReview::Auto => (Review::Now, ReturnStatus::Approved, Some(now)),
        ReturnReview::Manual => (Review::Pending, ReturnStatus::Pending, None),
    };
    conn.prepare_kept(
        "INSERT INTO returns (transaction_id, workspace_id, buyer_id, reason_code, reason,
            status, previous_status, requested_by, requested_at, decided_by, decided_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        current.id,
        current.workspace_id,
        buyer.id,
        reason_code,
        claim.reason,
        status,
        current.status,
        claim.actor,
        now,
        decided.map(|_| claim.actor),
        decided,
    ])?;
    Ok(review)
}

/// What the operator's return filed for a buyer did.
#[derive(Debug, Clone)]
pub struct Filed {
    applied: apply::Applied,
    filed: Option<Return>,
}

impl Filed {
    /// Whether the return was filed before (a replay changes nothing).
    pub fn already_applied(&self) -> bool {
        self.applied.already_applied
    }

    pub fn view(&self) -> FiledView<'_> {
        FiledView {
            code: self.applied.state.as_str(),
            already_applied: self.applied.already_applied,
            economics_applied: self.applied.economics_applied,
            item: self.applied.item.view(),
            filed: self.filed.as_ref().map(Return::view),
            outcome: (self.applied.state == Status::ReturnRequested).then_some("pending_review"),
        }
    }

    /// [`Filed::view`] as a JSON value, for callers that print one.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a filed return view serialises")
    }
}

/// `transaction return request --json`: the move, the transaction after it and the return.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FiledView<'a> {
    code: &'static str,
    already_applied: bool,
    economics_applied: bool,
    item: crate::delivery::transaction::TransactionView<'a>,
    #[serde(rename = "return")]
    filed: Option<ReturnView<'a>>,
    /// Only a return that waits for review says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
}

/// The operator's return of transaction `id` for its buyer (`transaction return request`),
/// with `reason_code` and `note` as the return's text, as `actor` at `now`: the buyer's
/// cancellation, taken through the same path as the buyer's own call (`apply::apply`), so
/// the same rules hold (window, state, denied, code, cap, review).
pub fn request(
    conn: &Connection,
    id: &crate::ids::TransactionId,
    reason_code: &str,
    note: Option<&str>,
    actor: &str,
    now: i64,
) -> Result<Filed, LifecycleError> {
    let current = transaction::find(conn, id)?.ok_or(LifecycleError::TransactionNotFound)?;
    let buyer = crate::config::buyer::find(conn, &current.buyer_id)?
        .ok_or(LifecycleError::TransactionNotFound)?;
    let call = super::input::BuyerCall {
        address: super::input::Address {
            transaction_id: Some(id.clone()),
            external_id: None,
            buyer_account_id: None,
        },
        requested: state::Move::Cancel,
        reason: note.map(str::to_string),
        buyer_price_cents: None,
        reason_code: Some(reason_code.to_string()),
    };
    let applied = apply::apply(conn, current, &buyer, &call, actor, now)?;
    Ok(Filed {
        applied,
        filed: find(conn, id)?,
    })
}

/// Whether buyer `buyer` may ask to return `current` now: the state machine takes a
/// cancellation from its state and the cancellation window is open. The rules a filing
/// checks beyond these (the code, the cap, a return already filed) answer when it is
/// filed; this only says whether to offer the form (the buyer portal's lead page).
pub fn may_request(current: &Transaction, buyer: &Buyer, now: i64) -> bool {
    matches!(
        state::decide(current.status, state::Move::Cancel),
        state::Transition::Apply(_)
    ) && state::cancellation_window_open(current.created_at, buyer.cancellation_window_secs, now)
}

/// What a decision did.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The return after the decision.
    pub item: Return,
    /// The transaction after the decision.
    pub transaction: Transaction,
    /// Whether an approval refunded a prepaid charge.
    pub refunded: bool,
    /// Whether the buyer is sent `transaction.return_decided` (it has the generic
    /// integration).
    pub event_queued: bool,
}

impl Decided {
    pub fn view(&self) -> DecidedView<'_> {
        DecidedView {
            item: self.item.view(),
            transaction: self.transaction.view(),
            refunded: self.refunded,
            event_queued: self.event_queued,
        }
    }

    /// [`Decided::view`] as a JSON value, for callers that print one.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a decided return view serialises")
    }
}

/// `transaction return approve|deny --json`: the return with the transaction after it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecidedView<'a> {
    #[serde(flatten)]
    item: ReturnView<'a>,
    transaction: crate::delivery::transaction::TransactionView<'a>,
    refunded: bool,
    event_queued: bool,
}

/// The `transaction.return_decided` event's body.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReturnDecided<'a> {
    event: &'static str,
    transaction_id: &'a crate::ids::TransactionId,
    decision: &'static str,
    note: Option<&'a str>,
    decided_at: String,
}

/// Decides the pending return of transaction `id` as `actor` at `now`: an approval ends the
/// sale as a cancellation does (refund, cap place, supplier clawback: `apply::end_sale`), a
/// denial (which needs a `note`, the buyer is told why) puts the transaction back where it
/// was. Either way a buyer with the generic integration is sent
/// `transaction.return_decided` through the outbox, in the same job.
pub fn decide(
    conn: &Connection,
    id: &crate::ids::TransactionId,
    decision: Decision,
    note: Option<&str>,
    actor: &str,
    now: i64,
) -> Result<Decided, LifecycleError> {
    let note = note.map(str::trim).filter(|n| !n.is_empty());
    if decision == Decision::Deny && note.is_none() {
        return Err(LifecycleError::NoteRequired);
    }
    let pending = find(conn, id)?.ok_or_else(|| LifecycleError::NoPendingReturn(id.clone()))?;
    if pending.status != ReturnStatus::Pending {
        return Err(LifecycleError::ReturnAlreadyDecided {
            status: pending.status.to_string(),
        });
    }
    let current = transaction::find(conn, id)?.ok_or(LifecycleError::TransactionNotFound)?;
    let refunded = match decision {
        Decision::Approve => {
            let why = note.or(pending.reason.as_deref());
            apply::end_sale(conn, &current, Status::Cancelled, actor, why, now)?
        }
        Decision::Deny => {
            transaction::move_to(
                conn,
                id,
                current.status,
                pending.previous_status,
                actor,
                note,
                now,
            )?;
            false
        }
    };
    let status = decision.status();
    conn.prepare_kept(
        "UPDATE returns SET status = ?2, decided_by = ?3, decided_at = ?4, note = ?5
         WHERE transaction_id = ?1",
    )?
    .execute(params![id, status, actor, now, note])?;
    let event_queued = notify_buyer(conn, &current.buyer_id, id, status, note, now)?;
    let item = find(conn, id)?.expect("the return was read and written in this job");
    let transaction = transaction::find(conn, id)?
        .expect("the transaction was read in this job and nothing deletes transactions");
    Ok(Decided {
        item,
        transaction,
        refunded,
        event_queued,
    })
}

/// Queues `transaction.return_decided` for a buyer with the generic integration (a
/// buyer-native integration maps `lead.delivered` only). Returns whether it did.
fn notify_buyer(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    transaction_id: &crate::ids::TransactionId,
    status: ReturnStatus,
    note: Option<&str>,
    now: i64,
) -> Result<bool, LifecycleError> {
    if crate::integration::store::document_text(conn, buyer_id)?.is_some() {
        return Ok(false);
    }
    let Some(buyer) = crate::config::buyer::find(conn, buyer_id)? else {
        return Ok(false);
    };
    let body = ReturnDecided {
        event: crate::outbox::store::EventKind::ReturnDecided.as_str(),
        transaction_id,
        decision: status.as_str(),
        note,
        decided_at: crate::clock::iso(now),
    };
    let payload = serde_json::to_string(&body).expect("a struct of strings serialises");
    crate::outbox::store::insert_notice(
        conn,
        &crate::outbox::store::NewNotice {
            kind: crate::outbox::store::EventKind::ReturnDecided,
            buyer_id,
            url: &buyer.webhook_url,
            payload: &payload,
            created_at: now,
        },
    )?;
    Ok(true)
}
