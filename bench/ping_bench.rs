//! Ping/post benchmark (run by `bench/ping.sh`, which configures the market with the CLI and
//! starts `leadrelay serve` and the buyers' endpoints): open loops against a running server,
//! each scenario after its baseline in the same process, so both see the same machine load.
//! The baseline is plain ingest (`POST …/leads`, no ping) of the same lead at the same rate.
//!
//! - `fixed`: pings of product `solar`, answered from the fixed-price subscriptions (20 in
//!   bench/ping.sh, with caps and filters), at `--rate` per second.
//! - `bid`: pings of product `heat`, whose only buyers price by bid (5 in bench/ping.sh,
//!   answering after 50 ms), at `--bid-rate` per second; the bids' outcomes from the file.
//! - `autobid`: ordinary leads of `heat` with `triggerAutoDelivery` (no ping), whose only
//!   buyers price by bid (the same 5, answering after 50 ms), at `--bid-rate` per second:
//!   each lead is bid on before its writer job, so it is answered within the bid timeout
//!   plus the routing; the bids' outcomes from the file.
//! - `pairs`: at `--rate` pairs per second, a ping of `solar` and, once it is accepted, the
//!   post of the full lead with its `pingId`; the pair's latency runs from its scheduled time
//!   to the post's answer. Then the file is checked: every accepted ping ended posted (or
//!   says why not), each posted ping's lead has a transaction with each reserved buyer at
//!   the reserved price, every acknowledged post is a lead in the file, and every such
//!   transaction reaches its buyer (delivery `sent`).
//!
//! Latencies count from each request's scheduled time (what a partner sees: a request
//! waiting in the client for a connection counts); `server` is from writing the request to
//! its connection (for a pair, ping and post together); `started_late` is how long after its
//! scheduled time a request's task started (the load generator's own delay, included in the
//! latency).

#[path = "support/pool.rs"]
mod pool;

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use pool::{Answer, Pool};
use serde_json::{Value, json};

struct Settings {
    url: String,
    secret: String,
    db: String,
    phases: Vec<String>,
    rate: f64,
    bid_rate: f64,
    seconds: f64,
    connections: usize,
    /// The bid buyers' timeout (ms), for the bid phase's target.
    bid_timeout_ms: f64,
}

fn settings() -> Settings {
    let mut s = Settings {
        url: String::new(),
        secret: String::new(),
        db: String::new(),
        phases: vec!["fixed".into(), "bid".into(), "pairs".into()],
        rate: 1000.0,
        bid_rate: 200.0,
        seconds: 10.0,
        connections: 2048,
        bid_timeout_ms: 100.0,
    };
    let usage = "usage: ping_bench --url URL --secret S --db FILE [--phases fixed,bid,autobid,pairs] \
                 [--rate N] [--bid-rate N] [--seconds N] [--connections N] [--bid-timeout MS]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_else(|| panic!("{usage}"));
        let number = || -> f64 { value.parse().unwrap_or_else(|_| panic!("{usage}")) };
        match pair[0].as_str() {
            "--url" => s.url = value.clone(),
            "--secret" => s.secret = value.clone(),
            "--db" => s.db = value.clone(),
            "--phases" => s.phases = value.split(',').map(str::to_string).collect(),
            "--rate" => s.rate = number(),
            "--bid-rate" => s.bid_rate = number(),
            "--seconds" => s.seconds = number(),
            "--connections" => s.connections = number() as usize,
            "--bid-timeout" => s.bid_timeout_ms = number(),
            _ => panic!("{usage}"),
        }
    }
    assert!(!s.url.is_empty() && !s.db.is_empty(), "{usage}");
    s
}

const PING: &str = "/api/ping/channels/web/sources/bench";
const INGEST: &str = "/api/webhooks/channels/web/sources/bench/leads";

/// The regions the leads come from: bench/ping.sh's buyers filter on the postal code's
/// first digit.
const REGIONS: [(&str, &str); 10] = [
    ("01067", "Dresden"),
    ("10115", "Berlin"),
    ("20095", "Hamburg"),
    ("30159", "Hannover"),
    ("40213", "Düsseldorf"),
    ("50667", "Köln"),
    ("60311", "Frankfurt"),
    ("70173", "Stuttgart"),
    ("80331", "München"),
    ("90403", "Nürnberg"),
];
const ROOFS: [&str; 3] = ["tile", "flat", "metal"];
/// The phases' tags (baseline and scenario of each), so that no lead of one phase is a
/// duplicate of another's.
const TAGS: [&str; 10] = ["fb", "fa", "fp", "bb", "bp", "pb", "pa", "pp", "ab", "aa"];

/// Lead `n` of a phase (`tag` keeps emails unique across phases, so nothing is a
/// duplicate): what the ping says of it, and the full lead.
struct Lead {
    n: u64,
    tag: &'static str,
    product: &'static str,
}

impl Lead {
    fn email(&self) -> String {
        format!("jane.{}.{}@example.com", self.tag, self.n)
    }
    /// The phone's subscriber number: the phase's digit, then `n`.
    fn subscriber(&self) -> String {
        let phase = TAGS.iter().position(|t| *t == self.tag).unwrap_or(9);
        format!("{phase}{:07}", self.n % 10_000_000)
    }
    fn phone_digits(&self) -> String {
        format!("4930{}", self.subscriber())
    }
    fn region(&self) -> (&'static str, &'static str) {
        REGIONS[(self.n % REGIONS.len() as u64) as usize]
    }
    fn roof(&self) -> &'static str {
        ROOFS[(self.n / REGIONS.len() as u64 % ROOFS.len() as u64) as usize]
    }

    /// The ping: no personal data, the email and phone hashed.
    fn ping(&self) -> Value {
        let (postal_code, city) = self.region();
        json!({
            "externalId": format!("{}-{}", self.tag, self.n),
            "productSlug": self.product,
            "postalCode": postal_code,
            "city": city,
            "country": "DE",
            "consentStatus": "granted",
            "fieldValues": {"roof": self.roof()},
            "emailSha256": leadrelay::secrets::hash(&self.email()),
            "phoneSha256": leadrelay::secrets::hash(&self.phone_digits()),
        })
    }

    /// The full lead (with `ping_id`: its post; with `auto`, sold by auto-delivery).
    fn full(&self, ping_id: Option<&str>, auto: bool) -> Value {
        let (postal_code, city) = self.region();
        let mut lead = json!({
            "externalId": format!("{}-{}", self.tag, self.n),
            "firstName": "Jane",
            "lastName": "Doe",
            "email": self.email(),
            "phone": format!("+49 30 {}", self.subscriber()),
            "street": "Hauptstr.",
            "houseNumber": "1",
            "postalCode": postal_code,
            "city": city,
            "country": "DE",
            "consentStatus": "granted",
            "productSlug": self.product,
            "routingReady": true,
            "fieldValues": {"roof": self.roof()},
        });
        if let Some(id) = ping_id {
            lead["pingId"] = json!(id);
        }
        if auto {
            lead["triggerAutoDelivery"] = json!(true);
        }
        lead
    }
}

fn request(settings: &Settings, path: &str, body: &Value) -> hyper::Request<Full<Bytes>> {
    hyper::Request::post(path)
        .header("host", "bench")
        .header("content-type", "application/json")
        .header("x-service-webhook-secret", &settings.secret)
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a valid request")
}

/// One request's (or pair's) result.
#[derive(Default)]
struct Sample {
    /// From the scheduled time to the (last) answer; `None`: no answer.
    micros: Option<u64>,
    /// The server's part (written → answered), summed over a pair's two requests.
    service_micros: u64,
    /// What came of it: `accepted`, `rejected:REASON`, `STATUS CODE`, …
    outcome: String,
    /// Whether it counts as a success for the latency figures of successes.
    success: bool,
    ping_id: Option<String>,
    /// A pair whose post was acknowledged (201, status accepted).
    posted: bool,
    /// How late the request's task started, from its scheduled time: the load generator's
    /// own delay, part of `micros`.
    late_micros: u64,
}

impl Sample {
    /// A request that got no answer (connection refused or closed).
    fn unanswered(outcome: &str) -> Sample {
        Sample {
            outcome: outcome.into(),
            ..Sample::default()
        }
    }
}

fn error_code(answer: &Answer) -> String {
    let json: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    format!(
        "{} {}",
        answer.status,
        json["error"]["code"].as_str().unwrap_or("?")
    )
}

/// The outcome of a plain ingest answer.
fn ingest_outcome(answer: &Answer) -> (String, bool) {
    if answer.status != 201 {
        return (error_code(answer), false);
    }
    let json: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    let status = json["item"]["status"].as_str().unwrap_or("?").to_string();
    let ok = status == "accepted";
    (format!("201 {status}"), ok)
}

/// The outcome of a ping's answer, and its id when accepted.
fn ping_outcome(answer: &Answer) -> (String, Option<String>) {
    if answer.status != 200 {
        return (error_code(answer), None);
    }
    let json: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    match json["status"].as_str() {
        Some("accepted") => (
            "accepted".into(),
            json["pingId"].as_str().map(str::to_string),
        ),
        Some(status) => (
            format!("{status}:{}", json["reason"].as_str().unwrap_or("?")),
            None,
        ),
        None => ("200 ?".into(), None),
    }
}

/// Runs `job(n, scheduled)` `rate` times a second for `seconds`, each at its scheduled
/// time whether or not earlier ones were answered.
///
/// The pacing runs on a thread of its own with the operating system's sleep (tens of µs
/// late), not tokio's timer: that one fires on whole milliseconds, rounded up, so every
/// request of a step left up to 1 ms after its scheduled time, a delay of the load
/// generator's that its latencies (counted from the scheduled time) then included. They
/// still do count from the scheduled time, so whatever delay is left (the pacing thread's,
/// a task waiting for a worker of this runtime) is in them; [`Sample::late_micros`] shows it.
async fn open_loop<F, Fut>(rate: f64, seconds: f64, job: F) -> Vec<Sample>
where
    F: Fn(u64, Instant) -> Fut + Send + 'static,
    Fut: Future<Output = Sample> + Send + 'static,
{
    let interval = Duration::from_secs_f64(1.0 / rate);
    let total = (rate * seconds) as u64;
    let runtime = tokio::runtime::Handle::current();
    let tasks = tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(total as usize);
        for n in 0..total {
            let scheduled = start + interval.mul_f64(n as f64);
            let wait = scheduled.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            tasks.push(runtime.spawn(job(n, scheduled)));
        }
        tasks
    })
    .await
    .expect("the pacing thread ends");
    let mut samples = Vec::with_capacity(tasks.len());
    for task in tasks {
        samples.push(task.await.expect("a request task ends"));
    }
    samples
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index] as f64 / 1000.0
}

/// The CPU time (user + system) the server has used, in µs, from its `/metrics`
/// (`process_cpu_seconds_total`); `None` when that is off. Less noisy on a shared machine
/// than latency.
async fn cpu_micros(pool: &Pool) -> Option<f64> {
    let request = hyper::Request::get("/metrics")
        .header("host", "bench")
        .body(Full::new(Bytes::new()))
        .expect("a valid request");
    let answer = pool.send(request).await?;
    let text = String::from_utf8_lossy(&answer.body);
    let line = text
        .lines()
        .find(|line| line.starts_with("process_cpu_seconds_total "))?;
    let seconds: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(seconds * 1_000_000.0)
}

/// Runs `step`, with the server's CPU time (µs) over it.
async fn with_cpu<Fut: Future<Output = Vec<Sample>>>(
    pool: &Pool,
    step: Fut,
) -> (Vec<Sample>, Option<f64>) {
    let before = cpu_micros(pool).await;
    let samples = step.await;
    let spent = match (before, cpu_micros(pool).await) {
        (Some(b), Some(a)) => Some(a - b),
        _ => None,
    };
    (samples, spent)
}

/// One line: the outcomes, the latency of successes and of every answer.
fn summary(name: &str, measured: &(Vec<Sample>, Option<f64>), seconds: f64) -> (f64, f64) {
    let (samples, cpu) = measured;
    let mut outcomes: BTreeMap<&str, u64> = BTreeMap::new();
    let mut all: Vec<u64> = Vec::new();
    let mut ok: Vec<u64> = Vec::new();
    let mut server: Vec<u64> = Vec::new();
    let mut late: Vec<u64> = Vec::new();
    let mut no_answer = 0;
    for s in samples {
        *outcomes.entry(&s.outcome).or_default() += 1;
        late.push(s.late_micros);
        match s.micros {
            Some(m) => {
                all.push(m);
                if s.success {
                    ok.push(m);
                    server.push(s.service_micros);
                }
            }
            None => no_answer += 1,
        }
    }
    all.sort_unstable();
    ok.sort_unstable();
    server.sort_unstable();
    late.sort_unstable();
    // Per success: refused requests cost CPU too, and are counted in what the successes
    // cost, so an overloaded step shows it.
    let cpu = match cpu {
        Some(spent) if !ok.is_empty() => format!("{:.0}", spent / ok.len() as f64),
        _ => "?".to_string(),
    };
    println!(
        "  {name}: sent={} server_cpu_us_per_ok={cpu} answered_per_s={:.0} ok={} ok_p50_ms={:.2} ok_p99_ms={:.2} ok_max_ms={:.1} server_p50_ms={:.2} server_p99_ms={:.2} all_p99_ms={:.2} started_late_p50_ms={:.2} started_late_p99_ms={:.2} no_answer={no_answer} outcomes={outcomes:?}",
        samples.len(),
        all.len() as f64 / seconds,
        ok.len(),
        percentile(&ok, 0.5),
        percentile(&ok, 0.99),
        percentile(&ok, 1.0),
        percentile(&server, 0.5),
        percentile(&server, 0.99),
        percentile(&all, 0.99),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
    );
    (percentile(&ok, 0.5), percentile(&ok, 0.99))
}

struct Bench {
    settings: Arc<Settings>,
    pool: Arc<Pool>,
}

impl Bench {
    /// Ingest of lead `n` of `tag`: plain (stored, not routed), or with `auto` routed and
    /// delivered by auto-delivery in the same writer job (what a ping and its post do in
    /// two).
    async fn ingest(
        &self,
        rate: f64,
        tag: &'static str,
        product: &'static str,
        auto: bool,
    ) -> Vec<Sample> {
        let (settings, pool) = (self.settings.clone(), self.pool.clone());
        open_loop(rate, settings.seconds, move |n, scheduled| {
            let (settings, pool) = (settings.clone(), pool.clone());
            async move {
                let late_micros = scheduled.elapsed().as_micros() as u64;
                let lead = Lead { n, tag, product };
                let answer = pool
                    .send(request(&settings, INGEST, &lead.full(None, auto)))
                    .await;
                let Some(answer) = answer else {
                    return Sample::unanswered("no answer");
                };
                let (outcome, success) = ingest_outcome(&answer);
                Sample {
                    micros: Some(scheduled.elapsed().as_micros() as u64),
                    service_micros: answer.service_micros,
                    outcome,
                    success,
                    late_micros,
                    ..Sample::default()
                }
            }
        })
        .await
    }

    /// Pings of lead `n` of `tag`; with `post`, each accepted one is posted.
    async fn pings(
        &self,
        rate: f64,
        tag: &'static str,
        product: &'static str,
        post: bool,
    ) -> Vec<Sample> {
        let (settings, pool) = (self.settings.clone(), self.pool.clone());
        open_loop(rate, settings.seconds, move |n, scheduled| {
            let (settings, pool) = (settings.clone(), pool.clone());
            async move {
                let late_micros = scheduled.elapsed().as_micros() as u64;
                let lead = Lead { n, tag, product };
                let Some(answer) = pool.send(request(&settings, PING, &lead.ping())).await else {
                    return Sample::unanswered("no answer");
                };
                let (outcome, ping_id) = ping_outcome(&answer);
                let mut sample = Sample {
                    micros: Some(scheduled.elapsed().as_micros() as u64),
                    service_micros: answer.service_micros,
                    success: ping_id.is_some(),
                    outcome,
                    ping_id: ping_id.clone(),
                    posted: false,
                    late_micros,
                };
                let (true, Some(id)) = (post, ping_id) else {
                    if post {
                        sample.outcome = format!("ping {}", sample.outcome);
                        sample.success = false;
                    }
                    return sample;
                };
                let Some(answer) = pool
                    .send(request(&settings, INGEST, &lead.full(Some(&id), false)))
                    .await
                else {
                    sample.outcome = "post no answer".into();
                    sample.success = false;
                    sample.micros = None;
                    return sample;
                };
                let (outcome, posted) = ingest_outcome(&answer);
                sample.micros = Some(scheduled.elapsed().as_micros() as u64);
                sample.service_micros += answer.service_micros;
                sample.outcome = format!("post {outcome}");
                sample.success = posted;
                sample.posted = posted;
                sample
            }
        })
        .await
    }
}

fn open(db: &str) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("the database opens")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// The bids recorded since `since_ms` (a ping's or a lead's): count and latency by outcome.
fn bid_outcomes(db: &str, since_ms: i64) {
    let conn = open(db);
    let mut statement = conn
        .prepare(
            "SELECT outcome, count(*), sum(won), max(latency_ms) FROM bids
             WHERE created_at >= ?1 GROUP BY outcome ORDER BY outcome",
        )
        .expect("the query prepares");
    let rows: Vec<(String, i64, i64, i64)> = statement
        .query_map([since_ms], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .expect("the bids are read")
        .collect::<Result<_, _>>()
        .expect("the bids are read");
    let text: Vec<String> = rows
        .iter()
        .map(|(outcome, n, won, max)| format!("{outcome}={n} (won {won}, max {max} ms)"))
        .collect();
    println!("  bids recorded: {}", text.join(", "));
}

/// The pairs' accounting from the file: every reservation of a posted ping honoured, every
/// acknowledged post a lead, and the deliveries sent.
fn check_pairs(db: &str, samples: &[Sample]) {
    let accepted: Vec<&str> = samples
        .iter()
        .filter_map(|s| s.ping_id.as_deref())
        .collect();
    let acknowledged: HashSet<&str> = samples
        .iter()
        .filter(|s| s.posted)
        .filter_map(|s| s.ping_id.as_deref())
        .collect();
    let conn = open(db);
    let mut by_status: BTreeMap<String, u64> = BTreeMap::new();
    let (mut reservations, mut honoured, mut foreign, mut lost, mut unacknowledged) =
        (0i64, 0i64, 0i64, 0u64, 0u64);
    let mut leads = Vec::new();
    let mut read = conn
        .prepare(
            "SELECT p.status, p.lead_id,
                    (SELECT count(*) FROM ping_reservations r WHERE r.ping_id = p.id),
                    (SELECT count(*) FROM ping_reservations r WHERE r.ping_id = p.id
                       AND EXISTS (SELECT 1 FROM transactions t WHERE t.lead_id = p.lead_id
                                   AND t.buyer_id = r.buyer_id
                                   AND t.buyer_price_cents = r.price_cents)),
                    (SELECT count(*) FROM transactions t WHERE t.lead_id = p.lead_id
                       AND NOT EXISTS (SELECT 1 FROM ping_reservations r WHERE r.ping_id = p.id
                                       AND r.buyer_id = t.buyer_id)),
                    EXISTS (SELECT 1 FROM leads l WHERE l.id = p.lead_id)
             FROM pings p WHERE p.id = ?1",
        )
        .expect("the query prepares");
    for id in &accepted {
        // The lead id as stored (text or, from migration 20 on, 16 bytes), bound back as is.
        let (status, lead_id, reserved, kept, other, stored): (
            String,
            Option<rusqlite::types::Value>,
            i64,
            i64,
            i64,
            bool,
        ) = read
            .query_row([id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .expect("every accepted ping is in the file");
        *by_status.entry(status.clone()).or_default() += 1;
        let was_acknowledged = acknowledged.contains(id);
        if was_acknowledged && (status != "posted" || !stored) {
            lost += 1;
        }
        if status == "posted" {
            if !was_acknowledged {
                unacknowledged += 1;
            }
            reservations += reserved;
            honoured += kept;
            foreign += other;
            if let Some(lead) = lead_id.filter(|v| *v != rusqlite::types::Value::Null) {
                leads.push(lead);
            }
        }
    }
    println!(
        "  accounting: accepted_pings={} acknowledged_posts={} pings_by_status={by_status:?} reservations_of_posted={reservations} honoured={honoured} not_honoured={} transactions_to_other_buyers={foreign} acknowledged_but_missing={lost} posted_but_unacknowledged={unacknowledged}",
        accepted.len(),
        acknowledged.len(),
        reservations - honoured,
    );
    // The outbox sends what was committed; wait (up to a minute) until it has.
    let started = Instant::now();
    let count = |state: &str| -> i64 {
        let mut total = 0;
        let mut statement = conn
            .prepare_cached(
                "SELECT count(*) FROM transactions WHERE lead_id = ?1 AND delivery_status = ?2",
            )
            .expect("the query prepares");
        for lead in &leads {
            total += statement
                .query_row(rusqlite::params![lead, state], |r| r.get::<_, i64>(0))
                .expect("the transactions are counted");
        }
        total
    };
    let mut pending = count("pending");
    while pending > 0 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        pending = count("pending");
    }
    println!(
        "  deliveries of the posted leads: sent={} failed={} pending={pending} (after {:.1} s)",
        count("sent"),
        count("failed"),
        started.elapsed().as_secs_f64()
    );
}

fn main() {
    let settings = Arc::new(settings());
    let runtime = pool::runtime();
    let pool = Arc::new(Pool::new(&settings.url, settings.connections));
    let bench = Bench {
        settings: settings.clone(),
        pool: pool.clone(),
    };
    let secs = settings.seconds;
    runtime.block_on(async {
        for phase in &settings.phases {
            match phase.as_str() {
                "fixed" => {
                    println!(
                        "fixed: pings of solar answered from fixed-price subscriptions, {} /s open loop, {secs} s (target: p99 < 5 ms)",
                        settings.rate
                    );
                    let base = with_cpu(&pool, bench.ingest(settings.rate, "fb", "solar", false)).await;
                    summary("baseline plain ingest", &base, secs);
                    let auto = with_cpu(&pool, bench.ingest(settings.rate, "fa", "solar", true)).await;
                    summary("baseline ingest + auto-delivery", &auto, secs);
                    let pings = with_cpu(&pool, bench.pings(settings.rate, "fp", "solar", false)).await;
                    let (_, p99) = summary("pings", &pings, secs);
                    print_target(p99, 5.0);
                }
                "bid" => {
                    println!(
                        "bid: pings of heat to 5 bid buyers answering in 50 ms (timeout {} ms), {} /s open loop, {secs} s (target: p99 < {} ms)",
                        settings.bid_timeout_ms,
                        settings.bid_rate,
                        settings.bid_timeout_ms + 10.0
                    );
                    let base = with_cpu(&pool, bench.ingest(settings.bid_rate, "bb", "heat", false)).await;
                    summary("baseline plain ingest", &base, secs);
                    let since = now_ms();
                    let pings = with_cpu(&pool, bench.pings(settings.bid_rate, "bp", "heat", false)).await;
                    let (_, p99) = summary("pings", &pings, secs);
                    bid_outcomes(&settings.db, since);
                    print_target(p99, settings.bid_timeout_ms + 10.0);
                }
                "autobid" => {
                    println!(
                        "autobid: auto-delivered leads of heat (no ping) to 5 bid buyers answering in 50 ms (timeout {} ms), {} /s open loop, {secs} s (target: p99 < {} ms)",
                        settings.bid_timeout_ms,
                        settings.bid_rate,
                        settings.bid_timeout_ms + 10.0
                    );
                    let base = with_cpu(&pool, bench.ingest(settings.bid_rate, "ab", "heat", false)).await;
                    summary("baseline plain ingest", &base, secs);
                    let since = now_ms();
                    let auto = with_cpu(&pool, bench.ingest(settings.bid_rate, "aa", "heat", true)).await;
                    let (_, p99) = summary("ingest + bids + auto-delivery", &auto, secs);
                    bid_outcomes(&settings.db, since);
                    print_target(p99, settings.bid_timeout_ms + 10.0);
                }
                "pairs" => {
                    println!(
                        "pairs: ping then post of solar, {} pairs/s open loop, {secs} s",
                        settings.rate
                    );
                    let base = with_cpu(&pool, bench.ingest(settings.rate, "pb", "solar", false)).await;
                    summary("baseline plain ingest", &base, secs);
                    let auto = with_cpu(&pool, bench.ingest(settings.rate, "pa", "solar", true)).await;
                    summary("baseline ingest + auto-delivery", &auto, secs);
                    let pairs = with_cpu(&pool, bench.pings(settings.rate, "pp", "solar", true)).await;
                    summary("pairs (ping → post)", &pairs, secs);
                    let db = settings.db.clone();
                    tokio::task::spawn_blocking(move || check_pairs(&db, &pairs.0))
                        .await
                        .expect("the check ends");
                }
                other => panic!("unknown phase {other}"),
            }
        }
        println!(
            "connections opened: {}",
            pool.opened.load(Ordering::Relaxed)
        );
    });
}

/// Prints whether a phase's p99 met its target (milliseconds).
fn print_target(p99: f64, target_ms: f64) {
    let verdict = if p99 < target_ms { "met" } else { "MISSED" };
    println!("  target p99 < {target_ms} ms: {verdict}");
}
