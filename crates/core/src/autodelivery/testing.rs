//! Fixtures for the unit tests of auto-delivery: leads and interests built in memory, and
//! an in-memory database with the schema and a small workspace.

use rusqlite::Connection;
use serde_json::{Map, Value};

use crate::config::container::{ContainerKind, DeliveryMode};
use crate::delivery::transaction::{self, NewTransaction, Status};
use crate::ids::{LeadId, LeadRequestId, TransactionId};
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::model::{Interest, StoredLead, StoredRequest};
use crate::ingest::quality::QualityStatus;
use crate::ingest::status::{LeadStatus, RequestStatus};

/// The id of the fixtures' lead ([`lead`]).
pub fn lead_id() -> LeadId {
    "lead_01JD7Q4N9V3X8K2M5P6R7S8T9W"
        .parse()
        .expect("a canonical lead id")
}

/// The id of the fixtures' request ([`request`]).
pub fn request_id() -> LeadRequestId {
    "lreq_01JD7Q4N9VB2C3D4E5F6G7H8J9"
        .parse()
        .expect("a canonical request id")
}

/// Another request of the fixtures' lead, decided earlier.
pub fn old_request_id() -> LeadRequestId {
    "lreq_01JD7Q4N9V0000000000000000"
        .parse()
        .expect("a canonical request id")
}

/// Lead [`lead_id`] with `fields` set by interface name (read as ingest's validation reads
/// a Lead), quality ok and unique, with request [`request`] and no answers.
pub fn lead(fields: &[(&str, &str)]) -> StoredLead {
    let body: Map<String, Value> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    // Missing names are problems the fixtures do not care about.
    let draft = crate::ingest::validate::lead(body, "", &mut Vec::new());
    StoredLead {
        id: lead_id(),
        source_id: "src".into(),
        container_id: "web".into(),
        container_kind: ContainerKind::Channel,
        workspace_id: "ws".into(),
        fields: draft.fields,
        quality_status: QualityStatus::Ok,
        quality_reasons: Vec::new(),
        duplicate_status: DuplicateStatus::Unique,
        duplicate_match: None,
        status: LeadStatus::Active,
        created_at: 0,
        erased_at: None,
        checks: Vec::new(),
        requests: vec![request(&[])],
    }
}

/// An interest in `solar` with `answers`, asking for auto-delivery.
pub fn interest(answers: &[(&str, &str)]) -> Interest {
    Interest {
        product_id: "solar".into(),
        product_slug: "solar".into(),
        product_name: "Solar".into(),
        routing_ready: None,
        trigger_auto_delivery: true,
        field_values: answers
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    }
}

/// Request [`request_id`] of [`lead_id`]: an interest in `solar` with `answers`.
pub fn request(answers: &[(&str, &str)]) -> StoredRequest {
    StoredRequest {
        id: request_id(),
        position: 0,
        interest: interest(answers),
        status: RequestStatus::Open,
        decision: None,
        created_at: 0,
    }
}

/// An in-memory database with the schema and the [`rows`].
pub fn database() -> Connection {
    let mut conn = Connection::open_in_memory().expect("an in-memory database opens");
    crate::db::apply_migrations(&mut conn).expect("the schema applies");
    rows(&conn);
    conn
}

/// Workspaces `ws` and `other`; products `solar` and `heat`; channel `web` with source
/// `src`; lead [`lead_id`] with requests [`request_id`] and [`old_request_id`] for `solar`.
pub fn rows(conn: &Connection) {
    conn.execute_batch(
        "INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'W', 0), ('other', 'O', 0);
         INSERT INTO products (id, workspace_id, slug, name, created_at)
             VALUES ('solar', 'ws', 'solar', 'Solar', 0), ('heat', 'ws', 'heat', 'Heat', 0);
         INSERT INTO containers (id, workspace_id, kind, name, auto_delivery, created_at)
             VALUES ('web', 'ws', 'channel', 'Web', 1, 0);
         INSERT INTO sources (id, container_id, name, dedupe_scope, created_at)
             VALUES ('src', 'web', 'S', 'channel', 0);",
    )
    .expect("the fixture rows insert");
    conn.execute(
        "INSERT INTO leads (id, source_id, container_id, workspace_id, first_name,
             last_name, quality_status, duplicate_status, created_at)
         VALUES (?1, 'src', 'web', 'ws', 'Ann', 'Lee', 'ok', 'unique', 0)",
        [lead_id()],
    )
    .expect("the fixture lead inserts");
    conn.execute(
        "INSERT INTO lead_requests (id, lead_id, position, product_id, created_at)
         VALUES (?1, ?3, 0, 'solar', 0), (?2, ?3, 1, 'solar', 0)",
        rusqlite::params![request_id(), old_request_id(), lead_id()],
    )
    .expect("the fixture requests insert");
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
             credit_limit_cents, created_at)
         VALUES (?1, 'ws', ?1, 'http://x.test/', 'whsec_x', ?2, ?3, ?4, 0)",
        rusqlite::params![id, fixture.status, fixture.plan, fixture.credit_limit_cents],
    )
    .expect("the buyer fixture inserts");
    if fixture.balance_cents != 0 {
        // The balance comes from the ledger, as every balance does.
        crate::ledger::post(
            conn,
            &crate::ledger::Posting {
                workspace_id: "ws",
                party: crate::ledger::Party::Buyer(&id.into()),
                transaction_id: None,
                kind: crate::ledger::Kind::Adjustment,
                amount_cents: fixture.balance_cents,
                reason: Some("test balance"),
                actor: "test",
                at: 0,
            },
        )
        .expect("the balance fixture posts");
    }
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

/// A transaction of `buyer` for `product` on `request` of [`lead_id`], created at `at` and
/// moved to `status`, written through the transaction's owner; its id.
pub fn add_transaction(
    conn: &Connection,
    request: LeadRequestId,
    buyer: &str,
    product: &str,
    status: &str,
    at: i64,
) -> TransactionId {
    let id = TransactionId::generate();
    let new = NewTransaction {
        bid: None,
        id: &id,
        lead_request_id: request,
        lead_id: lead_id(),
        buyer_id: &buyer.into(),
        product_id: product,
        workspace_id: "ws",
        source_id: &"src".into(),
        delivery_mode: DeliveryMode::Exclusive,
        buyer_price_cents: 1000,
        supplier_cost_cents: 0,
        margin_cents: 1000,
        charged_cents: 0,
        cap_windows: None,
        first_of_request: false,
    };
    transaction::create(conn, &new, "test", at).expect("the transaction fixture inserts");
    let status = Status::parse(status).expect("a known transaction status");
    if status != Status::Delivered {
        transaction::move_to(conn, &id, Status::Delivered, status, "test", None, at)
            .expect("the transaction fixture moves");
    }
    id
}
