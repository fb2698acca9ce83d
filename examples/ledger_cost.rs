//! Measures what money costs a delivery on the writer thread: the time of
//! `delivery::deliver` (its checks and every write) for a postpaid buyer and a source
//! without a supplier (no money moves), a prepaid buyer (a charge), and a prepaid buyer and
//! a source with a supplier (a charge and a supplier cost). Run with
//! `cargo run --release --example ledger_cost`.
//!
//! Leads are written with plain SQL (ingest has its own benchmark), each with one lead
//! request, and delivered in writer jobs of 100, as a batch's auto-delivery would; each
//! scenario on a fresh database file with `synchronous=FULL`. Only the `deliver` calls are
//! timed, not the commits.

use std::time::{Duration, Instant};

use leadrelay::config::ConfigError;
use leadrelay::config::buyer::{self, NewBuyer, Plan};
use leadrelay::config::container::{self, ContainerKind, DeliveryMode, NewContainer};
use leadrelay::config::product::{self, NewProduct};
use leadrelay::config::source::{self, DedupeAction, NewSource};
use leadrelay::config::supplier::{self, NewSupplier};
use leadrelay::config::workspace::{self, NewWorkspace};
use leadrelay::db::{Db, DbError};
use leadrelay::delivery::{self, DeliveryOrder};
use leadrelay::ids::SupplierId;
use rusqlite::{Connection, params};

const DELIVERIES: usize = 10_000;
const PER_JOB: usize = 100;

fn main() {
    let scenarios = [
        (
            "postpaid buyer, no supplier (no money row)",
            Plan::Postpaid,
            false,
        ),
        (
            "prepaid buyer, no supplier (a charge)",
            Plan::Prepaid,
            false,
        ),
        (
            "prepaid buyer, source with a supplier (a charge and a supplier cost)",
            Plan::Prepaid,
            true,
        ),
    ];
    for (what, plan, with_supplier) in scenarios {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = Db::open(dir.path().join("bench.db")).expect("the database opens");
        db.write_blocking(move |conn| setup(conn, plan, with_supplier))
            .expect("the setup is valid");
        let mut per_delivery = Vec::with_capacity(DELIVERIES);
        for job in 0..DELIVERIES / PER_JOB {
            let timings = db
                .write_blocking(move |conn| deliver_group(conn, job))
                .expect("the group is delivered");
            per_delivery.extend(timings);
        }
        let total: Duration = per_delivery.iter().sum();
        let mut sorted = per_delivery.clone();
        sorted.sort();
        println!(
            "{what}: {DELIVERIES} deliveries, {:.1?} per delivery on average (p50 {:.1?}, \
             p99 {:.1?}), {:.0} deliveries/s on the writer thread",
            total / DELIVERIES as u32,
            sorted[DELIVERIES / 2],
            sorted[DELIVERIES * 99 / 100],
            DELIVERIES as f64 / total.as_secs_f64()
        );
        db.close();
    }
}

/// A workspace, a channel with one source (with supplier `sup` when asked), a product and
/// buyer `b` on `plan`, funded to take every delivery when prepaid.
fn setup(conn: &Connection, plan: Plan, with_supplier: bool) -> Result<(), ConfigError> {
    workspace::create(
        conn,
        &NewWorkspace {
            id: Some("ws"),
            name: "Bench",
            timezone: "UTC",
            retention: None,
            suppression_action: None,
        },
    )?;
    container::create(
        conn,
        &NewContainer {
            id: Some("web"),
            workspace_id: "ws",
            kind: ContainerKind::Channel,
            name: "web",
            auto_delivery: Some(false),
            delivery_mode: DeliveryMode::Exclusive,
            max_buyers: 1,
            score_threshold: 50,
            ping_ttl_ms: None,
            waterfall: None,
            waterfall_max: None,
        },
    )?;
    if with_supplier {
        supplier::create(
            conn,
            &NewSupplier {
                id: Some("sup"),
                workspace_id: "ws",
                name: "Sup",
                key: None,
            },
        )?;
    }
    source::create(
        conn,
        &NewSource {
            id: Some("src"),
            container_id: "web",
            container_kind: ContainerKind::Channel,
            name: "src",
            secret: None,
            supplier_id: with_supplier.then_some(&SupplierId::from("sup")),
            supplier_cost_cents: Some(400),
            revenue_share_bp: None,
            dedupe_fields: None,
            dedupe_scope: None,
            dedupe_action: DedupeAction::Review,
            dedupe_window_days: 30,
            result_detail: None,
        },
    )?;
    product::create(
        conn,
        &NewProduct {
            id: Some("solar"),
            workspace_id: "ws",
            slug: "solar",
            name: "Solar",
            fields: Vec::new(),
            default_supplier_cost_cents: None,
        },
    )?;
    buyer::create(
        conn,
        &NewBuyer {
            id: Some("b"),
            workspace_id: "ws",
            name: "b",
            webhook_url: "http://127.0.0.1:9/leads",
            secret: Some(None),
            signing_secret: None,
            capabilities: vec!["confirm".into()],
            cancellation_window_secs: 259_200,
            auto_payout_pending: false,
            plan,
            credit_limit_cents: 0,
            return_cap_bp: None,
            return_review: buyer::ReturnReview::Auto,
        },
    )?;
    if plan == Plan::Prepaid {
        buyer::fund(conn, &"b".into(), 2500 * DELIVERIES as i64)?;
    }
    Ok(())
}

/// Writes `PER_JOB` leads with one request each and delivers each to buyer `b`; the time
/// of each delivery.
fn deliver_group(conn: &Connection, job: usize) -> Result<Vec<Duration>, DbError> {
    let now = leadrelay::clock::now_ms();
    let mut timings = Vec::with_capacity(PER_JOB);
    for n in 0..PER_JOB {
        let lead_id = leadrelay::ids::LeadId::generate();
        let request_id = leadrelay::ids::LeadRequestId::generate();
        conn.prepare_cached(
            "INSERT INTO leads (id, source_id, container_id, workspace_id, first_name, last_name,
                email, quality_status, duplicate_status, created_at)
             VALUES (?1, 'src', 'web', 'ws', 'Ann', 'Lee', ?2, 'ok', 'unique', ?3)",
        )?
        .execute(params![lead_id, format!("ann{job}-{n}@example.com"), now])?;
        conn.prepare_cached(
            "INSERT INTO lead_requests (id, lead_id, position, product_id, created_at)
             VALUES (?1, ?2, 0, 'solar', ?3)",
        )?
        .execute(params![request_id, lead_id, now])?;
        let order = DeliveryOrder {
            lead_request_id: request_id,
            buyer_id: &"b".into(),
            price_cents: Some(2500),
            actor: "operator",
        };
        let started = Instant::now();
        delivery::deliver(conn, &order).expect("every delivery is allowed");
        timings.push(started.elapsed());
    }
    Ok(timings)
}
