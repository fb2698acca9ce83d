//! Subscriptions: a buyer's terms for one product (price, caps, priority, filters,
//! schedule).
//!
//! Owns the `subscriptions` table, the filter syntax (`FIELD=VALUE`, `FIELD=V1|V2`,
//! `FIELD=PREFIX*`) and the rule that a filter names a field a lead can have: an interface
//! field of the Lead (`ingest::model::FIELD_NAMES`) or `fieldValues.NAME` of the product's
//! fields. Matching filters against a lead is `autodelivery::filters`'; cap use is `caps`'
//! counters (read here for `buyer terms`).

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::product::{FieldDef, Product};
use super::{ConfigError, buyer, product};
use crate::caps::{self, Windows};
use leadrelay_rules::schedule::Schedule;

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

    /// The filter in the syntax `parse` reads: `country=DE`, `roof=tile|flat`, `zip=80*`.
    pub fn to_text(&self) -> String {
        let value = match self.op {
            FilterOp::Equals | FilterOp::OneOf => self.values.join("|"),
            FilterOp::Prefix => format!("{}*", self.values.concat()),
        };
        format!("{}={value}", self.field)
    }
}

/// The field names a filter may use for a lead interested in `product`.
pub(crate) fn known_fields(product: &Product) -> Vec<String> {
    leadrelay_rules::fields::FIELD_NAMES
        .iter()
        .map(|name| name.to_string())
        .chain(
            product
                .fields
                .iter()
                .map(|field| format!("fieldValues.{}", field.name)),
        )
        .collect()
}

/// A filter on a value a check step kept: `check.NAME.KEY` (DESIGN.md section 22).
pub(crate) const CHECK_FILTER_PREFIX: &str = "check.";

/// Refuses a filter on a field that no lead interested in `product` has: such a buyer would
/// never get a lead, silently.
pub(crate) fn check_filters(filters: &[Filter], product: &Product) -> Result<(), ConfigError> {
    let known = known_fields(product);
    let check_value = |field: &str| {
        field
            .strip_prefix(CHECK_FILTER_PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(name, key)| !name.is_empty() && !key.is_empty())
    };
    match filters
        .iter()
        .find(|f| !known.contains(&f.field) && !check_value(&f.field))
    {
        Some(unknown) => Err(ConfigError::Invalid(format!(
            "unknown filter field '{}' for product '{}': use one of {} or check.STEP.KEY",
            unknown.field,
            product.slug,
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// How a subscription prices a lead (DESIGN.md section 14).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Pricing {
    /// The subscription's price.
    #[default]
    Fixed,
    /// Asked per lead: a signed bid request to the buyer's URL.
    Bid(BidTerms),
}

/// Where and how a bid-priced subscription is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BidTerms {
    pub url: String,
    /// How long a bid may take (default [`DEFAULT_BID_TIMEOUT_MS`]).
    pub timeout_ms: i64,
    /// Bids below or above are ignored.
    pub min_price_cents: Option<i64>,
    pub max_price_cents: Option<i64>,
}

/// How long a buyer has to answer a bid request unless its subscription says otherwise.
pub const DEFAULT_BID_TIMEOUT_MS: i64 = 300;

impl Pricing {
    pub fn name(&self) -> &'static str {
        match self {
            Pricing::Fixed => "fixed",
            Pricing::Bid(_) => "bid",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    #[serde(skip)]
    pub pricing: Pricing,
    pub buyer_id: crate::ids::BuyerId,
    pub product_id: String,
    #[serde(rename = "price", serialize_with = "crate::config::serialize_money")]
    pub price_cents: i64,
    pub daily_cap: Option<i64>,
    pub monthly_cap: Option<i64>,
    pub priority: i64,
    pub filters: Vec<Filter>,
    /// The schedule as stored (JSON), or none for always open.
    pub schedule: Option<Value>,
    /// The check step a lead must have passed to be offered (DESIGN.md section 22).
    pub require_check: Option<String>,
}

pub struct NewSubscription<'a> {
    pub pricing: Pricing,
    pub buyer_id: &'a crate::ids::BuyerId,
    /// Product id or slug in the buyer's workspace.
    pub product: &'a str,
    pub price_cents: i64,
    pub daily_cap: Option<i64>,
    pub monthly_cap: Option<i64>,
    pub priority: i64,
    pub filters: Vec<Filter>,
    pub schedule: Option<Value>,
    pub require_check: Option<String>,
}

/// A `buyer terms set`: only the terms given change. `Some(None)` removes a cap or the
/// schedule; `filters: Some(vec![])` removes every filter.
#[derive(Debug, Default)]
pub struct TermsChanges {
    /// A new way of pricing; `price_cents` must come with a change to fixed pricing.
    pub pricing: Option<Pricing>,
    pub price_cents: Option<i64>,
    pub daily_cap: Option<Option<i64>>,
    pub monthly_cap: Option<Option<i64>>,
    pub priority: Option<i64>,
    pub filters: Option<Vec<Filter>>,
    pub schedule: Option<Option<Value>>,
    /// `Some(None)` requires no check step any more.
    pub require_check: Option<Option<String>>,
}

/// A subscription with its product's slug and today's and this month's cap use: one entry
/// of `buyer terms`.
#[derive(Debug, Clone)]
pub struct Terms {
    pub subscription: Subscription,
    pub product_slug: String,
    pub used_today: i64,
    pub used_this_month: i64,
}

impl Terms {
    pub fn view(&self) -> TermsView<'_> {
        let s = &self.subscription;
        let schedules = s
            .schedule
            .as_ref()
            .and_then(|stored| Schedule::from_json(stored).ok())
            .map(|schedule| schedule.to_texts())
            .unwrap_or_default();
        let (price, bid) = match &s.pricing {
            Pricing::Fixed => (Some(crate::money::as_f64(s.price_cents)), None),
            Pricing::Bid(bid) => (
                None,
                Some(BidTermsView {
                    url: &bid.url,
                    timeout: crate::duration::format(std::time::Duration::from_millis(
                        u64::try_from(bid.timeout_ms).unwrap_or(0),
                    )),
                    min_price: bid.min_price_cents.map(crate::money::as_f64),
                    max_price: bid.max_price_cents.map(crate::money::as_f64),
                }),
            ),
        };
        TermsView {
            buyer_id: &s.buyer_id,
            product_id: &s.product_id,
            product_slug: &self.product_slug,
            pricing: s.pricing.name(),
            price,
            bid,
            daily_cap: s.daily_cap,
            monthly_cap: s.monthly_cap,
            priority: s.priority,
            filters: s.filters.iter().map(Filter::to_text).collect(),
            schedules,
            require_check: s.require_check.as_deref(),
            used_today: self.used_today,
            used_this_month: self.used_this_month,
        }
    }

    /// [`Terms::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// One entry of `buyer terms --json`: the price for fixed pricing, the bid request's terms
/// for bid pricing (the other null).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TermsView<'a> {
    buyer_id: &'a crate::ids::BuyerId,
    product_id: &'a str,
    product_slug: &'a str,
    pricing: &'static str,
    price: Option<f64>,
    bid: Option<BidTermsView<'a>>,
    daily_cap: Option<i64>,
    monthly_cap: Option<i64>,
    priority: i64,
    filters: Vec<String>,
    schedules: Vec<String>,
    require_check: Option<&'a str>,
    used_today: i64,
    used_this_month: i64,
}

/// A bid-priced subscription's bid request: the timeout as the operator writes it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BidTermsView<'a> {
    url: &'a str,
    timeout: String,
    min_price: Option<f64>,
    max_price: Option<f64>,
}

fn check_terms(subscription: &Subscription) -> Result<(), ConfigError> {
    super::check_not_negative("price", subscription.price_cents)?;
    if let Pricing::Bid(bid) = &subscription.pricing {
        check_bid_url(&bid.url)?;
        if !(1..=60_000).contains(&bid.timeout_ms) {
            return Err(ConfigError::Invalid("a bid timeout is 1ms to 60s".into()));
        }
        for (name, price) in [
            ("min price", bid.min_price_cents),
            ("max price", bid.max_price_cents),
        ] {
            if let Some(cents) = price {
                super::check_not_negative(name, cents)?;
            }
        }
        if let (Some(min), Some(max)) = (bid.min_price_cents, bid.max_price_cents)
            && min > max
        {
            return Err(ConfigError::Invalid(
                "the min price must not be above the max price".into(),
            ));
        }
    }
    if subscription.daily_cap.is_some_and(|c| c < 0)
        || subscription.monthly_cap.is_some_and(|c| c < 0)
    {
        return Err(ConfigError::Invalid("caps must not be negative".into()));
    }
    Ok(())
}

/// The live product of the buyer's workspace that `product` names (id or slug).
fn live_product(
    conn: &Connection,
    buyer: &buyer::Buyer,
    product: &str,
) -> Result<Product, ConfigError> {
    let found = product::resolve(conn, &buyer.workspace_id, product)?;
    super::ensure_live("product", &found.id, found.archived_at)?;
    Ok(found)
}

/// Subscribes a buyer to a product. Refused when the buyer has a subscription to it
/// already: `set_terms` changes one.
pub fn subscribe(conn: &Connection, new: &NewSubscription) -> Result<Subscription, ConfigError> {
    let buyer = buyer::get_live(conn, new.buyer_id)?;
    let product = live_product(conn, &buyer, new.product)?;
    let subscription = Subscription {
        pricing: new.pricing.clone(),
        buyer_id: buyer.id,
        product_id: product.id.clone(),
        price_cents: new.price_cents,
        daily_cap: new.daily_cap,
        monthly_cap: new.monthly_cap,
        priority: new.priority,
        filters: new.filters.clone(),
        schedule: new.schedule.clone(),
        require_check: new.require_check.clone(),
    };
    check_terms(&subscription)?;
    check_filters(&subscription.filters, &product)?;
    check_steps_named(conn, &subscription, &product.workspace_id)?;
    if find_subscription(conn, &subscription.buyer_id, &subscription.product_id)?.is_some() {
        return Err(ConfigError::Invalid(format!(
            "buyer '{}' is subscribed to '{}' already: change its terms with `buyer terms set`",
            subscription.buyer_id, product.slug
        )));
    }
    conn.execute(
        "INSERT INTO subscriptions (buyer_id, product_id, price_cents, daily_cap, monthly_cap,
            priority, filters, schedule, created_at, pricing, bid_url, bid_timeout_ms,
            min_price_cents, max_price_cents, require_check)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
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
            subscription.pricing.name(),
            bid_column(&subscription.pricing, |b| b.url.clone()),
            bid_column(&subscription.pricing, |b| b.timeout_ms),
            bid_column(&subscription.pricing, |b| b.min_price_cents).flatten(),
            bid_column(&subscription.pricing, |b| b.max_price_cents).flatten(),
            subscription.require_check,
        ],
    )?;
    Ok(subscription)
}

/// Changes the given terms of the buyer's subscription to `product`; auto-delivery reads
/// them from the next lead on.
pub fn set_terms(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product: &str,
    changes: &TermsChanges,
) -> Result<Subscription, ConfigError> {
    let buyer = buyer::get_live(conn, buyer_id)?;
    let product = live_product(conn, &buyer, product)?;
    let mut subscription = find_subscription(conn, &buyer.id, &product.id)?
        .ok_or_else(|| not_subscribed(&buyer.id, &product))?;
    if let Some(pricing) = &changes.pricing {
        subscription.pricing = pricing.clone();
        if matches!(pricing, Pricing::Bid(_)) {
            subscription.price_cents = 0;
        }
    }
    if let Some(price) = changes.price_cents {
        if let Pricing::Bid(_) = subscription.pricing {
            return Err(ConfigError::Invalid(
                "a bid-priced subscription has no --price (its bids are the price): pass \
                 --pricing fixed with it"
                    .into(),
            ));
        }
        subscription.price_cents = price;
    }
    if let Some(cap) = changes.daily_cap {
        subscription.daily_cap = cap;
    }
    if let Some(cap) = changes.monthly_cap {
        subscription.monthly_cap = cap;
    }
    if let Some(priority) = changes.priority {
        subscription.priority = priority;
    }
    if let Some(filters) = &changes.filters {
        check_filters(filters, &product)?;
        subscription.filters = filters.clone();
    }
    if let Some(schedule) = &changes.schedule {
        subscription.schedule = schedule.clone();
    }
    if let Some(require_check) = &changes.require_check {
        subscription.require_check = require_check.clone();
    }
    check_terms(&subscription)?;
    check_steps_named(conn, &subscription, &product.workspace_id)?;
    conn.execute(
        "UPDATE subscriptions SET price_cents = ?3, daily_cap = ?4, monthly_cap = ?5,
            priority = ?6, filters = ?7, schedule = ?8, pricing = ?9, bid_url = ?10,
            bid_timeout_ms = ?11, min_price_cents = ?12, max_price_cents = ?13,
            require_check = ?14
         WHERE buyer_id = ?1 AND product_id = ?2",
        params![
            subscription.buyer_id,
            subscription.product_id,
            subscription.price_cents,
            subscription.daily_cap,
            subscription.monthly_cap,
            subscription.priority,
            serde_json::to_string(&subscription.filters).expect("filters serialise"),
            subscription.schedule.as_ref().map(Value::to_string),
            subscription.pricing.name(),
            bid_column(&subscription.pricing, |b| b.url.clone()),
            bid_column(&subscription.pricing, |b| b.timeout_ms),
            bid_column(&subscription.pricing, |b| b.min_price_cents).flatten(),
            bid_column(&subscription.pricing, |b| b.max_price_cents).flatten(),
            subscription.require_check,
        ],
    )?;
    Ok(subscription)
}

/// Refuses a `--require-check` or a `check.NAME.KEY` filter naming a check step that the
/// workspace does not have: such a buyer would never get a lead, silently. Reads
/// `check_steps` (the `checks` module's table).
fn check_steps_named(
    conn: &Connection,
    subscription: &Subscription,
    workspace_id: &str,
) -> Result<(), ConfigError> {
    let named = subscription.require_check.iter().map(String::as_str).chain(
        subscription.filters.iter().filter_map(|f| {
            f.field
                .strip_prefix(CHECK_FILTER_PREFIX)
                .and_then(|rest| rest.split_once('.'))
                .map(|(name, _)| name)
        }),
    );
    for name in named {
        let exists: bool = conn
            .prepare_kept(
                "SELECT EXISTS (SELECT 1 FROM check_steps WHERE name = ?1 AND workspace_id = ?2)",
            )?
            .query_row([name, workspace_id], |row| row.get(0))?;
        if !exists {
            return Err(ConfigError::Invalid(format!(
                "unknown check step '{name}' in workspace '{workspace_id}': add it with                  `check-step set`"
            )));
        }
    }
    Ok(())
}

/// A column of a bid-priced subscription's terms; NULL for a fixed price.
fn bid_column<T>(pricing: &Pricing, column: impl Fn(&BidTerms) -> T) -> Option<T> {
    match pricing {
        Pricing::Fixed => None,
        Pricing::Bid(bid) => Some(column(bid)),
    }
}

/// A bid URL follows the rule of every outbound URL (DESIGN.md section 16).
fn check_bid_url(url: &str) -> Result<(), ConfigError> {
    crate::outbound_url::check(url)
        .map_err(|e| ConfigError::Invalid(format!("invalid bid URL: {e}")))
}

fn not_subscribed(buyer_id: &crate::ids::BuyerId, product: &Product) -> ConfigError {
    ConfigError::Invalid(format!(
        "buyer '{buyer_id}' is not subscribed to '{}'",
        product.slug
    ))
}

/// Ends the buyer's subscription to `product`; the buyer gets no more of its leads from
/// auto-delivery. Its transactions stay as they are.
pub fn unsubscribe(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product: &str,
) -> Result<(), ConfigError> {
    let buyer = buyer::get(conn, buyer_id)?;
    let product = product::resolve(conn, &buyer.workspace_id, product)?;
    let removed = conn.execute(
        "DELETE FROM subscriptions WHERE buyer_id = ?1 AND product_id = ?2",
        params![buyer.id, product.id],
    )?;
    if removed == 0 {
        return Err(not_subscribed(&buyer.id, &product));
    }
    Ok(())
}

/// The buyer's subscriptions, by product slug, each with its cap use today and this month
/// in the workspace's time zone at `now_ms`.
pub fn terms(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    now_ms: i64,
) -> Result<Vec<Terms>, ConfigError> {
    let buyer = buyer::get(conn, buyer_id)?;
    let tz = super::workspace::get(conn, &buyer.workspace_id)?.tz();
    let windows = Windows::at(now_ms, &tz);
    let mut stmt = conn.prepare(&format!(
        "SELECT {SUBSCRIPTION_COLUMNS_OF_S}, p.slug FROM subscriptions s
         JOIN products p ON p.id = s.product_id
         WHERE s.buyer_id = ?1 ORDER BY p.slug"
    ))?;
    let rows = stmt.query_map([&buyer.id], |row| {
        Ok((subscription_from_row(row)?, row.get::<_, String>(14)?))
    })?;
    let mut all = Vec::new();
    for row in rows {
        let (subscription, product_slug) = row?;
        let usage = caps::usage_now(
            conn,
            &subscription.buyer_id,
            &subscription.product_id,
            &windows,
        )?;
        all.push(Terms {
            subscription,
            product_slug,
            used_today: usage.today,
            used_this_month: usage.this_month,
        });
    }
    Ok(all)
}

/// The one entry of `terms` for `product`.
pub fn terms_of(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product_id: &str,
    now_ms: i64,
) -> Result<Terms, ConfigError> {
    terms(conn, buyer_id, now_ms)?
        .into_iter()
        .find(|t| t.subscription.product_id == product_id)
        .ok_or_else(|| ConfigError::NotFound {
            kind: "subscription",
            id: format!("{buyer_id}/{product_id}"),
        })
}

/// Refuses product fields that drop a field a subscription's filter names.
pub(crate) fn check_fields_kept(
    conn: &Connection,
    product_id: &str,
    fields: &[FieldDef],
) -> Result<(), ConfigError> {
    for subscription in subscriptions_to_product(conn, product_id)? {
        for filter in &subscription.filters {
            if let Some(name) = filter.field.strip_prefix("fieldValues.")
                && !fields.iter().any(|f| f.name == name)
            {
                return Err(ConfigError::Invalid(format!(
                    "field '{name}' is used by buyer '{}' in the filter '{}': change that \
                     filter first",
                    subscription.buyer_id,
                    filter.to_text()
                )));
            }
        }
    }
    Ok(())
}

fn subscription_from_row(row: &Row) -> rusqlite::Result<Subscription> {
    let filters: String = row.get(6)?;
    let schedule: Option<String> = row.get(7)?;
    let pricing: String = row.get(8)?;
    Ok(Subscription {
        pricing: match pricing.as_str() {
            "bid" => Pricing::Bid(BidTerms {
                url: row.get::<_, Option<String>>(9)?.unwrap_or_default(),
                timeout_ms: row
                    .get::<_, Option<i64>>(10)?
                    .unwrap_or(DEFAULT_BID_TIMEOUT_MS),
                min_price_cents: row.get(11)?,
                max_price_cents: row.get(12)?,
            }),
            _ => Pricing::Fixed,
        },
        buyer_id: row.get(0)?,
        product_id: row.get(1)?,
        price_cents: row.get(2)?,
        daily_cap: row.get(3)?,
        monthly_cap: row.get(4)?,
        priority: row.get(5)?,
        filters: serde_json::from_str(&filters).unwrap_or_default(),
        schedule: schedule.and_then(|s| serde_json::from_str(&s).ok()),
        require_check: row.get(13)?,
    })
}

const SUBSCRIPTION_COLUMNS: &str = "buyer_id, product_id, price_cents, daily_cap, monthly_cap, priority, filters, schedule, \
     pricing, bid_url, bid_timeout_ms, min_price_cents, max_price_cents, require_check";

const SUBSCRIPTION_COLUMNS_OF_S: &str = "s.buyer_id, s.product_id, s.price_cents, s.daily_cap, \
    s.monthly_cap, s.priority, s.filters, s.schedule, s.pricing, s.bid_url, s.bid_timeout_ms, \
    s.min_price_cents, s.max_price_cents, s.require_check";

pub fn find_subscription(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    product_id: &str,
) -> rusqlite::Result<Option<Subscription>> {
    conn.query_row(
        &format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions
             WHERE buyer_id = ?1 AND product_id = ?2"
        ),
        rusqlite::params![buyer_id, product_id],
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

/// The products (slugs) the buyer is subscribed to.
pub(crate) fn products_of_buyer(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT p.slug FROM subscriptions s JOIN products p ON p.id = s.product_id
         WHERE s.buyer_id = ?1 ORDER BY p.slug",
    )?;
    let rows = stmt.query_map([buyer_id], |row| row.get(0))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_filters_and_prints_them_back() {
        assert_eq!(Filter::parse("country=DE").unwrap().op, FilterOp::Equals);
        let one_of = Filter::parse("fieldValues.roof=tile|flat").unwrap();
        assert_eq!(one_of.op, FilterOp::OneOf);
        assert_eq!(one_of.values, vec!["tile", "flat"]);
        let prefix = Filter::parse("postalCode=80*").unwrap();
        assert_eq!(
            (prefix.op, prefix.values.clone()),
            (FilterOp::Prefix, vec!["80".to_string()])
        );
        assert!(Filter::parse("nothing").is_err());
        assert!(Filter::parse("=x").is_err());
        for text in ["country=DE", "fieldValues.roof=tile|flat", "postalCode=80*"] {
            assert_eq!(Filter::parse(text).unwrap().to_text(), text);
        }
    }

    #[test]
    fn a_filter_must_name_a_field_a_lead_can_have() {
        let product = Product {
            id: "p".into(),
            workspace_id: "ws".into(),
            slug: "solar".into(),
            name: "Solar".into(),
            fields: vec![FieldDef::parse("roof").unwrap()],
            default_supplier_cost_cents: None,
            created_at: 0,
            archived_at: None,
            bid_subscriptions: false,
        };
        let check = |text: &str| check_filters(&[Filter::parse(text).unwrap()], &product);
        assert!(check("country=DE").is_ok());
        assert!(check("fieldValues.roof=tile").is_ok());
        let refused = check("countyr=DE").unwrap_err().to_string();
        assert!(
            refused.contains("unknown filter field 'countyr'"),
            "{refused}"
        );
        assert!(
            refused.contains("country"),
            "names the known ones: {refused}"
        );
        assert!(refused.contains("fieldValues.roof"), "{refused}");
        assert!(check("fieldValues.size=big").is_err());
    }
}
