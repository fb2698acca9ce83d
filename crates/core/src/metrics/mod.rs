//! Counters and histograms of the running service, and their Prometheus text rendering for
//! `GET /metrics`.
//!
//! Owns what is counted and how it is named. There is no global registry: one [`Metrics`]
//! hangs off `AppState` (and can be handed to worker threads as an `Arc`), so two services
//! in one process (tests) never mix their figures. Domain code records with plain calls
//! ([`Metrics::ingest_result`]); the HTTP server records every request
//! ([`Metrics::start_request`]). Figures that other components keep anyway are read at
//! scrape time by the handler of `GET /metrics` (`http::handlers::metrics`), not counted
//! twice here: outbox depth (the database), delivery attempts (the outbox workers'
//! `Notifier`), group sizes (the writer), the rate limiter's table.

mod instruments;
pub mod process;
mod text;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

pub(crate) use instruments::LabelledCounter;
pub use leadrelay_rules::histogram::{Histogram, HistogramReading};
pub(crate) use process::ProcessStats;
pub use text::CONTENT_TYPE;

use crate::db::WriterStats;
use text::TextWriter;

/// The endpoint label of a request that matched no route (404, 405).
pub const UNMATCHED: &str = "unmatched";

/// The per-lead ingest results of SPEC.md section 2.5, always exported (zero included).
pub(crate) const INGEST_STATUSES: &[&str] =
    &["accepted", "duplicate", "idempotent_replay", "rejected"];

/// The outcomes of a ping (DESIGN.md section 14): answered accepted or rejected, refused
/// as invalid (validation, personal data), or failed on our side.
pub(crate) const PING_OUTCOMES: &[&str] = &["accepted", "rejected", "invalid", "error"];

/// The outcomes of one delivery attempt, as `outbox_attempts.outcome` records them.
pub(crate) const DELIVERY_OUTCOMES: &[&str] = &["delivered", "retry", "failed"];

/// Request latency bucket bounds in microseconds: from a fast in-memory answer (100 µs) to
/// a request stuck behind a busy disk (10 s).
const LATENCY_BOUNDS_MICROS: &[u64] = &[
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Lowest and highest HTTP status a response can carry; one counter slot per code.
const FIRST_STATUS: u16 = 100;
const LAST_STATUS: u16 = 599;

pub struct Metrics {
    started: Instant,
    /// Endpoint labels; requests and latency are indexed alike.
    endpoints: Vec<&'static str>,
    /// Per endpoint, one counter per status code 100..=599.
    requests: Vec<Box<[AtomicU64]>>,
    latency: Vec<Histogram>,
    in_flight: AtomicI64,
    ingest: LabelledCounter,
    pings: LabelledCounter,
    ping_latency: Histogram,
    /// Bid requests per buyer: by outcome, and their latency.
    bids: std::sync::Mutex<std::collections::BTreeMap<String, BuyerBids>>,
    /// Connections answered 503 because `serve --max-connections` were open.
    connections_refused: AtomicU64,
}

/// One buyer's bid requests.
struct BuyerBids {
    outcomes: LabelledCounter,
    latency_ms: Histogram,
}

/// How a bid request ended, as `bids.outcome` records it.
pub(crate) const BID_OUTCOMES: &[&str] =
    &["bid", "pass", "timeout", "error", "below_min", "above_max"];

/// Bid latency bucket bounds in milliseconds.
const BID_LATENCY_BOUNDS_MS: &[u64] = &[5, 10, 25, 50, 100, 200, 300, 500, 1_000, 2_500, 5_000];

/// Figures read at scrape time from outside this module.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    /// `None` when the database could not be read for this scrape.
    pub outbox: Option<OutboxGauges>,
    pub writer: WriterStats,
    /// Client addresses the rate limiter tracks; `None` when rate limiting is off.
    pub rate_limited_clients: Option<usize>,
    /// Delivery attempts recorded by this service's outbox workers.
    pub deliveries: DeliveryGauges,
    /// Per buyer that the outbox workers dealt with, by buyer id.
    pub buyers: Vec<BuyerGauges>,
    /// Connections open now and the most allowed (`serve --max-connections`).
    pub connections: ConnectionGauges,
    /// `None` where the process's figures cannot be read (no `/proc`).
    pub process: Option<ProcessStats>,
}

/// One buyer's delivery figures: its endpoint's state, sends in flight, attempts by
/// outcome and their durations.
#[derive(Debug, Clone)]
pub struct BuyerGauges {
    pub buyer_id: crate::ids::BuyerId,
    pub unhealthy: bool,
    pub in_flight: usize,
    /// Delivered, retry, failed, as [`DELIVERY_OUTCOMES`] names them.
    pub attempts: [u64; 3],
    /// Attempt durations in milliseconds.
    pub duration_ms: HistogramReading,
}

#[derive(Debug, Clone, Default)]
pub struct ConnectionGauges {
    pub open: usize,
    pub max: usize,
    /// Requests that write in progress now, and the most allowed at once.
    pub write_requests: usize,
    pub max_write_requests: usize,
}

/// Delivery attempts by outcome, as [`DELIVERY_OUTCOMES`] names them.
#[derive(Debug, Clone, Default)]
pub struct DeliveryGauges {
    pub delivered: u64,
    pub retry: u64,
    pub failed: u64,
}

#[derive(Debug, Clone, Default)]
pub struct OutboxGauges {
    pub pending: i64,
    pub failed: i64,
    pub oldest_pending_seconds: Option<i64>,
}

/// Measures one request; created by [`Metrics::start_request`]. Dropping it without
/// [`RequestTimer::finish`] (the client went away mid-request) only ends the in-flight count.
pub struct RequestTimer<'a> {
    metrics: &'a Metrics,
    started: Instant,
}

impl RequestTimer<'_> {
    /// Counts the request under `endpoint` and `status` and records its latency.
    pub fn finish(self, endpoint: &str, status: u16) {
        let metrics = self.metrics;
        let index = metrics.endpoint_index(endpoint);
        if (FIRST_STATUS..=LAST_STATUS).contains(&status) {
            metrics.requests[index][usize::from(status - FIRST_STATUS)]
                .fetch_add(1, Ordering::Relaxed);
        }
        let micros = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        metrics.latency[index].observe(micros);
    }
}

impl Drop for RequestTimer<'_> {
    fn drop(&mut self) {
        self.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Metrics for a server whose routes have the endpoint labels `endpoints`;
    /// [`UNMATCHED`] is added for requests that match none.
    pub fn new(endpoints: &[&'static str]) -> Metrics {
        let mut endpoints = endpoints.to_vec();
        if !endpoints.contains(&UNMATCHED) {
            endpoints.push(UNMATCHED);
        }
        let statuses = usize::from(LAST_STATUS - FIRST_STATUS + 1);
        Metrics {
            started: Instant::now(),
            requests: endpoints
                .iter()
                .map(|_| (0..statuses).map(|_| AtomicU64::new(0)).collect())
                .collect(),
            latency: endpoints
                .iter()
                .map(|_| Histogram::new(LATENCY_BOUNDS_MICROS))
                .collect(),
            endpoints,
            in_flight: AtomicI64::new(0),
            ingest: LabelledCounter::new(INGEST_STATUSES),
            pings: LabelledCounter::new(PING_OUTCOMES),
            ping_latency: Histogram::new(LATENCY_BOUNDS_MICROS),
            bids: Default::default(),
            connections_refused: AtomicU64::new(0),
        }
    }

    /// Counts a connection refused at the connection limit.
    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts measuring a request: it counts as in flight until the timer is dropped.
    pub fn start_request(&self) -> RequestTimer<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        RequestTimer {
            metrics: self,
            started: Instant::now(),
        }
    }

    /// Counts one lead's ingest result (`accepted`, `duplicate`, `idempotent_replay`,
    /// `rejected`): call once per lead, also for each item of a batch.
    pub fn ingest_result(&self, status: &str) {
        self.ingest.add(status, 1);
    }

    /// Counts one ping by outcome ([`PING_OUTCOMES`]) and records how long answering it
    /// took (from its checked body to its committed answer).
    pub fn ping(&self, outcome: &str, took: std::time::Duration) {
        self.pings.add(outcome, 1);
        self.ping_latency
            .observe(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
    }

    /// Counts one bid request to `buyer_id` by outcome ([`BID_OUTCOMES`]) with its latency.
    pub fn bid(&self, buyer_id: &crate::ids::BuyerId, outcome: &str, latency_ms: i64) {
        let mut bids = self
            .bids
            .lock()
            .expect("the bid figures' lock is never held across a panic");
        let buyer = bids
            .entry(buyer_id.to_string())
            .or_insert_with(|| BuyerBids {
                outcomes: LabelledCounter::new(BID_OUTCOMES),
                latency_ms: Histogram::new(BID_LATENCY_BOUNDS_MS),
            });
        buyer.outcomes.add(outcome, 1);
        buyer
            .latency_ms
            .observe(u64::try_from(latency_ms).unwrap_or(0));
    }

    /// How many requests were answered with `status` on `endpoint` so far.
    pub fn requests_answered(&self, endpoint: &str, status: u16) -> u64 {
        if !(FIRST_STATUS..=LAST_STATUS).contains(&status) {
            return 0;
        }
        self.requests[self.endpoint_index(endpoint)][usize::from(status - FIRST_STATUS)]
            .load(Ordering::Relaxed)
    }

    /// An unknown label lands on [`UNMATCHED`], which always exists.
    fn endpoint_index(&self, endpoint: &str) -> usize {
        self.endpoints
            .iter()
            .position(|&e| e == endpoint)
            .unwrap_or(self.endpoints.len() - 1)
    }

    /// The whole scrape answer in the Prometheus text format.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut w = TextWriter::new();
        w.family(
            "leadrelay_build_info",
            "gauge",
            "Always 1; the version label names the running build.",
        );
        w.sample(
            "leadrelay_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1,
        );
        w.family(
            "leadrelay_uptime_seconds",
            "gauge",
            "Seconds since the service started.",
        );
        w.sample(
            "leadrelay_uptime_seconds",
            &[],
            self.started.elapsed().as_secs(),
        );
        self.render_requests(&mut w);
        self.render_connections(&mut w, &gauges.connections);
        self.render_ingest(&mut w);
        self.render_pings(&mut w);
        render_gauges(&mut w, gauges);
        if let Some(process) = &gauges.process {
            render_process(&mut w, process);
        }
        w.finish()
    }

    fn render_requests(&self, w: &mut TextWriter) {
        w.family(
            "leadrelay_http_requests_total",
            "counter",
            "HTTP requests answered, by endpoint and status code.",
        );
        for (index, endpoint) in self.endpoints.iter().enumerate() {
            for (slot, count) in self.requests[index].iter().enumerate() {
                let count = count.load(Ordering::Relaxed);
                if count > 0 {
                    let status = (FIRST_STATUS + slot as u16).to_string();
                    w.sample(
                        "leadrelay_http_requests_total",
                        &[("endpoint", endpoint), ("status", &status)],
                        count,
                    );
                }
            }
        }
        w.family(
            "leadrelay_http_requests_in_flight",
            "gauge",
            "HTTP requests being handled right now.",
        );
        w.sample(
            "leadrelay_http_requests_in_flight",
            &[],
            self.in_flight.load(Ordering::Relaxed).max(0),
        );
        w.family(
            "leadrelay_http_request_duration_seconds",
            "histogram",
            "Time from the request's arrival to its response, by endpoint.",
        );
        for (index, endpoint) in self.endpoints.iter().enumerate() {
            let reading = self.latency[index].read();
            if reading.count > 0 {
                w.histogram(
                    "leadrelay_http_request_duration_seconds",
                    &[("endpoint", endpoint)],
                    &reading,
                    1e6,
                );
            }
        }
    }

    fn render_connections(&self, w: &mut TextWriter, connections: &ConnectionGauges) {
        w.family(
            "leadrelay_http_connections_open",
            "gauge",
            "HTTP connections open now.",
        );
        w.sample("leadrelay_http_connections_open", &[], connections.open);
        w.family(
            "leadrelay_http_connections_max",
            "gauge",
            "The most HTTP connections open at once (serve --max-connections).",
        );
        w.sample("leadrelay_http_connections_max", &[], connections.max);
        w.family(
            "leadrelay_http_connections_refused_total",
            "counter",
            "Connections answered 503 and closed because the connection limit was reached.",
        );
        w.sample(
            "leadrelay_http_connections_refused_total",
            &[],
            self.connections_refused.load(Ordering::Relaxed),
        );
        w.family(
            "leadrelay_http_write_requests_in_progress",
            "gauge",
            "Requests that write (ingest, lifecycle) being handled now.",
        );
        w.sample(
            "leadrelay_http_write_requests_in_progress",
            &[],
            connections.write_requests,
        );
        w.family(
            "leadrelay_http_write_requests_max",
            "gauge",
            "The most requests that write handled at once; past it they are answered 503.",
        );
        w.sample(
            "leadrelay_http_write_requests_max",
            &[],
            connections.max_write_requests,
        );
    }

    fn render_ingest(&self, w: &mut TextWriter) {
        w.family(
            "leadrelay_ingest_leads_total",
            "counter",
            "Leads received on the ingest endpoints, by per-lead result status.",
        );
        for (status, count) in self.ingest.values() {
            w.sample(
                "leadrelay_ingest_leads_total",
                &[("status", &status)],
                count,
            );
        }
    }
}

impl Metrics {
    fn render_pings(&self, w: &mut TextWriter) {
        w.family(
            "leadrelay_pings_total",
            "counter",
            "Pings answered, by outcome (accepted, rejected, invalid, error).",
        );
        for (outcome, count) in self.pings.values() {
            w.sample("leadrelay_pings_total", &[("outcome", &outcome)], count);
        }
        w.family(
            "leadrelay_ping_duration_seconds",
            "histogram",
            "Time to decide and commit a ping, from its checked body to its answer.",
        );
        w.histogram(
            "leadrelay_ping_duration_seconds",
            &[],
            &self.ping_latency.read(),
            1e6,
        );
        let bids = self
            .bids
            .lock()
            .expect("the bid figures' lock is never held across a panic");
        w.family(
            "leadrelay_bid_requests_total",
            "counter",
            "Bid requests to bid-priced buyers, by buyer and outcome (bid, pass, timeout, error, below_min, above_max).",
        );
        for (buyer, figures) in bids.iter() {
            for (outcome, count) in figures.outcomes.values() {
                w.sample(
                    "leadrelay_bid_requests_total",
                    &[("buyer", buyer), ("outcome", &outcome)],
                    count,
                );
            }
        }
        w.family(
            "leadrelay_bid_duration_seconds",
            "histogram",
            "Time from a bid request to its answer (or its timeout), by buyer.",
        );
        for (buyer, figures) in bids.iter() {
            w.histogram(
                "leadrelay_bid_duration_seconds",
                &[("buyer", buyer)],
                &figures.latency_ms.read(),
                1e3,
            );
        }
    }
}

fn render_gauges(w: &mut TextWriter, gauges: &Gauges) {
    w.family(
        "leadrelay_deliveries_total",
        "counter",
        "Webhook delivery attempts, by outcome (delivered, retry, failed).",
    );
    let deliveries = &gauges.deliveries;
    let counts = [deliveries.delivered, deliveries.retry, deliveries.failed];
    for (outcome, count) in DELIVERY_OUTCOMES.iter().zip(counts) {
        w.sample("leadrelay_deliveries_total", &[("outcome", outcome)], count);
    }
    render_buyers(w, &gauges.buyers);
    if let Some(outbox) = &gauges.outbox {
        w.family(
            "leadrelay_outbox_events",
            "gauge",
            "Outbox events waiting to be delivered (pending) or given up on (failed).",
        );
        w.sample(
            "leadrelay_outbox_events",
            &[("status", "pending")],
            outbox.pending,
        );
        w.sample(
            "leadrelay_outbox_events",
            &[("status", "failed")],
            outbox.failed,
        );
        w.family(
            "leadrelay_outbox_oldest_pending_age_seconds",
            "gauge",
            "Age of the oldest pending outbox event; 0 when none is pending.",
        );
        w.sample(
            "leadrelay_outbox_oldest_pending_age_seconds",
            &[],
            outbox.oldest_pending_seconds.unwrap_or(0),
        );
    }
    let writer = &gauges.writer;
    w.family(
        "leadrelay_db_write_group_size",
        "histogram",
        "Write jobs committed together in one group transaction (one fsync).",
    );
    w.histogram(
        "leadrelay_db_write_group_size",
        &[],
        &writer.group_sizes,
        1.0,
    );
    w.family(
        "leadrelay_db_write_group_size_max",
        "gauge",
        "Largest group transaction since the service started.",
    );
    w.sample(
        "leadrelay_db_write_group_size_max",
        &[],
        writer.max_group_size,
    );
    w.family(
        "leadrelay_db_commit_seconds",
        "histogram",
        "Time of a group transaction's commit: its WAL frames written and synced, which every \
         job of the group waits for.",
    );
    w.histogram(
        "leadrelay_db_commit_seconds",
        &[],
        &writer.commit_micros,
        1e6,
    );
    w.family(
        "leadrelay_db_write_queue_depth",
        "gauge",
        "Request write jobs queued for the writer or running now.",
    );
    w.sample("leadrelay_db_write_queue_depth", &[], writer.queued);
    w.family(
        "leadrelay_db_write_queue_capacity",
        "gauge",
        "The most request write jobs queued at once; past it requests are answered 503.",
    );
    w.sample("leadrelay_db_write_queue_capacity", &[], writer.capacity);
    w.family(
        "leadrelay_db_writes_refused_total",
        "counter",
        "Request write jobs refused (503) because the writer's queue was full.",
    );
    w.sample("leadrelay_db_writes_refused_total", &[], writer.refused);
    let checkpoints = &writer.checkpoints;
    w.family(
        "leadrelay_db_wal_checkpoints_total",
        "counter",
        "WAL checkpoints: passes of the checkpointer thread, and the writer's own when the WAL outgrew the checkpointer.",
    );
    w.sample(
        "leadrelay_db_wal_checkpoints_total",
        &[("by", "checkpointer")],
        checkpoints.passes,
    );
    w.sample(
        "leadrelay_db_wal_checkpoints_total",
        &[("by", "writer")],
        checkpoints.by_writer,
    );
    w.family(
        "leadrelay_db_wal_checkpoint_seconds_total",
        "counter",
        "Time spent copying the WAL into the database file: by the checkpointer thread, and by the writer (jobs waited meanwhile).",
    );
    w.sample(
        "leadrelay_db_wal_checkpoint_seconds_total",
        &[("by", "checkpointer")],
        checkpoints.pass_micros as f64 / 1e6,
    );
    w.sample(
        "leadrelay_db_wal_checkpoint_seconds_total",
        &[("by", "writer")],
        checkpoints.writer_micros as f64 / 1e6,
    );
    w.family(
        "leadrelay_db_wal_checkpoint_failures_total",
        "counter",
        "WAL checkpoints that failed with an error (see the log).",
    );
    w.sample(
        "leadrelay_db_wal_checkpoint_failures_total",
        &[],
        checkpoints.failed,
    );
    w.family(
        "leadrelay_db_wal_restarts_total",
        "counter",
        "Times the WAL started again from its beginning after a checkpoint had copied all of it.",
    );
    w.sample(
        "leadrelay_db_wal_restarts_total",
        &[],
        checkpoints.wal_restarts,
    );
    if let Some(clients) = gauges.rate_limited_clients {
        w.family(
            "leadrelay_rate_limit_tracked_clients",
            "gauge",
            "Client addresses with a token bucket in the rate limiter.",
        );
        w.sample("leadrelay_rate_limit_tracked_clients", &[], clients);
    }
}

/// The per-buyer delivery series; one label value per buyer the outbox dealt with.
fn render_buyers(w: &mut TextWriter, buyers: &[BuyerGauges]) {
    if buyers.is_empty() {
        return;
    }
    w.family(
        "leadrelay_buyer_endpoint_unhealthy",
        "gauge",
        "1 while the buyer's endpoint is unhealthy (its circuit breaker is open), else 0.",
    );
    for buyer in buyers {
        w.sample(
            "leadrelay_buyer_endpoint_unhealthy",
            &[("buyer", buyer.buyer_id.as_str())],
            u64::from(buyer.unhealthy),
        );
    }
    w.family(
        "leadrelay_buyer_deliveries_in_flight",
        "gauge",
        "Webhook sends to the buyer in flight now.",
    );
    for buyer in buyers {
        w.sample(
            "leadrelay_buyer_deliveries_in_flight",
            &[("buyer", buyer.buyer_id.as_str())],
            buyer.in_flight,
        );
    }
    w.family(
        "leadrelay_buyer_delivery_attempts_total",
        "counter",
        "Webhook delivery attempts to the buyer, by outcome (delivered, retry, failed).",
    );
    for buyer in buyers {
        for (outcome, count) in DELIVERY_OUTCOMES.iter().zip(buyer.attempts) {
            w.sample(
                "leadrelay_buyer_delivery_attempts_total",
                &[("buyer", buyer.buyer_id.as_str()), ("outcome", outcome)],
                count,
            );
        }
    }
    w.family(
        "leadrelay_buyer_delivery_duration_seconds",
        "histogram",
        "Duration of webhook delivery attempts to the buyer, answered or not.",
    );
    for buyer in buyers {
        w.histogram(
            "leadrelay_buyer_delivery_duration_seconds",
            &[("buyer", buyer.buyer_id.as_str())],
            &buyer.duration_ms,
            1e3,
        );
    }
}

/// The standard process metrics, named as every Prometheus client library names them.
fn render_process(w: &mut TextWriter, process: &ProcessStats) {
    w.family(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
    );
    w.sample("process_cpu_seconds_total", &[], process.cpu_seconds);
    w.family(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
    );
    w.sample(
        "process_resident_memory_bytes",
        &[],
        process.resident_memory_bytes,
    );
    w.family(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
    );
    w.sample(
        "process_virtual_memory_bytes",
        &[],
        process.virtual_memory_bytes,
    );
    if let Some(open) = process.open_fds {
        w.family(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
        );
        w.sample("process_open_fds", &[], open);
    }
    if let Some(max) = process.max_fds {
        w.family(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
        );
        w.sample("process_max_fds", &[], max);
    }
    w.family(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
    );
    w.sample(
        "process_start_time_seconds",
        &[],
        process.start_time_seconds,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_endpoint_and_status() {
        let metrics = Metrics::new(&["health", "ingest"]);
        metrics.start_request().finish("health", 200);
        metrics.start_request().finish("health", 200);
        metrics.start_request().finish("ingest", 400);
        metrics.start_request().finish("no such endpoint", 404);
        assert_eq!(metrics.requests_answered("health", 200), 2);
        assert_eq!(metrics.requests_answered("ingest", 400), 1);
        assert_eq!(metrics.requests_answered(UNMATCHED, 404), 1);
        let text = metrics.render(&Gauges::default());
        assert!(
            text.contains("leadrelay_http_requests_total{endpoint=\"health\",status=\"200\"} 2\n")
        );
        assert!(
            text.contains("leadrelay_http_request_duration_seconds_count{endpoint=\"ingest\"} 1\n")
        );
        assert!(text.contains("leadrelay_http_requests_in_flight 0\n"));
    }

    #[test]
    fn in_flight_counts_unfinished_requests() {
        let metrics = Metrics::new(&["health"]);
        let first = metrics.start_request();
        let second = metrics.start_request();
        assert!(
            metrics
                .render(&Gauges::default())
                .contains("leadrelay_http_requests_in_flight 2\n")
        );
        drop(first);
        second.finish("health", 200);
        assert!(
            metrics
                .render(&Gauges::default())
                .contains("leadrelay_http_requests_in_flight 0\n")
        );
    }

    #[test]
    fn domain_counters_start_at_zero_and_count() {
        let metrics = Metrics::new(&[]);
        metrics.ingest_result("accepted");
        metrics.ingest_result("accepted");
        let gauges = Gauges {
            deliveries: DeliveryGauges {
                retry: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let text = metrics.render(&gauges);
        assert!(text.contains("leadrelay_ingest_leads_total{status=\"accepted\"} 2\n"));
        assert!(text.contains("leadrelay_ingest_leads_total{status=\"idempotent_replay\"} 0\n"));
        assert!(text.contains("leadrelay_deliveries_total{outcome=\"retry\"} 1\n"));
        assert!(text.contains("leadrelay_deliveries_total{outcome=\"delivered\"} 0\n"));
    }
}
