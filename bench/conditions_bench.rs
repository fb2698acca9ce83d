//! Delivery under real conditions (DESIGN.md section 13; run by `bench/conditions.sh`):
//! 20 buyers whose endpoints answer after a delay (200 ms by default), some of them
//! hanging, served by `bench/support/receiver.rs` (one small tokio runtime, a timer per
//! delayed answer, not a thread). Each phase runs twice in the same process, on a fresh
//! file each time: the scenario and its baseline, so both see the same machine load.
//!
//! - `throughput`: N deliveries to the 20 buyers (round-robin) are committed while no
//!   outbox runs; the service starts and the clock runs until the database says all N are
//!   delivered. Baseline: the same buyers answering at once.
//! - `hanging`: the last 2 buyers never answer and have a backlog of events when the
//!   service starts; deliveries to the 18 others are then committed one per write job at a
//!   steady rate (100/s for 10 s), and the time from each commit to its arrival at the buyer is measured.
//!   Baseline: the same with no buyer hanging.
//! - `latency`: one delivery at a time on an idle queue to a buyer answering at once; the
//!   time from its commit to its arrival, when the committer pokes the outbox's `Notifier`
//!   (as auto-delivery does in the server) and when nobody does (a CLI `deliver` in another
//!   process: the outbox's poll finds it). Each sample starts once the one before is
//!   recorded.
//! - `speed`: leads are POSTed over HTTP at a steady rate (default 200/s for 30 s) with
//!   automated delivery to one of the 20 buyers (exclusive, equal prices, daily and monthly
//!   caps); the time from each 201 to its arrival at the buyer, and leads that never arrive.
//!   Baseline: the same buyers answering at once.
//!
//! Everything is real: the file (`synchronous=FULL`), the writer, the service with its HTTP
//! server and outbox, TCP to the receivers. Leads for `throughput` and `hanging` are written
//! with SQL (this measures delivery; ingest has its own benchmark).

// The server's allocator, so the outbox and the writer run here as they do in `serve`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "client.rs"]
mod client;
#[path = "support/receiver.rs"]
mod receiver;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use leadrelay::config::{buyer, container, product, source, workspace};
use leadrelay::db::{Db, DbError};
use leadrelay::delivery::{DeliveryError, DeliveryOrder};
use leadrelay::outbox::{Notifier, WorkerConfig};
use leadrelay::service::ServiceOptions;
use receiver::{Behaviour, Receivers, ms, percentile};
use serde_json::json;

struct Settings {
    phases: Vec<String>,
    buyers: usize,
    delay_ms: u64,
    hanging: usize,
    events: usize,
    backlog: usize,
    rate: usize,
    seconds: usize,
    concurrency: usize,
    per_buyer: usize,
    samples: usize,
}

fn settings() -> Settings {
    let mut s = Settings {
        phases: vec!["throughput".into(), "hanging".into(), "speed".into()],
        buyers: 20,
        delay_ms: 200,
        hanging: 2,
        events: 10_000,
        backlog: 100,
        rate: 200,
        seconds: 30,
        concurrency: 256,
        per_buyer: 16,
        samples: 200,
    };
    let usage = "usage: conditions_bench [--phases throughput,hanging,speed] [--buyers N] \
                 [--delay MS] [--hanging N] [--events N] [--backlog N] [--rate N] \
                 [--seconds N] [--concurrency N] [--per-buyer N] [--samples N]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).unwrap_or_else(|| panic!("{usage}"));
        let number = || -> usize { value.parse().unwrap_or_else(|_| panic!("{usage}")) };
        match pair[0].as_str() {
            "--phases" => s.phases = value.split(',').map(str::to_string).collect(),
            "--buyers" => s.buyers = number(),
            "--delay" => s.delay_ms = number() as u64,
            "--hanging" => s.hanging = number(),
            "--events" => s.events = number(),
            "--backlog" => s.backlog = number(),
            "--rate" => s.rate = number(),
            "--seconds" => s.seconds = number(),
            "--concurrency" => s.concurrency = number(),
            "--per-buyer" => s.per_buyer = number(),
            "--samples" => s.samples = number(),
            _ => panic!("{usage}"),
        }
    }
    s
}

/// A fresh file with one workspace, channel `web` (automated delivery, exclusive), source
/// `src`, product `solar` and one buyer per receiver (`b00`, `b01`, …), each subscribed at
/// the same price with caps far above what a run delivers. Returns the source's secret.
fn configure(db: &Db, urls: Vec<String>) -> String {
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
                auto_delivery: Some(true),
                delivery_mode: container::DeliveryMode::Exclusive,
                max_buyers: 1,
                score_threshold: 0,
                ping_ttl_ms: None,
                waterfall: None,
                waterfall_max: None,
            },
        )?;
        let created = source::create(
            conn,
            &source::NewSource {
                id: Some("src"),
                container_id: "web",
                container_kind: container::ContainerKind::Channel,
                name: "Src",
                secret: Some(None),
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
                    daily_cap: Some(1_000_000),
                    monthly_cap: Some(10_000_000),
                    priority: 0,
                    filters: Vec::new(),
                    schedule: None,
                },
            )?;
        }
        Ok::<_, leadrelay::config::ConfigError>(created.secret.expect("a secret was asked for"))
    })
    .expect("the bench configuration is written")
}

fn buyer_id(n: usize) -> String {
    format!("b{n:02}")
}

/// Writes `count` leads with one request each (no automated delivery); the request ids.
fn seed_lead_requests(db: &Db, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    let mut next = 0usize;
    while next < count {
        let chunk = (next..count.min(next + 1000)).collect::<Vec<_>>();
        next += chunk.len();
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
                            '+4917012345678', '80331', 'DE', 'granted', '{}',
                            'ok', 'unique', ?4)",
                    )?
                    .execute(rusqlite::params![
                        lead,
                        format!("seed-{n}-{lead}"),
                        format!("ada{n}@example.org"),
                        leadrelay::clock::now_ms()
                    ])?;
                    conn.prepare_cached(
                        "INSERT INTO lead_requests (id, lead_id, position, product_id,
                            field_values, created_at)
                         VALUES (?1, ?2, 0, 'solar', '{}', ?3)",
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

/// Delivers each (request, buyer) in write jobs of up to 500; the event ids.
fn deliver(db: &Db, orders: Vec<(String, String)>) -> Vec<String> {
    let mut events = Vec::with_capacity(orders.len());
    for chunk in orders.chunks(500) {
        let chunk = chunk.to_vec();
        let mut written = db
            .write_blocking(move |conn| {
                let mut events = Vec::new();
                for (request, buyer) in &chunk {
                    let delivered = leadrelay::delivery::deliver(
                        conn,
                        &DeliveryOrder {
                            lead_request_id: request,
                            buyer_id: buyer,
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
    .expect("the file is readable")
}

fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !condition() {
        if Instant::now() >= deadline {
            println!("  gave up waiting for {what}");
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// The service (HTTP server and outbox) on 127.0.0.1:0 in its own runtime; its address.
struct Service {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Service {
    fn start(db: Db, settings: &Settings, notifier: Notifier) -> Service {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, addr) = std::sync::mpsc::channel();
        let options = ServiceOptions {
            delivery: WorkerConfig {
                concurrency: settings.concurrency,
                per_buyer: settings.per_buyer,
                request_timeout: Duration::from_secs(10),
                ..WorkerConfig::default()
            },
            retention_interval: None,
            outbox: notifier,
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
                bound
                    .send(listener.local_addr().expect("bound"))
                    .expect("the caller waits");
                leadrelay::service::run(listener, db, options, async {
                    let _ = stopped.await;
                })
                .await
                .expect("the service runs");
            });
        });
        Service {
            addr: addr.recv().expect("the service reports its address"),
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

fn behaviours(settings: &Settings, hanging: usize, delay: Duration) -> Vec<Behaviour> {
    (0..settings.buyers)
        .map(|n| {
            if n >= settings.buyers - hanging {
                Behaviour::Hang
            } else {
                Behaviour::Delay(delay)
            }
        })
        .collect()
}

fn report(name: &str, samples: &mut [Duration]) {
    samples.sort();
    if samples.is_empty() {
        println!("  {name}: no samples");
        return;
    }
    println!(
        "  {name}: samples={} p50={:.1}ms p90={:.1}ms p99={:.1}ms max={:.1}ms",
        samples.len(),
        ms(percentile(samples, 0.5)),
        ms(percentile(samples, 0.9)),
        ms(percentile(samples, 0.99)),
        ms(*samples.last().expect("not empty")),
    );
}

fn throughput(settings: &Settings, delay: Duration) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = Db::open(dir.path().join("bench.db")).expect("the file opens");
    let receivers = Receivers::start(behaviours(settings, 0, delay), 2);
    configure(
        &db,
        (0..settings.buyers).map(|n| receivers.url(n)).collect(),
    );
    let requests = seed_lead_requests(&db, settings.events);
    let orders = requests
        .into_iter()
        .enumerate()
        .map(|(n, r)| (r, buyer_id(n % settings.buyers)))
        .collect();
    deliver(&db, orders);
    let groups_before = db.writer_stats().groups;
    let started = Instant::now();
    let notifier = Notifier::new();
    let service = Service::start(db.clone(), settings, notifier.clone());
    // What the outbox had in flight, sampled while waiting: how full it kept its places.
    let (mut in_flight_sum, mut in_flight_samples) = (0usize, 0usize);
    let done = wait_until("every event delivered", Duration::from_secs(600), || {
        in_flight_sum += notifier
            .buyer_figures()
            .iter()
            .map(|f| f.in_flight)
            .sum::<usize>();
        in_flight_samples += 1;
        // The outbox's own count of recorded deliveries (after their commit): no query
        // competing with the outbox every few milliseconds.
        notifier.counts().delivered >= settings.events as u64
    });
    let took = started.elapsed();
    let done = done && delivered_count(&db) >= settings.events as i64;
    // Nothing else writes while the events drain: each group is one outbox round.
    let rounds = db.writer_stats().groups - groups_before;
    drop(service);
    let seen = receivers.arrivals.first_by_event().len();
    println!(
        "  {} events to {} buyers answering in {} ms: {:.2}s = {:.0} events/s{}; receiver saw {} requests for {} events; {rounds} outbox rounds ({:.1} events each), {:.0} in flight on average",
        settings.events,
        settings.buyers,
        delay.as_millis(),
        took.as_secs_f64(),
        settings.events as f64 / took.as_secs_f64(),
        if done { "" } else { " (not all delivered)" },
        receivers
            .arrivals
            .count
            .load(std::sync::atomic::Ordering::Relaxed),
        seen,
        settings.events as f64 / rounds.max(1) as f64,
        in_flight_sum as f64 / in_flight_samples.max(1) as f64,
    );
}

fn hanging(settings: &Settings, hanging: usize, delay: Duration) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = Db::open(dir.path().join("bench.db")).expect("the file opens");
    let receivers = Receivers::start(behaviours(settings, hanging, delay), 2);
    configure(
        &db,
        (0..settings.buyers).map(|n| receivers.url(n)).collect(),
    );
    let healthy = settings.buyers - hanging;
    // 100 events a second for 10 s, whatever the speed phase's rate.
    let (rate, count) = (100usize, 1000usize);
    // The last `hanging` buyers' backlog (in the baseline they answer: their backlog is
    // simply work for them).
    let backlog_buyers = settings.hanging;
    let requests = seed_lead_requests(&db, backlog_buyers * settings.backlog + count);
    let (backlog, fresh) = requests.split_at(backlog_buyers * settings.backlog);
    deliver(
        &db,
        backlog
            .iter()
            .enumerate()
            .map(|(n, r)| {
                (
                    r.clone(),
                    buyer_id(settings.buyers - 1 - n % backlog_buyers),
                )
            })
            .collect(),
    );
    let notifier = Notifier::new();
    let service = Service::start(db.clone(), settings, notifier.clone());
    // Let the backlog be claimed: the hanging buyers' places are all taken.
    std::thread::sleep(Duration::from_secs(1));
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let mut committed: HashMap<String, Instant> = HashMap::with_capacity(count);
    let start = Instant::now();
    for (n, request) in fresh.iter().enumerate() {
        let due = start + interval * n as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let events = deliver(&db, vec![(request.clone(), buyer_id(n % healthy))]);
        committed.insert(events[0].clone(), Instant::now());
        notifier.notify();
    }
    wait_until(
        "the fresh events to arrive",
        Duration::from_secs(60),
        || {
            let first = receivers.arrivals.first_by_event();
            committed.keys().all(|id| first.contains_key(id))
        },
    );
    let first = receivers.arrivals.first_by_event();
    let mut samples: Vec<Duration> = committed
        .iter()
        .filter_map(|(id, at)| first.get(id).map(|a| a.at.saturating_duration_since(*at)))
        .collect();
    let missing = committed.len() - samples.len();
    drop(service);
    report(
        &format!(
            "{hanging} of {} buyers hanging (backlog {} each), {count} events to the {healthy} others at {rate}/s, commit → arrival (missing {missing})",
            settings.buyers, settings.backlog
        ),
        &mut samples,
    );
}

/// Commit → arrival of single deliveries on an idle queue, woken by the `Notifier` and
/// found by the poll (a tenth as many samples: each waits for the poll interval).
fn latency(settings: &Settings) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = Db::open(dir.path().join("bench.db")).expect("the file opens");
    let receivers = Receivers::start(behaviours(settings, 0, Duration::ZERO), 2);
    configure(
        &db,
        (0..settings.buyers).map(|n| receivers.url(n)).collect(),
    );
    let polled = (settings.samples / 10).max(10);
    let requests = seed_lead_requests(&db, settings.samples + polled);
    let notifier = Notifier::new();
    let service = Service::start(db.clone(), settings, notifier.clone());
    let (woken, polled) = requests.split_at(settings.samples);
    let one_at_a_time = |requests: &[String], wake: bool| -> Vec<Duration> {
        let mut samples = Vec::with_capacity(requests.len());
        for (n, request) in requests.iter().enumerate() {
            let recorded = notifier.counts().delivered;
            let events = deliver(&db, vec![(request.clone(), buyer_id(n % settings.buyers))]);
            let committed = Instant::now();
            if wake {
                notifier.notify();
            }
            let arrived = || {
                receivers
                    .arrivals
                    .first_by_event()
                    .get(&events[0])
                    .map(|a| a.at)
            };
            wait_until("the event to arrive", Duration::from_secs(60), || {
                arrived().is_some()
            });
            if let Some(at) = arrived() {
                samples.push(at.saturating_duration_since(committed));
            }
            wait_until(
                "the attempt to be recorded",
                Duration::from_secs(60),
                || notifier.counts().delivered > recorded,
            );
        }
        samples
    };
    let mut samples = one_at_a_time(woken, true);
    report(
        "commit → arrival, idle queue, woken by the Notifier",
        &mut samples,
    );
    let mut samples = one_at_a_time(polled, false);
    report(
        "commit → arrival, idle queue, no wake-up (the poll, as for a CLI deliver)",
        &mut samples,
    );
    drop(service);
}

fn speed(settings: &Settings, delay: Duration) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = Db::open(dir.path().join("bench.db")).expect("the file opens");
    let receivers = Receivers::start(behaviours(settings, 0, delay), 2);
    let secret = configure(
        &db,
        (0..settings.buyers).map(|n| receivers.url(n)).collect(),
    );
    let service = Service::start(db.clone(), settings, Notifier::new());
    let url = format!(
        "http://{}/api/webhooks/channels/web/sources/src/leads",
        service.addr
    );
    let count = settings.rate * settings.seconds;
    // Four clients, each sending every fourth lead on the common schedule, so one slow
    // answer does not hold the rate back.
    let clients = 4;
    let interval = Duration::from_secs_f64(1.0 / settings.rate as f64);
    let start = Instant::now() + Duration::from_millis(100);
    let secret = Arc::new(secret);
    let url = Arc::new(url);
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (secret, url) = (secret.clone(), url.clone());
            std::thread::spawn(move || {
                let agent = client::agent();
                let mut answered: Vec<(String, Instant)> = Vec::new();
                let mut refused = 0usize;
                for n in (c..count).step_by(clients) {
                    let due = start + interval * n as u32;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let lead = json!({
                        "externalId": format!("speed-{n}"),
                        "firstName": "Ann",
                        "lastName": "Lee",
                        "email": format!("ann{n}@example.com"),
                        "phone": format!("+49 30 {:07}", 1_000_000 + n),
                        "street": "Hauptstr.",
                        "houseNumber": "1",
                        "postalCode": "10115",
                        "city": "Berlin",
                        "country": "DE",
                        "consentStatus": "granted",
                        "consentCapturedAt": "2025-01-06T10:00:00Z",
                        "productSlug": "solar",
                        "triggerAutoDelivery": true,
                    });
                    let (status, body) = client::post(&agent, &url, Some(&secret), &lead);
                    let at = Instant::now();
                    match body["item"]["leadId"].as_str() {
                        Some(id) if status == 201 => answered.push((id.to_string(), at)),
                        _ => refused += 1,
                    }
                }
                (answered, refused)
            })
        })
        .collect();
    let mut answered: Vec<(String, Instant)> = Vec::new();
    let mut refused = 0;
    for thread in threads {
        let (mut a, r) = thread.join().expect("a client thread");
        answered.append(&mut a);
        refused += r;
    }
    let sending = start.elapsed();
    wait_until("every lead to arrive", Duration::from_secs(60), || {
        receivers.arrivals.first_by_lead().len() >= answered.len()
    });
    let first = receivers.arrivals.first_by_lead();
    let mut samples: Vec<Duration> = answered
        .iter()
        .filter_map(|(id, at)| first.get(id).map(|a| a.at.saturating_duration_since(*at)))
        .collect();
    let lost = answered.len() - samples.len();
    let early = answered
        .iter()
        .filter(|(id, at)| first.get(id).is_some_and(|a| a.at < *at))
        .count();
    drop(service);
    report(
        &format!(
            "{} leads at {}/s over {:.1}s (refused {refused}), buyers answering in {} ms, 201 → arrival (not arrived {lost}; arrived before its 201: {early})",
            answered.len(),
            settings.rate,
            sending.as_secs_f64(),
            delay.as_millis()
        ),
        &mut samples,
    );
}

fn main() {
    let settings = settings();
    let delay = Duration::from_millis(settings.delay_ms);
    println!(
        "conditions bench: {} buyers, delay {} ms, concurrency {} / per buyer {}",
        settings.buyers, settings.delay_ms, settings.concurrency, settings.per_buyer
    );
    for phase in &settings.phases {
        match phase.as_str() {
            "throughput" => {
                println!("throughput (baseline: buyers answering at once)");
                throughput(&settings, Duration::ZERO);
                throughput(&settings, delay);
            }
            "hanging" => {
                println!("hanging buyers (baseline: none hanging)");
                hanging(&settings, 0, delay);
                hanging(&settings, settings.hanging, delay);
            }
            "latency" => {
                println!("commit to arrival on an idle queue");
                latency(&settings);
            }
            "speed" => {
                println!("speed to lead (baseline: buyers answering at once)");
                speed(&settings, Duration::ZERO);
                speed(&settings, delay);
            }
            other => panic!("unknown phase {other}"),
        }
    }
}
