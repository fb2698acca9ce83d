//! Shared test helpers: a running server on a temp database, an HTTP client, the CLI.

#![allow(dead_code)]

pub mod cli;
pub mod contract;
pub mod files;
pub mod fixtures;
pub mod http;
pub mod json;
pub mod process;
pub mod receiver;
pub mod smtp;
pub mod source;
pub mod tls_receiver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use cli::{TestCommand, lr};
pub use files::{beside, file_names, mode};
pub use fixtures::{
    SIGNING_SECRET, WAIT, Words, basic_setup, bidder, buyer, channel, complete_lead, deliver,
    deliver_command, fast_options, lead_request, lead_request_in, product, setup, simple_lead,
    source, supplier, table_source,
};
pub use http::{Reply, Request};
pub use json::{keys, strings};

/// Routes the server's log lines into the test output (shown for failing tests).
fn init_logging() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
            .is_test(true)
            .try_init();
    });
}

/// A temp directory with a database path in it, removed when dropped.
pub struct TempDb {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl TempDb {
    pub fn new() -> TempDb {
        let dir = tempfile::tempdir().expect("a temp dir can be made");
        let path = dir.path().join("leadrelay.db");
        TempDb { dir, path }
    }
}

impl AsRef<Path> for TempDb {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// The service running on 127.0.0.1:0 on its own runtime thread. Stops when dropped.
pub struct TestServer {
    pub addr: std::net::SocketAddr,
    /// The operator console's address, when started with [`TestServer::start_with_console`].
    pub console_addr: Option<std::net::SocketAddr>,
    /// The partner portal's address, when started with [`TestServer::start_with_portal`].
    pub portal_addr: Option<std::net::SocketAddr>,
    pub db: TempDb,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts the service with default options on a fresh database.
    pub fn start() -> TestServer {
        TestServer::start_with(TempDb::new(), leadrelay::service::ServiceOptions::default())
    }

    /// Starts the service with `options` on `db` (which may hold data already).
    pub fn start_with(db: TempDb, options: leadrelay::service::ServiceOptions) -> TestServer {
        let database = leadrelay::db::Db::open(&db.path).expect("test database opens");
        TestServer::start_inner(db, database, options, None, None)
    }

    /// Starts the service and the operator console (each on its own port 0) on `db`.
    pub fn start_with_console(
        db: TempDb,
        options: leadrelay::service::ServiceOptions,
        console: leadrelay::console::ConsoleConfig,
    ) -> TestServer {
        let database = leadrelay::db::Db::open(&db.path).expect("test database opens");
        TestServer::start_inner(db, database, options, Some(console), None)
    }

    /// Starts the service and the partner portal (each on its own port 0) on `db`.
    pub fn start_with_portal(
        db: TempDb,
        options: leadrelay::service::ServiceOptions,
        portal: leadrelay::portal::PortalConfig,
    ) -> TestServer {
        let database = leadrelay::db::Db::open(&db.path).expect("test database opens");
        TestServer::start_inner(db, database, options, None, Some(portal))
    }

    /// Starts the service, the operator console and the partner portal (each on its own
    /// port 0) on `db`.
    pub fn start_with_console_and_portal(
        db: TempDb,
        options: leadrelay::service::ServiceOptions,
        console: leadrelay::console::ConsoleConfig,
        portal: leadrelay::portal::PortalConfig,
    ) -> TestServer {
        let database = leadrelay::db::Db::open(&db.path).expect("test database opens");
        TestServer::start_inner(db, database, options, Some(console), Some(portal))
    }

    /// Starts the service with `options` on `database`, opened on `db` by the caller (with
    /// its own `DbOptions`).
    pub fn start_on(
        db: TempDb,
        database: leadrelay::db::Db,
        options: leadrelay::service::ServiceOptions,
    ) -> TestServer {
        TestServer::start_inner(db, database, options, None, None)
    }

    fn start_inner(
        db: TempDb,
        database: leadrelay::db::Db,
        options: leadrelay::service::ServiceOptions,
        console: Option<leadrelay::console::ConsoleConfig>,
        portal: Option<leadrelay::portal::PortalConfig>,
    ) -> TestServer {
        init_logging();
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let (ready, bound) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("test-server".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("test runtime starts");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("port 0 binds");
                    let (console, console_addr) = second_listener(console).await;
                    let (portal, portal_addr) = second_listener(portal).await;
                    ready
                        .send((
                            listener.local_addr().expect("bound address"),
                            console_addr,
                            portal_addr,
                        ))
                        .expect("test waits for the address");
                    leadrelay::service::run_with_listeners(
                        listener,
                        console,
                        portal,
                        database,
                        options,
                        async {
                            let _ = stop.await;
                        },
                    )
                    .await
                    .expect("service runs");
                });
            })
            .expect("server thread starts");
        let (addr, console_addr, portal_addr) = bound.recv().expect("server reports its address");
        TestServer {
            addr,
            console_addr,
            portal_addr,
            db,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The URL of `path` on the operator console.
    pub fn console_url(&self, path: &str) -> String {
        let addr = self
            .console_addr
            .expect("the server was started with its console");
        format!("http://{addr}{path}")
    }

    /// The URL of `path` on the partner portal.
    pub fn portal_url(&self, path: &str) -> String {
        let addr = self
            .portal_addr
            .expect("the server was started with its portal");
        format!("http://{addr}{path}")
    }

    /// A request builder for `method` `path` on this server.
    pub fn request(&self, method: &str, path: &str) -> Request {
        Request::new(method, &self.url(path))
    }

    /// A POST request builder for `path` on this server.
    pub fn post(&self, path: &str) -> Request {
        self.request("POST", path)
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path).send()
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.request("POST", path).json(body).send()
    }

    /// Stops the server (drains requests, stops the writer) and waits for it.
    pub fn stop(mut self) -> TempDb {
        self.shutdown_and_join();
        std::mem::replace(&mut self.db, TempDb::new())
    }

    fn shutdown_and_join(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("server thread ends cleanly");
        }
    }
}

/// A listener on port 0 for a second face of the service (the console, the portal) when
/// `config` is given, with its address.
async fn second_listener<C>(
    config: Option<C>,
) -> (
    Option<(tokio::net::TcpListener, C)>,
    Option<std::net::SocketAddr>,
) {
    let Some(config) = config else {
        return (None, None);
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("port 0 binds");
    let addr = listener.local_addr().expect("bound address");
    (Some((listener, config)), Some(addr))
}

/// The server's database file, so `lr(&server, …)` runs the CLI on it.
impl AsRef<Path> for TestServer {
    fn as_ref(&self) -> &Path {
        &self.db.path
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown_and_join();
    }
}

/// The built `leadrelay` binary.
pub fn bin() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_leadrelay"));
    command.env_remove("LEADRELAY_DB").env("RUST_LOG", "warn");
    command
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes; panics on timeout.
pub fn wait_until(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
