//! Mapped delivery benchmark (issue 21; run by `bench/integration.sh`): events per second
//! from the outbox to buyers that take leads through their own API, a JSON CRM body or a
//! form-encoded body built by the integration document (`integration::request`), against
//! the generic signed `lead.delivered` webhook, in the same run.
//!
//! For each delay (the buyers answering after 200 ms, and at once to show the CPU cost of
//! a send) and each kind (`webhook`, `json`, `form`), on a fresh file: 20 buyers whose
//! endpoints answer `200 {}` after the delay (`bench/support/receiver.rs`), N deliveries
//! (round-robin) committed while no outbox runs, then the service starts and the clock
//! runs until the database says all N are delivered. Mapped kinds use the README's
//! documents (`docs/examples/`), the JSON one with its secret header set and an `accept`
//! rule on the status only (the bench receiver answers `{}`).
//!
//! Everything is real: the file (`synchronous=FULL`), the writer, the service with its
//! outbox, TCP to the receivers. Leads are written with SQL (this measures delivery).

#[path = "support/receiver.rs"]
mod receiver;

use std::time::{Duration, Instant};

use leadrelay::config::{buyer, container, product, source, workspace};
use leadrelay::db::{Db, DbError};
use leadrelay::delivery::{DeliveryError, DeliveryOrder};
use leadrelay::outbox::{Notifier, WorkerConfig};
use leadrelay::service::ServiceOptions;
use receiver::{Behaviour, Receivers};
use serde_json::{Value, json};

struct Settings {
    events: usize,
    buyers: usize,
    delays_ms: Vec<u64>,
    kinds: Vec<String>,
}

fn settings() -> Settings {
    let mut s = Settings {
        events: 4000,
        buyers: 20,
        delays_ms: vec![200, 0],
        kinds: vec!["webhook".into(), "json".into(), "form".into()],
    };
    let usage = "usage: integration_bench [--events N] [--buyers N] [--delays MS,MS] \
                 [--kinds webhook,json,form]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).unwrap_or_else(|| panic!("{usage}"));
        let number = || value.parse::<usize>().unwrap_or_else(|_| panic!("{usage}"));
        match pair[0].as_str() {
            "--events" => s.events = number(),
            "--buyers" => s.buyers = number().max(1),
            "--delays" => {
                s.delays_ms = value
                    .split(',')
                    .map(|d| d.parse().unwrap_or_else(|_| panic!("{usage}")))
                    .collect()
            }
            "--kinds" => s.kinds = value.split(',').map(str::to_string).collect(),
            _ => panic!("{usage}"),
        }
    }
    s
}

/// The integration document of `kind` (`None`: the generic webhook) posting to `url`.
fn document(kind: &str, url: &str) -> Option<Value> {
    let text = match kind {
        "webhook" => return None,
        "json" => include_str!("../docs/examples/crm-integration.json"),
        "form" => include_str!("../docs/examples/form-integration.json"),
        other => panic!("unknown kind {other}; use webhook, json or form"),
    };
    let mut document: Value = serde_json::from_str(text).expect("the example is JSON");
    document["url"] = json!(url);
    if kind == "json" {
        document["accept"] = json!({"status": [200, 201]});
    }
    Some(document)
}

fn buyer_id(n: usize) -> String {
    format!("b{n:02}")
}

/// The workspace, channel, source, product and one subscribed buyer per URL, each with
/// the integration of `kind`.
fn configure(db: &Db, path: &std::path::Path, urls: Vec<String>, kind: &str) {
    let documents: Vec<(String, serde_json::Value)> = urls
        .iter()
        .enumerate()
        .filter_map(|(n, url)| Some((buyer_id(n), document(kind, url)?)))
        .collect();
    db.write_blocking(move |conn| {
        workspace::create(
            conn,
            &workspace::NewWorkspace {
                id: Some("ws"),
                name: "Bench",
                timezone: "Europe/Berlin",
                retention: None,
            },
        )?;
        container::create(
            conn,
            &container::NewContainer {
                id: Some("web"),
                workspace_id: "ws",
                kind: container::ContainerKind::Channel,
                name: "Web",
                auto_delivery: Some(false),
                delivery_mode: container::DeliveryMode::Exclusive,
                max_buyers: 1,
                score_threshold: 0,
                ping_ttl_ms: None,
                waterfall: None,
                waterfall_max: None,
            },
        )?;
        source::create(
            conn,
            &source::NewSource {
                id: Some("src"),
                container_id: "web",
                container_kind: container::ContainerKind::Channel,
                name: "Src",
                secret: None,
                supplier_id: None,
                supplier_cost_cents: Some(400),
                revenue_share_bp: None,
                dedupe_fields: None,
                dedupe_scope: None,
                dedupe_action: source::DedupeAction::Review,
                dedupe_window_days: 30,
                result_detail: None,
            },
        )?;
        product::create(
            conn,
            &product::NewProduct {
                id: Some("solar"),
                workspace_id: "ws",
                slug: "solar",
                name: "Solar",
                fields: Vec::new(),
                default_supplier_cost_cents: None,
            },
        )?;
        for (n, url) in urls.iter().enumerate() {
            let id = buyer_id(n);
            buyer::create(
                conn,
                &buyer::NewBuyer {
                    id: Some(&id),
                    workspace_id: "ws",
                    name: &id,
                    webhook_url: url,
                    secret: None,
                    signing_secret: None,
                    capabilities: vec!["confirm".into()],
                    cancellation_window_secs: 259_200,
                    auto_payout_pending: false,
                    plan: buyer::Plan::Postpaid,
                    credit_limit_cents: 0,
                },
            )?;
            buyer::subscribe(
                conn,
                &buyer::NewSubscription {
                    pricing: Default::default(),
                    buyer_id: &id,
                    product: "solar",
                    price_cents: 2500,
                    daily_cap: None,
                    monthly_cap: None,
                    priority: 0,
                    filters: Vec::new(),
                    schedule: None,
                },
            )?;
        }
        Ok::<_, anyhow::Error>(())
    })
    .expect("the bench configuration is written");
    for (id, document) in documents {
        set_integration(path, &id, &document);
    }
}

/// Sets a buyer's integration and its secret the way an operator does: with the CLI.
fn set_integration(path: &std::path::Path, id: &str, document: &serde_json::Value) {
    let file = path.with_file_name(format!("{id}-integration.json"));
    std::fs::write(&file, document.to_string()).expect("the integration file is written");
    let db = path.to_str().expect("a UTF-8 temp path");
    let file = file.to_str().expect("a UTF-8 temp path");
    for args in [
        vec!["buyer", "integration", "set", id, "--file", file],
        vec![
            "buyer",
            "integration",
            "secret",
            id,
            "crm-key",
            "--value",
            "crm-key-0123456789abcdef",
        ],
    ] {
        let args: Vec<std::ffi::OsString> = ["leadrelay", "--db", db]
            .into_iter()
            .chain(args)
            .map(Into::into)
            .collect();
        let cli = leadrelay::cli::parse_from(&args).expect("the bench's CLI arguments parse");
        let code = leadrelay::cli::run(cli).expect("the integration is set");
        assert_eq!(code, std::process::ExitCode::SUCCESS, "{args:?}");
    }
}

/// Writes `count` leads with one request each; the request ids.
fn seed_lead_requests(db: &Db, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for start in (0..count).step_by(1000) {
        let end = count.min(start + 1000);
        let mut written = db
            .write_blocking(move |conn| {
                let now = leadrelay::clock::now_ms();
                let mut ids = Vec::new();
                for n in start..end {
                    let lead = leadrelay::ids::new("lead");
                    let request = leadrelay::ids::new("lreq");
                    conn.prepare_cached(
                        "INSERT INTO leads (id, source_id, container_id, workspace_id,
                            external_id, first_name, last_name, email, phone, postal_code,
                            country, consent_status, additional, quality_status,
                            duplicate_status, created_at)
                         VALUES (?1, 'src', 'web', 'ws', ?2, 'Ada', 'Lovelace', ?3,
                            '+4917012345678', '80331', 'DE', 'granted', '{}',
                            'ok', 'unique', ?4)",
                    )?
                    .execute(rusqlite::params![
                        lead,
                        format!("seed-{n}"),
                        format!("ada{n}@example.org"),
                        now
                    ])?;
                    conn.prepare_cached(
                        "INSERT INTO lead_requests (id, lead_id, position, product_id,
                            field_values, created_at)
                         VALUES (?1, ?2, 0, 'solar', '{\"roof\": \"tile\"}', ?3)",
                    )?
                    .execute(rusqlite::params![request, lead, now])?;
                    ids.push(request);
                }
                Ok::<_, DbError>(ids)
            })
            .expect("leads are written");
        ids.append(&mut written);
    }
    ids
}

/// Delivers request n to buyer n % buyers, in write jobs of up to 500.
fn deliver(db: &Db, requests: Vec<String>, buyers: usize) {
    let orders: Vec<(String, String)> = requests
        .into_iter()
        .enumerate()
        .map(|(n, request)| (request, buyer_id(n % buyers)))
        .collect();
    for chunk in orders.chunks(500) {
        let chunk = chunk.to_vec();
        db.write_blocking(move |conn| {
            for (request, buyer) in &chunk {
                leadrelay::delivery::deliver(
                    conn,
                    &DeliveryOrder {
                        lead_request_id: request,
                        buyer_id: buyer,
                        price_cents: None,
                        actor: "bench",
                    },
                )?;
            }
            Ok::<_, DeliveryError>(())
        })
        .expect("deliveries are written");
    }
}

/// How many events are delivered and how many failed.
fn outcome(db: &Db) -> (i64, i64) {
    db.read_blocking(|conn| {
        conn.query_row(
            "SELECT count(*) FILTER (WHERE status = 'delivered'),
                    count(*) FILTER (WHERE status = 'failed')
             FROM outbox_events",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(DbError::from)
    })
    .expect("the file is readable")
}

/// The service (HTTP server and outbox, default concurrency) on 127.0.0.1:0 in its own
/// runtime, until dropped.
struct Service {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Service {
    fn start(db: Db) -> Service {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let options = ServiceOptions {
            delivery: WorkerConfig {
                request_timeout: Duration::from_secs(10),
                ..WorkerConfig::default()
            },
            retention_interval: None,
            outbox: Notifier::new(),
            ..ServiceOptions::default()
        };
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("the runtime starts");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("port 0 binds");
                leadrelay::service::run(listener, db, options, async {
                    let _ = stopped.await;
                })
                .await
                .expect("the service runs");
            });
        });
        Service {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One run: `kind` to buyers answering after `delay`.
fn run(settings: &Settings, kind: &str, delay: Duration) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = Db::open(dir.path().join("bench.db")).expect("the file opens");
    let receivers = Receivers::start(vec![Behaviour::Delay(delay); settings.buyers], 2);
    configure(
        &db,
        &dir.path().join("bench.db"),
        (0..settings.buyers).map(|n| receivers.url(n)).collect(),
        kind,
    );
    deliver(
        &db,
        seed_lead_requests(&db, settings.events),
        settings.buyers,
    );
    let started = Instant::now();
    let service = Service::start(db.clone());
    let limit = started + Duration::from_secs(600);
    let mut done = outcome(&db);
    while done.0 + done.1 < settings.events as i64 && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(5));
        done = outcome(&db);
    }
    let took = started.elapsed();
    drop(service);
    let requests = receivers
        .arrivals
        .count
        .load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "  {kind:<7} {:>3} ms: {} events in {:.2}s = {:>5.0} events/s; delivered {}, failed {}, \
         requests seen {requests}",
        delay.as_millis(),
        settings.events,
        took.as_secs_f64(),
        done.0 as f64 / took.as_secs_f64(),
        done.0,
        done.1,
    );
    db.close();
}

fn main() {
    let settings = settings();
    println!(
        "integration bench: {} events to {} buyers (round-robin), default outbox concurrency",
        settings.events, settings.buyers
    );
    for &delay in &settings.delays_ms {
        for kind in &settings.kinds {
            run(&settings, kind, Duration::from_millis(delay));
        }
    }
}
