//! Measures what automated delivery costs the ingest writer job: the time of the ingest
//! writer job per lead (idempotency, the duplicate rule, the inserts and auto-delivery with
//! its deliveries), with and without auto-delivery. Run with
//! `cargo run --release --example autodelivery_cost`.
//!
//! Leads are parsed, validated and prepared as the ingest handler does, outside the timed
//! part, then stored with `accept::job::store_all` in writer jobs of 100, as a batch
//! would be, submitted as `serve` submits them (the report roll-up summed for the group and
//! written once before its commit, no savepoint per job). Only the writer job is timed.
//! Scenarios:
//!
//! - plain ingest: the leads do not ask for auto-delivery (the reference);
//! - ten buyers subscribe to the product, two with filters and one with a schedule, without
//!   caps or with daily and monthly caps; the lead goes to one of them (exclusive) or to
//!   three (multi);
//! - twenty buyers, every one with daily and monthly caps and a filter (DESIGN.md section 13,
//!   "Routing speed": such a lead should cost the writer no more than about 2.5 times a
//!   plain ingest).
//!
//! All leads fall on one day, so with caps the counts grow with every lead. The time per lead
//! is printed for the first and the last thousand leads, so that growing cap counts show,
//! and as the median of the jobs (robust against a neighbour taking the CPU for a moment).
//!
//! `ONLY=5` runs only the fifth scenario (1-based), e.g. under callgrind, counting the
//! instructions of the jobs alone, which a loaded machine does not change:
//! `valgrind --tool=callgrind --toggle-collect='leadrelay_core::accept::job::store_all'
//! target/release/examples/autodelivery_cost` with `LEADS=1000 ONLY=5`.
//! `LEADS=2000` (a multiple of 100, at least 1000) measures fewer leads per scenario.
//!
//! `PREFILL=1000000` measures the twenty-buyer scenario once more on a file that already
//! holds that many auto-delivered leads (written through the same writer job first, spread
//! over the past 200 days so no cap stops them), against the fresh file's figure of the
//! same run: routing must not grow with history (DESIGN.md section 13: at most 5% slower).

use std::time::{Duration, Instant};

use leadrelay::accept::job::{self, StoreOutcome};
use leadrelay::config::ConfigError;
use leadrelay::config::buyer::{self, Filter, NewBuyer, NewSubscription, Plan};
use leadrelay::config::container::{self, ContainerKind, DeliveryMode, NewContainer};
use leadrelay::config::product::{self, NewProduct};
use leadrelay::config::source::Source;
use leadrelay::config::source::{self, DedupeAction, NewSource};
use leadrelay::config::workspace::{self, NewWorkspace};
use leadrelay::db::{Db, DbError, Undo};
use leadrelay::ingest::catalog::{self, References};
use leadrelay::ingest::shape::{self, Shape};
use leadrelay::ingest::store::PreparedLead;
use leadrelay::ingest::{quality, validate};
use leadrelay::report::ROLLUP;
use rusqlite::Connection;

const PER_JOB: usize = 100;

/// Leads per scenario: `LEADS` from the environment, else 10,000.
fn leads() -> usize {
    std::env::var("LEADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n: &usize| *n >= 1000 && n.is_multiple_of(PER_JOB))
        .unwrap_or(10_000)
}

/// One measured set-up.
struct Scenario {
    what: &'static str,
    /// `web` (exclusive) or `shared` (multi, up to three buyers).
    channel: &'static str,
    buyers: usize,
    /// Daily and monthly cap of every subscription.
    caps: Option<(i64, i64)>,
    /// Every buyer has a filter (else two of them do, and one a schedule).
    filters_everywhere: bool,
    /// Whether the leads ask for auto-delivery.
    auto: bool,
}

fn main() {
    let caps = Some((5_000, 50_000));
    let scenarios = [
        Scenario {
            what: "plain ingest, no auto-delivery",
            channel: "web",
            buyers: 20,
            caps,
            filters_everywhere: true,
            auto: false,
        },
        Scenario {
            what: "exclusive, 10 buyers, no caps",
            channel: "web",
            buyers: 10,
            caps: None,
            filters_everywhere: false,
            auto: true,
        },
        Scenario {
            what: "exclusive, 10 buyers, caps 5000/day 50000/month",
            channel: "web",
            buyers: 10,
            caps,
            filters_everywhere: false,
            auto: true,
        },
        Scenario {
            what: "multi (3 of 10 buyers), caps 5000/day 50000/month",
            channel: "shared",
            buyers: 10,
            caps,
            filters_everywhere: false,
            auto: true,
        },
        Scenario {
            what: "exclusive, 20 buyers, each with caps and a filter",
            channel: "web",
            buyers: 20,
            caps,
            filters_everywhere: true,
            auto: true,
        },
    ];
    let leads = leads();
    let prefill: usize = std::env::var("PREFILL")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut plain: Option<Duration> = None;
    let last = &scenarios[scenarios.len() - 1];
    let only: Option<usize> = std::env::var("ONLY").ok().and_then(|n| n.parse().ok());
    let runs = scenarios
        .iter()
        .enumerate()
        .filter(|(index, _)| only.is_none_or(|only| only == index + 1))
        .map(|(_, s)| (s, 0))
        .chain((prefill > 0).then_some((last, prefill)));
    for (scenario, prefill) in runs {
        let per_lead = run(scenario, leads, prefill);
        let total: Duration = per_lead.iter().sum();
        let mean = |slice: &[Duration]| slice.iter().sum::<Duration>() / slice.len() as u32;
        let mut per_job: Vec<Duration> = per_lead.iter().step_by(PER_JOB).copied().collect();
        per_job.sort();
        let median = per_job[per_job.len() / 2];
        let ratio = plain.map_or(String::new(), |p| {
            format!(
                ", {:.2} times the plain ingest",
                median.as_secs_f64() / p.as_secs_f64()
            )
        });
        let what = if prefill > 0 {
            format!("{}, after {prefill} delivered leads", scenario.what)
        } else {
            scenario.what.to_string()
        };
        println!(
            "{what}: {leads} leads; writer job per lead: median {:.1?}, mean {:.1?} (first 1000: \
             {:.1?}, last 1000: {:.1?}){ratio}",
            median,
            total / leads as u32,
            mean(&per_lead[..1000]),
            mean(&per_lead[leads - 1000..]),
        );
        plain.get_or_insert(median);
    }
}

/// Stores `leads` leads under `scenario` on a fresh file; the writer time of each lead (its
/// job's time shared evenly by the job's leads).
fn run(scenario: &Scenario, leads: usize, prefill: usize) -> Vec<Duration> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = Db::open(dir.path().join("bench.db")).expect("the database opens");
    let (buyers, caps, everywhere) = (scenario.buyers, scenario.caps, scenario.filters_everywhere);
    db.write_blocking(move |conn| setup(conn, buyers, caps, everywhere))
        .expect("the setup is valid");
    let source_id = leadrelay::ids::SourceId::from(format!("{}-src", scenario.channel));
    let target = db
        .read_blocking(|conn| source::find(conn, &source_id).map_err(DbError::from))
        .expect("the source is read")
        .expect("the source exists");
    if prefill > 0 {
        let started = Instant::now();
        let now = leadrelay::clock::now_ms();
        let span = 200 * 86_400_000i64;
        let jobs = prefill / PER_JOB;
        for job in 0..jobs {
            let leads = prepare(&db, &target, 10_000_000 + job, true);
            let target = target.clone();
            // From 200 days ago up to yesterday: today's caps start as on a fresh file.
            let at = now - span + (span - 86_400_000) * job as i64 / jobs as i64;
            db.write_blocking(move |conn| {
                job::store_all(conn, &target, &leads, at).map_err(|e| DbError::GroupFailed {
                    why: e.to_string(),
                    fault: None,
                })
            })
            .expect("the job is written");
        }
        let delivered: i64 = db
            .read_blocking(|conn| {
                conn.query_row("SELECT count(*) FROM transactions", [], |r| r.get(0))
                    .map_err(DbError::from)
            })
            .expect("the file is readable");
        eprintln!(
            "prefilled {prefill} leads ({delivered} transactions) in {:.0?}",
            started.elapsed()
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let mut per_lead = Vec::with_capacity(leads);
    for job in 0..leads / PER_JOB {
        let leads = prepare(&db, &target, job, scenario.auto);
        let target = target.clone();
        let auto = scenario.auto;
        // As `serve` submits an ingest job: the report roll-up left to the group (written
        // once before its commit, outside the timed job) and no savepoint of its own.
        let elapsed = runtime
            .block_on(db.write_deferring(&ROLLUP, Undo::Group, move |conn| {
                let started = Instant::now();
                let outcomes = job::store_all(conn, &target, &leads, leadrelay::clock::now_ms())
                    .map_err(|e| DbError::GroupFailed {
                        why: e.to_string(),
                        fault: None,
                    })?;
                let elapsed = started.elapsed();
                for outcome in &outcomes {
                    let StoreOutcome::Created { auto_delivered, .. } = outcome else {
                        panic!("every lead is new and unique");
                    };
                    assert_eq!(
                        *auto_delivered > 0,
                        auto,
                        "every lead is delivered when asked"
                    );
                }
                Ok::<_, DbError>(elapsed)
            }))
            .expect("the job is written");
        per_lead.extend(std::iter::repeat_n(elapsed / PER_JOB as u32, PER_JOB));
    }
    db.close();
    per_lead
}

/// `PER_JOB` new leads, parsed, validated and prepared as the ingest handler does.
fn prepare(db: &Db, target: &Source, job: usize, auto: bool) -> Vec<PreparedLead> {
    let leads: Vec<serde_json::Value> = (0..PER_JOB)
        .map(|n| {
            serde_json::json!({
                "externalId": format!("{job}-{n}"),
                "firstName": "Ann",
                "lastName": "Lee",
                "email": format!("ann.{job}.{n}@example.com"),
                "phone": format!("+49 30 {:07}", job * PER_JOB + n),
                "street": "Hauptstr.",
                "houseNumber": "1",
                "postalCode": "10115",
                "city": "Berlin",
                "country": "DE",
                "consentStatus": "granted",
                "consentCapturedAt": "2025-01-06T10:00:00Z",
                "productSlug": "solar",
                "triggerAutoDelivery": auto,
                "utmSource": "bench",
            })
        })
        .collect();
    let body = serde_json::json!({ "leads": leads });
    let Ok(Shape::Batch(items)) = shape::detect(body, None, ContainerKind::Channel) else {
        panic!("the body is a valid batch");
    };
    let references = References::of(items.iter().filter_map(|item| item.draft.as_ref()));
    let catalog = db
        .read_blocking(|conn| {
            catalog::load(conn, &target.workspace_id, &references).map_err(DbError::from)
        })
        .expect("the products are read");
    items
        .into_iter()
        .map(|item| {
            let mut problems = item.problems;
            let draft = item.draft.expect("every item is an object");
            let lead = validate::complete(draft, &catalog, &mut problems);
            assert!(problems.is_empty(), "every lead is valid: {problems:?}");
            let quality = quality::assess(&lead.fields);
            PreparedLead::new(lead, item.raw, quality)
        })
        .collect()
}

/// The workspace, channels, product and `buyers` buyers; `caps` (daily, monthly) for each
/// subscription when given. With `filters_everywhere` every buyer has a filter (all but
/// every fifth match the leads), else two have one and one a schedule.
fn setup(
    conn: &Connection,
    buyers: usize,
    caps: Option<(i64, i64)>,
    filters_everywhere: bool,
) -> Result<(), ConfigError> {
    workspace::create(
        conn,
        &NewWorkspace {
            id: Some("ws"),
            name: "Bench",
            timezone: "Europe/Berlin",
            retention: None,
            suppression_action: None,
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
                ping_ttl_ms: None,
                waterfall: None,
                waterfall_max: None,
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
                revenue_share_bp: None,
                dedupe_fields: None,
                dedupe_scope: None,
                dedupe_action: DedupeAction::Review,
                dedupe_window_days: 30,
                result_detail: None,
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
    for n in 0..buyers {
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
                return_cap_bp: None,
                return_review: buyer::ReturnReview::Auto,
            },
        )?;
        let filter = |text: &str| Filter::parse(text).expect("a valid filter");
        let filters = match (filters_everywhere, n) {
            (true, n) if n % 5 == 0 => vec![filter("country=AT")],
            (true, n) if n % 2 == 0 => vec![filter("postalCode=1*")],
            (true, _) => vec![filter("country=DE"), filter("city=Berlin")],
            (false, 0) => vec![filter("country=AT")],
            (false, 1) => vec![filter("postalCode=1*")],
            (false, _) => Vec::new(),
        };
        let schedule = (!filters_everywhere && n == 2).then(
            || serde_json::json!([{"days": [1, 2, 3, 4, 5, 6, 7], "from": "00:00", "to": "24:00"}]),
        );
        buyer::subscribe(
            conn,
            &NewSubscription {
                pricing: Default::default(),
                buyer_id: &id.as_str().into(),
                product: "solar",
                price_cents: 2000 + (n as i64 % 3) * 100,
                daily_cap: caps.map(|c| c.0),
                monthly_cap: caps.map(|c| c.1),
                priority: 0,
                filters,
                schedule,
                require_check: None,
            },
        )?;
    }
    Ok(())
}
