//! What the console and the portal share as listeners: the accept loop with its connection
//! limit, the headers every answer carries, the one log line per request, the limit on
//! failed logins, and the answers of signing in and out (the session cookie, its clearing,
//! 303s, 429 after too many failures).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::StatusCode;
use hyper::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, HeaderName, HeaderValue, LOCATION, REFERRER_POLICY,
    RETRY_AFTER, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use tokio::net::TcpListener;

use crate::http::{Request, Response, response};
use crate::ratelimit::RateLimiter;

/// Only the listener's own origin may provide anything (no inline script or style, no
/// third-party asset), no page may frame it, and forms post only to it.
const CSP: &str = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Failed logins one client address may make in a burst, and then per minute.
const LOGIN_FAILURES_BURST: u32 = 10;
const LOGIN_FAILURES_PER_MINUTE: u32 = 10;

/// The limit on failed logins per client address.
pub(crate) fn login_limiter() -> RateLimiter {
    RateLimiter::per_minute(LOGIN_FAILURES_PER_MINUTE, LOGIN_FAILURES_BURST)
        .expect("the login limit is not zero")
}

/// Serves `state`'s pages on `listener` until `shutdown` completes, at most
/// `max_connections` at once: each answer of `dispatch` gets [`secure_headers`], and each
/// request one log line starting with `label` (method, path without its query, status,
/// time: a search query can hold an email).
pub(crate) async fn serve<S, D, F>(
    listener: TcpListener,
    label: &'static str,
    max_connections: usize,
    state: Arc<S>,
    dispatch: D,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    S: Send + Sync + 'static,
    D: Fn(Arc<S>, Request, SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    crate::http::server::serve(
        listener,
        Duration::from_secs(10),
        crate::http::server::ConnectionLimit::new(max_connections),
        move |request: Request, peer: SocketAddr| {
            let (state, dispatch) = (state.clone(), dispatch.clone());
            async move {
                let started = Instant::now();
                let method = request.method().clone();
                let path: String = request.uri().path().chars().take(200).collect();
                let mut response = dispatch(state, request, peer).await;
                secure_headers(&mut response);
                log::info!(
                    "{label} {} {} {} {} {:.1}ms",
                    peer.ip(),
                    method,
                    path,
                    response.status().as_u16(),
                    started.elapsed().as_secs_f64() * 1000.0
                );
                response
            }
        },
        shutdown,
        || {},
    )
    .await
}

/// Adds the headers of every answer of a browser-facing listener.
pub(crate) fn secure_headers(response: &mut Response) {
    let headers = response.headers_mut();
    let mut set = |name: HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(CONTENT_SECURITY_POLICY, CSP);
    set(X_CONTENT_TYPE_OPTIONS, "nosniff");
    // Links to other sites carry no referrer (a lead page's address names a lead), but
    // the listener's own forms keep their `Origin`: under `no-referrer` a browser sends
    // `Origin: null`, and the origin check could not tell the page from a stranger.
    set(REFERRER_POLICY, "same-origin");
    set(X_FRAME_OPTIONS, "DENY");
    // Pages hold personal data: no copy in a shared cache or the browser's disk cache.
    if !headers.contains_key(CACHE_CONTROL) {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

/// 303 to `location` (a path of the listener's own).
pub(crate) fn see_other(location: &str) -> Response {
    let mut response = response::html(StatusCode::SEE_OTHER, String::new());
    response.headers_mut().insert(
        LOCATION,
        HeaderValue::from_str(location).unwrap_or(HeaderValue::from_static("/")),
    );
    response
}

/// The `Set-Cookie` value of a session: `HttpOnly` (no script reads it), `SameSite=Strict`
/// (no other site's page sends it), `Path=/`, `Max-Age`, and `Secure` when the listener is
/// reached over HTTPS.
pub(crate) fn session_cookie(
    name: &str,
    session_id: &str,
    ttl_ms: i64,
    secure: bool,
) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let cookie = format!(
        "{name}={session_id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        ttl_ms / 1000
    );
    HeaderValue::from_str(&cookie).expect("a session id is URL-safe base64")
}

/// The `Set-Cookie` value that clears cookie `name`.
pub(crate) fn cleared_cookie(name: &str, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"
    ))
    .expect("the cookie is ASCII")
}

/// 429 with `Retry-After`: the login `page` (its form with the message) for a client address
/// that failed to sign in too often.
pub(crate) fn too_many_failures(page: String, retry_after_secs: u64) -> Response {
    let mut response = response::html(StatusCode::TOO_MANY_REQUESTS, page);
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// The message of [`too_many_failures`]' page.
pub(crate) fn too_many_failures_message(retry_after_secs: u64) -> String {
    format!("Too many failed sign-ins from this address. Try again in {retry_after_secs} seconds.")
}
