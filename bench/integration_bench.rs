//! Mapped delivery benchmark (issue 21; run by `bench/integration.sh`): events per second
//! from the outbox to buyers that take leads through their own API, a JSON CRM body or a
//! form-encoded body built by the integration document (`integration::request`), against
//! the generic signed `lead.delivered` webhook, in the same run.
//!
//! For each delay (the buyers answering after 200 ms, and at once to show the CPU cost of
//! a send) and each kind (`webhook`, `json`, `form`), on a fresh file: 20 buyers whose
//! endpoints answer `200 {}` after the delay (`bench/support/receiver.rs`), N deliveries
//! (round-robin) committed while no outbox runs, then the service starts and the clock
//! runs until the database says all N are delivered. Mapped kinds use docs/delivery.md's
//! documents (`docs/examples/`), the JSON one with its secret header set and an `accept`
//! rule on the status only (the bench receiver answers `{}`).
//!
//! Everything is real: the file (`synchronous=FULL`), the writer, the service with its
//! outbox, TCP to the receivers. Leads are written with SQL (this measures delivery).

#[path = "support/delivery.rs"]
mod delivery;
#[path = "support/receiver.rs"]
mod receiver;

use std::time::{Duration, Instant};

use delivery::{Service, Setup, buyer_id, deliver, round_robin, seed_lead_requests};
use leadrelay::db::{Db, DbError};
use leadrelay::outbox::{Notifier, WorkerConfig};
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

/// The workspace, channel, source, product and one subscribed buyer per URL, each with
/// the integration of `kind`.
fn configure(db: &Db, path: &std::path::Path, urls: Vec<String>, kind: &str) {
    let documents: Vec<(String, serde_json::Value)> = urls
        .iter()
        .enumerate()
        .filter_map(|(n, url)| Some((buyer_id(n), document(kind, url)?)))
        .collect();
    delivery::configure(
        db,
        urls,
        Setup {
            auto_delivery: false,
            caps: false,
            source_secret: false,
        },
    );
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
    let requests = seed_lead_requests(&db, settings.events, "{\"roof\": \"tile\"}");
    deliver(&db, round_robin(requests, settings.buyers));
    let started = Instant::now();
    // The default outbox (concurrency 256, 16 per buyer).
    let outbox = WorkerConfig {
        request_timeout: Duration::from_secs(10),
        ..WorkerConfig::default()
    };
    let service = Service::start(db.clone(), outbox, Notifier::new());
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
