//! The running service: the HTTP server, the operator console's and the portal's listeners and the
//! background workers on one database, started together and stopped in order (stop
//! accepting, drain requests, stop workers, close the database).

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::console::ConsoleConfig;
use crate::db::Db;
use crate::http::{AppState, ServerConfig};
use crate::outbox::{Notifier, WorkerConfig};
use crate::portal::PortalConfig;

/// Everything `leadrelay serve` can set.
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    pub server: ServerConfig,
    /// The outbox workers: sender threads, retry schedule, request timeout.
    pub delivery: WorkerConfig,
    /// How often leads past their workspace's retention are purged (also once at start);
    /// `None` turns the retention worker off (tests that want a file left as they wrote it).
    pub retention_interval: Option<std::time::Duration>,
    /// Wakes the outbox workers. The service hands it to the HTTP handlers; a caller that
    /// writes events in the same process (a benchmark, a test) may keep a clone to poke.
    pub outbox: Notifier,
    /// Alert evaluation and the SMTP relay of email alerts.
    pub alerts: crate::outbox::alert::AlertOptions,
}

/// Runs the service on `listener` until `shutdown` completes; returns after a clean stop.
pub async fn run(
    listener: TcpListener,
    db: Db,
    options: ServiceOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    run_with_console(listener, None, db, options, shutdown).await
}

/// [`run`], and the operator console on its own listener when `console` is given: both stop
/// accepting when `shutdown` completes, and both drain before the workers stop.
pub async fn run_with_console(
    listener: TcpListener,
    console: Option<(TcpListener, ConsoleConfig)>,
    db: Db,
    options: ServiceOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    run_with_listeners(listener, console, None, db, options, shutdown).await
}

/// [`run_with_console`], and the buyer and supplier portal on its own listener when `portal`
/// is given: every listener stops accepting when `shutdown` completes, and all drain
/// before the workers stop.
pub async fn run_with_listeners(
    listener: TcpListener,
    console: Option<(TcpListener, ConsoleConfig)>,
    portal: Option<(TcpListener, PortalConfig)>,
    db: Db,
    options: ServiceOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut state = AppState::new(db.clone(), options.server);
    state.outbox = options.outbox.clone();
    let reach = crate::outbound_url::Reach::public_only(options.delivery.public_outbound_only);
    state.bids = crate::outbox::bid::client(reach);
    state.checks = crate::outbox::check::client(reach);
    let state = Arc::new(state);
    let reach = crate::outbound_url::Reach::public_only(options.delivery.public_outbound_only);
    let workers = crate::outbox::start(db.clone(), options.delivery, options.outbox)?;
    let retention = options
        .retention_interval
        .map(|interval| crate::privacy::purge::RetentionWorker::start(db.clone(), interval))
        .transpose()?;
    // One shutdown future, two listeners: the flag tells both.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let api = crate::http::server::run(listener, state, until_stopped(stopped.clone()));
    let sweep = crate::ping::run_sweep(db.clone(), until_stopped(stopped.clone()));
    let alerts = crate::outbox::alert::run(
        db.clone(),
        options.alerts,
        reach,
        until_stopped(stopped.clone()),
    );
    let console = async {
        match console {
            Some((listener, config)) => {
                crate::console::run(listener, db.clone(), config, until_stopped(stopped.clone()))
                    .await
            }
            None => Ok(()),
        }
    };
    let portal = async {
        match portal {
            Some((listener, config)) => {
                crate::portal::run(listener, db.clone(), config, until_stopped(stopped.clone()))
                    .await
            }
            None => Ok(()),
        }
    };
    let signal = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    let ((), result, console_result, portal_result, (), ()) =
        tokio::join!(signal, api, console, portal, sweep, alerts);
    let closing = db.clone();
    // Stopping the workers waits for their current attempts, and closing joins the writer
    // thread, which may still be committing: keep both off the async threads.
    let _ = tokio::task::spawn_blocking(move || {
        if let Some(retention) = retention {
            retention.stop();
        }
        workers.stop();
        closing.close();
    })
    .await;
    log::info!("stopped");
    result.and(console_result).and(portal_result)
}
