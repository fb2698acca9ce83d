//! Overload benchmark (run by `bench/overload.sh`): what a running `leadrelay serve` does
//! when partners send more than it can take.
//!
//! 1. calibration: a closed loop of 64 connections sends new leads as fast as the server
//!    answers; the answers per second are the sustainable rate S;
//! 2. open loops, one per factor F (default 1 then 4): F × S requests per second (each request scheduled
//!    at a fixed time, sent whether or not earlier ones were answered, on up to
//!    `--connections` keep-alive connections), so the server meets more than it can do.
//!
//! It prints, per phase, the answers by status and code, and for accepted requests two
//! latencies: from the moment each was scheduled (a request waiting in the client for a free
//! connection counts: what a partner would see) and from the moment it was written to its
//! connection (the server's part alone); and finally compares the leads the server acknowledged (2xx, status accepted) with the rows
//! in the database file: nothing acknowledged may be missing, and nothing refused may be
//! there.

#[path = "support/pool.rs"]
mod pool;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use pool::{Answer, Pool};

struct Settings {
    url: String,
    path: String,
    secret: String,
    db: String,
    /// The open-loop phases, each offering this many times the sustainable rate.
    factors: Vec<f64>,
    calibrate_secs: u64,
    overload_secs: u64,
    connections: usize,
    batch: usize,
}

fn settings() -> Settings {
    let mut settings = Settings {
        url: String::new(),
        path: "/api/webhooks/channels/web/sources/bench/leads".into(),
        secret: String::new(),
        db: String::new(),
        factors: vec![1.0, 4.0],
        calibrate_secs: 10,
        overload_secs: 15,
        connections: 2048,
        batch: 1,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_else(|| {
            panic!("usage: overload_bench --url URL --secret S --db FILE [--factors 1,4] [--calibrate-secs N] [--overload-secs N] [--connections N] [--batch N]")
        });
        match pair[0].as_str() {
            "--url" => settings.url = value,
            "--path" => settings.path = value,
            "--secret" => settings.secret = value,
            "--db" => settings.db = value,
            "--factors" => {
                settings.factors = value
                    .split(',')
                    .map(|f| f.parse().expect("numbers"))
                    .collect()
            }
            "--calibrate-secs" => settings.calibrate_secs = value.parse().expect("a number"),
            "--overload-secs" => settings.overload_secs = value.parse().expect("a number"),
            "--connections" => settings.connections = value.parse().expect("a number"),
            "--batch" => settings.batch = value.parse().expect("a number"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        !settings.url.is_empty() && !settings.db.is_empty(),
        "--url and --db are needed"
    );
    settings
}

/// New leads, each unique (external id, email, phone), as request bodies.
struct Leads {
    next: AtomicU64,
    batch: usize,
}

impl Leads {
    fn body(&self) -> Bytes {
        let lead = |n: u64| {
            format!(
                r#"{{"externalId":"ov-{n}","firstName":"Jane","lastName":"Doe","email":"jane.{n}@example.com","phone":"+49 30 {:07}","street":"Hauptstr.","houseNumber":"1","postalCode":"10115","city":"Berlin","country":"DE","consentStatus":"granted","productSlug":"solar","routingReady":true,"fieldValues":{{"roof":"tile"}}}}"#,
                n % 10_000_000
            )
        };
        let first = self.next.fetch_add(self.batch as u64, Ordering::Relaxed);
        if self.batch == 1 {
            return Bytes::from(lead(first));
        }
        let leads: Vec<String> = (first..first + self.batch as u64).map(lead).collect();
        Bytes::from(format!(r#"{{"leads":[{}]}}"#, leads.join(",")))
    }
}

/// What one phase saw.
#[derive(Default)]
struct Tally {
    statuses: BTreeMap<u16, u64>,
    /// Answers by error code (503s and others).
    codes: BTreeMap<String, u64>,
    /// From the scheduled time.
    accepted_micros: Vec<u64>,
    /// From the moment the request went out on its connection.
    accepted_service_micros: Vec<u64>,
    refused_micros: Vec<u64>,
    /// Leads the server acknowledged as accepted (2xx, per-lead status accepted).
    acknowledged_leads: u64,
    /// Requests that got no answer (connection errors).
    no_answer: u64,
}

impl Tally {
    fn record(&mut self, answer: &Answer, micros: u64) {
        let (status, body) = (answer.status, &answer.body);
        *self.statuses.entry(status).or_default() += 1;
        let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        if (200..300).contains(&status) {
            self.accepted_micros.push(micros);
            self.accepted_service_micros.push(answer.service_micros);
            let items: Vec<&serde_json::Value> = match json.get("items") {
                Some(items) => items
                    .as_array()
                    .map(|a| a.iter().collect())
                    .unwrap_or_default(),
                None => json.get("item").into_iter().collect(),
            };
            self.acknowledged_leads += items
                .iter()
                .filter(|item| item["status"] == "accepted")
                .count() as u64;
        } else {
            self.refused_micros.push(micros);
            let code = json["error"]["code"].as_str().unwrap_or("?").to_string();
            *self.codes.entry(code).or_default() += 1;
        }
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index] as f64 / 1000.0
}

fn summary(tally: &mut Tally, seconds: f64) -> String {
    tally.accepted_micros.sort_unstable();
    tally.accepted_service_micros.sort_unstable();
    tally.refused_micros.sort_unstable();
    let accepted = tally.accepted_micros.len() as f64;
    format!(
        "accepted_per_s={:.0} leads_per_s={:.0} accepted_p50_ms={:.1} accepted_p99_ms={:.1} accepted_max_ms={:.1} server_p50_ms={:.1} server_p99_ms={:.1} server_max_ms={:.1} refused={} refused_p99_ms={:.1} no_answer={} statuses={:?} codes={:?}",
        accepted / seconds,
        tally.acknowledged_leads as f64 / seconds,
        percentile(&tally.accepted_micros, 0.5),
        percentile(&tally.accepted_micros, 0.99),
        percentile(&tally.accepted_micros, 1.0),
        percentile(&tally.accepted_service_micros, 0.5),
        percentile(&tally.accepted_service_micros, 0.99),
        percentile(&tally.accepted_service_micros, 1.0),
        tally.refused_micros.len(),
        percentile(&tally.refused_micros, 0.99),
        tally.no_answer,
        tally.statuses,
        tally.codes
    )
}

fn request(settings: &Settings, body: Bytes) -> hyper::Request<Full<Bytes>> {
    hyper::Request::post(&settings.path)
        .header("host", "bench")
        .header("content-type", "application/json")
        .header("x-service-webhook-secret", &settings.secret)
        .body(Full::new(body))
        .expect("a valid request")
}

/// Sends one request of new leads and records its answer, with its latency counted from
/// `since` (when it was sent, or when it was scheduled).
async fn send_one(
    settings: &Settings,
    leads: &Leads,
    pool: &Pool,
    tally: &Mutex<Tally>,
    since: Instant,
) {
    let answer = pool.send(request(settings, leads.body())).await;
    let micros = since.elapsed().as_micros() as u64;
    let mut tally = tally.lock().expect("not poisoned");
    match answer {
        Some(answer) => tally.record(&answer, micros),
        None => tally.no_answer += 1,
    }
}

async fn calibrate(settings: &Arc<Settings>, leads: &Arc<Leads>, pool: &Arc<Pool>) -> (f64, Tally) {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let end = Instant::now() + Duration::from_secs(settings.calibrate_secs);
    let started = Instant::now();
    let loops: Vec<_> = (0..64)
        .map(|_| {
            let (settings, leads, pool, tally) =
                (settings.clone(), leads.clone(), pool.clone(), tally.clone());
            tokio::spawn(async move {
                while Instant::now() < end {
                    send_one(&settings, &leads, &pool, &tally, Instant::now()).await;
                }
            })
        })
        .collect();
    for handle in loops {
        handle.await.expect("a calibration loop ends");
    }
    let seconds = started.elapsed().as_secs_f64();
    let tally = Arc::try_unwrap(tally)
        .ok()
        .expect("the loops ended")
        .into_inner()
        .expect("not poisoned");
    let rate = tally.statuses.get(&201).copied().unwrap_or(0) as f64 / seconds;
    (rate, tally)
}

async fn overload(
    settings: &Arc<Settings>,
    leads: &Arc<Leads>,
    pool: &Arc<Pool>,
    rate: f64,
) -> Tally {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let interval = Duration::from_secs_f64(1.0 / rate);
    let total = (rate * settings.overload_secs as f64) as u64;
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for n in 0..total {
        let scheduled = start + interval.mul_f64(n as f64);
        tokio::time::sleep_until(scheduled.into()).await;
        let (settings, leads, pool, tally) =
            (settings.clone(), leads.clone(), pool.clone(), tally.clone());
        tasks.push(tokio::spawn(async move {
            send_one(&settings, &leads, &pool, &tally, scheduled).await;
        }));
    }
    for task in tasks {
        task.await.expect("a request task ends");
    }
    Arc::try_unwrap(tally)
        .ok()
        .expect("the tasks ended")
        .into_inner()
        .expect("not poisoned")
}

fn rows_in(db: &str) -> i64 {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("the database opens");
    conn.query_row("SELECT count(*) FROM leads", [], |row| row.get(0))
        .expect("the leads are counted")
}

fn main() {
    let settings = Arc::new(settings());
    let runtime = pool::runtime();
    runtime.block_on(async {
        let leads = Arc::new(Leads {
            next: AtomicU64::new(0),
            batch: settings.batch,
        });
        let pool = Arc::new(Pool::new(&settings.url, settings.connections));
        let (rate, mut calibration) = calibrate(&settings, &leads, &pool).await;
        println!(
            "calibration (closed loop, 64 connections, {} s): sustainable={rate:.0} req/s {}",
            settings.calibrate_secs,
            summary(&mut calibration, settings.calibrate_secs as f64)
        );
        let mut acknowledged = calibration.acknowledged_leads;
        for factor in &settings.factors {
            let offered = rate * factor;
            let mut tally = overload(&settings, &leads, &pool, offered).await;
            println!(
                "open loop at {factor}x ({:.0} req/s offered, {} s, up to {} connections, {} opened so far): {}",
                offered,
                settings.overload_secs,
                settings.connections,
                pool.opened.load(Ordering::Relaxed),
                summary(&mut tally, settings.overload_secs as f64)
            );
            acknowledged += tally.acknowledged_leads;
        }
        let rows = rows_in(&settings.db);
        println!(
            "durability: acknowledged_leads={acknowledged} rows_in_file={rows} lost={} unacknowledged_rows={}",
            (acknowledged as i64 - rows).max(0),
            (rows - acknowledged as i64).max(0)
        );
    });
}
