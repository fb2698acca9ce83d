//! Slow buyers for the delivery benchmarks: one HTTP/1.1 listener per buyer on 127.0.0.1,
//! each answering 200 after a fixed delay, or never (a hanging endpoint), on one small tokio
//! runtime. A delayed answer is a timer, not a thread: a thousand requests waiting out
//! their 200 ms cost a thousand small tasks.
//!
//! Every arrival is recorded (listener, `webhook-id`, the body's `leadId`, when it arrived)
//! so a benchmark can measure commit → arrival and ingest → arrival. Included with
//! `#[path]` by the benchmark examples; `bench/slow_receiver.rs` runs it on its own.

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// How one buyer's endpoint behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers 200 `{}` after this long.
    Delay(Duration),
    /// Reads the request and never answers (the client's timeout ends it).
    Hang,
    /// A bidding buyer's endpoint: answers 200 `{"bid": EUROS, "bidId": WEBHOOK-ID}` after
    /// the delay, the bid being `cents` (ping/post's bid requests, bench/ping.sh).
    Bid { delay: Duration, cents: i64 },
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub buyer: usize,
    pub event_id: String,
    pub lead_id: String,
    pub at: Instant,
}

#[derive(Default)]
pub struct Arrivals {
    pub count: AtomicU64,
    list: Mutex<Vec<Arrival>>,
}

impl Arrivals {
    pub fn all(&self) -> Vec<Arrival> {
        self.list.lock().expect("no panic holding it").clone()
    }

    /// The first arrival of each event id.
    pub fn first_by_event(&self) -> HashMap<String, Arrival> {
        let mut first = HashMap::new();
        for arrival in self.all() {
            first.entry(arrival.event_id.clone()).or_insert(arrival);
        }
        first
    }

    /// The first arrival of each lead id.
    pub fn first_by_lead(&self) -> HashMap<String, Arrival> {
        let mut first = HashMap::new();
        for arrival in self.all() {
            first.entry(arrival.lead_id.clone()).or_insert(arrival);
        }
        first
    }

    pub fn clear(&self) {
        self.list.lock().expect("no panic holding it").clear();
        self.count.store(0, Ordering::Relaxed);
    }
}

/// The running receivers; they stop when the process ends.
pub struct Receivers {
    pub addrs: Vec<SocketAddr>,
    pub arrivals: Arc<Arrivals>,
    behaviours: Arc<Mutex<Vec<Behaviour>>>,
}

impl Receivers {
    /// Starts one listener per entry of `behaviours` on a runtime with `threads` threads.
    pub fn start(behaviours: Vec<Behaviour>, threads: usize) -> Receivers {
        let arrivals = Arc::new(Arrivals::default());
        let shared = Arc::new(Mutex::new(behaviours.clone()));
        let (ready, bound) = std::sync::mpsc::channel();
        let recorded = arrivals.clone();
        let served = shared.clone();
        let count = behaviours.len();
        std::thread::Builder::new()
            .name("slow-receivers".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads.max(1))
                    .enable_all()
                    .build()
                    .expect("the receiver runtime starts");
                runtime.block_on(async move {
                    let mut addrs = Vec::new();
                    for buyer in 0..count {
                        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                            .await
                            .expect("port 0 binds");
                        addrs.push(listener.local_addr().expect("bound"));
                        tokio::spawn(accept(listener, buyer, recorded.clone(), served.clone()));
                    }
                    ready.send(addrs).expect("the caller waits");
                    std::future::pending::<()>().await;
                });
            })
            .expect("the receiver thread starts");
        Receivers {
            addrs: bound.recv().expect("the receivers report their addresses"),
            arrivals,
            behaviours: shared,
        }
    }

    /// The webhook URL of buyer `n`.
    pub fn url(&self, n: usize) -> String {
        format!("http://{}/leads", self.addrs[n])
    }

    pub fn set(&self, buyer: usize, behaviour: Behaviour) {
        self.behaviours.lock().expect("no panic holding it")[buyer] = behaviour;
    }
}

async fn accept(
    listener: tokio::net::TcpListener,
    buyer: usize,
    arrivals: Arc<Arrivals>,
    behaviours: Arc<Mutex<Vec<Behaviour>>>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let arrivals = arrivals.clone();
        let behaviours = behaviours.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| {
                    let arrivals = arrivals.clone();
                    let behaviours = behaviours.clone();
                    async move {
                        let event_id = request
                            .headers()
                            .get("webhook-id")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string();
                        let body = request
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let at = Instant::now();
                        let lead_id = serde_json::from_slice::<serde_json::Value>(&body)
                            .ok()
                            .and_then(|v| v["leadId"].as_str().map(str::to_string))
                            .unwrap_or_default();
                        arrivals
                            .list
                            .lock()
                            .expect("no panic holding it")
                            .push(Arrival {
                                buyer,
                                event_id: event_id.clone(),
                                lead_id,
                                at,
                            });
                        arrivals.count.fetch_add(1, Ordering::Relaxed);
                        let behaviour = behaviours.lock().expect("no panic holding it")[buyer];
                        let answer = match behaviour {
                            Behaviour::Delay(delay) => {
                                tokio::time::sleep(delay).await;
                                Bytes::from_static(b"{}")
                            }
                            Behaviour::Hang => {
                                tokio::time::sleep(Duration::from_secs(3600)).await;
                                Bytes::from_static(b"{}")
                            }
                            Behaviour::Bid { delay, cents } => {
                                tokio::time::sleep(delay).await;
                                Bytes::from(
                                    serde_json::json!({
                                        "bid": cents as f64 / 100.0,
                                        "bidId": event_id,
                                    })
                                    .to_string(),
                                )
                            }
                        };
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(answer)))
                    }
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The `p` quantile (0 to 1) of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
