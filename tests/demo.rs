//! `leadrelay demo`: the printed walk-through works when pasted into a shell. The printed
//! receiver runs as printed (on the port of `--webhook-url`), and the steps after it run in
//! one shell as printed, with the real binary and curl on PATH: each step finds the ids it
//! needs in the variables an earlier one set, nothing is filled in by hand.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::util::{TempDb, TestServer, fast_options, lr, wait_until};

const WAIT: Duration = Duration::from_secs(20);

/// `sh` with the binary's folder first on PATH, as after `cargo build`.
fn sh(script: &str) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_leadrelay"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("the binary is in a folder").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(script)
        .env("PATH", path)
        .env_remove("LEADRELAY_DB");
    command
}

fn steps(demo: &Value) -> Vec<(String, String)> {
    demo["steps"]
        .as_array()
        .expect("the demo prints steps")
        .iter()
        .map(|s| {
            (
                s["title"].as_str().unwrap().to_string(),
                s["command"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A port nothing listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The printed receiver, running; killed (by its own pid) when dropped.
struct Receiver(Child);

impl Receiver {
    fn start(command: &str, port: u16) -> Receiver {
        let child = sh(&format!("exec {command}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the receiver starts");
        wait_until(WAIT, "the printed receiver to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Receiver(child)
    }

    /// Stops it and returns what it printed.
    fn stop(mut self) -> String {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let mut printed = String::new();
        if let Some(mut stdout) = self.0.stdout.take() {
            let _ = stdout.read_to_string(&mut printed);
        }
        printed
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_printed_walk_through_runs_as_pasted() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let port = free_port();
    let base = format!("http://{}", server.addr);
    let webhook_url = format!("http://127.0.0.1:{port}/leads");
    let demo = lr(
        &server,
        format!("demo --base-url {base} --webhook-url {webhook_url}"),
    )
    .json();
    let steps = steps(&demo);
    assert!(
        steps[0]
            .1
            .contains(&format!("serve --listen {}", server.addr))
    );

    // The receiver listens where the buyers' webhook URL points.
    assert!(
        steps[1].0.contains(&format!("127.0.0.1:{port}")),
        "{}",
        steps[1].0
    );
    let receiver = Receiver::start(&steps[1].1, port);

    // Everything else in one shell, in order, stopping at the first failure.
    let script = format!(
        "set -e\n{}",
        steps[2..]
            .iter()
            .map(|(_, command)| command.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let output = sh(&script).output().expect("sh runs");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the walk-through failed:\n{printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // SunCo got the auto-delivered lead and was paid; HeatCo got the other by hand and
    // cancelled it; the supplier confirmed the clawback of that lead.
    let transactions = lr(&server, "transaction list").json();
    let status_of = |buyer: &str| {
        transactions
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["buyerAccountId"] == buyer)
            .unwrap_or_else(|| panic!("no transaction of {buyer}: {transactions}"))
            .clone()
    };
    let sunco = status_of("demo-sunco");
    let heatco = status_of("demo-heatco");
    assert_eq!(sunco["status"], "paid", "{sunco}");
    assert_eq!(heatco["status"], "cancelled", "{heatco}");
    let lead = lr(
        &server,
        format!("lead show {}", heatco["leadId"].as_str().unwrap()),
    )
    .json();
    assert_eq!(
        lead["status"], "cancelled",
        "the supplier confirmed: {lead}"
    );
    assert!(printed.contains("cancellation_confirmed"), "{printed}");
    assert!(printed.contains(r#""status":"ok""#), "health: {printed}");

    // Every event settled: SunCo's reached the printed receiver; HeatCo's too, unless the
    // cancellation came before its first attempt, when it is voided, never sent (the
    // person's data is not sent for a sale that no longer exists).
    let mut events = Value::Null;
    wait_until(WAIT, "every event delivered or voided", || {
        events = lr(&server, "outbox list").json();
        events.as_array().is_some_and(|all| {
            all.len() == 2
                && all
                    .iter()
                    .all(|e| e["status"] == "delivered" || e["status"] == "voided")
        })
    });
    let status_of_event = |transaction: &Value| {
        events
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["transactionId"] == transaction["transactionId"])
            .unwrap_or_else(|| panic!("no event of {transaction}: {events}"))["status"]
            .clone()
    };
    assert_eq!(status_of_event(&sunco), "delivered", "{events}");
    let received = receiver.stop();
    for transaction in [&sunco, &heatco] {
        let id = transaction["transactionId"].as_str().unwrap();
        if status_of_event(transaction) == "delivered" {
            assert!(received.contains(id), "{id} not received:\n{received}");
        } else {
            assert!(
                !received.contains(id),
                "{id} voided but received:\n{received}"
            );
        }
    }
}
