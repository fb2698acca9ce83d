//! The buyer and supplier portal (DESIGN.md section 20): a web view for the two other parties
//! of every sale, served by `serve` on its own listener (`--portal-listen`, default
//! 127.0.0.1:8082). It is the face meant for the internet (behind the operator's TLS
//! proxy), so it is built as hostile-facing.
//!
//! Part of the HTTP layer, beside `crate::http` and `crate::console`, whose accept loop,
//! body reading, error mapping, security headers and stylesheet it uses. It owns the
//! portal's routes ([`router`]), the login, logout, cookie, `Origin` and CSRF checks
//! ([`session`]), the pages (`pages/`, one module per side) and the page shell
//! ([`layout`]).
//!
//! Isolation is the read model's (`leadrelay_core::portal`): each query is narrowed by the
//! session's buyer or supplier, so another party's id answers exactly as one that does not
//! exist. Users and sessions are `crate::partners`'. Every value a partner sent goes
//! through maud's escaping, and every CSV through `report::csv::Writer`.

mod layout;
mod pages;
mod router;
mod session;

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::db::Db;
use crate::outbound_url::Reach;
use crate::ratelimit::RateLimiter;

/// Settings of the portal (`serve --portal-*`).
#[derive(Debug, Clone, Default)]
pub struct PortalConfig {
    /// Mark the session cookie `Secure` (the portal is reached over HTTPS).
    pub secure_cookie: bool,
    /// The API's address as partners reach it, named by the posting instructions
    /// (`serve --portal-api-url`; no trailing `/`).
    pub api_url: String,
    /// Where the buyer's test event may go (`serve --public-outbound-only`).
    pub reach: Reach,
}

/// Connections the portal keeps open at once: enough for its partners, never so many that
/// a flood takes the file descriptors the API needs.
const MAX_CONNECTIONS: usize = 1024;

/// What every portal request can reach.
struct Portal {
    db: Db,
    config: PortalConfig,
    /// Failed logins per client address.
    login_failures: RateLimiter,
}

/// Serves the portal on `listener` until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    db: Db,
    config: PortalConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let portal = Arc::new(Portal {
        db,
        config,
        login_failures: crate::web::login_limiter(),
    });
    log::info!("partner portal on http://{}", listener.local_addr()?);
    crate::web::serve(
        listener,
        "portal",
        MAX_CONNECTIONS,
        portal,
        |portal, request, peer| async move { router::dispatch(&portal, request, peer).await },
        shutdown,
    )
    .await
}
