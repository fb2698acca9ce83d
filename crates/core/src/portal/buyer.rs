//! The buyer portal's reads: the overview, the buyer's transactions (search, status), one
//! transaction as delivered with its history and whether a return may be filed, the account
//! (balance, credit, ledger of a month) and the delivery page (webhook URL, endpoint health,
//! the last attempts). Every statement is narrowed by the session's buyer id.

use crate::db::PrepareKept;
use jiff::tz::TimeZone;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

use crate::caps::Windows;
use crate::config::buyer::Buyer;
use crate::delivery::transaction::COLUMNS as TRANSACTION_COLUMNS;
use crate::delivery::transaction::{self, HistoryEntry, Status, Transaction};
use crate::ledger::query::Entry;
use crate::lifecycle::returns::{self, Return};

/// What the portal knows of its buyer: its record and its time zone.
pub struct Me {
    pub buyer: Buyer,
    pub tz: TimeZone,
}

/// The buyer `buyer_id` with its workspace's time zone (`None` once it is gone).
pub fn me(conn: &Connection, buyer_id: &crate::ids::BuyerId) -> rusqlite::Result<Option<Me>> {
    let Some(buyer) = crate::config::buyer::find(conn, buyer_id)? else {
        return Ok(None);
    };
    let tz = crate::caps::timezone_of(conn, &buyer.workspace_id)?;
    Ok(Some(Me { buyer, tz }))
}

/// Leads received, returned and spent in one window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    pub received: i64,
    pub returned: i64,
    pub spend_cents: i64,
}

/// One subscription's cap use now.
pub struct CapLine {
    pub product_name: String,
    pub day_used: i64,
    pub daily_cap: Option<i64>,
    pub month_used: i64,
    pub monthly_cap: Option<i64>,
}

pub struct Overview {
    pub today: Tally,
    pub month: Tally,
    pub caps: Vec<CapLine>,
}

/// The buyer's figures of today and this month (`windows` in its time zone). Counts per
/// status from `transactions_buyer_status`; a returned lead is one cancelled or waiting for
/// its return's review, and the spend is what the live ones cost.
pub fn overview(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    windows: &Windows,
) -> rusqlite::Result<Overview> {
    let tally = |(from, to): (i64, i64)| -> rusqlite::Result<Tally> {
        let mut statement = conn.prepare_kept(
            "SELECT status, count(*), coalesce(sum(buyer_price_cents), 0) FROM transactions
             WHERE buyer_id = ?1 AND created_at >= ?2 AND created_at < ?3 GROUP BY status",
        )?;
        let mut rows = statement.query(params![buyer_id, from, to])?;
        let mut tally = Tally::default();
        while let Some(row) = rows.next()? {
            let status: Status = row.get(0)?;
            let (count, cents): (i64, i64) = (row.get(1)?, row.get(2)?);
            tally.received += count;
            if matches!(status, Status::Cancelled | Status::ReturnRequested) {
                tally.returned += count;
            }
            if status.is_live() {
                tally.spend_cents += cents;
            }
        }
        Ok(tally)
    };
    let mut caps = Vec::new();
    let mut statement = conn.prepare_kept(
        "SELECT p.id, p.name, s.daily_cap, s.monthly_cap FROM subscriptions s
         JOIN products p ON p.id = s.product_id WHERE s.buyer_id = ?1 ORDER BY p.name",
    )?;
    let subscriptions: Vec<(String, String, Option<i64>, Option<i64>)> = statement
        .query_map([buyer_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?
        .collect::<Result<_, _>>()?;
    for (product_id, product_name, daily_cap, monthly_cap) in subscriptions {
        let usage = crate::caps::usage_now(conn, buyer_id, &product_id, windows)?;
        caps.push(CapLine {
            product_name,
            day_used: usage.today,
            daily_cap,
            month_used: usage.this_month,
            monthly_cap,
        });
    }
    Ok(Overview {
        today: tally(windows.day)?,
        month: tally(windows.month)?,
        caps,
    })
}

/// A transaction as the buyer's list shows it.
pub struct LeadRow {
    pub transaction_id: crate::ids::TransactionId,
    pub created_at: i64,
    pub first_name: String,
    pub last_name: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub product_name: String,
    pub buyer_price_cents: i64,
    pub status: Status,
    pub erased_at: Option<i64>,
}

const ROW_COLUMNS: &str = "t.id, t.created_at, l.first_name, l.last_name, l.email, l.phone, \
    p.name, t.buyer_price_cents, t.status, l.erased_at";

const ROW_FROM: &str = "transactions t JOIN leads l ON l.id = t.lead_id \
    JOIN products p ON p.id = t.product_id";

fn row_from(row: &Row) -> rusqlite::Result<LeadRow> {
    Ok(LeadRow {
        transaction_id: row.get(0)?,
        created_at: row.get(1)?,
        first_name: row.get(2)?,
        last_name: row.get(3)?,
        email: row.get(4)?,
        phone: row.get(5)?,
        product_name: row.get(6)?,
        buyer_price_cents: row.get(7)?,
        status: row.get(8)?,
        erased_at: row.get(9)?,
    })
}

/// How many of a buyer's newest transactions (of the status asked for) a name search reads:
/// a name has no index, so it is matched only there, and the page says so.
pub const NAME_SEARCH_WINDOW: i64 = 5000;

/// The buyer's transactions, newest first, at most `limit`: those `q` names (a transaction
/// id, an email, a phone, or part of the name within the newest [`NAME_SEARCH_WINDOW`];
/// empty: all) with status `status`.
pub fn leads(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    q: &str,
    status: Option<Status>,
    limit: usize,
) -> rusqlite::Result<Vec<LeadRow>> {
    let status = status.map(|s| s.as_str());
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    if q.is_empty() {
        let mut statement = conn.prepare_cached(&format!(
            "SELECT {ROW_COLUMNS} FROM {ROW_FROM}
             WHERE t.buyer_id = ?1 AND (?2 IS NULL OR t.status = ?2)
             ORDER BY t.created_at DESC, t.rowid DESC LIMIT ?3"
        ))?;
        return statement
            .query_map(params![buyer_id, status, limit], row_from)?
            .collect();
    }
    // A transaction id, or the leads with this email or phone (found by the key's hash,
    // `ingest::view`), or a name: each narrowed to the buyer's own transactions.
    let mut contacts = Vec::new();
    if let Some(key) = crate::ingest::normalize::email_key(q) {
        contacts.extend(crate::ingest::view::with_email(conn, &key, 1000)?);
    }
    if let Some(key) = crate::ingest::normalize::phone_key(q) {
        contacts.extend(crate::ingest::view::with_phone(conn, &key, 1000)?);
    }
    let mut found: Vec<LeadRow> = Vec::new();
    let mut by_id = conn.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS} FROM {ROW_FROM}
         WHERE t.buyer_id = ?1 AND t.id = ?2 AND (?3 IS NULL OR t.status = ?3)"
    ))?;
    found.extend(
        by_id
            .query_map(params![buyer_id, q, status], row_from)?
            .collect::<Result<Vec<_>, _>>()?,
    );
    // The `+` keeps SQLite on `transactions_lead` (a lead's few sales) instead of walking
    // all of the buyer's transactions by `transactions_buyer_created`.
    let mut by_lead = conn.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS} FROM {ROW_FROM}
         WHERE t.lead_id = ?2 AND +t.buyer_id = ?1 AND (?3 IS NULL OR t.status = ?3)"
    ))?;
    for lead_id in &contacts {
        found.extend(
            by_lead
                .query_map(params![buyer_id, lead_id, status], row_from)?
                .collect::<Result<Vec<_>, _>>()?,
        );
    }
    if found.is_empty() {
        // A name: the buyer's newest `NAME_SEARCH_WINDOW` transactions (of the status),
        // the first `limit` whose lead's name holds `q` (case-insensitive for ASCII, as LIKE
        // is).
        let pattern = format!(
            "%{}%",
            q.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let mut by_name = conn.prepare_cached(&format!(
            "SELECT {ROW_COLUMNS} FROM (
                 SELECT rowid AS r FROM transactions
                 WHERE buyer_id = ?1 AND (?3 IS NULL OR status = ?3)
                 ORDER BY created_at DESC, rowid DESC LIMIT ?5
             ) w
             JOIN transactions t ON t.rowid = w.r JOIN leads l ON l.id = t.lead_id
             JOIN products p ON p.id = t.product_id
             WHERE (l.first_name || ' ' || l.last_name) LIKE ?2 ESCAPE '\\'
             ORDER BY t.created_at DESC, t.rowid DESC LIMIT ?4"
        ))?;
        found.extend(
            by_name
                .query_map(
                    params![buyer_id, pattern, status, limit, NAME_SEARCH_WINDOW],
                    row_from,
                )?
                .collect::<Result<Vec<_>, _>>()?,
        );
    }
    found.sort_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then_with(|| b.transaction_id.cmp(&a.transaction_id))
    });
    found.dedup_by(|a, b| a.transaction_id == b.transaction_id);
    found.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(found)
}

/// One transaction of the buyer as the lead page shows it.
pub struct LeadPage {
    pub transaction: Transaction,
    pub product_name: String,
    /// The `lead.delivered` payload's `lead`, `fieldValues`, `product` and
    /// `pricing.buyerPrice`, as sent (`None` before its event is written or once erased).
    pub delivered: Option<Delivered>,
    pub erased_at: Option<i64>,
    pub history: Vec<HistoryEntry>,
    pub filed: Option<Return>,
    /// Whether a return may be filed now (section 19's state, window and once-only rules;
    /// the code and the cap are checked when it is filed).
    pub may_return: bool,
    /// The workspace's return reason codes, for the form.
    pub reasons: Vec<crate::config::return_reason::ReturnReason>,
}

pub struct Delivered {
    pub lead: Value,
    pub field_values: Value,
    pub product: Value,
    pub buyer_price: Value,
}

/// Transaction `id` of buyer `buyer_id`, or `None` when it does not exist or is another
/// buyer's (one answer for both).
pub fn lead(
    conn: &Connection,
    buyer: &Buyer,
    id: &str,
    now: i64,
) -> rusqlite::Result<Option<LeadPage>> {
    // The subqueries' `product_id` and `lead_id` are the transaction's (neither products
    // nor leads has a column of that name).
    let found = conn
        .prepare_cached(&format!(
            "SELECT {TRANSACTION_COLUMNS},
                    (SELECT name FROM products WHERE id = product_id),
                    (SELECT erased_at FROM leads WHERE id = lead_id)
             FROM transactions WHERE id = ?1 AND buyer_id = ?2"
        ))?
        .query_row(params![id, buyer.id], |row| {
            Ok((
                transaction::from_row(row)?,
                row.get::<_, String>(18)?,
                row.get::<_, Option<i64>>(19)?,
            ))
        })
        .optional()?;
    let Some((transaction, product_name, erased_at)) = found else {
        return Ok(None);
    };
    let payload: Option<String> = conn
        .prepare_kept(
            "SELECT payload FROM outbox_events
             WHERE transaction_id = ?1 AND buyer_id = ?2 AND kind = 'lead.delivered'
             ORDER BY created_at DESC, id DESC LIMIT 1",
        )?
        .query_row(params![transaction.id, buyer.id], |row| row.get(0))
        .optional()?;
    let delivered = payload
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .filter(|body| body.get("lead").is_some_and(|lead| !lead.is_null()))
        .map(|body| Delivered {
            lead: body["lead"].clone(),
            field_values: body["fieldValues"].clone(),
            product: body["product"].clone(),
            buyer_price: body["pricing"]["buyerPrice"].clone(),
        });
    let history = transaction::history(conn, &transaction.id)?;
    let filed = returns::find(conn, &transaction.id)?;
    let may_return = filed.is_none() && returns::may_request(&transaction, buyer, now);
    let reasons = crate::config::return_reason::codes(conn, &buyer.workspace_id)?;
    Ok(Some(LeadPage {
        transaction,
        product_name,
        delivered,
        erased_at,
        history,
        filed,
        may_return,
        reasons,
    }))
}

/// Whether transaction `id` is buyer `buyer_id`'s: a return is filed only for one's own.
pub fn owns(conn: &Connection, buyer_id: &crate::ids::BuyerId, id: &str) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_kept("SELECT 1 FROM transactions WHERE id = ?1 AND buyer_id = ?2")?
        .query_row(params![id, buyer_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// The buyer's ledger entries of `[from, to)`, oldest first.
pub fn ledger(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    (from, to): (i64, i64),
) -> rusqlite::Result<Vec<Entry>> {
    crate::ledger::query::list(
        conn,
        &crate::ledger::query::ListFilter {
            buyer_id: Some(buyer_id.clone()),
            from_ms: Some(from),
            to_ms: Some(to),
            limit: i64::MAX,
            ..Default::default()
        },
    )
}

/// One delivery attempt to the buyer.
pub struct Attempt {
    pub event_id: crate::ids::EventId,
    pub kind: String,
    pub transaction_id: Option<crate::ids::TransactionId>,
    pub started_at: i64,
    pub duration_ms: i64,
    pub http_status: Option<i64>,
    pub outcome: String,
    pub error: Option<String>,
}

/// The buyer's last `limit` attempts, newest first.
pub fn attempts(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    limit: usize,
) -> rusqlite::Result<Vec<Attempt>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut statement = conn.prepare_kept(
        "SELECT a.event_id, e.kind, e.transaction_id, a.started_at, a.duration_ms,
                a.http_status, a.outcome, a.error
         FROM outbox_attempts a JOIN outbox_events e ON e.id = a.event_id
         WHERE e.buyer_id = ?1 ORDER BY a.id DESC LIMIT ?2",
    )?;
    statement
        .query_map(params![buyer_id, limit], |row| {
            Ok(Attempt {
                event_id: row.get(0)?,
                kind: row.get(1)?,
                transaction_id: row.get(2)?,
                started_at: row.get(3)?,
                duration_ms: row.get(4)?,
                http_status: row.get(5)?,
                outcome: row.get(6)?,
                error: row.get(7)?,
            })
        })?
        .collect()
}

/// The endpoint's health as the outbox workers record it.
pub fn health(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
) -> rusqlite::Result<crate::outbox::health::Breaker> {
    crate::outbox::health::load(conn, buyer_id)
}
