//! Lifecycle benchmark (run by `bench/lifecycle.sh`): buyer calls per second and their
//! latency, over HTTP against the real service on a database file with `synchronous=FULL`.
//!
//! The configuration (workspace, channel, source, product, buyer with its secret) is made by
//! the script with the CLI. This program starts the service in-process on 127.0.0.1:0, posts
//! N leads over HTTP, delivers each to the buyer with `delivery::deliver` in writer jobs,
//! waits until the outbox is idle, then measures, with C client threads each keeping its
//! connection:
//! 1. acknowledge every transaction (a move: one writer job each, group-committed);
//! 2. payout every transaction (a move);
//! 3. acknowledge again (already applied: no write, but still one writer job);
//! 4. a wrong secret (refused by the read-side pre-check, never reaching the writer).
//!
//! The buyer's webhook URL is the service's own health path, which answers POST with 405:
//! each `lead.delivered` event is attempted once and fails at once, so the outbox is quiet
//! while the lifecycle is measured.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use leadrelay::db::{Db, DbError};
use leadrelay::delivery::{DeliveryError, DeliveryOrder};
use leadrelay::service::ServiceOptions;
use serde_json::{Value, json};

#[path = "client.rs"]
mod client;
use client::{agent, post, read_json};

struct Settings {
    db: PathBuf,
    secret: String,
    leads: usize,
    clients: usize,
}

fn settings() -> Settings {
    let mut settings = Settings {
        db: PathBuf::new(),
        secret: String::new(),
        leads: 5000,
        clients: 8,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_else(|| {
            panic!("usage: lifecycle_bench --db F --secret S [--leads N] [--clients N]")
        });
        let number = || value.parse().expect("a number");
        match pair[0].as_str() {
            "--db" => settings.db = PathBuf::from(&value),
            "--secret" => settings.secret = value.clone(),
            "--leads" => settings.leads = number(),
            "--clients" => settings.clients = number(),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!settings.secret.is_empty(), "--secret is required");
    settings
}

/// Runs `work(agent, index)` for every index in `0..n` on `clients` threads; returns the
/// wall time and every call's latency.
fn run_parallel<F>(n: usize, clients: usize, work: F) -> (Duration, Vec<Duration>)
where
    F: Fn(&ureq::Agent, usize) + Sync,
{
    let started = Instant::now();
    let latencies: Vec<Duration> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|client| {
                let work = &work;
                scope.spawn(move || {
                    let agent = agent();
                    let mut mine = Vec::new();
                    for index in (client..n).step_by(clients) {
                        let at = Instant::now();
                        work(&agent, index);
                        mine.push(at.elapsed());
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client thread"))
            .collect()
    });
    (started.elapsed(), latencies)
}

fn report(what: &str, n: usize, (wall, mut latencies): (Duration, Vec<Duration>)) {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{what:<34} {n:>6} calls  {:>8.0}/s  p50 {:>6.2} ms  p99 {:>6.2} ms",
        n as f64 / wall.as_secs_f64(),
        at(0.50).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
    );
}

fn main() {
    let settings = settings();
    let db = Db::open(&settings.db).expect("the database opens");
    let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
    let (ready, bound) = std::sync::mpsc::channel();
    let service_db = db.clone();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime starts");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("port 0 binds");
            ready
                .send(listener.local_addr().expect("bound"))
                .expect("main waits");
            let options = ServiceOptions {
                server: leadrelay::http::ServerConfig {
                    // One address sends everything: no per-client limit.
                    rate_limit: leadrelay::ratelimit::RateLimit {
                        per_second: 0,
                        burst: 0,
                    },
                    ..Default::default()
                },
                ..Default::default()
            };
            leadrelay::service::run(listener, service_db, options, async {
                let _ = stop.await;
            })
            .await
            .expect("service runs");
        });
    });
    let addr = bound.recv().expect("the service reports its address");
    let base = format!("http://{addr}");
    db.write_blocking(move |conn| {
        conn.execute(
            "UPDATE buyers SET webhook_url = ?1",
            [format!("http://{addr}/api/health")],
        )
        .map(|_| ())
        .map_err(DbError::from)
    })
    .expect("the webhook URL is set");

    // Leads over HTTP, then one delivery each in writer jobs (group-committed).
    let n = settings.leads;
    let ingest_url = format!("{base}/api/webhooks/channels/web/sources/src/leads");
    let request_ids: Vec<std::sync::Mutex<String>> = (0..n)
        .map(|_| std::sync::Mutex::new(String::new()))
        .collect();
    let took = run_parallel(n, settings.clients, |agent, i| {
        let lead = json!({
            "firstName": "Ada", "lastName": format!("L{i}"),
            "email": format!("ada{i}@example.com"), "productSlug": "solar",
        });
        let (status, body) = post(agent, &ingest_url, None, &lead);
        assert_eq!(status, 201, "{body}");
        *request_ids[i].lock().expect("no poisoning") = body["item"]["requestIds"][0]
            .as_str()
            .expect("a request id")
            .to_string();
    });
    report("setup: ingest (single leads)", n, took);
    let transaction_ids: Vec<std::sync::Mutex<String>> = (0..n)
        .map(|_| std::sync::Mutex::new(String::new()))
        .collect();
    let took = run_parallel(n, settings.clients, |_, i| {
        let request = request_ids[i].lock().expect("no poisoning").clone();
        let delivered = db
            .write_blocking(move |conn| {
                leadrelay::delivery::deliver(
                    conn,
                    &DeliveryOrder {
                        lead_request_id: request.parse().expect("a request id"),
                        buyer_id: &"b".into(),
                        price_cents: None,
                        actor: "operator",
                    },
                )
            })
            .unwrap_or_else(|e: DeliveryError| panic!("delivery: {e}"));
        *transaction_ids[i].lock().expect("no poisoning") = delivered.transaction_id.to_string();
    });
    report("setup: deliver (library, writer)", n, took);
    let pending = || -> i64 {
        let mut response = agent()
            .get(&format!("{base}/api/health"))
            .call()
            .expect("health answers");
        let health = read_json(&mut response);
        health["outbox"]["pending"].as_i64().unwrap_or(0)
    };
    let idle_by = Instant::now() + Duration::from_secs(600);
    loop {
        let left = pending();
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < idle_by,
            "the outbox did not go idle: {left} events pending"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let txn = |i: usize| transaction_ids[i].lock().expect("no poisoning").clone();
    let confirm = format!("{base}/api/webhooks/partner-confirmation");
    let payout = format!("{base}/api/webhooks/partner-payout");
    let expect = |(status, body): (u16, Value), code: u16| {
        assert_eq!(status, code, "{body}");
    };
    let secret = settings.secret.as_str();
    report(
        "acknowledge (move)",
        n,
        run_parallel(n, settings.clients, |agent, i| {
            let body = json!({"transactionId": txn(i), "status": "acknowledged"});
            expect(post(agent, &confirm, Some(secret), &body), 200);
        }),
    );
    report(
        "payout (move)",
        n,
        run_parallel(n, settings.clients, |agent, i| {
            expect(
                post(
                    agent,
                    &payout,
                    Some(secret),
                    &json!({"transactionId": txn(i)}),
                ),
                200,
            );
        }),
    );
    report(
        "acknowledge again (already applied)",
        n,
        run_parallel(n, settings.clients, |agent, i| {
            let body = json!({"transactionId": txn(i), "status": "acknowledged"});
            let (status, body) = post(agent, &confirm, Some(secret), &body);
            assert!(status == 200 && body["alreadyApplied"] == true, "{body}");
        }),
    );
    report(
        "wrong secret (401, read side)",
        n,
        run_parallel(n, settings.clients, |agent, i| {
            let body = json!({"transactionId": txn(i), "status": "rejected"});
            expect(
                post(agent, &confirm, Some("not-the-secret-0123456789"), &body),
                401,
            );
        }),
    );
    let stats = db.writer_stats();
    println!("writer: {stats:?}");
    let _ = shutdown.send(());
    server.join().expect("the service stops");
}
