//! Soak test driver (run by `bench/soak.sh`): starts the release binary on a fresh database
//! with a local webhook receiver, measures the maximum rate of a mixed load (single and
//! batch ingest with automated delivery, the buyer lifecycle walk, health), then runs the
//! same mix at half that rate for a fixed time and reports errors, latency percentiles per
//! kind, the server's resident memory over time, and whether every event was delivered.
//!
//! ```text
//! cargo run --release --example soak -- --bin target/release/leadrelay --work /tmp/soak \
//!     --measure 20 --duration 600
//! ```
//!
//! All traffic goes to 127.0.0.1; the run ends by itself after `--measure + --duration`
//! seconds plus a bounded drain.

use std::collections::{HashSet, VecDeque};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SOURCE_SECRET: &str = "soak-source-secret-0123456789abcdef";
const BUYER_SECRET: &str = "soak-buyer-secret-0123456789abcdef";
const INGEST: &str = "/api/webhooks/channels/web/sources/soak/leads";

struct Options {
    bin: PathBuf,
    work: PathBuf,
    measure_secs: u64,
    duration_secs: u64,
    clients: usize,
    rate: Option<f64>,
}

fn options() -> Options {
    let mut options = Options {
        bin: PathBuf::from("target/release/leadrelay"),
        work: std::env::temp_dir().join("leadrelay-soak"),
        measure_secs: 20,
        duration_secs: 600,
        clients: 32,
        rate: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        let number = || value.parse::<u64>().expect("a number");
        match pair[0].as_str() {
            "--bin" => options.bin = PathBuf::from(&value),
            "--work" => options.work = PathBuf::from(&value),
            "--measure" => options.measure_secs = number(),
            "--duration" => options.duration_secs = number(),
            "--clients" => options.clients = number() as usize,
            "--rate" => options.rate = Some(value.parse().expect("a rate")),
            other => panic!("unknown option {other}"),
        }
    }
    options
}

/// The kinds of operation in the mix, for per-kind figures.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Single,
    Batch,
    Lifecycle,
    Health,
}

const KINDS: [Kind; 4] = [Kind::Single, Kind::Batch, Kind::Lifecycle, Kind::Health];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Single => "ingest single",
            Kind::Batch => "ingest batch of 10",
            Kind::Lifecycle => "lifecycle call",
            Kind::Health => "health",
        }
    }
}

/// Latencies (µs) and errors per kind.
#[derive(Default)]
struct Record {
    latencies: [Vec<u32>; 4],
    errors: [u64; 4],
    error_samples: Vec<String>,
}

impl Record {
    fn add(&mut self, kind: Kind, micros: u32, error: Option<String>) {
        let index = KINDS.iter().position(|k| *k == kind).expect("a known kind");
        self.latencies[index].push(micros);
        if let Some(error) = error {
            self.errors[index] += 1;
            if self.error_samples.len() < 10 {
                self.error_samples.push(error);
            }
        }
    }

    fn merge(&mut self, other: Record) {
        for (mine, theirs) in self.latencies.iter_mut().zip(other.latencies) {
            mine.extend(theirs);
        }
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors) {
            *mine += theirs;
        }
        self.error_samples.extend(other.error_samples);
    }

    fn operations(&self) -> usize {
        self.latencies.iter().map(Vec::len).sum()
    }

    fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    f64::from(sorted[rank]) / 1000.0
}

/// Transactions waiting for their next buyer call, and what automated delivery did.
struct Shared {
    /// (transaction id, calls made so far).
    transactions: Mutex<VecDeque<(String, u8)>>,
    /// Lead requests to deliver with `leadrelay deliver` when automated delivery is absent.
    undelivered: Mutex<VecDeque<String>>,
    auto_delivery_seen: AtomicBool,
    sequence: AtomicU64,
    events_received: AtomicU64,
    event_ids: Mutex<HashSet<String>>,
}

/// The local webhook receiver: answers 200 and queues each delivered transaction for its
/// lifecycle walk.
fn start_receiver(shared: Arc<Shared>) -> String {
    use http_body_util::{BodyExt, Full};
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;

    let (ready, bound) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime starts");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("port 0 binds");
            ready
                .send(listener.local_addr().expect("bound"))
                .expect("main waits");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let shared = shared.clone();
                            async move {
                                let id = request
                                    .headers()
                                    .get("webhook-id")
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or("")
                                    .to_string();
                                let body = request
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|c| c.to_bytes())
                                    .unwrap_or_default();
                                let event: Value =
                                    serde_json::from_slice(&body).unwrap_or(Value::Null);
                                shared.events_received.fetch_add(1, Ordering::Relaxed);
                                let fresh =
                                    shared.event_ids.lock().expect("not poisoned").insert(id);
                                if fresh && let Some(txn) = event["transactionId"].as_str() {
                                    shared
                                        .transactions
                                        .lock()
                                        .expect("not poisoned")
                                        .push_back((txn.to_string(), 0));
                                }
                                Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                    bytes::Bytes::new(),
                                )))
                            }
                        });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    format!("http://{}/hook", bound.recv().expect("the receiver binds"))
}

fn cli(bin: &Path, db: &Path, args: &[&str]) -> Value {
    let output = Command::new(bin)
        .arg("--db")
        .arg(db)
        .arg("--json")
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "leadrelay {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
}

fn start_server(bin: &Path, db: &Path) -> (Child, String) {
    let mut child = Command::new(bin)
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0", "--rate-limit", "0"])
        .args(["--console-listen", "off"])
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the server starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("the server prints its address");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("an address")
        .to_string();
    (child, format!("http://{addr}"))
}

/// Resident memory of `pid` in MiB, from /proc.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn lead(n: u64) -> Value {
    json!({
        "externalId": format!("soak-{n}"),
        "firstName": "Ann",
        "lastName": "Lee",
        "email": format!("soak{n}@example.com"),
        "phone": format!("+49 30 {:08}", n % 100_000_000),
        "street": "Hauptstr.",
        "houseNumber": "1",
        "postalCode": "10115",
        "city": "Berlin",
        "country": "DE",
        "consentStatus": "granted",
        "consentCapturedAt": "2026-01-06T10:00:00Z",
        "productSlug": "solar",
        "triggerAutoDelivery": true,
    })
}

struct Client {
    agent: ureq::Agent,
    base: String,
    shared: Arc<Shared>,
    random: u64,
}

impl Client {
    fn new(base: &str, shared: Arc<Shared>, seed: u64) -> Client {
        Client {
            agent: ureq::Agent::new_with_config(
                ureq::config::Config::builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(30)))
                    .build(),
            ),
            base: base.to_string(),
            shared,
            random: seed | 1,
        }
    }

    fn roll(&mut self, n: u64) -> u64 {
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        self.random % n
    }

    fn post(&self, path: &str, secret: &str, body: &Value) -> Result<(u16, Value), String> {
        let mut response = self
            .agent
            .post(&format!("{}{path}", self.base))
            .header("X-Service-Webhook-Secret", secret)
            .header("Content-Type", "application/json")
            .send(body.to_string().as_bytes())
            .map_err(|e| format!("{path}: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("{path}: {e}"))?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// One operation of the mix: 30% a buyer call on a delivered transaction (a single
    /// ingest when none is waiting), 5% health, 10% a batch of 10, the rest a single lead.
    /// Returns its kind, latency and error, if any.
    fn operate(&mut self) -> (Kind, u32, Option<String>) {
        let roll = self.roll(100);
        let next_call = if roll < 30 {
            self.shared
                .transactions
                .lock()
                .expect("not poisoned")
                .pop_front()
        } else {
            None
        };
        let started = Instant::now();
        let (kind, result) = if let Some((txn, calls)) = next_call {
            (Kind::Lifecycle, self.lifecycle(&txn, calls))
        } else if (30..35).contains(&roll) {
            let result = self
                .agent
                .get(&format!("{}/api/health", self.base))
                .call()
                .map_err(|e| e.to_string())
                .and_then(|r| match r.status().as_u16() {
                    200 => Ok(()),
                    s => Err(format!("health {s}")),
                });
            (Kind::Health, result)
        } else if (35..45).contains(&roll) {
            let leads: Vec<Value> = (0..10)
                .map(|_| lead(self.shared.sequence.fetch_add(1, Ordering::Relaxed)))
                .collect();
            (Kind::Batch, self.ingest(&json!({"leads": leads})))
        } else {
            let n = self.shared.sequence.fetch_add(1, Ordering::Relaxed);
            (Kind::Single, self.ingest(&lead(n)))
        };
        let micros = u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX);
        (kind, micros, result.err())
    }

    fn ingest(&self, body: &Value) -> Result<(), String> {
        let (status, answer) = self.post(INGEST, SOURCE_SECRET, body)?;
        if status != 201 {
            return Err(format!("ingest {status}: {answer}"));
        }
        let items: Vec<&Value> = match answer["items"].as_array() {
            Some(items) => items.iter().collect(),
            None => vec![&answer["item"]],
        };
        for item in items {
            if item.get("autoDelivery").is_some() {
                self.shared
                    .auto_delivery_seen
                    .store(true, Ordering::Relaxed);
            } else if let Some(request) = item["requestIds"][0].as_str() {
                let mut queue = self.shared.undelivered.lock().expect("not poisoned");
                if queue.len() < 10_000 {
                    queue.push_back(request.to_string());
                }
            }
        }
        Ok(())
    }

    /// The buyer's walk: acknowledge (or reject), payout pending, payout; now and then a
    /// cancellation instead.
    fn lifecycle(&mut self, txn: &str, calls: u8) -> Result<(), String> {
        let roll = self.roll(10);
        let (path, body, next) = match calls {
            0 if roll == 0 => (
                "/api/webhooks/partner-confirmation",
                json!({"transactionId": txn, "status": "rejected", "reason": "not reachable"}),
                None,
            ),
            0 => (
                "/api/webhooks/partner-confirmation",
                json!({"transactionId": txn, "status": "acknowledged"}),
                Some(1),
            ),
            1 if roll == 0 => (
                "/api/webhooks/partner-cancellation",
                json!({"transactionId": txn, "reason": "customer withdrew"}),
                None,
            ),
            1 => (
                "/api/webhooks/partner-payout-pending",
                json!({"transactionId": txn}),
                Some(2),
            ),
            _ => (
                "/api/webhooks/partner-payout",
                json!({"transactionId": txn}),
                None,
            ),
        };
        let (status, answer) = self.post(path, BUYER_SECRET, &body)?;
        if status != 200 {
            return Err(format!("{path} {status}: {answer}"));
        }
        if let Some(next) = next {
            self.shared
                .transactions
                .lock()
                .expect("not poisoned")
                .push_back((txn.to_string(), next));
        }
        Ok(())
    }
}

/// Delivers lead requests with `leadrelay deliver` (at most 20 a second) while automated
/// delivery is not there to do it.
fn cli_deliverer(bin: PathBuf, db: PathBuf, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let next = shared.undelivered.lock().expect("not poisoned").pop_front();
        match next {
            Some(request) if !shared.auto_delivery_seen.load(Ordering::Relaxed) => {
                let _ = Command::new(&bin)
                    .arg("--db")
                    .arg(&db)
                    .args(["--json", "deliver", "--request", &request, "--buyer", "b"])
                    .env("RUST_LOG", "error")
                    .output();
                std::thread::sleep(Duration::from_millis(50));
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Closed loop: `clients` threads as fast as they can for `seconds`. Operations per second.
fn measure_max(base: &str, shared: &Arc<Shared>, clients: usize, seconds: u64) -> (f64, Record) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..clients)
        .map(|n| {
            let mut client = Client::new(base, shared.clone(), 0x5eed + n as u64);
            std::thread::spawn(move || {
                let mut record = Record::default();
                while Instant::now() < deadline {
                    let (kind, micros, error) = client.operate();
                    record.add(kind, micros, error);
                }
                record
            })
        })
        .collect();
    let mut record = Record::default();
    for thread in threads {
        record.merge(thread.join().expect("a client thread does not panic"));
    }
    (record.operations() as f64 / seconds as f64, record)
}

/// Open loop at `rate` operations per second for `seconds`: operation i starts at
/// `i / rate`, whatever happened to the ones before (latency includes no client queueing).
fn run_at_rate(
    base: &str,
    shared: &Arc<Shared>,
    workers: usize,
    rate: f64,
    seconds: u64,
) -> (Record, u64) {
    let started = Instant::now();
    let total = (rate * seconds as f64) as u64;
    let ticket = Arc::new(AtomicU64::new(0));
    let late = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..workers)
        .map(|n| {
            let mut client = Client::new(base, shared.clone(), 0xabcd + n as u64);
            let (ticket, late) = (ticket.clone(), late.clone());
            std::thread::spawn(move || {
                let mut record = Record::default();
                loop {
                    let i = ticket.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let due = started + Duration::from_secs_f64(i as f64 / rate);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    } else if now - due > Duration::from_millis(100) {
                        late.fetch_add(1, Ordering::Relaxed);
                    }
                    let (kind, micros, error) = client.operate();
                    record.add(kind, micros, error);
                }
                record
            })
        })
        .collect();
    let mut record = Record::default();
    for thread in threads {
        record.merge(thread.join().expect("a client thread does not panic"));
    }
    (record, late.load(Ordering::Relaxed))
}

fn report(title: &str, record: &mut Record, seconds: f64) {
    println!(
        "{title}: {} operations in {seconds:.0} s ({:.0}/s), errors {}",
        record.operations(),
        record.operations() as f64 / seconds,
        record.total_errors()
    );
    let mut all: Vec<u32> = Vec::with_capacity(record.operations());
    for (index, kind) in KINDS.iter().enumerate() {
        let latencies = &mut record.latencies[index];
        latencies.sort_unstable();
        all.extend_from_slice(latencies);
        println!(
            "  {:<20} {:>8} ops  errors {:>4}  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>8.2} ms",
            kind.name(),
            latencies.len(),
            record.errors[index],
            percentile(latencies, 50.0),
            percentile(latencies, 99.0),
            percentile(latencies, 100.0),
        );
    }
    all.sort_unstable();
    println!(
        "  {:<20} {:>8} ops  errors {:>4}  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>8.2} ms",
        "all",
        all.len(),
        record.total_errors(),
        percentile(&all, 50.0),
        percentile(&all, 99.0),
        percentile(&all, 100.0),
    );
    for sample in &record.error_samples {
        println!("  error: {sample}");
    }
}

fn main() {
    let options = options();
    std::fs::create_dir_all(&options.work).expect("the work directory can be made");
    let db = options.work.join("soak.db");
    let _ = std::fs::remove_file(&db);
    let shared = Arc::new(Shared {
        transactions: Mutex::new(VecDeque::new()),
        undelivered: Mutex::new(VecDeque::new()),
        auto_delivery_seen: AtomicBool::new(false),
        sequence: AtomicU64::new(0),
        events_received: AtomicU64::new(0),
        event_ids: Mutex::new(HashSet::new()),
    });
    let hook = start_receiver(shared.clone());
    let bin = &options.bin;
    // Commands other than `init` refuse a database that does not exist.
    cli(bin, &db, &["init"]);
    cli(
        bin,
        &db,
        &["workspace", "create", "--name", "Soak", "--id", "ws"],
    );
    cli(
        bin,
        &db,
        &[
            "channel",
            "create",
            "--workspace",
            "ws",
            "--name",
            "Web",
            "--id",
            "web",
        ],
    );
    cli(
        bin,
        &db,
        &[
            "product",
            "create",
            "--workspace",
            "ws",
            "--slug",
            "solar",
            "--name",
            "Solar",
            "--id",
            "solar",
        ],
    );
    cli(
        bin,
        &db,
        &[
            "source",
            "create",
            "--channel",
            "web",
            "--name",
            "Soak",
            "--id",
            "soak",
            "--secret",
            SOURCE_SECRET,
        ],
    );
    cli(
        bin,
        &db,
        &[
            "buyer",
            "create",
            "--workspace",
            "ws",
            "--name",
            "B",
            "--id",
            "b",
            "--webhook-url",
            &hook,
            "--secret",
            BUYER_SECRET,
        ],
    );
    cli(
        bin,
        &db,
        &[
            "buyer",
            "subscribe",
            "b",
            "--product",
            "solar",
            "--price",
            "20",
        ],
    );

    let (mut server, base) = start_server(bin, &db);
    let pid = server.id();
    let stop = Arc::new(AtomicBool::new(false));
    let deliverer = {
        let (bin, db, shared, stop) = (bin.clone(), db.clone(), shared.clone(), stop.clone());
        std::thread::spawn(move || cli_deliverer(bin, db, shared, stop))
    };
    println!(
        "leadrelay soak: {} cores, server pid {pid}, database {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        db.display()
    );

    let rate = match options.rate {
        Some(rate) => rate,
        None => {
            let (max, mut record) =
                measure_max(&base, &shared, options.clients, options.measure_secs);
            report(
                &format!("maximum (closed loop, {} clients)", options.clients),
                &mut record,
                options.measure_secs as f64,
            );
            max / 2.0
        }
    };

    // RSS every 5 s while the soak runs.
    let samples: Arc<Mutex<Vec<(f64, f64)>>> = Arc::new(Mutex::new(Vec::new()));
    let soak_started = Instant::now();
    let sampler = {
        let (samples, stop) = (samples.clone(), Arc::new(AtomicBool::new(false)));
        let stop_sampler = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let at = soak_started.elapsed().as_secs_f64();
                samples
                    .lock()
                    .expect("not poisoned")
                    .push((at, rss_mib(pid)));
                for _ in 0..50 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        });
        (thread, stop_sampler)
    };
    let rss_start = rss_mib(pid);
    let workers = (rate / 50.0).ceil().clamp(8.0, 256.0) as usize;
    let (mut record, late) = run_at_rate(&base, &shared, workers, rate, options.duration_secs);
    let rss_end = rss_mib(pid);
    sampler.1.store(true, Ordering::Relaxed);
    sampler.0.join().expect("the sampler does not panic");
    report(
        &format!(
            "soak at {rate:.0} ops/s (half the maximum), {workers} workers, {} s",
            options.duration_secs
        ),
        &mut record,
        soak_started.elapsed().as_secs_f64(),
    );
    println!("  operations started over 100 ms late (client could not keep the pace): {late}");

    // Stop delivering, let the outbox drain, then read the database.
    stop.store(true, Ordering::Relaxed);
    let _ = deliverer.join();
    let drain = Instant::now();
    let conn = rusqlite::Connection::open(&db).expect("the database opens");
    conn.busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap_or(-1) };
    while count("SELECT count(*) FROM outbox_events WHERE status = 'pending'") > 0
        && drain.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let samples = samples.lock().expect("not poisoned").clone();
    let max_rss = samples
        .iter()
        .map(|s| s.1)
        .fold(rss_start.max(rss_end), f64::max);
    let window = |from: f64, to: f64| -> String {
        let inside: Vec<f64> = samples
            .iter()
            .filter(|s| s.0 >= from && s.0 < to)
            .map(|s| s.1)
            .collect();
        if inside.is_empty() {
            return "n/a".into();
        }
        format!(
            "{:.1} MiB",
            inside.iter().sum::<f64>() / inside.len() as f64
        )
    };
    let length = options.duration_secs as f64;
    println!(
        "  resident memory: start {rss_start:.1} MiB, end {rss_end:.1} MiB, max {max_rss:.1} MiB; \
         mean of the first minute {}, of the last minute {}",
        window(0.0, 60.0_f64.min(length / 2.0)),
        window((length - 60.0).max(length / 2.0), length + 1.0),
    );
    let trend: Vec<String> = samples
        .iter()
        .step_by((samples.len() / 10).max(1))
        .map(|(at, rss)| format!("{at:.0}s {rss:.0}"))
        .collect();
    println!("  memory over time (MiB): {}", trend.join(", "));
    println!(
        "  leads {}, transactions {} ({}), events pending {} failed {}, receiver got {} requests for {} distinct events, transactions paid {}, cancelled {}, rejected {}",
        count("SELECT count(*) FROM leads"),
        count("SELECT count(*) FROM transactions"),
        if shared.auto_delivery_seen.load(Ordering::Relaxed) {
            "automated delivery"
        } else {
            "automated delivery absent: leadrelay deliver at up to 20/s"
        },
        count("SELECT count(*) FROM outbox_events WHERE status = 'pending'"),
        count("SELECT count(*) FROM outbox_events WHERE status = 'failed'"),
        shared.events_received.load(Ordering::Relaxed),
        shared.event_ids.lock().expect("not poisoned").len(),
        count("SELECT count(*) FROM transactions WHERE status = 'paid'"),
        count("SELECT count(*) FROM transactions WHERE status = 'cancelled'"),
        count("SELECT count(*) FROM transactions WHERE status = 'rejected'"),
    );
    let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    println!("  database file {:.0} MiB", size as f64 / 1024.0 / 1024.0);
    drop(conn);
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let exit = server.wait().expect("the server exits");
    println!("  server stopped cleanly: {}", exit.success());
    let errors = record.total_errors();
    println!(
        "RESULT errors={errors} p99_ms={:.2} rss_start_mib={rss_start:.1} rss_end_mib={rss_end:.1} rss_max_mib={max_rss:.1}",
        {
            let mut all: Vec<u32> = record.latencies.concat();
            all.sort_unstable();
            percentile(&all, 99.0)
        }
    );
    if errors > 0 || !exit.success() {
        std::process::exit(1);
    }
}
