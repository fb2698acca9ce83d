//! The operator console (DESIGN.md sections 15 and 23): a web view of the business with a
//! few actions, served by `serve` on its own listener (`--console-listen`, default
//! 127.0.0.1:8081).
//!
//! Part of the HTTP layer, beside `crate::http`, whose accept loop, body reading and error
//! mapping (`error_to_http_response` in its HTML form) it uses. It owns the console's
//! routes ([`router`]), the login, logout and session cookie ([`session`]), the pages
//! (`pages/`, one module per page: its read queries and its HTML), the page shell and
//! formatting ([`layout`]), the server-drawn SVG charts ([`chart`]) and the stylesheet.
//!
//! It writes nothing itself: operators and sessions are `crate::operators`' tables, which
//! the login and logout call; every page only reads, through the read pool; the actions
//! ([`actions`]: POST forms checked for origin, CSRF token and role) call the writer jobs
//! of `crate::audited`, which record each change in the audit log. Every value a
//! page shows goes through maud's escaping (`(value)` in `html!`); nothing is spliced as
//! raw markup, since names, fields and answer excerpts come from partners and buyers.

mod actions;
mod chart;
pub(crate) mod layout;
mod pages;
pub(crate) mod router;
mod session;

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::db::Db;
use crate::ratelimit::RateLimiter;

/// Settings of the console (`serve --console-*`).
#[derive(Debug, Clone, Default)]
pub struct ConsoleConfig {
    /// Mark the session cookie `Secure` (the console is reached over HTTPS).
    pub secure_cookie: bool,
}

/// Connections the console keeps open at once: it is for a few operators, and must not let
/// a flood take the file descriptors the API needs.
const MAX_CONNECTIONS: usize = 256;

/// What every console request can reach.
struct Console {
    db: Db,
    config: ConsoleConfig,
    /// Failed logins per client address.
    login_failures: RateLimiter,
}

/// Serves the console on `listener` until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    db: Db,
    config: ConsoleConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let console = Arc::new(Console {
        db,
        config,
        login_failures: crate::web::login_limiter(),
    });
    log::info!("operator console on http://{}", listener.local_addr()?);
    crate::web::serve(
        listener,
        "console",
        MAX_CONNECTIONS,
        console,
        |console, request, peer| async move { router::dispatch(&console, request, peer).await },
        shutdown,
    )
    .await
}
