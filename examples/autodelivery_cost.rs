//! Measures what automated delivery adds to the ingest writer job: the time of
//! `autodelivery::run_for_lead` for one lead, delivery included. Run with
//! `cargo run --release --example autodelivery_cost`.
//!
//! Ten buyers subscribe to the product, two with filters and one with a schedule, without
//! caps or with daily and monthly caps (then every lead counts each buyer's transactions of
//! the day and month, up to the cap); the lead goes to one of them (exclusive) or to three
//! (multi). All leads fall on one day, so with caps the counts grow with every lead. Leads are written with plain SQL and
//! decided in groups of 100 per writer job, as a batch would be. The time per lead is
//! printed for the first and the last thousand leads, so that growing cap counts show.

use std::time::{Duration, Instant};

use leadrelay::autodelivery;
use leadrelay::config::ConfigError;
use leadrelay::config::buyer::{self, Filter, NewBuyer, NewSubscription, Plan};
use leadrelay::config::container::{self, ContainerKind, DeliveryMode, NewContainer};
use leadrelay::config::product::{self, NewProduct};
use leadrelay::config::source::{self, DedupeAction, NewSource};
use leadrelay::config::workspace::{self, NewWorkspace};
use leadrelay::db::{Db, DbError};
use rusqlite::{Connection, params};

const LEADS: usize = 10_000;
const PER_JOB: usize = 100;

fn main() {
    let scenarios = [
        ("exclusive, no caps", "web", None),
        (
            "exclusive, caps 5000/day 50000/month",
            "web",
            Some((5_000, 50_000)),
        ),
        (
            "multi (3 buyers), caps 5000/day 50000/month",
            "shared",
            Some((5_000, 50_000)),
        ),
    ];
    for (what, channel, caps) in scenarios {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = Db::open(dir.path().join("bench.db")).expect("the database opens");
        db.write_blocking(move |conn| setup(conn, caps))
            .expect("the setup is valid");
        let mut per_lead = Vec::with_capacity(LEADS);
        for job in 0..LEADS / PER_JOB {
            let channel = channel.to_string();
            let timings = db
                .write_blocking(move |conn| decide_group(conn, &channel, job))
                .expect("the group is decided");
            per_lead.extend(timings);
        }
        let delivered: i64 = db
            .read_blocking(|conn| {
                conn.query_row("SELECT count(*) FROM transactions", [], |r| r.get(0))
                    .map_err(DbError::from)
            })
            .expect("counted");
        let total: Duration = per_lead.iter().sum();
        let mean = |slice: &[Duration]| slice.iter().sum::<Duration>() / slice.len() as u32;
        println!(
            "{what}: {LEADS} leads, {delivered} transactions; run_for_lead {:.1?} per lead on average \
             (first 1000: {:.1?}, last 1000: {:.1?}), {:.0} leads/s on the writer thread",
            total / LEADS as u32,
            mean(&per_lead[..1000]),
            mean(&per_lead[LEADS - 1000..]),
            LEADS as f64 / total.as_secs_f64()
        );
        db.close();
    }
}

/// The workspace, channels, product and ten buyers; `caps` (daily, monthly) for each
/// subscription when given.
fn setup(conn: &Connection, caps: Option<(i64, i64)>) -> Result<(), ConfigError> {
    workspace::create(
        conn,
        &NewWorkspace {
            id: Some("ws"),
            name: "Bench",
            timezone: "Europe/Berlin",
        },
    )?;
    for (id, mode) in [
        ("web", DeliveryMode::Exclusive),
        ("shared", DeliveryMode::Multi),
    ] {
        container::create(
            conn,
            &NewContainer {
                id: Some(id),
                workspace_id: "ws",
                kind: ContainerKind::Channel,
                name: id,
                auto_delivery: Some(true),
                delivery_mode: mode,
                max_buyers: 3,
                score_threshold: 50,
            },
        )?;
        let source_id = format!("{id}-src");
        source::create(
            conn,
            &NewSource {
                id: Some(&source_id),
                container_id: id,
                container_kind: ContainerKind::Channel,
                name: &source_id,
                secret: None,
                supplier_id: None,
                supplier_cost_cents: None,
                dedupe_fields: None,
                dedupe_scope: None,
                dedupe_action: DedupeAction::Review,
                dedupe_window_days: 30,
            },
        )?;
    }
    product::create(
        conn,
        &NewProduct {
            id: Some("solar"),
            workspace_id: "ws",
            slug: "solar",
            name: "Solar",
            fields: Vec::new(),
            default_supplier_cost_cents: Some(400),
        },
    )?;
    for n in 0..10 {
        let id = format!("buyer{n}");
        buyer::create(
            conn,
            &NewBuyer {
                id: Some(&id),
                workspace_id: "ws",
                name: &id,
                webhook_url: "http://127.0.0.1:9/leads",
                secret: Some(None),
                signing_secret: None,
                capabilities: vec!["confirm".into()],
                cancellation_window_secs: 259_200,
                auto_payout_pending: false,
                plan: Plan::Postpaid,
                credit_limit_cents: 0,
            },
        )?;
        let filters = match n {
            0 => vec![Filter::parse("country=AT").expect("a valid filter")],
            1 => vec![Filter::parse("postalCode=1*").expect("a valid filter")],
            _ => Vec::new(),
        };
        let schedule = (n == 2).then(
            || serde_json::json!([{"days": [1, 2, 3, 4, 5, 6, 7], "from": "00:00", "to": "24:00"}]),
        );
        buyer::subscribe(
            conn,
            &NewSubscription {
                buyer_id: &id,
                product: "solar",
                price_cents: 2000 + (n % 3) * 100,
                daily_cap: caps.map(|c| c.0),
                monthly_cap: caps.map(|c| c.1),
                priority: 0,
                filters,
                schedule,
            },
        )?;
    }
    Ok(())
}

/// Writes `PER_JOB` leads with one interest each and decides them; the time of each
/// decision.
fn decide_group(conn: &Connection, channel: &str, job: usize) -> Result<Vec<Duration>, DbError> {
    let now = leadrelay::clock::now_ms();
    let mut timings = Vec::with_capacity(PER_JOB);
    for n in 0..PER_JOB {
        let lead_id = leadrelay::ids::new("lead");
        conn.prepare_cached(
            "INSERT INTO leads (id, source_id, container_id, workspace_id, first_name, last_name,
                email, phone, street, house_number, postal_code, city, country, consent_status,
                consent_captured_at, quality_status, duplicate_status, created_at)
             VALUES (?1, ?2, ?3, 'ws', 'Ann', 'Lee', ?4, '+49 30 1234567', 'Hauptstr.', '1',
                '10115', 'Berlin', 'DE', 'granted', '2025-01-06T10:00:00Z', 'ok', 'unique', ?5)",
        )?
        .execute(params![
            lead_id,
            format!("{channel}-src"),
            channel,
            format!("ann{job}-{n}@example.com"),
            now
        ])?;
        conn.prepare_cached("INSERT INTO lead_bodies (lead_id, body) VALUES (?1, '{}')")?
            .execute([&lead_id])?;
        conn.prepare_cached(
            "INSERT INTO lead_requests (id, lead_id, position, product_id, trigger_auto_delivery,
                created_at) VALUES (?1, ?2, 0, 'solar', 1, ?3)",
        )?
        .execute(params![leadrelay::ids::new("lreq"), lead_id, now])?;
        let started = Instant::now();
        let decided = autodelivery::run_for_lead(conn, &lead_id, now).map_err(|e| match e {
            autodelivery::AutoDeliveryError::Db(db) => db,
            other => DbError::GroupFailed(other.to_string()),
        })?;
        timings.push(started.elapsed());
        assert!(
            decided.is_some_and(|d| d.delivered() > 0),
            "every lead is delivered"
        );
    }
    Ok(timings)
}
