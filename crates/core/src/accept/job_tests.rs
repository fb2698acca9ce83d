//! The ingest writer job hands the lead it stored on: auto-delivery and delivery never read
//! it back. Every statement the job runs is traced on a real, migrated database file.

use std::cell::RefCell;

use rusqlite::Connection;
use rusqlite::trace::{TraceEvent, TraceEventCodes};
use serde_json::{Value, json};

use super::job::{self, StoreOutcome};
use crate::config::buyer::{self, Filter, NewSubscription};
use crate::config::container::{ContainerKind, DeliveryMode};
use crate::config::product::{self, NewProduct};
use crate::config::source::{self, Source};
use crate::config::testing;
use crate::ingest::catalog::{self, References};
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::quality;
use crate::ingest::shape::{self, Shape};
use crate::ingest::store::PreparedLead;
use crate::ingest::validate;

thread_local! {
    /// The statements run on this thread's traced connection, in order.
    static TRACED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn record(event: TraceEvent<'_>) {
    if let TraceEvent::Stmt(_, sql) = event {
        TRACED.with(|t| t.borrow_mut().push(sql.to_string()));
    }
}

/// Runs `f` with every statement on `conn` traced; the statements, in order.
fn traced<T>(conn: &Connection, f: impl FnOnce() -> T) -> (T, Vec<String>) {
    TRACED.with(|t| t.borrow_mut().clear());
    conn.trace_v2(TraceEventCodes::SQLITE_TRACE_STMT, Some(record));
    let result = f();
    conn.trace_v2(TraceEventCodes::empty(), None);
    (result, TRACED.with(|t| t.take()))
}

/// Whether `sql` reads the table `table` (names it after FROM or JOIN).
fn reads(sql: &str, table: &str) -> bool {
    let words: Vec<String> = sql
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words
        .windows(2)
        .any(|pair| (pair[0] == "from" || pair[0] == "join") && pair[1] == table)
}

/// A migrated database file with workspace `ws`, product `solar`, the multi-mode channel
/// `web` (auto-delivery on, up to two buyers) with source `src`, and three buyers with
/// caps and filters, of which `at` filters the leads out.
fn database() -> (tempfile::TempDir, Connection, Source) {
    let (dir, conn) = testing::migrated();
    testing::workspace(&conn, "Europe/Berlin");
    let channel = testing::Channel {
        auto_delivery: true,
        mode: DeliveryMode::Multi,
        max_buyers: 2,
        score_threshold: 10,
    };
    testing::channel(&conn, channel, Some(300));
    product::create(
        &conn,
        &NewProduct {
            id: Some("solar"),
            workspace_id: "ws",
            slug: "solar",
            name: "Solar",
            fields: Vec::new(),
            default_supplier_cost_cents: Some(400),
        },
    )
    .unwrap();
    for (id, filter, price) in [
        ("de", "country=DE", 2500),
        ("berlin", "postalCode=1*", 2400),
        ("at", "country=AT", 9900),
    ] {
        testing::buyer(&conn, id);
        buyer::subscribe(
            &conn,
            &NewSubscription {
                pricing: Default::default(),
                buyer_id: &id.into(),
                product: "solar",
                price_cents: price,
                daily_cap: Some(100),
                monthly_cap: Some(1000),
                priority: 0,
                filters: vec![Filter::parse(filter).unwrap()],
                schedule: None,
                require_check: None,
            },
        )
        .unwrap();
    }
    let source = source::find(&conn, &"src".into())
        .unwrap()
        .expect("the source exists");
    (dir, conn, source)
}

/// `lead` as the handler prepares it for the writer.
fn prepare(conn: &Connection, lead: Value) -> PreparedLead {
    let Ok(Shape::Single(item)) = shape::detect(lead, None, ContainerKind::Channel) else {
        panic!("a single lead");
    };
    let mut problems = item.problems;
    let draft = item.draft.expect("an object");
    let catalog = catalog::load(conn, "ws", &References::of([&draft])).unwrap();
    let lead = validate::complete(draft, &catalog, &mut problems);
    assert_eq!(problems, Vec::new());
    let quality = quality::assess(&lead.fields);
    PreparedLead::new(lead, item.raw, quality)
}

fn lead(external_id: &str, auto: bool) -> Value {
    json!({
        "externalId": external_id,
        "firstName": "Ann",
        "lastName": "Lee",
        "email": format!("{external_id}@example.com"),
        "phone": "+49 30 1234567",
        "postalCode": "10115",
        "country": "DE",
        "consentStatus": "granted",
        "utmSource": "fair",
        "productSlug": "solar",
        "fieldValues": {"roof": "tile"},
        "triggerAutoDelivery": auto,
    })
}

#[test]
fn the_ingest_job_hands_the_stored_lead_on_and_never_reads_it_back() {
    let (_dir, conn, source) = database();
    let prepared = prepare(&conn, lead("x1", true));
    let (outcomes, statements) = traced(&conn, || {
        job::store_all(&conn, &source, std::slice::from_ref(&prepared), 0).unwrap()
    });
    let [StoreOutcome::Created { auto_delivered, .. }] = outcomes.as_slice() else {
        panic!("one lead created: {outcomes:?}");
    };
    assert_eq!(*auto_delivered, 2, "multi mode: both matching buyers");

    let inserted = statements
        .iter()
        .position(|sql| sql.starts_with("INSERT INTO leads"))
        .expect("the lead is inserted");
    let read_back: Vec<&String> = statements[inserted..]
        .iter()
        .filter(|sql| reads(sql, "leads") || reads(sql, "lead_requests"))
        .collect();
    assert!(
        read_back.is_empty(),
        "after its insert the job read the lead again: {read_back:#?}"
    );

    // The events carry the lead as it was handed on.
    let mut stmt = conn
        .prepare("SELECT payload FROM outbox_events ORDER BY created_at, rowid")
        .unwrap();
    let payloads: Vec<Value> = stmt
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(|text| serde_json::from_str(&text.unwrap()).unwrap())
        .collect();
    assert_eq!(payloads.len(), 2);
    for payload in &payloads {
        assert_eq!(payload["lead"]["externalId"], "x1");
        assert_eq!(payload["lead"]["postalCode"], "10115");
        assert_eq!(payload["lead"]["utmSource"], "fair");
        assert_eq!(payload["fieldValues"], json!({"roof": "tile"}));
        assert_eq!(payload["product"]["slug"], "solar");
    }
    assert_eq!(payloads[0]["pricing"]["supplierCost"], json!(3.0));
    assert_eq!(payloads[1]["pricing"]["supplierCost"], json!(0.0));
}

/// The statements of `statements` that look up a lead by its email or phone key.
fn key_lookups(statements: &[String]) -> Vec<&String> {
    statements
        .iter()
        .filter(|sql| sql.contains("email_key = ") || sql.contains("phone_key = "))
        .collect()
}

#[test]
fn a_lead_whose_keys_no_earlier_lead_has_is_looked_up_once_per_key() {
    let (_dir, conn, source) = database();
    let prepared = prepare(&conn, lead("x1", true));
    let (outcomes, statements) = traced(&conn, || {
        job::store_all(&conn, &source, std::slice::from_ref(&prepared), 0).unwrap()
    });
    let [StoreOutcome::Created { item, .. }] = outcomes.as_slice() else {
        panic!("one lead created: {outcomes:?}");
    };
    let ingest = item.ingest.as_ref().expect("judged");
    assert_eq!(ingest.duplicate_status, DuplicateStatus::Unique);
    let lookups = key_lookups(&statements);
    assert_eq!(
        lookups.len(),
        2,
        "the evaluator's count finds no earlier lead, so the duplicate rule does not look \
         again: {lookups:#?}"
    );
}

#[test]
fn a_duplicate_that_asks_for_auto_delivery_is_still_judged_by_the_rule() {
    let (_dir, conn, source) = database();
    let first = prepare(&conn, lead("x1", true));
    job::store_all(&conn, &source, std::slice::from_ref(&first), 0).unwrap();
    // Another externalId and email, the same phone: a duplicate under the rule's phone.
    let again = prepare(&conn, lead("x2", true));
    let (outcomes, statements) = traced(&conn, || {
        job::store_all(&conn, &source, std::slice::from_ref(&again), 1_000).unwrap()
    });
    let [StoreOutcome::Created { item, .. }] = outcomes.as_slice() else {
        panic!("one lead created: {outcomes:?}");
    };
    let ingest = item.ingest.as_ref().expect("judged");
    assert_eq!(ingest.duplicate_status, DuplicateStatus::Review);
    let matched = ingest.duplicate_match.as_ref().expect("the earlier lead");
    assert_eq!(matched.matched_on, "phone");
    assert!(
        key_lookups(&statements).len() > 2,
        "the rule looked for the keys itself"
    );
}

#[test]
fn the_deliver_command_reads_the_lead_once() {
    let (_dir, conn, source) = database();
    let prepared = prepare(&conn, lead("x2", false));
    let outcomes = job::store_all(&conn, &source, &[prepared], 0).unwrap();
    let [StoreOutcome::Created { item, .. }] = outcomes.as_slice() else {
        panic!("one lead created: {outcomes:?}");
    };
    let request = item.request_ids[0];
    let (delivered, statements) = traced(&conn, || {
        crate::delivery::deliver(
            &conn,
            &crate::delivery::DeliveryOrder {
                lead_request_id: request,
                buyer_id: &crate::ids::BuyerId::from("at"),
                price_cents: Some(1000),
                actor: "operator",
            },
        )
    });
    let delivered = delivered.expect("an operator may deliver to any buyer");
    let lead_reads: Vec<&String> = statements
        .iter()
        .filter(|sql| reads(sql, "leads"))
        .collect();
    assert_eq!(lead_reads.len(), 1, "{lead_reads:#?}");
    let payload: String = conn
        .query_row(
            "SELECT payload FROM outbox_events WHERE id = ?1",
            [&delivered.event_id],
            |row| row.get(0),
        )
        .unwrap();
    let payload: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(payload["lead"]["utmSource"], "fair");
    assert_eq!(payload["fieldValues"], json!({"roof": "tile"}));
}

#[test]
fn reads_finds_tables_after_from_and_join_only() {
    assert!(reads("SELECT id FROM leads WHERE x", "leads"));
    assert!(reads("select 1 from lead_requests r join leads l", "leads"));
    assert!(!reads("SELECT id FROM lead_requests", "leads"));
    assert!(!reads("UPDATE leads SET result = ?2", "leads"));
    assert!(!reads("INSERT INTO leads (id) VALUES (?1)", "leads"));
}
