//! Delivery benchmark (run by `bench/delivery.sh`): how many `lead.delivered` events per
//! second the outbox workers get to a local receiver that answers 200 at once, and how long
//! an event waits from the commit of its delivery to its first attempt when the queue is
//! idle.
//!
//! Everything is real: a database file with `synchronous=FULL`, `delivery::deliver` in
//! writer jobs, the service with its worker threads, signed HTTP POSTs over TCP to an
//! HTTP/1.1 server. Only the leads themselves are written with SQL, because this measures
//! delivery; ingest has its own benchmark.
//!
//! Phases:
//! 1. throughput: N deliveries are committed while no workers run, then the service starts
//!    and the time until the receiver has all N events (and the database says delivered)
//!    is measured;
//! 2. latency with a wake-up: one delivery at a time on an idle queue, the writer pokes the
//!    `Notifier` after its commit (what auto-delivery does in the server);
//! 3. latency without a wake-up: as 2, but nobody pokes (a CLI `deliver` in another
//!    process): the workers' poll finds the event.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use leadrelay::config::{buyer, container, product, source, workspace};
use leadrelay::db::{Db, DbError};
use leadrelay::delivery::{DeliveryError, DeliveryOrder};
use leadrelay::outbox::{Notifier, WorkerConfig};
use leadrelay::service::ServiceOptions;

struct Settings {
    events: usize,
    senders: usize,
    samples: usize,
}

fn settings() -> Settings {
    let mut settings = Settings {
        events: 20_000,
        senders: 4,
        samples: 200,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            panic!("usage: delivery_bench [--events N] [--senders N] [--samples N]")
        });
        match pair[0].as_str() {
            "--events" => settings.events = value,
            "--senders" => settings.senders = value,
            "--samples" => settings.samples = value,
            other => panic!("unknown flag {other}"),
        }
    }
    settings
}

/// The receiver's view: how many requests, and when each event id first arrived.
#[derive(Default)]
struct Received {
    count: AtomicU64,
    first_seen: Mutex<HashMap<String, Instant>>,
}

/// An HTTP/1.1 server on 127.0.0.1:0 that answers 200 with an empty body at once.
fn start_receiver(received: Arc<Received>) -> SocketAddr {
    let (ready, bound) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("bench-receiver".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("receiver runtime starts");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let (stream, _) = listener.accept().await.unwrap();
                    let _ = stream.set_nodelay(true);
                    let received = received.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(
                            move |request: hyper::Request<hyper::body::Incoming>| {
                                let received = received.clone();
                                async move {
                                    let at = Instant::now();
                                    let id = request
                                        .headers()
                                        .get("webhook-id")
                                        .and_then(|v| v.to_str().ok())
                                        .unwrap_or_default()
                                        .to_string();
                                    let _ = request.into_body().collect().await;
                                    received.first_seen.lock().unwrap().entry(id).or_insert(at);
                                    received.count.fetch_add(1, Ordering::Relaxed);
                                    Ok::<_, Infallible>(hyper::Response::new(Full::new(
                                        Bytes::new(),
                                    )))
                                }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        })
        .unwrap();
    bound.recv().unwrap()
}

/// The service on port 0 in its own runtime; stops when the returned sender is dropped.
fn start_service(
    db: Db,
    senders: usize,
    notifier: Notifier,
) -> (
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = ServiceOptions {
        delivery: WorkerConfig {
            concurrency: senders,
            ..WorkerConfig::default()
        },
        outbox: notifier,
        ..ServiceOptions::default()
    };
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            leadrelay::service::run(listener, db, options, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
    });
    (stop, thread)
}

fn configure(db: &Db, webhook_url: String) {
    db.write_blocking(move |conn| {
        workspace::create(
            conn,
            &workspace::NewWorkspace {
                id: Some("ws"),
                name: "Bench",
                timezone: "UTC",
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
                max_buyers: 3,
                score_threshold: 50,
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
        buyer::create(
            conn,
            &buyer::NewBuyer {
                id: Some("b"),
                workspace_id: "ws",
                name: "Buyer",
                webhook_url: &webhook_url,
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
                buyer_id: "b",
                product: "solar",
                price_cents: 2500,
                daily_cap: None,
                monthly_cap: None,
                priority: 0,
                filters: Vec::new(),
                schedule: None,
            },
        )?;
        Ok::<_, leadrelay::config::ConfigError>(())
    })
    .expect("the bench configuration is written");
}

/// Writes `count` leads with one interest each; returns the lead request ids.
fn seed_lead_requests(db: &Db, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(1000) {
        let chunk = chunk.to_vec();
        let mut written = db
            .write_blocking(move |conn| {
                let mut ids = Vec::new();
                for n in chunk {
                    let lead = leadrelay::ids::new("lead");
                    let request = leadrelay::ids::new("lreq");
                    conn.prepare_cached(
                        "INSERT INTO leads (id, source_id, container_id, workspace_id,
                            external_id, first_name, last_name, email, phone, postal_code,
                            country, consent_status, additional, quality_status,
                            duplicate_status, created_at)
                         VALUES (?1, 'src', 'web', 'ws', ?2, 'Ada', 'Lovelace', ?3,
                            '+4917012345678', '80331', 'DE', 'granted', '{\"utm\":\"bench\"}',
                            'ok', 'unique', ?4)",
                    )?
                    .execute(rusqlite::params![
                        lead,
                        format!("bench-{n}"),
                        format!("ada{n}@example.org"),
                        leadrelay::clock::now_ms()
                    ])?;
                    conn.prepare_cached(
                        "INSERT INTO lead_requests (id, lead_id, position, product_id,
                            field_values, created_at)
                         VALUES (?1, ?2, 0, 'solar', '{\"roof\":\"tile\"}', ?3)",
                    )?
                    .execute(rusqlite::params![
                        request,
                        lead,
                        leadrelay::clock::now_ms()
                    ])?;
                    ids.push(request);
                }
                Ok::<_, DbError>(ids)
            })
            .expect("leads are written");
        ids.append(&mut written);
    }
    ids
}

fn deliver_all(db: &Db, requests: &[String]) -> Vec<String> {
    let mut events = Vec::with_capacity(requests.len());
    for chunk in requests.chunks(500) {
        let chunk = chunk.to_vec();
        let mut written = db
            .write_blocking(move |conn| {
                let mut events = Vec::new();
                for request in &chunk {
                    let delivered = leadrelay::delivery::deliver(
                        conn,
                        &DeliveryOrder {
                            lead_request_id: request,
                            buyer_id: "b",
                            price_cents: None,
                            actor: "bench",
                        },
                    )?;
                    events.push(delivered.event_id);
                }
                Ok::<_, DeliveryError>(events)
            })
            .expect("deliveries are written");
        events.append(&mut written);
    }
    events
}

fn delivered_count(db: &Db) -> i64 {
    db.read_blocking(|conn| {
        conn.query_row(
            "SELECT count(*) FROM outbox_events WHERE status = 'delivered'",
            [],
            |r| r.get(0),
        )
        .map_err(DbError::from)
    })
    .unwrap()
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// One delivery at a time on an idle queue; the time from commit to first arrival.
fn latencies(
    db: &Db,
    received: &Received,
    requests: &[String],
    notifier: Option<&Notifier>,
) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(requests.len());
    for (expected_delivered, request) in (delivered_count(db) + 1..).zip(requests) {
        let events = deliver_all(db, std::slice::from_ref(request));
        let committed = Instant::now();
        if let Some(notifier) = notifier {
            notifier.notify();
        }
        let id = events[0].clone();
        wait_until("the event to arrive", || {
            received.first_seen.lock().unwrap().contains_key(&id)
        });
        let arrived = received.first_seen.lock().unwrap()[&id];
        samples.push(arrived.saturating_duration_since(committed));
        // Let the attempt be recorded, so the next sample starts on an idle queue.
        wait_until("the attempt to be recorded", || {
            delivered_count(db) >= expected_delivered
        });
    }
    samples.sort();
    samples
}

fn report(name: &str, samples: &[Duration]) {
    println!(
        "{name}: samples={} p50={:.1}ms p90={:.1}ms p99={:.1}ms max={:.1}ms",
        samples.len(),
        percentile(samples, 0.5).as_secs_f64() * 1000.0,
        percentile(samples, 0.9).as_secs_f64() * 1000.0,
        percentile(samples, 0.99).as_secs_f64() * 1000.0,
        samples.last().unwrap().as_secs_f64() * 1000.0,
    );
}

fn main() {
    let settings = settings();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("bench.db")).unwrap();
    let received = Arc::new(Received::default());
    let addr = start_receiver(received.clone());
    configure(&db, format!("http://{addr}/leads"));
    let poll_samples = (settings.samples / 10).max(10);
    let requests = seed_lead_requests(&db, settings.events + settings.samples + poll_samples);
    let (bulk, rest) = requests.split_at(settings.events);
    let (woken, polled) = rest.split_at(settings.samples);

    let started = Instant::now();
    deliver_all(&db, bulk);
    let writing = started.elapsed();
    println!(
        "deliveries written (transaction + event, 500 per write job): {} in {:.2}s = {:.0}/s",
        bulk.len(),
        writing.as_secs_f64(),
        bulk.len() as f64 / writing.as_secs_f64()
    );

    let notifier = Notifier::new();
    let started = Instant::now();
    let (stop, service) = start_service(db.clone(), settings.senders, notifier.clone());
    wait_until("every event delivered", || {
        delivered_count(&db) >= bulk.len() as i64
    });
    let draining = started.elapsed();
    let requests_seen = received.count.load(Ordering::Relaxed);
    println!(
        "throughput: {} events delivered (senders={}) in {:.2}s = {:.0} events/s; receiver saw {} requests",
        bulk.len(),
        settings.senders,
        draining.as_secs_f64(),
        bulk.len() as f64 / draining.as_secs_f64(),
        requests_seen
    );

    let samples = latencies(&db, &received, woken, Some(&notifier));
    report(
        "commit to first attempt, idle queue, woken by the Notifier",
        &samples,
    );
    let samples = latencies(&db, &received, polled, None);
    report(
        "commit to first attempt, idle queue, no wake-up (poll, as for a CLI deliver)",
        &samples,
    );

    drop(stop);
    service.join().unwrap();
}
