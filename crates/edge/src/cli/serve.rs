//! `leadrelay serve`: opens the database, binds the listener and runs the service until
//! SIGTERM or Ctrl-C.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use super::args::ServeArgs;
use crate::console::ConsoleConfig;
use crate::outbox::WorkerConfig;
use crate::outbox::alert::{AlertOptions, Smtp};
use crate::portal::PortalConfig;
use crate::ratelimit::RateLimit;
use crate::service::{self, ServiceOptions};

pub(super) fn run(path: &Path, args: ServeArgs) -> anyhow::Result<ExitCode> {
    // Taken before the file is opened (or migrated) and held until the server has stopped.
    let _one_server = crate::db::files::ServeLock::take(path)?;
    let db = super::setup::create_or_open(path)?;
    let mut options = ServiceOptions {
        delivery: WorkerConfig {
            concurrency: usize::from(args.delivery_concurrency),
            per_buyer: usize::from(args.delivery_per_buyer),
            retry_schedule: args.retry_schedule.clone(),
            request_timeout: args.delivery_timeout,
            public_outbound_only: args.public_outbound_only,
            ..WorkerConfig::default()
        },
        retention_interval: Some(crate::privacy::purge::RETENTION_INTERVAL),
        alerts: AlertOptions {
            interval: args.alert_interval,
            smtp: match (&args.smtp_url, &args.smtp_from) {
                (Some(url), Some(from)) => {
                    Some(Smtp::parse(url, from).map_err(anyhow::Error::msg)?)
                }
                _ => None,
            },
        },
        ..ServiceOptions::default()
    };
    options.server.rate_limit = RateLimit {
        per_second: args.rate_limit,
        burst: args.rate_burst,
    };
    options.server.metrics_endpoint = args.metrics;
    options.server.max_connections = args.max_connections as usize;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let console = if args.console_listen == "off" {
            None
        } else {
            let listener = tokio::net::TcpListener::bind(&args.console_listen)
                .await
                .with_context(|| {
                    format!(
                        "cannot listen on {} for the console (--console-listen off turns it off)",
                        args.console_listen
                    )
                })?;
            let config = ConsoleConfig {
                secure_cookie: args.console_secure_cookie,
            };
            Some((listener, config))
        };
        let portal = if args.portal_listen == "off" {
            None
        } else {
            let listener = tokio::net::TcpListener::bind(&args.portal_listen)
                .await
                .with_context(|| {
                    format!(
                        "cannot listen on {} for the portal (--portal-listen off turns it off)",
                        args.portal_listen
                    )
                })?;
            let config = PortalConfig {
                secure_cookie: args.portal_secure_cookie,
                api_url: args
                    .portal_api_url
                    .clone()
                    .unwrap_or_else(|| format!("http://{}", args.listen))
                    .trim_end_matches('/')
                    .to_string(),
                reach: crate::outbound_url::Reach::public_only(args.public_outbound_only),
            };
            Some((listener, config))
        };
        // The signal handlers go in before the address is printed: a supervisor that stops
        // the server as soon as it reports its address gets the graceful stop, not death by
        // the signal's default action.
        let shutdown = shutdown_signal()?;
        // Print the bound address on stdout so scripts that pass port 0 can find it.
        println!(
            "leadrelay {} listening on http://{} (database {})",
            env!("CARGO_PKG_VERSION"),
            listener.local_addr()?,
            path.display()
        );
        if let Some((console, _)) = &console {
            println!("operator console on http://{}", console.local_addr()?);
        }
        if let Some((portal, _)) = &portal {
            println!("partner portal on http://{}", portal.local_addr()?);
        }
        service::run_with_listeners(listener, console, portal, db, options, shutdown)
            .await
            .context("server failed")
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A future that completes on SIGTERM (systemd stop) or Ctrl-C, with both handlers
/// registered when this returns (tokio registers a handler when its future is first polled,
/// which would be too late).
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C")?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => log::info!("Ctrl-C received"),
                _ = terminate.recv() => log::info!("SIGTERM received"),
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            if tokio::signal::ctrl_c().await.is_ok() {
                log::info!("Ctrl-C received");
            }
        })
    }
}
