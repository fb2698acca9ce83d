//! Fixtures for the unit tests of auto-delivery: leads and interests built in memory, and
//! an in-memory database with the schema and a small workspace.

use rusqlite::Connection;
use serde_json::Value;

use super::lead::{Interest, Lead};
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::quality::QualityStatus;

/// A lead with `fields` set by interface name, quality ok and unique.
pub fn lead(fields: &[(&str, &str)]) -> Lead {
    Lead {
        id: "lead_test".into(),
        workspace_id: "ws".into(),
        container_id: "web".into(),
        quality_status: QualityStatus::Ok,
        quality_reasons: Vec::new(),
        duplicate_status: DuplicateStatus::Unique,
        fields: fields
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    }
}

pub fn interest(answers: &[(&str, &str)]) -> Interest {
    Interest {
        id: "lreq_test".into(),
        product_id: "solar".into(),
        routing_ready: None,
        field_values: answers
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    }
}

/// An in-memory database with the schema; workspaces `ws` and `other`; products `solar` and
/// `heat`; channel `web` with source `src`; lead `lead_test` with requests `lreq_test` and
/// `lreq_old` for `solar`.
pub fn database() -> Connection {
    let conn = Connection::open_in_memory().expect("an in-memory database opens");
    conn.execute_batch(include_str!("../../schema.sql"))
        .expect("the schema applies");
    conn.execute_batch(
        "INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'W', 0), ('other', 'O', 0);
         INSERT INTO products (id, workspace_id, slug, name, created_at)
             VALUES ('solar', 'ws', 'solar', 'Solar', 0), ('heat', 'ws', 'heat', 'Heat', 0);
         INSERT INTO containers (id, workspace_id, kind, name, auto_delivery, created_at)
             VALUES ('web', 'ws', 'channel', 'Web', 1, 0);
         INSERT INTO sources (id, container_id, name, dedupe_scope, created_at)
             VALUES ('src', 'web', 'S', 'channel', 0);
         INSERT INTO leads (id, source_id, container_id, workspace_id, first_name,
             last_name, quality_status, duplicate_status, created_at)
             VALUES ('lead_test', 'src', 'web', 'ws', 'Ann', 'Lee', 'ok', 'unique', 0);
         INSERT INTO lead_requests (id, lead_id, position, product_id, created_at)
             VALUES ('lreq_test', 'lead_test', 0, 'solar', 0),
                    ('lreq_old', 'lead_test', 1, 'solar', 0);",
    )
    .expect("the fixture rows insert");
    conn
}

/// A buyer and its subscription as the tests vary them; the default is an active postpaid
/// buyer subscribed to `solar` at 10.00 with no caps, filters or schedule.
pub struct BuyerFixture<'a> {
    pub status: &'a str,
    pub plan: &'a str,
    pub balance_cents: i64,
    pub credit_limit_cents: i64,
    pub product: &'a str,
    pub daily_cap: Option<i64>,
    pub monthly_cap: Option<i64>,
    /// Stored filters JSON.
    pub filters: &'a str,
    /// Stored schedule JSON.
    pub schedule: Option<&'a str>,
}

impl Default for BuyerFixture<'_> {
    fn default() -> Self {
        BuyerFixture {
            status: "active",
            plan: "postpaid",
            balance_cents: 0,
            credit_limit_cents: 0,
            product: "solar",
            daily_cap: None,
            monthly_cap: None,
            filters: "[]",
            schedule: None,
        }
    }
}

/// A buyer `id` of `ws` with its subscription as `fixture` says.
pub fn add_buyer(conn: &Connection, id: &str, fixture: &BuyerFixture) {
    conn.execute(
        "INSERT INTO buyers (id, workspace_id, name, webhook_url, signing_secret, status, plan,
             balance_cents, credit_limit_cents, created_at)
         VALUES (?1, 'ws', ?1, 'http://x.test/', 'whsec_x', ?2, ?3, ?4, ?5, 0)",
        rusqlite::params![
            id,
            fixture.status,
            fixture.plan,
            fixture.balance_cents,
            fixture.credit_limit_cents
        ],
    )
    .expect("the buyer fixture inserts");
    conn.execute(
        "INSERT INTO subscriptions (buyer_id, product_id, price_cents, daily_cap, monthly_cap,
             filters, schedule, created_at)
         VALUES (?1, ?2, 1000, ?3, ?4, ?5, ?6, 0)",
        rusqlite::params![
            id,
            fixture.product,
            fixture.daily_cap,
            fixture.monthly_cap,
            fixture.filters,
            fixture.schedule
        ],
    )
    .expect("the subscription fixture inserts");
}

/// A transaction of `buyer` for `product` on `request` of `lead_test`, created at `at`.
pub fn add_transaction(
    conn: &Connection,
    request: &str,
    buyer: &str,
    product: &str,
    status: &str,
    at: i64,
) {
    conn.execute(
        "INSERT INTO transactions (id, lead_request_id, lead_id, buyer_id, product_id,
             workspace_id, delivery_mode, buyer_price_cents, margin_cents, status,
             created_at, updated_at)
         VALUES (?1, ?2, 'lead_test', ?3, ?4, 'ws', 'exclusive', 1000, 1000, ?5, ?6, ?6)",
        rusqlite::params![crate::ids::new("txn"), request, buyer, product, status, at],
    )
    .expect("the transaction fixture inserts");
}
