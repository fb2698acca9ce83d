//! The HTTP server loop: accepting connections, per-connection limits, the request log and
//! graceful shutdown.
//!
//! [`run`] takes an already bound listener and a shutdown future, so tests start it on port
//! 0 and stop it at will. On shutdown it stops accepting, lets in-flight requests finish
//! (bounded by [`DRAIN_TIMEOUT`]) and returns; the caller then stops the workers and closes
//! the database.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::db::Db;
use crate::metrics::Metrics;
use crate::ratelimit::{RateLimit, RateLimiter};

/// How long shutdown waits for in-flight requests before it gives up on them.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Settings of the HTTP server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest accepted request body in bytes (DESIGN.md section 2: 1 MiB).
    pub body_limit: usize,
    /// How long a client may take to send a request's headers; idle keep-alive connections
    /// are closed after this too.
    pub header_read_timeout: Duration,
    /// Per-client token bucket applied to every request (`serve --rate-limit`,
    /// `--rate-burst`).
    pub rate_limit: RateLimit,
    /// Whether `GET /metrics` answers (`serve --metrics on|off`); counting goes on either way.
    pub metrics_endpoint: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            body_limit: 1024 * 1024,
            header_read_timeout: Duration::from_secs(10),
            rate_limit: RateLimit::default(),
            metrics_endpoint: true,
        }
    }
}

/// What every handler can reach. Shared by all connections.
pub struct AppState {
    pub db: Db,
    pub config: ServerConfig,
    /// Wakes the outbox workers; poke it after a write that created events.
    pub outbox: crate::outbox::Notifier,
    pub started: Instant,
    /// Counters of this service; worker threads get a clone of the `Arc`.
    pub metrics: Arc<Metrics>,
    /// `None` when rate limiting is off.
    pub rate_limiter: Option<RateLimiter>,
    /// The bid client of this service (ping/post's bid requests, `outbox::bid`).
    pub bids: crate::outbox::bid::BidClient,
    shutting_down: AtomicBool,
}

impl AppState {
    pub fn new(db: Db, config: ServerConfig) -> AppState {
        let endpoints: Vec<&'static str> = super::router::ROUTES
            .iter()
            .map(|route| route.endpoint.name())
            .collect();
        AppState {
            db,
            rate_limiter: RateLimiter::new(config.rate_limit),
            config,
            outbox: crate::outbox::Notifier::new(),
            started: Instant::now(),
            metrics: Arc::new(Metrics::new(&endpoints)),
            bids: Default::default(),
            shutting_down: AtomicBool::new(false),
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }
}

/// Serves HTTP on `listener` until `shutdown` completes, then drains in-flight requests.
pub async fn run(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let header_read_timeout = state.config.header_read_timeout;
    let stopping = state.clone();
    serve(
        listener,
        header_read_timeout,
        move |request, peer| {
            let state = state.clone();
            async move { handle(&state, request, peer).await }
        },
        shutdown,
        move || stopping.shutting_down.store(true, Ordering::Relaxed),
    )
    .await
}

/// The accept loop of a listener: every connection is served by `handle` (one call per
/// request) with the header read timeout, until `shutdown` completes; then `on_shutdown`
/// runs, the listener closes and in-flight requests drain (bounded by [`DRAIN_TIMEOUT`]).
/// The API ([`run`]) and the operator console (`crate::console`) each run one.
pub(crate) async fn serve<H, F>(
    listener: TcpListener,
    header_read_timeout: Duration,
    handle: H,
    shutdown: impl Future<Output = ()>,
    on_shutdown: impl FnOnce(),
) -> std::io::Result<()>
where
    H: Fn(super::Request, SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = super::Response> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    log::info!("listening on http://{}", listener.local_addr()?);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: wait a little instead of
                        // spinning on the same error.
                        log::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let connection =
                    serve_connection(stream, peer, header_read_timeout, handle.clone());
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        log::debug!("connection from {peer} ended: {e}");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    on_shutdown();
    drop(listener);
    log::info!("shutting down: draining in-flight requests");
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        log::warn!("some requests were still running after {DRAIN_TIMEOUT:?}; giving up on them");
    }
    Ok(())
}

fn serve_connection<H, F>(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    header_read_timeout: Duration,
    handle: H,
) -> hyper::server::conn::http1::Connection<
    TokioIo<tokio::net::TcpStream>,
    impl hyper::service::Service<
        super::Request,
        Response = super::Response,
        Error = Infallible,
        Future = impl Future<Output = Result<super::Response, Infallible>> + Send,
    > + Send,
>
where
    H: Fn(super::Request, SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = super::Response> + Send + 'static,
{
    let service = service_fn(move |request: super::Request| {
        let response = handle(request, peer);
        async move { Ok::<_, Infallible>(response.await) }
    });
    http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_buf_size(64 * 1024)
        // A client may shut down its write side once its request is sent (HTTP/1.0 style
        // clients, some proxies); it must still get its answer, or it cannot tell whether
        // its leads were stored. Without this, hyper drops the connection at the EOF.
        .half_close(true)
        .serve_connection(TokioIo::new(stream), service)
}

/// One request: rate limit, dispatch, metrics, then one log line. Headers and bodies are
/// never logged, since they carry secrets and personal data.
async fn handle(state: &AppState, request: super::Request, peer: SocketAddr) -> super::Response {
    let timer = state.metrics.start_request();
    let started = Instant::now();
    let method = request.method().clone();
    let route = super::router::resolve(&method, request.uri().path());
    let endpoint = match &route {
        Ok((endpoint, _)) => endpoint.name(),
        Err(_) => crate::metrics::UNMATCHED,
    };
    // Paths come from clients; a hostile one must not flood the log.
    let path: String = request.uri().path().chars().take(200).collect();
    let limited = match &state.rate_limiter {
        Some(limiter) => limiter.check(peer.ip()).err(),
        None => None,
    };
    let response = match limited {
        Some(limited) => {
            super::body::discard(request.into_body(), state.config.body_limit).await;
            too_many_requests(limited)
        }
        None => super::router::dispatch(state, request, route).await,
    };
    let status = response.status().as_u16();
    timer.finish(endpoint, status);
    log::info!(
        "{} {} {} {} {:.1}ms",
        peer.ip(),
        method,
        path,
        status,
        started.elapsed().as_secs_f64() * 1000.0
    );
    response
}

/// 429 with `Retry-After` and the usual JSON error body.
fn too_many_requests(limited: crate::ratelimit::Limited) -> super::Response {
    let error = super::error::HttpError::RateLimited {
        retry_after_secs: limited.retry_after_secs,
    };
    super::error::error_to_http_response(error.into(), super::error::Form::Plain)
}
