//! Buyer accounts.
//!
//! A buyer has a webhook URL, an inbound lifecycle secret (stored hashed), an outbound
//! signing secret (stored as is, since it signs), capabilities, a cancellation window, a
//! plan (postpaid, or prepaid with a balance and credit limit), a return policy (a cap on
//! the share of a month's deliveries it may return, and whether its returns wait for the
//! operator's review; DESIGN.md section 19) and a status. During a
//! rotation's overlap the previous inbound secret is still accepted and every event is also
//! signed with the previous signing secret. An archived buyer gets no deliveries and its
//! lifecycle calls find no transaction.
//!
//! Owns the `buyers` table but for `buyers.balance_cents`, which the ledger owns (`buyer
//! fund` posts a `fund` row there). Subscriptions are `subscription.rs`'s; their types are
//! re-exported here, where the rest of the code has always found them.

use crate::db::PrepareKept;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::rotation::{Rotation, StoredSecret};
use super::source::Rotated;
use super::{ConfigError, check_name, choose, ensure_live, insert_error, workspace};
use crate::db::stored::stored_enum;
use crate::ids::BuyerId;

pub use super::subscription::{
    Filter, FilterOp, NewSubscription, Subscription, find_subscription, subscribe,
    subscriptions_to_product,
};

pub const CAPABILITIES: &[&str] = &["confirm", "payout", "cancel"];

/// A buyer's cancellation window unless the operator sets one: 72 hours.
pub const DEFAULT_CANCELLATION_WINDOW_SECS: i64 = 72 * 3600;

stored_enum! {
    /// How a buyer pays: invoiced later, or from a balance funded in advance.
    pub enum Plan as "buyer plan" {
        Postpaid = "postpaid",
        Prepaid = "prepaid",
    }
}

stored_enum! {
    /// Whether a buyer's returns apply at once (`auto`) or wait for the operator
    /// (`manual`, DESIGN.md section 19).
    pub enum ReturnReview as "buyer return review" {
        Auto = "auto",
        Manual = "manual",
    }
}

stored_enum! {
    /// Whether a buyer takes deliveries.
    pub enum BuyerStatus as "buyer status" {
        Active = "active",
        Paused = "paused",
    }
}

#[derive(Debug, Clone)]
pub struct Buyer {
    pub id: BuyerId,
    pub workspace_id: String,
    pub name: String,
    pub webhook_url: String,
    /// The inbound lifecycle secret (hash), with the previous one during an overlap.
    pub secret: StoredSecret,
    pub signing_secret: String,
    /// The signing secret before the last rotation and until when events are also signed
    /// with it.
    pub previous_signing_secret: Option<(String, i64)>,
    pub capabilities: Vec<String>,
    pub cancellation_window_secs: i64,
    pub auto_payout_pending: bool,
    pub plan: Plan,
    pub balance_cents: i64,
    pub credit_limit_cents: i64,
    pub paused: bool,
    pub last_served_at: Option<i64>,
    pub created_at: i64,
    pub archived_at: Option<i64>,
    /// The share of a month's deliveries the buyer may return, in basis points (1250 is
    /// 12.5%); `None`: no cap.
    pub return_cap_bp: Option<i64>,
    pub return_review: ReturnReview,
}

impl Buyer {
    pub fn has_capability(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    pub fn is_archived(&self) -> bool {
        self.archived_at.is_some()
    }

    /// The buyer as shown to the operator. Never includes a secret or its hash.
    pub fn view(&self) -> BuyerView<'_> {
        let now = crate::clock::now_ms();
        let window = Duration::from_secs(self.cancellation_window_secs.max(0).unsigned_abs());
        BuyerView {
            id: self.id.as_str(),
            workspace_id: &self.workspace_id,
            name: &self.name,
            webhook_url: &self.webhook_url,
            has_secret: self.secret.is_set(),
            previous_secret_valid_until: self
                .secret
                .previous_valid_until(now)
                .map(crate::clock::iso),
            previous_signing_secret_valid_until: self
                .previous_signing_secret
                .as_ref()
                .map(|(_, until)| *until)
                .filter(|until| now < *until)
                .map(crate::clock::iso),
            capabilities: &self.capabilities,
            cancellation_window: crate::duration::format(window),
            cancellation_window_seconds: self.cancellation_window_secs,
            auto_payout_pending: self.auto_payout_pending,
            plan: self.plan.as_str(),
            balance: crate::money::as_f64(self.balance_cents),
            credit_limit: crate::money::as_f64(self.credit_limit_cents),
            return_cap: self.return_cap_bp.map(crate::money::as_f64),
            return_review: self.return_review.as_str(),
            status: if self.paused { "paused" } else { "active" },
            last_served_at: self.last_served_at.map(crate::clock::iso),
            created_at: crate::clock::iso(self.created_at),
            archived_at: self.archived_at.map(crate::clock::iso),
        }
    }

    /// [`Buyer::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// The buyer as `buyer show --json` shows it: money as numbers, the return cap as a
/// percentage, never a secret or its hash.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuyerView<'a> {
    id: &'a str,
    workspace_id: &'a str,
    name: &'a str,
    webhook_url: &'a str,
    has_secret: bool,
    previous_secret_valid_until: Option<String>,
    previous_signing_secret_valid_until: Option<String>,
    capabilities: &'a [String],
    cancellation_window: String,
    cancellation_window_seconds: i64,
    auto_payout_pending: bool,
    plan: &'static str,
    balance: f64,
    credit_limit: f64,
    return_cap: Option<f64>,
    return_review: &'static str,
    status: &'static str,
    last_served_at: Option<String>,
    created_at: String,
    archived_at: Option<String>,
}

pub struct NewBuyer<'a> {
    pub id: Option<&'a str>,
    pub workspace_id: &'a str,
    pub name: &'a str,
    pub webhook_url: &'a str,
    /// `None`: no inbound secret. `Some(None)`: generate one. `Some(Some(s))`: use `s`.
    pub secret: Option<Option<&'a str>>,
    /// A given signing secret (`whsec_…`); generated when `None`.
    pub signing_secret: Option<&'a str>,
    pub capabilities: Vec<String>,
    pub cancellation_window_secs: i64,
    pub auto_payout_pending: bool,
    pub plan: Plan,
    pub credit_limit_cents: i64,
    pub return_cap_bp: Option<i64>,
    pub return_review: ReturnReview,
}

/// An `update`: only the fields given change.
#[derive(Debug, Default)]
pub struct BuyerChanges {
    pub name: Option<String>,
    pub webhook_url: Option<String>,
    pub capabilities: Option<Vec<String>>,
    pub cancellation_window_secs: Option<i64>,
    pub auto_payout_pending: Option<bool>,
    pub plan: Option<Plan>,
    pub credit_limit_cents: Option<i64>,
    /// `Some(None)` removes the cap.
    pub return_cap_bp: Option<Option<i64>>,
    pub return_review: Option<ReturnReview>,
}

/// A created buyer with its secrets in clear, shown once.
pub struct CreatedBuyer {
    pub buyer: Buyer,
    pub secret: Option<String>,
    pub signing_secret: String,
}

const COLUMNS: &str = "id, workspace_id, name, webhook_url, secret_hash, signing_secret, \
    capabilities, cancellation_window_secs, auto_payout_pending, plan, balance_cents, \
    credit_limit_cents, status, last_served_at, created_at, archived_at, previous_secret_hash, \
    previous_secret_valid_until, previous_signing_secret, previous_signing_valid_until, \
    return_cap_bp, return_review";

fn from_row(row: &Row) -> rusqlite::Result<Buyer> {
    let capabilities: String = row.get(6)?;
    let previous_signing: Option<String> = row.get(18)?;
    Ok(Buyer {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        name: row.get(2)?,
        webhook_url: row.get(3)?,
        secret: StoredSecret::from_columns(row.get(4)?, row.get(16)?, row.get(17)?),
        signing_secret: row.get(5)?,
        previous_signing_secret: previous_signing.zip(row.get(19)?),
        capabilities: capabilities
            .split(',')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect(),
        cancellation_window_secs: row.get(7)?,
        auto_payout_pending: row.get(8)?,
        plan: row.get(9)?,
        balance_cents: row.get(10)?,
        credit_limit_cents: row.get(11)?,
        paused: row.get::<_, BuyerStatus>(12)? == BuyerStatus::Paused,
        last_served_at: row.get(13)?,
        created_at: row.get(14)?,
        archived_at: row.get(15)?,
        return_cap_bp: row.get(20)?,
        return_review: row.get(21)?,
    })
}

/// Parses `confirm,payout,cancel` (any subset; `none` for no capability).
pub fn parse_capabilities(text: &str) -> Result<Vec<String>, String> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for capability in text.split(',').map(str::trim) {
        if !CAPABILITIES.contains(&capability) {
            return Err(format!(
                "unknown capability '{capability}': use confirm, payout, cancel or none"
            ));
        }
        if !found.iter().any(|c| c == capability) {
            found.push(capability.to_string());
        }
    }
    Ok(found)
}

/// The one check of a buyer's webhook URL, on create and on update. The rule is
/// [`crate::outbound_url::check`], shared with every other URL leadrelay sends to.
pub(crate) fn check_webhook_url(url: &str) -> Result<(), ConfigError> {
    crate::outbound_url::check(url)
        .map_err(|e| ConfigError::Invalid(format!("invalid webhook URL: {e}")))
}

/// A return cap is a share of 0% to 100%.
fn check_return_cap(cap_bp: Option<i64>) -> Result<(), ConfigError> {
    if let Some(bp) = cap_bp
        && !(0..=10_000).contains(&bp)
    {
        return Err(ConfigError::Invalid(
            "the return cap is a percentage from 0 to 100".into(),
        ));
    }
    Ok(())
}

fn check_window(secs: i64) -> Result<(), ConfigError> {
    if secs < 0 {
        return Err(ConfigError::Invalid(
            "the cancellation window must not be negative".into(),
        ));
    }
    Ok(())
}

pub fn create(conn: &Connection, new: &NewBuyer) -> Result<CreatedBuyer, ConfigError> {
    let id: BuyerId = choose(new.id)?;
    check_name(new.name)?;
    check_webhook_url(new.webhook_url)?;
    check_window(new.cancellation_window_secs)?;
    check_return_cap(new.return_cap_bp)?;
    super::check_not_negative("credit limit", new.credit_limit_cents)?;
    workspace::get_live(conn, new.workspace_id)?;
    let secret = match new.secret {
        None => None,
        Some(given) => Some(super::new_secret(given, "lrb_")?),
    };
    let signing_secret = new_signing_secret(new.signing_secret)?;
    conn.execute(
        "INSERT INTO buyers (id, workspace_id, name, webhook_url, secret_hash, signing_secret,
            capabilities, cancellation_window_secs, auto_payout_pending, plan,
            credit_limit_cents, created_at, return_cap_bp, return_review)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            id,
            new.workspace_id,
            new.name,
            new.webhook_url,
            secret.as_deref().map(crate::secrets::hash),
            signing_secret,
            new.capabilities.join(","),
            new.cancellation_window_secs,
            new.auto_payout_pending,
            new.plan.as_str(),
            new.credit_limit_cents,
            crate::clock::now_ms(),
            new.return_cap_bp,
            new.return_review,
        ],
    )
    .map_err(|e| insert_error(e, "buyer", id.as_str()))?;
    Ok(CreatedBuyer {
        buyer: get(conn, &id)?,
        secret,
        signing_secret,
    })
}

/// The operator's signing secret (checked) or a new random one.
fn new_signing_secret(given: Option<&str>) -> Result<String, ConfigError> {
    match given {
        Some(given) => {
            check_signing_secret(given)?;
            Ok(given.to_string())
        }
        None => Ok(crate::secrets::generate_signing_secret()),
    }
}

/// A Standard Webhooks secret is `whsec_` followed by base64 of at least 24 bytes.
fn check_signing_secret(secret: &str) -> Result<(), ConfigError> {
    use base64::Engine;
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok());
    match key {
        Some(key) if key.len() >= 24 => Ok(()),
        _ => Err(ConfigError::Invalid(
            "a signing secret is 'whsec_' followed by base64 of at least 24 random bytes".into(),
        )),
    }
}

/// Cached: a statement prepared anew for every lookup cost 30% of a post's delivery when
/// deliveries read whole buyers (perf of `serve` during `bench/ping.sh`'s ping-then-post
/// pairs). A delivery reads [`find_recipient`].
pub fn find(conn: &Connection, id: &BuyerId) -> rusqlite::Result<Option<Buyer>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM buyers WHERE id = ?1"))?
        .query_row([id], from_row)
        .optional()
}

/// What a delivery needs of its buyer: who it is, where its events go, and its standing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recipient {
    pub(crate) id: BuyerId,
    pub(crate) workspace_id: String,
    pub(crate) name: String,
    pub(crate) webhook_url: String,
    pub(crate) plan: Plan,
    pub(crate) balance_cents: i64,
    pub(crate) credit_limit_cents: i64,
    pub(crate) paused: bool,
    pub(crate) archived: bool,
}

/// Buyer `id` as a delivery reads it: nine columns of [`find`]'s twenty-two, without the
/// secrets, capabilities and return terms a delivery never looks at. Every delivery runs
/// it on the writer thread (auto-delivery's, a post's, the `deliver` command's), where the
/// whole row cost 18,600 instructions of an auto-delivered lead's job and this one
/// 10,400 (callgrind of `examples/autodelivery_cost`, `LEADS=1000 ONLY=5`).
pub(crate) fn find_recipient(
    conn: &Connection,
    id: &BuyerId,
) -> rusqlite::Result<Option<Recipient>> {
    conn.prepare_kept(
        "SELECT id, workspace_id, name, webhook_url, plan, balance_cents, credit_limit_cents,
                status, archived_at IS NOT NULL
         FROM buyers WHERE id = ?1",
    )?
    .query_row([id], |row| {
        Ok(Recipient {
            id: row.get(0)?,
            workspace_id: row.get(1)?,
            name: row.get(2)?,
            webhook_url: row.get(3)?,
            plan: row.get(4)?,
            balance_cents: row.get(5)?,
            credit_limit_cents: row.get(6)?,
            paused: row.get::<_, BuyerStatus>(7)? == BuyerStatus::Paused,
            archived: row.get(8)?,
        })
    })
    .optional()
}

pub fn get(conn: &Connection, id: &BuyerId) -> Result<Buyer, ConfigError> {
    find(conn, id)?.ok_or_else(|| ConfigError::NotFound {
        kind: "buyer",
        id: id.to_string(),
    })
}

/// A buyer that may change: it exists and is not archived.
pub(crate) fn get_live(conn: &Connection, id: &BuyerId) -> Result<Buyer, ConfigError> {
    let buyer = get(conn, id)?;
    ensure_live("buyer", id.as_str(), buyer.archived_at)?;
    Ok(buyer)
}

/// Buyers in creation order, of one workspace when given; archived ones only with `all`.
pub fn list(
    conn: &Connection,
    workspace_id: Option<&str>,
    all: bool,
) -> Result<Vec<Buyer>, ConfigError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM buyers
         WHERE (?1 IS NULL OR workspace_id = ?1) AND (?2 OR archived_at IS NULL)
         ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map(params![workspace_id, all], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Changes the given fields of buyer `id`. The outbox reads the URL when it sends, so the
/// next event goes to a new URL; lifecycle calls read capabilities and window per call.
pub fn update(
    conn: &Connection,
    id: &BuyerId,
    changes: &BuyerChanges,
) -> Result<Buyer, ConfigError> {
    let mut buyer = get_live(conn, id)?;
    if let Some(name) = &changes.name {
        check_name(name)?;
        buyer.name = name.clone();
    }
    if let Some(url) = &changes.webhook_url {
        check_webhook_url(url)?;
        buyer.webhook_url = url.clone();
    }
    if let Some(capabilities) = &changes.capabilities {
        buyer.capabilities = capabilities.clone();
    }
    if let Some(secs) = changes.cancellation_window_secs {
        check_window(secs)?;
        buyer.cancellation_window_secs = secs;
    }
    if let Some(on) = changes.auto_payout_pending {
        buyer.auto_payout_pending = on;
    }
    if let Some(plan) = changes.plan {
        buyer.plan = plan;
    }
    if let Some(limit) = changes.credit_limit_cents {
        super::check_not_negative("credit limit", limit)?;
        buyer.credit_limit_cents = limit;
    }
    if let Some(cap_bp) = changes.return_cap_bp {
        check_return_cap(cap_bp)?;
        buyer.return_cap_bp = cap_bp;
    }
    if let Some(review) = changes.return_review {
        buyer.return_review = review;
    }
    conn.execute(
        "UPDATE buyers SET name = ?2, webhook_url = ?3, capabilities = ?4,
            cancellation_window_secs = ?5, auto_payout_pending = ?6, plan = ?7,
            credit_limit_cents = ?8, return_cap_bp = ?9, return_review = ?10
         WHERE id = ?1",
        params![
            buyer.id,
            buyer.name,
            buyer.webhook_url,
            buyer.capabilities.join(","),
            buyer.cancellation_window_secs,
            buyer.auto_payout_pending,
            buyer.plan.as_str(),
            buyer.credit_limit_cents,
            buyer.return_cap_bp,
            buyer.return_review,
        ],
    )?;
    get(conn, id)
}

/// Adds `amount_cents` to a prepaid buyer's balance: a `fund` row in the ledger, which owns
/// the balance.
pub fn fund(conn: &Connection, id: &BuyerId, amount_cents: i64) -> Result<Buyer, ConfigError> {
    let buyer = get_live(conn, id)?;
    if buyer.plan != Plan::Prepaid {
        return Err(ConfigError::Invalid(format!(
            "buyer '{id}' is postpaid; only prepaid buyers have a balance to fund"
        )));
    }
    if amount_cents <= 0 {
        return Err(ConfigError::Invalid("amount must be greater than 0".into()));
    }
    operator_move(conn, &buyer, crate::ledger::Kind::Fund, amount_cents, None)
}

/// Corrects a prepaid buyer's balance by `amount_cents` (negative: a debit): an
/// `adjustment` row in the ledger with the operator's reason.
pub fn adjust(
    conn: &Connection,
    id: &BuyerId,
    amount_cents: i64,
    reason: &str,
) -> Result<Buyer, ConfigError> {
    let buyer = get_live(conn, id)?;
    if buyer.plan != Plan::Prepaid {
        return Err(ConfigError::Invalid(format!(
            "buyer '{id}' is postpaid; only prepaid buyers have a balance to adjust"
        )));
    }
    if amount_cents == 0 {
        return Err(ConfigError::Invalid(
            "an adjustment of 0 changes nothing: give a positive or negative amount".into(),
        ));
    }
    if reason.trim().is_empty() {
        return Err(ConfigError::Invalid("an adjustment needs a reason".into()));
    }
    operator_move(
        conn,
        &buyer,
        crate::ledger::Kind::Adjustment,
        amount_cents,
        Some(reason),
    )
}

/// Posts the operator's `kind` of `amount_cents` to `buyer`'s balance in the ledger, which
/// refuses a move past the balance bound; returns the buyer after it.
fn operator_move(
    conn: &Connection,
    buyer: &Buyer,
    kind: crate::ledger::Kind,
    amount_cents: i64,
    reason: Option<&str>,
) -> Result<Buyer, ConfigError> {
    let posted = crate::ledger::post_to_balance(
        conn,
        &crate::ledger::Posting {
            workspace_id: &buyer.workspace_id,
            party: crate::ledger::Party::Buyer(&buyer.id),
            transaction_id: None,
            kind,
            amount_cents,
            reason,
            actor: "operator",
            at: crate::clock::now_ms(),
        },
    );
    match posted {
        Ok(_) => get(conn, &buyer.id),
        Err(crate::ledger::BalanceError::Db(e)) => Err(e.into()),
        Err(refused) => Err(ConfigError::Invalid(refused.to_string())),
    }
}

/// Records that the buyer was just served (`last_served_at`, selection's last tie-breaker).
pub(crate) fn mark_served(conn: &Connection, id: &BuyerId, now: i64) -> rusqlite::Result<()> {
    conn.prepare_kept("UPDATE buyers SET last_served_at = ?2 WHERE id = ?1")?
        .execute(params![id, now])?;
    Ok(())
}

/// Pauses (`true`) or resumes (`false`) a buyer. A paused buyer gets no deliveries.
pub fn set_paused(conn: &Connection, id: &BuyerId, paused: bool) -> Result<Buyer, ConfigError> {
    get_live(conn, id)?;
    let status = if paused {
        BuyerStatus::Paused
    } else {
        BuyerStatus::Active
    };
    conn.execute(
        "UPDATE buyers SET status = ?2 WHERE id = ?1",
        params![id, status],
    )?;
    get(conn, id)
}

/// Replaces the buyer's inbound lifecycle secret with `given` or a new random one; the old
/// one stays accepted for `overlap` (none: cut off at once).
pub fn rotate_secret(
    conn: &Connection,
    id: &BuyerId,
    given: Option<&str>,
    overlap: Duration,
) -> Result<Rotated<Buyer>, ConfigError> {
    let buyer = get_live(conn, id)?;
    let secret = super::new_secret(given, "lrb_")?;
    let rotation = Rotation::of(buyer.secret.current, overlap, crate::clock::now_ms());
    conn.execute(
        "UPDATE buyers SET secret_hash = ?2, previous_secret_hash = ?3,
            previous_secret_valid_until = ?4
         WHERE id = ?1",
        params![
            id,
            crate::secrets::hash(&secret),
            rotation.previous_value(),
            rotation.previous_until()
        ],
    )?;
    Ok(Rotated {
        record: get(conn, id)?,
        secret,
        old_valid_until: rotation.old_valid_until,
    })
}

/// Replaces the buyer's signing secret with `given` or a new random one. During `overlap`
/// every event is signed with both (two signatures in `webhook-signature`), so the buyer
/// can switch its verification at any moment in between.
pub fn rotate_signing_secret(
    conn: &Connection,
    id: &BuyerId,
    given: Option<&str>,
    overlap: Duration,
) -> Result<Rotated<Buyer>, ConfigError> {
    let buyer = get_live(conn, id)?;
    let secret = new_signing_secret(given)?;
    let rotation = Rotation::of(Some(buyer.signing_secret), overlap, crate::clock::now_ms());
    conn.execute(
        "UPDATE buyers SET signing_secret = ?2, previous_signing_secret = ?3,
            previous_signing_valid_until = ?4
         WHERE id = ?1",
        params![
            id,
            secret,
            rotation.previous_value(),
            rotation.previous_until()
        ],
    )?;
    Ok(Rotated {
        record: get(conn, id)?,
        secret,
        old_valid_until: rotation.old_valid_until,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_capabilities() {
        assert_eq!(
            parse_capabilities("confirm,cancel").unwrap(),
            vec!["confirm", "cancel"]
        );
        assert!(parse_capabilities("none").unwrap().is_empty());
        assert!(parse_capabilities("fly").is_err());
    }
}
