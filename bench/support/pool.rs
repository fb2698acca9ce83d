//! The benchmarks' open-loop HTTP client: keep-alive HTTP/1.1 connections to one server,
//! opened as needed up to a bound, and each answer with the server's part of its latency
//! (from writing the request to its connection to the end of the answer). Included with
//! `#[path]` by `bench/overload_bench.rs` and `bench/ping_bench.rs`.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::sync::Semaphore;

/// The load generator's runtime: two worker threads, as many as the machine's cores (the
/// server shares them).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Keep-alive connections to the server, opened as needed up to a bound.
pub struct Pool {
    pub addr: String,
    pub idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    pub places: Arc<Semaphore>,
    pub opened: AtomicUsize,
}

/// A server's answer to one request.
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    /// From writing the request to its connection to the end of the answer.
    pub service_micros: u64,
}

impl Pool {
    /// Up to `connections` connections to `url` (`http://HOST:PORT`).
    pub fn new(url: &str, connections: usize) -> Pool {
        Pool {
            addr: url.trim_start_matches("http://").to_string(),
            idle: Mutex::new(Vec::new()),
            places: Arc::new(Semaphore::new(connections)),
            opened: AtomicUsize::new(0),
        }
    }

    /// Sends `request` on an idle connection or a new one; `None` when no answer came
    /// (connection refused or closed).
    pub async fn send(&self, request: hyper::Request<Full<Bytes>>) -> Option<Answer> {
        let _place = self.places.acquire().await.expect("never closed");
        let idle = self.idle.lock().expect("not poisoned").pop();
        let mut sender = match idle {
            Some(sender) if !sender.is_closed() => sender,
            _ => {
                let stream = tokio::net::TcpStream::connect(&self.addr).await.ok()?;
                let _ = stream.set_nodelay(true);
                let (sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .ok()?;
                tokio::spawn(connection);
                self.opened.fetch_add(1, Ordering::Relaxed);
                sender
            }
        };
        sender.ready().await.ok()?;
        let sent = Instant::now();
        let response = sender.send_request(request).await.ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        let service_micros = sent.elapsed().as_micros() as u64;
        if !sender.is_closed() {
            self.idle.lock().expect("not poisoned").push(sender);
        }
        Some(Answer {
            status,
            body,
            service_micros,
        })
    }
}
