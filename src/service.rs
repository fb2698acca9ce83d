//! The running service: the HTTP server and the background workers on one database, started
//! together and stopped in order (stop accepting, drain requests, stop workers, close the
//! database).

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::db::Db;
use crate::http::{AppState, ServerConfig};

/// Everything `leadrelay serve` can set.
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    pub server: ServerConfig,
}

/// Runs the service on `listener` until `shutdown` completes; returns after a clean stop.
pub async fn run(
    listener: TcpListener,
    db: Db,
    options: ServiceOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let state = Arc::new(AppState::new(db.clone(), options.server));
    let result = crate::http::server::run(listener, state, shutdown).await;
    let closing = db.clone();
    // Closing joins the writer thread, which may still be committing: keep it off the
    // async threads.
    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
    log::info!("stopped");
    result
}
