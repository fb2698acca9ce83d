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
#[path = "support/delivery.rs"]
mod delivery;
#[path = "support/receiver.rs"]
mod receiver;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use delivery::{
    Service, Setup, buyer_id, configure, deliver, round_robin, seed_lead_requests, wait_until,
};
use leadrelay::db::{Db, DbError};
use leadrelay::outbox::{Notifier, WorkerConfig};
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

/// The channel delivers automatically, to one buyer per lead, under caps far above what a
/// run delivers; the source takes leads with a secret (the speed phase posts them).
const SETUP: Setup = Setup {
    auto_delivery: true,
    caps: true,
    source_secret: true,
};

/// The outbox's settings of a run.
fn outbox(settings: &Settings) -> WorkerConfig {
    WorkerConfig {
        concurrency: settings.concurrency,
        per_buyer: settings.per_buyer,
        request_timeout: Duration::from_secs(10),
        ..WorkerConfig::default()
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
        SETUP,
    );
    let requests = seed_lead_requests(&db, settings.events, "{}");
    deliver(&db, round_robin(requests, settings.buyers));
    let groups_before = db.writer_stats().groups;
    let writer_before = writer_cpu();
    let started = Instant::now();
    let notifier = Notifier::new();
    let service = Service::start(db.clone(), outbox(settings), notifier.clone());
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
    let writer = writer_cpu()
        .zip(writer_before)
        .map(|(after, before)| after - before);
    let done = done && delivered_count(&db) >= settings.events as i64;
    // Nothing else writes while the events drain: each group is one outbox round.
    let rounds = db.writer_stats().groups - groups_before;
    drop(service);
    let seen = receivers.arrivals.first_by_event().len();
    println!(
        "  {} events to {} buyers answering in {} ms: {:.2}s = {:.0} events/s{}; receiver saw {} requests for {} events; {rounds} outbox rounds ({:.1} events each), {:.0} in flight on average; writer CPU {} per event",
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
        writer.map_or("unknown".to_string(), |cpu| format!(
            "{:.1} µs",
            cpu.as_secs_f64() * 1e6 / settings.events as f64
        )),
    );
}

/// The CPU time the writer thread (`db-writer`) has used so far, from the kernel's
/// scheduler statistics (nanoseconds; `None` where there is no `/proc`): what the outbox's
/// claims and records cost the writer while the events drain and nothing else writes.
fn writer_cpu() -> Option<Duration> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        if std::fs::read_to_string(path.join("comm")).ok()?.trim() == "db-writer" {
            let stat = std::fs::read_to_string(path.join("schedstat")).ok()?;
            let nanos: u64 = stat.split_whitespace().next()?.parse().ok()?;
            return Some(Duration::from_nanos(nanos));
        }
    }
    None
}

fn hanging(settings: &Settings, hanging: usize, delay: Duration) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = Db::open(dir.path().join("bench.db")).expect("the file opens");
    let receivers = Receivers::start(behaviours(settings, hanging, delay), 2);
    configure(
        &db,
        (0..settings.buyers).map(|n| receivers.url(n)).collect(),
        SETUP,
    );
    let healthy = settings.buyers - hanging;
    // 100 events a second for 10 s, whatever the speed phase's rate.
    let (rate, count) = (100usize, 1000usize);
    // The last `hanging` buyers' backlog (in the baseline they answer: their backlog is
    // simply work for them).
    let backlog_buyers = settings.hanging;
    let requests = seed_lead_requests(&db, backlog_buyers * settings.backlog + count, "{}");
    let (backlog, fresh) = requests.split_at(backlog_buyers * settings.backlog);
    deliver(
        &db,
        backlog
            .iter()
            .enumerate()
            .map(|(n, r)| (*r, buyer_id(settings.buyers - 1 - n % backlog_buyers)))
            .collect(),
    );
    let notifier = Notifier::new();
    let service = Service::start(db.clone(), outbox(settings), notifier.clone());
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
        let events = deliver(&db, vec![(*request, buyer_id(n % healthy))]);
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
        SETUP,
    );
    let polled = (settings.samples / 10).max(10);
    let requests = seed_lead_requests(&db, settings.samples + polled, "{}");
    let notifier = Notifier::new();
    let service = Service::start(db.clone(), outbox(settings), notifier.clone());
    let (woken, polled) = requests.split_at(settings.samples);
    let one_at_a_time = |requests: &[leadrelay::ids::LeadRequestId], wake: bool| -> Vec<Duration> {
        let mut samples = Vec::with_capacity(requests.len());
        for (n, request) in requests.iter().enumerate() {
            let recorded = notifier.counts().delivered;
            let events = deliver(&db, vec![(*request, buyer_id(n % settings.buyers))]);
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
        SETUP,
    )
    .expect("SETUP asks for the source's secret");
    let service = Service::start(db.clone(), outbox(settings), Notifier::new());
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
