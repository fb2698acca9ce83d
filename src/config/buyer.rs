//! Buyer accounts and their subscriptions to products.
//!
//! A buyer has a webhook URL, an inbound lifecycle secret (stored hashed), an outbound
//! signing secret (stored as is, since it signs), capabilities, a cancellation window, a
//! plan (postpaid, or prepaid with a balance and credit limit) and a status.
//!
//! Owns the `buyers` and `subscriptions` tables but for `buyers.balance_cents`, which the
//! ledger owns (`buyer fund` posts a `fund` row there).

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ConfigError, choose_id, exists, insert_error, product};
use crate::db::stored::stored_enum;

pub const CAPABILITIES: &[&str] = &["confirm", "payout", "cancel"];

stored_enum! {
    /// How a buyer pays: invoiced later, or from a balance funded in advance.
    pub enum Plan as "buyer plan" {
        Postpaid = "postpaid",
        Prepaid = "prepaid",
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
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub webhook_url: String,
    pub secret_hash: Option<String>,
    pub signing_secret: String,
    pub capabilities: Vec<String>,
    pub cancellation_window_secs: i64,
    pub auto_payout_pending: bool,
    pub plan: Plan,
    pub balance_cents: i64,
    pub credit_limit_cents: i64,
    pub paused: bool,
    pub last_served_at: Option<i64>,
    pub created_at: i64,
}

impl Buyer {
    pub fn has_capability(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// The buyer as shown to the operator. Never includes a secret or its hash.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "workspaceId": self.workspace_id,
            "name": self.name,
            "webhookUrl": self.webhook_url,
            "hasSecret": self.secret_hash.is_some(),
            "capabilities": self.capabilities,
            "cancellationWindowSeconds": self.cancellation_window_secs,
            "autoPayoutPending": self.auto_payout_pending,
            "plan": self.plan.as_str(),
            "balance": crate::money::to_json(self.balance_cents),
            "creditLimit": crate::money::to_json(self.credit_limit_cents),
            "status": if self.paused { "paused" } else { "active" },
            "lastServedAt": self.last_served_at.map(crate::clock::iso),
            "createdAt": crate::clock::iso(self.created_at),
        })
    }
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
}

/// A created buyer with its secrets in clear, shown once.
pub struct CreatedBuyer {
    pub buyer: Buyer,
    pub secret: Option<String>,
    pub signing_secret: String,
}

const COLUMNS: &str = "id, workspace_id, name, webhook_url, secret_hash, signing_secret, \
    capabilities, cancellation_window_secs, auto_payout_pending, plan, balance_cents, \
    credit_limit_cents, status, last_served_at, created_at";

fn from_row(row: &Row) -> rusqlite::Result<Buyer> {
    let capabilities: String = row.get(6)?;
    Ok(Buyer {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        name: row.get(2)?,
        webhook_url: row.get(3)?,
        secret_hash: row.get(4)?,
        signing_secret: row.get(5)?,
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

/// The webhook URL rule is [`crate::outbound_url::check`], shared with every other URL
/// leadrelay sends to; set a buyer's URL only through it.
pub(crate) fn check_webhook_url(url: &str) -> Result<(), ConfigError> {
    crate::outbound_url::check(url)
        .map_err(|e| ConfigError::Invalid(format!("invalid webhook URL: {e}")))
}

pub fn create(conn: &Connection, new: &NewBuyer) -> Result<CreatedBuyer, ConfigError> {
    let id = choose_id(new.id, "buyer")?;
    if new.name.trim().is_empty() {
        return Err(ConfigError::Invalid("name must not be empty".into()));
    }
    check_webhook_url(new.webhook_url)?;
    if !exists(conn, "workspaces", new.workspace_id)? {
        return Err(ConfigError::NotFound {
            kind: "workspace",
            id: new.workspace_id.to_string(),
        });
    }
    let secret = match new.secret {
        None => None,
        Some(None) => Some(crate::secrets::generate("lrb_")),
        Some(Some(given)) => {
            super::check_given_secret(given)?;
            Some(given.to_string())
        }
    };
    let signing_secret = match new.signing_secret {
        Some(given) => {
            check_signing_secret(given)?;
            given.to_string()
        }
        None => crate::secrets::generate_signing_secret(),
    };
    conn.execute(
        "INSERT INTO buyers (id, workspace_id, name, webhook_url, secret_hash, signing_secret,
            capabilities, cancellation_window_secs, auto_payout_pending, plan,
            credit_limit_cents, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
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
        ],
    )
    .map_err(|e| insert_error(e, "buyer", &id))?;
    Ok(CreatedBuyer {
        buyer: get(conn, &id)?,
        secret,
        signing_secret,
    })
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

pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Buyer>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM buyers WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

pub fn get(conn: &Connection, id: &str) -> Result<Buyer, ConfigError> {
    find(conn, id)?.ok_or_else(|| ConfigError::NotFound {
        kind: "buyer",
        id: id.to_string(),
    })
}

pub fn list(conn: &Connection) -> Result<Vec<Buyer>, ConfigError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM buyers ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Adds `amount_cents` to a prepaid buyer's balance: a `fund` row in the ledger, which owns
/// the balance.
pub fn fund(conn: &Connection, id: &str, amount_cents: i64) -> Result<Buyer, ConfigError> {
    let buyer = get(conn, id)?;
    if buyer.plan != Plan::Prepaid {
        return Err(ConfigError::Invalid(format!(
            "buyer '{id}' is postpaid; only prepaid buyers have a balance to fund"
        )));
    }
    if amount_cents <= 0 {
        return Err(ConfigError::Invalid("amount must be greater than 0".into()));
    }
    crate::ledger::post(
        conn,
        &crate::ledger::Posting {
            workspace_id: &buyer.workspace_id,
            party: crate::ledger::Party::Buyer(id),
            transaction_id: None,
            kind: crate::ledger::Kind::Fund,
            amount_cents,
            reason: None,
            actor: "operator",
            at: crate::clock::now_ms(),
        },
    )?;
    get(conn, id)
}

/// Records that the buyer was just served (`last_served_at`, selection's last tie-breaker).
pub(crate) fn mark_served(conn: &Connection, id: &str, now: i64) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE buyers SET last_served_at = ?2 WHERE id = ?1")?
        .execute(params![id, now])?;
    Ok(())
}

/// Pauses (`true`) or resumes (`false`) a buyer. A paused buyer gets no deliveries.
pub fn set_paused(conn: &Connection, id: &str, paused: bool) -> Result<Buyer, ConfigError> {
    let status = if paused {
        BuyerStatus::Paused
    } else {
        BuyerStatus::Active
    };
    let changed = conn.execute(
        "UPDATE buyers SET status = ?2 WHERE id = ?1",
        params![id, status],
    )?;
    if changed == 0 {
        return Err(ConfigError::NotFound {
            kind: "buyer",
            id: id.to_string(),
        });
    }
    get(conn, id)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FilterOp {
    Equals,
    OneOf,
    Prefix,
}

/// A condition on a lead field or a field value (`fieldValues.NAME`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    pub field: String,
    pub op: FilterOp,
    pub values: Vec<String>,
}

impl Filter {
    /// Parses `FIELD=VALUE`, `FIELD=V1|V2` or `FIELD=PREFIX*`.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let (field, value) = text
            .split_once('=')
            .ok_or_else(|| format!("filter '{text}': expected FIELD=VALUE"))?;
        let field = field.trim();
        if field.is_empty() {
            return Err(format!("filter '{text}': the field name is missing"));
        }
        let (op, values) = if value.contains('|') {
            (
                FilterOp::OneOf,
                value.split('|').map(str::to_string).collect(),
            )
        } else if let Some(prefix) = value.strip_suffix('*') {
            (FilterOp::Prefix, vec![prefix.to_string()])
        } else {
            (FilterOp::Equals, vec![value.to_string()])
        };
        Ok(Filter {
            field: field.to_string(),
            op,
            values,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    pub buyer_id: String,
    pub product_id: String,
    #[serde(rename = "price", serialize_with = "crate::config::serialize_money")]
    pub price_cents: i64,
    pub daily_cap: Option<i64>,
    pub monthly_cap: Option<i64>,
    pub priority: i64,
    pub filters: Vec<Filter>,
    /// The schedule as stored (JSON), or none for always open.
    pub schedule: Option<Value>,
}

pub struct NewSubscription<'a> {
    pub buyer_id: &'a str,
    /// Product id or slug in the buyer's workspace.
    pub product: &'a str,
    pub price_cents: i64,
    pub daily_cap: Option<i64>,
    pub monthly_cap: Option<i64>,
    pub priority: i64,
    pub filters: Vec<Filter>,
    pub schedule: Option<Value>,
}

/// Subscribes a buyer to a product, or replaces the terms of an existing subscription.
pub fn subscribe(conn: &Connection, new: &NewSubscription) -> Result<Subscription, ConfigError> {
    let buyer = get(conn, new.buyer_id)?;
    let product = product::resolve(conn, &buyer.workspace_id, new.product)?;
    if new.daily_cap.is_some_and(|c| c < 0) || new.monthly_cap.is_some_and(|c| c < 0) {
        return Err(ConfigError::Invalid("caps must not be negative".into()));
    }
    let subscription = Subscription {
        buyer_id: buyer.id,
        product_id: product.id,
        price_cents: new.price_cents,
        daily_cap: new.daily_cap,
        monthly_cap: new.monthly_cap,
        priority: new.priority,
        filters: new.filters.clone(),
        schedule: new.schedule.clone(),
    };
    conn.execute(
        "INSERT INTO subscriptions (buyer_id, product_id, price_cents, daily_cap, monthly_cap,
            priority, filters, schedule, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (buyer_id, product_id) DO UPDATE SET
            price_cents = excluded.price_cents, daily_cap = excluded.daily_cap,
            monthly_cap = excluded.monthly_cap, priority = excluded.priority,
            filters = excluded.filters, schedule = excluded.schedule",
        params![
            subscription.buyer_id,
            subscription.product_id,
            subscription.price_cents,
            subscription.daily_cap,
            subscription.monthly_cap,
            subscription.priority,
            serde_json::to_string(&subscription.filters).expect("filters serialise"),
            subscription.schedule.as_ref().map(Value::to_string),
            crate::clock::now_ms(),
        ],
    )?;
    Ok(subscription)
}

fn subscription_from_row(row: &Row) -> rusqlite::Result<Subscription> {
    let filters: String = row.get(6)?;
    let schedule: Option<String> = row.get(7)?;
    Ok(Subscription {
        buyer_id: row.get(0)?,
        product_id: row.get(1)?,
        price_cents: row.get(2)?,
        daily_cap: row.get(3)?,
        monthly_cap: row.get(4)?,
        priority: row.get(5)?,
        filters: serde_json::from_str(&filters).unwrap_or_default(),
        schedule: schedule.and_then(|s| serde_json::from_str(&s).ok()),
    })
}

const SUBSCRIPTION_COLUMNS: &str =
    "buyer_id, product_id, price_cents, daily_cap, monthly_cap, priority, filters, schedule";

pub fn find_subscription(
    conn: &Connection,
    buyer_id: &str,
    product_id: &str,
) -> rusqlite::Result<Option<Subscription>> {
    conn.query_row(
        &format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions
             WHERE buyer_id = ?1 AND product_id = ?2"
        ),
        [buyer_id, product_id],
        subscription_from_row,
    )
    .optional()
}

/// Every subscription to `product_id`, for choosing among buyers.
pub fn subscriptions_to_product(
    conn: &Connection,
    product_id: &str,
) -> rusqlite::Result<Vec<Subscription>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE product_id = ?1
         ORDER BY buyer_id"
    ))?;
    let rows = stmt.query_map([product_id], subscription_from_row)?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_filters() {
        assert_eq!(Filter::parse("country=DE").unwrap().op, FilterOp::Equals);
        let one_of = Filter::parse("fieldValues.roof=tile|flat").unwrap();
        assert_eq!(one_of.op, FilterOp::OneOf);
        assert_eq!(one_of.values, vec!["tile", "flat"]);
        let prefix = Filter::parse("postalCode=80*").unwrap();
        assert_eq!(
            (prefix.op, prefix.values),
            (FilterOp::Prefix, vec!["80".to_string()])
        );
        assert!(Filter::parse("nothing").is_err());
        assert!(Filter::parse("=x").is_err());
    }

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
