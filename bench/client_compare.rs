//! Blocking or non-blocking outbound HTTP for the outbox (ARCHITECTURE.md, "the outbox"):
//! the same requests to slow buyers sent by a pool of threads with the blocking ureq client
//! (one connection pool shared by all buyers, or one per buyer) and by tasks on a tokio
//! runtime with hyper-util's pooled client, each keeping `--concurrency` requests in
//! flight. Prints requests per second, this
//! process's CPU time per request, its peak resident memory and its thread count.
//!
//! Run by `bench/client_compare.sh`, which starts `slow_receiver` in its own process (so its
//! CPU is not counted here) and passes the buyers' URLs:
//! `client_compare --mode threads|threads-per-buyer|async --requests N --concurrency N URL...`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

// The allocator of the leadrelay binary, so the comparison is of the clients.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use http_body_util::{BodyExt, Full};

struct Settings {
    mode: String,
    requests: usize,
    concurrency: usize,
    urls: Vec<String>,
}

fn settings() -> Settings {
    let mut settings = Settings {
        mode: "threads".into(),
        requests: 5000,
        concurrency: 256,
        urls: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mode" => settings.mode = args.next().expect("--mode threads|async"),
            "--requests" => {
                settings.requests = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--requests N")
            }
            "--concurrency" => {
                settings.concurrency = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--concurrency N")
            }
            url => settings.urls.push(url.to_string()),
        }
    }
    assert!(!settings.urls.is_empty(), "give the buyers' URLs");
    settings
}

/// A `lead.delivered`-sized body.
fn body() -> Vec<u8> {
    let lead = "x".repeat(1400);
    format!(r#"{{"event":"lead.delivered","lead":{{"note":"{lead}"}}}}"#).into_bytes()
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given; an all-zero rusage is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn status_line(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .map(|l| l[field.len()..].trim().to_string())
        .unwrap_or_default()
}

fn agent(idle: usize) -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(15)))
            .max_idle_connections(idle)
            .max_idle_connections_per_host(16)
            .build(),
    )
}

/// `per_buyer`: one agent (one connection pool) per buyer instead of one shared.
fn threads(settings: &Settings, per_buyer: bool) -> usize {
    let agents: Arc<Vec<ureq::Agent>> = Arc::new(if per_buyer {
        settings.urls.iter().map(|_| agent(16)).collect()
    } else {
        vec![agent(settings.concurrency)]
    });
    let body = Arc::new(body());
    let next = Arc::new(AtomicUsize::new(0));
    let ok = Arc::new(AtomicUsize::new(0));
    let urls = Arc::new(settings.urls.clone());
    let total = settings.requests;
    let handles: Vec<_> = (0..settings.concurrency)
        .map(|_| {
            let (agents, body, next, ok, urls) = (
                agents.clone(),
                body.clone(),
                next.clone(),
                ok.clone(),
                urls.clone(),
            );
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= total {
                            break;
                        }
                        let url = &urls[n % urls.len()];
                        let agent = &agents[(n % urls.len()) % agents.len()];
                        let sent = agent
                            .post(url)
                            .header("content-type", "application/json")
                            .header("webhook-id", format!("evt_{n}"))
                            .send(&body[..]);
                        if let Ok(mut response) = sent {
                            let _ = response.body_mut().read_to_vec();
                            if response.status().is_success() {
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
                .expect("a thread")
        })
        .collect();
    for handle in handles {
        handle.join().expect("no panic");
    }
    ok.load(Ordering::Relaxed)
}

fn non_blocking(settings: &Settings) -> usize {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_max_idle_per_host(16)
                .build_http::<Full<Bytes>>();
        let body = Bytes::from(body());
        let permits = Arc::new(tokio::sync::Semaphore::new(settings.concurrency));
        let ok = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for n in 0..settings.requests {
            let permit = permits.clone().acquire_owned().await.expect("open");
            let url: hyper::Uri = settings.urls[n % settings.urls.len()]
                .parse()
                .expect("a URL");
            let (client, body, ok) = (client.clone(), body.clone(), ok.clone());
            tasks.spawn(async move {
                let request = hyper::Request::post(url)
                    .header("content-type", "application/json")
                    .header("webhook-id", format!("evt_{n}"))
                    .body(Full::new(body))
                    .expect("a request");
                let sent = tokio::time::timeout(Duration::from_secs(15), async {
                    let response = client.request(request).await?;
                    let status = response.status();
                    let _ = response.into_body().collect().await;
                    Ok::<_, hyper_util::client::legacy::Error>(status)
                })
                .await;
                if let Ok(Ok(status)) = sent
                    && status.is_success()
                {
                    ok.fetch_add(1, Ordering::Relaxed);
                }
                drop(permit);
            });
            while tasks.try_join_next().is_some() {}
        }
        while tasks.join_next().await.is_some() {}
        ok.load(Ordering::Relaxed)
    })
}

fn main() {
    let settings = settings();
    let cpu = cpu_seconds();
    let started = Instant::now();
    let ok = match settings.mode.as_str() {
        "threads" => threads(&settings, false),
        "threads-per-buyer" => threads(&settings, true),
        "async" => non_blocking(&settings),
        other => panic!("unknown mode {other}"),
    };
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    println!(
        "{:<8} requests={} ok={} concurrency={} elapsed={:.2}s rate={:.0}/s cpu={:.2}s cpu_per_request={:.0}us peak_rss={} threads_now={}",
        settings.mode,
        settings.requests,
        ok,
        settings.concurrency,
        elapsed,
        settings.requests as f64 / elapsed,
        cpu,
        cpu / settings.requests as f64 * 1e6,
        status_line("VmHWM:"),
        status_line("Threads:"),
    );
}
