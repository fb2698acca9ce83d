//! `leadrelay serve`: opens the database, binds the listener and runs the service until
//! SIGTERM or Ctrl-C.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use super::args::ServeArgs;
use crate::outbox::WorkerConfig;
use crate::ratelimit::RateLimit;
use crate::service::{self, ServiceOptions};

pub fn run(path: &Path, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let mut options = ServiceOptions {
        delivery: WorkerConfig {
            concurrency: usize::from(args.delivery_concurrency),
            per_buyer: usize::from(args.delivery_per_buyer),
            retry_schedule: args.retry_schedule.clone(),
            request_timeout: args.delivery_timeout,
            ..WorkerConfig::default()
        },
        ..ServiceOptions::default()
    };
    options.server.rate_limit = RateLimit {
        per_second: args.rate_limit,
        burst: args.rate_burst,
    };
    options.server.metrics_endpoint = args.metrics;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        // Print the bound address on stdout so scripts that pass port 0 can find it.
        println!(
            "leadrelay {} listening on http://{} (database {})",
            env!("CARGO_PKG_VERSION"),
            listener.local_addr()?,
            path.display()
        );
        service::run(listener, db, options, shutdown_signal())
            .await
            .context("server failed")
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Completes on SIGTERM (systemd stop) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => log::info!("Ctrl-C received"),
        () = terminate => log::info!("SIGTERM received"),
    }
}
