//! `leadrelay serve` as a real child process, for tests that kill or signal the server.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};

/// The binary serving on 127.0.0.1:0 against `db`. Killed with SIGKILL when dropped, so a
/// failing test never leaves a server running behind it.
pub struct ServeProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`, as the server printed it.
    pub base: String,
    /// The operator console's `http://127.0.0.1:PORT`, when it was turned on.
    pub console: Option<String>,
}

impl ServeProcess {
    /// Starts `leadrelay --db DB serve --listen 127.0.0.1:0 EXTRA…` and waits until it
    /// prints the address it listens on. The operator console is off unless `extra` names
    /// a `--console-listen` (its default port would clash between tests).
    pub fn start(db: &Path, extra: &[&str]) -> ServeProcess {
        let console_off: &[&str] = if extra.contains(&"--console-listen") {
            &[]
        } else {
            &["--console-listen", "off"]
        };
        let mut child = super::bin()
            .arg("--db")
            .arg(db)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(console_off)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("the server prints its address");
        let console = console_off.is_empty().then(|| {
            let mut line = String::new();
            stdout
                .read_line(&mut line)
                .expect("the server prints the console's address");
            let addr = line.split("http://").nth(1).unwrap_or("").trim();
            format!("http://{addr}")
        });
        let Some(addr) = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
        else {
            let _ = child.kill();
            panic!("no address in: {line}");
        };
        ServeProcess {
            base: format!("http://{addr}"),
            console,
            child,
        }
    }

    /// `host:port` of the server.
    pub fn addr(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// SIGKILL: no shutdown, no cleanup, like a power cut; waits until it is gone.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL is sent");
        self.child.wait().expect("the killed server is reaped");
    }

    /// SIGTERM: a graceful stop; returns how the server exited.
    pub fn terminate(mut self) -> ExitStatus {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "SIGTERM is sent");
        self.child.wait().expect("the server exits")
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
