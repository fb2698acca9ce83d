//! Fixtures for the unit tests of auto-delivery: leads and interests built in memory, and
//! an in-memory database with the schema and a small workspace.

use rusqlite::Connection;
use serde_json::Value;

use super::lead::{Interest, Lead};

/// A lead with `fields` set by interface name, quality ok and unique.
pub fn lead(fields: &[(&str, &str)]) -> Lead {
    Lead {
        id: "lead_test".into(),
        workspace_id: "ws".into(),
        container_id: "web".into(),
        quality_status: "ok".into(),
        quality_reasons: Vec::new(),
        duplicate_status: "unique".into(),
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

/// A buyer `id` of `ws` subscribed to `solar` at 10.00, then changed by `buyer_sql` and
/// `subscription_sql` (SQL `SET` lists written by the tests themselves).
pub fn add_buyer(conn: &Connection, id: &str, buyer_sql: &str, subscription_sql: &str) {
    conn.execute_batch(&format!(
        "INSERT INTO buyers (id, workspace_id, name, webhook_url, signing_secret, created_at)
             VALUES ('{id}', 'ws', '{id}', 'http://x.test/', 'whsec_x', 0);
         UPDATE buyers SET {buyer_sql} WHERE id = '{id}';
         INSERT INTO subscriptions (buyer_id, product_id, price_cents, created_at)
             VALUES ('{id}', 'solar', 1000, 0);
         UPDATE subscriptions SET {subscription_sql} WHERE buyer_id = '{id}';"
    ))
    .expect("the buyer fixture inserts");
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
