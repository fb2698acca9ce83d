//! The HTTP server loop: accepting connections, the connection limit, per-connection
//! limits, request ids, the request log and graceful shutdown.
//!
//! [`run`] takes an already bound listener and a shutdown future, so tests start it on port
//! 0 and stop it at will. On shutdown it stops accepting, lets in-flight requests finish
//! (bounded by [`DRAIN_TIMEOUT`]) and returns; the caller then stops the workers and closes
//! the database.
//!
//! Past `max_connections` open connections a new one is answered 503 with `Retry-After`
//! and closed ([`refuse`]), so a flood costs a short answer per connection, not memory and
//! time for every request it brings. Every answer carries `X-Request-Id`: the client's when
//! it is sane, else a new one; the request is handled with that id current, so every log
//! line it causes names it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper::header::{HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::db::Db;
use crate::logging::Repeated;
use crate::metrics::Metrics;
use crate::ratelimit::{RateLimit, RateLimiter};
use crate::request_id::RequestId;

/// How long shutdown waits for in-flight requests before it gives up on them.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The default of `serve --max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// The default of [`ServerConfig::max_write_requests`].
pub const DEFAULT_MAX_WRITE_REQUESTS: usize = 256;

/// Connections being refused at once, past the connection limit; a connection beyond these
/// is closed without an answer. Refusing takes a few milliseconds, so this is plenty.
const MAX_REFUSING: usize = 256;

/// How long a refused connection is read from (and its bytes dropped) after its 503, so
/// that closing it does not reset the connection before the client has read the answer.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

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
    /// Open connections at most (`serve --max-connections`); past it a new connection is
    /// answered 503 with `Retry-After` and closed.
    pub max_connections: usize,
    /// Requests that write (ingest, lifecycle) handled at once at most, from before their
    /// body is read to their answer; past it one is answered 503 `overloaded` at once.
    /// This bounds the work in progress, so an accepted request's latency stays bounded
    /// under overload, and a refusal costs almost nothing.
    pub max_write_requests: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            body_limit: 1024 * 1024,
            header_read_timeout: Duration::from_secs(10),
            rate_limit: RateLimit::default(),
            metrics_endpoint: true,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_write_requests: DEFAULT_MAX_WRITE_REQUESTS,
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
    /// The check client of this service (the check steps of ingest, `outbox::check`).
    pub checks: leadrelay_core::checks::CheckClient,
    /// Sources and workspace rules kept between ingest requests, checked against the
    /// file's stamp.
    pub kept: leadrelay_core::ingest::kept::Kept,
    /// The health check's write probe and its cached result.
    pub(crate) health: crate::health::Prober,
    /// One permit per connection that may be open.
    pub(crate) connections: Arc<Semaphore>,
    /// One permit per write request that may be in progress.
    write_requests: Arc<Semaphore>,
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
            outbox: crate::outbox::Notifier::new(),
            started: Instant::now(),
            metrics: Arc::new(Metrics::new(&endpoints)),
            bids: crate::outbox::bid::client(crate::outbound_url::Reach::default()),
            checks: crate::outbox::check::client(crate::outbound_url::Reach::default()),
            kept: Default::default(),
            health: crate::health::Prober::default(),
            connections: Arc::new(Semaphore::new(config.max_connections.max(1))),
            write_requests: Arc::new(Semaphore::new(config.max_write_requests.max(1))),
            config,
            shutting_down: AtomicBool::new(false),
        }
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.config.max_connections.max(1) - self.connections.available_permits()
    }

    /// Write requests in progress now.
    pub fn write_requests_in_progress(&self) -> usize {
        self.config.max_write_requests.max(1) - self.write_requests.available_permits()
    }

    /// A place for a request that writes, held until it is answered; `Overloaded` when
    /// `max_write_requests` are in progress.
    pub(crate) fn admit_write(&self) -> Result<OwnedSemaphorePermit, crate::db::DbError> {
        self.write_requests
            .clone()
            .try_acquire_owned()
            .map_err(|_| crate::db::DbError::Overloaded)
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
    let counting = state.clone();
    let limit = ConnectionLimit {
        places: state.connections.clone(),
        max: state.config.max_connections,
        on_refused: Arc::new(move || counting.metrics.connection_refused()),
    };
    serve(
        listener,
        header_read_timeout,
        limit,
        move |request, peer| {
            let state = state.clone();
            async move { handle(&state, request, peer).await }
        },
        shutdown,
        move || stopping.shutting_down.store(true, Ordering::Relaxed),
    )
    .await
}

/// How many connections a listener keeps open at once, and what to do when it refuses one
/// (count it).
#[derive(Clone)]
pub(crate) struct ConnectionLimit {
    /// One permit per connection that may be open.
    pub(crate) places: Arc<Semaphore>,
    pub(crate) max: usize,
    pub(crate) on_refused: Arc<dyn Fn() + Send + Sync>,
}

impl ConnectionLimit {
    /// `max` connections, refusals not counted anywhere.
    pub(crate) fn new(max: usize) -> ConnectionLimit {
        ConnectionLimit {
            places: Arc::new(Semaphore::new(max.max(1))),
            max,
            on_refused: Arc::new(|| {}),
        }
    }
}

/// The accept loop of a listener: every connection, up to `limit`, is served by `handle`
/// (one call per request, with its request id current and echoed in `X-Request-Id`) with
/// the header read timeout, until `shutdown` completes; then `on_shutdown` runs, the
/// listener closes and in-flight requests drain (bounded by [`DRAIN_TIMEOUT`]). A
/// connection past the limit is answered 503 and closed ([`refuse`]). The API ([`run`])
/// and the operator console (`crate::console`) each run one.
pub(crate) async fn serve<H, F>(
    listener: TcpListener,
    header_read_timeout: Duration,
    limit: ConnectionLimit,
    handle: H,
    shutdown: impl Future<Output = ()>,
    on_shutdown: impl FnOnce(),
) -> std::io::Result<()>
where
    H: Fn(super::Request, SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = super::Response> + Send + 'static,
{
    static ACCEPT_FAILED: Repeated = Repeated::new();
    static LIMIT_REACHED: Repeated = Repeated::new();
    let graceful = GracefulShutdown::new();
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
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
                        if let Some(repeats) = ACCEPT_FAILED.admit() {
                            log::warn!("accept failed: {e}{repeats}");
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let Ok(permit) = limit.places.clone().try_acquire_owned() else {
                    (limit.on_refused)();
                    if let Some(repeats) = LIMIT_REACHED.admit() {
                        log::warn!(
                            "{} connections are open (serve --max-connections): refusing new ones with 503{repeats}",
                            limit.max
                        );
                    }
                    // Beyond the refusals under way, the connection is just closed.
                    if let Ok(refusal) = refusing.clone().try_acquire_owned() {
                        tokio::spawn(async move {
                            refuse(stream).await;
                            drop(refusal);
                        });
                    }
                    continue;
                };
                let connection =
                    serve_connection(stream, peer, header_read_timeout, handle.clone());
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        log::debug!("connection from {peer} ended: {e}");
                    }
                    drop(permit);
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
        let id = crate::request_id::from_client(
            request
                .headers()
                .get(X_REQUEST_ID)
                .map(HeaderValue::as_bytes),
        );
        let response = crate::request_id::scope(id.clone(), handle(request, peer));
        async move {
            let mut response = response.await;
            response
                .headers_mut()
                .insert(X_REQUEST_ID, request_id_header(&id));
            Ok::<_, Infallible>(response)
        }
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
        // On the heap: the handlers' futures are large (an ingest's holds its leads and the
        // writer's answer), and this future is moved whole through the request-id scope,
        // the service and hyper's dispatcher; boxed, each move copies a pointer.
        None => Box::pin(super::router::dispatch(state, request, route)).await,
    };
    let status = response.status().as_u16();
    timer.finish(endpoint, status);
    // A refusal names its error code (`401 unauthorized`); the format adds the request id.
    let code = response
        .extensions()
        .get::<super::error::ErrorCode>()
        .map(|code| format!(" {}", code.0))
        .unwrap_or_default();
    log::info!(
        "{} {} {} {}{} {:.1}ms",
        peer.ip(),
        method,
        path,
        status,
        code,
        started.elapsed().as_secs_f64() * 1000.0
    );
    response
}

/// The header value of a request id: sane ids (`request_id::is_sane`) and generated ones
/// are visible ASCII.
fn request_id_header(id: &RequestId) -> HeaderValue {
    HeaderValue::from_str(id).expect("request ids are visible ASCII")
}

/// Answers a connection past the connection limit: 503 with `Retry-After` and a new
/// request id, without reading the request; then reads and drops what the client sends
/// for a moment, so that closing does not reset the connection before the answer is read.
async fn refuse(mut stream: tokio::net::TcpStream) {
    let id = crate::request_id::generate();
    let body = leadrelay_rules::problem::ErrorBody::<()>::new(
        "overloaded",
        "too many connections are open; retry".to_string(),
        None,
    )
    .to_json()
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nx-request-id: {id}\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let linger = async {
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 4096];
        let mut read = 0usize;
        while let Ok(n) = stream.read(&mut sink).await {
            read += n;
            if n == 0 || read > 64 * 1024 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, linger).await;
}

/// 429 with `Retry-After` and the usual JSON error body.
fn too_many_requests(limited: crate::ratelimit::Limited) -> super::Response {
    let error = super::error::HttpError::RateLimited {
        retry_after_secs: limited.retry_after_secs,
    };
    super::error::error_to_http_response(error.into(), super::error::Form::Plain)
}
