//! The delivery benchmarks' shared set-up (`bench/conditions_bench.rs`,
//! `bench/integration_bench.rs`): a fresh file's configuration (workspace `ws`, channel
//! `web`, source `src`, product `solar`, one subscribed buyer per receiver URL), leads
//! written with SQL, deliveries committed in write jobs, and the service (HTTP server and
//! outbox) in a runtime of its own. Included with `#[path]`.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use leadrelay::config::{buyer, container, product, source, workspace};
use leadrelay::db::{Db, DbError};
use leadrelay::delivery::{DeliveryError, DeliveryOrder};
use leadrelay::ids::LeadRequestId;
use leadrelay::outbox::{Notifier, WorkerConfig};
use leadrelay::service::ServiceOptions;

/// How [`configure`] sets the channel and the subscriptions up.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// The channel delivers automatically (exclusive, one buyer per lead).
    pub auto_delivery: bool,
    /// Daily and monthly caps far above what a run delivers (so their counting is paid).
    pub caps: bool,
    /// The source takes leads only with a secret, which [`configure`] returns.
    pub source_secret: bool,
}

/// The id of the buyer of receiver `n`: `b00`, `b01`, …
pub fn buyer_id(n: usize) -> String {
    format!("b{n:02}")
}

/// A fresh file's workspace, channel `web`, source `src`, product `solar` and one buyer per
/// URL ([`buyer_id`]), each subscribed at the same price. Returns the source's secret when
/// [`Setup::source_secret`] asks for one.
pub fn configure(db: &Db, urls: Vec<String>, setup: Setup) -> Option<String> {
    db.write_blocking(move |conn| {
        workspace::create(
            conn,
            &workspace::NewWorkspace {
                id: Some("ws"),
                name: "Bench",
                timezone: "Europe/Berlin",
                retention: None,
                suppression_action: None,
            },
        )?;
        container::create(
            conn,
            &container::NewContainer {
                id: Some("web"),
                workspace_id: "ws",
                kind: container::ContainerKind::Channel,
                name: "Web",
                auto_delivery: Some(setup.auto_delivery),
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
                secret: setup.source_secret.then_some(None),
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
                    return_cap_bp: None,
                    return_review: buyer::ReturnReview::Auto,
                },
            )?;
            buyer::subscribe(
                conn,
                &buyer::NewSubscription {
                    pricing: Default::default(),
                    buyer_id: &id.as_str().into(),
                    product: "solar",
                    price_cents: 2500,
                    daily_cap: setup.caps.then_some(1_000_000),
                    monthly_cap: setup.caps.then_some(10_000_000),
                    priority: 0,
                    filters: Vec::new(),
                    schedule: None,
                    require_check: None,
                },
            )?;
        }
        Ok::<_, leadrelay::config::ConfigError>(created.secret)
    })
    .expect("the bench configuration is written")
}

/// Writes `count` leads with one request each (no automated delivery), the requests with
/// `field_values` (a JSON object); the request ids.
pub fn seed_lead_requests(db: &Db, count: usize, field_values: &'static str) -> Vec<LeadRequestId> {
    let mut ids = Vec::with_capacity(count);
    for start in (0..count).step_by(1000) {
        let end = count.min(start + 1000);
        let mut written = db
            .write_blocking(move |conn| {
                let now = leadrelay::clock::now_ms();
                let mut ids = Vec::new();
                for n in start..end {
                    let lead = leadrelay::ids::LeadId::generate();
                    let request = LeadRequestId::generate();
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
                        now
                    ])?;
                    conn.prepare_cached(
                        "INSERT INTO lead_requests (id, lead_id, position, product_id,
                            field_values, created_at)
                         VALUES (?1, ?2, 0, 'solar', ?3, ?4)",
                    )?
                    .execute(rusqlite::params![
                        request,
                        lead,
                        field_values,
                        now
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

/// Request n to buyer n % `buyers`.
pub fn round_robin(requests: Vec<LeadRequestId>, buyers: usize) -> Vec<(LeadRequestId, String)> {
    requests
        .into_iter()
        .enumerate()
        .map(|(n, request)| (request, buyer_id(n % buyers)))
        .collect()
}

/// Delivers each (request, buyer) in write jobs of up to 500; the event ids.
pub fn deliver(db: &Db, orders: Vec<(LeadRequestId, String)>) -> Vec<String> {
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
                            lead_request_id: *request,
                            buyer_id: &buyer.as_str().into(),
                            price_cents: None,
                            actor: "bench",
                        },
                    )?;
                    events.push(delivered.event_id.to_string());
                }
                Ok::<_, DeliveryError>(events)
            })
            .expect("deliveries are written");
        events.append(&mut written);
    }
    events
}

/// Polls `condition` every 5 ms for at most `limit`; false (and a line saying so) when it
/// never held.
pub fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
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

/// The service (HTTP server and outbox) on 127.0.0.1:0 in its own two-thread runtime, until
/// dropped; its address.
pub struct Service {
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Service {
    /// Starts the service with the outbox's `delivery` settings, waking through `notifier`.
    pub fn start(db: Db, delivery: WorkerConfig, notifier: Notifier) -> Service {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, addr) = std::sync::mpsc::channel();
        let options = ServiceOptions {
            delivery,
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
