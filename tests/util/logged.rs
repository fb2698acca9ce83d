//! `leadrelay serve` as a real child process whose output goes to files, for tests that
//! read its log: the lines the binary's own log format writes (request ids included).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{Request, bin, wait_until};

/// `leadrelay serve` on port 0, stdout and stderr going to files in a directory.
pub struct LoggedServer {
    child: Child,
    pub base: String,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl LoggedServer {
    /// Starts `leadrelay --db DB serve --listen 127.0.0.1:0 --console-listen off EXTRA…`
    /// with `RUST_LOG=level`, its output in `logs/serve.out` and `logs/serve.err`, and waits
    /// for its address.
    pub fn start(db: &Path, logs: &Path, level: &str, extra: &[&str]) -> LoggedServer {
        let stdout = logs.join("serve.out");
        let stderr = logs.join("serve.err");
        let child = bin()
            .env("RUST_LOG", level)
            .arg("--db")
            .arg(db)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--console-listen",
                "off",
            ])
            .args(extra)
            .stdout(Stdio::from(
                std::fs::File::create(&stdout).expect("log file"),
            ))
            .stderr(Stdio::from(
                std::fs::File::create(&stderr).expect("log file"),
            ))
            .spawn()
            .expect("the binary starts");
        let mut base = String::new();
        wait_until(
            Duration::from_secs(20),
            "the server to print its address",
            || {
                let printed = std::fs::read_to_string(&stdout).unwrap_or_default();
                match printed
                    .split("http://")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                {
                    Some(addr) => {
                        base = format!("http://{addr}");
                        true
                    }
                    None => false,
                }
            },
        );
        LoggedServer {
            child,
            base,
            stdout,
            stderr,
        }
    }

    pub fn request(&self, method: &str, path: &str) -> Request {
        Request::new(method, &format!("{}{path}", self.base))
    }

    pub fn post(&self, path: &str, body: &Value) -> Request {
        self.request("POST", path).json(body)
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Stops the server with SIGTERM (so it logs its shutdown) and returns everything it
    /// printed.
    pub fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "SIGTERM sent");
        let exit = self.child.wait().expect("the server exits");
        assert!(exit.success(), "a clean stop: {exit:?}");
        let read = |p: &Path| std::fs::read_to_string(p).expect("the log file reads");
        format!("{}{}", read(&self.stdout), read(&self.stderr))
    }
}

impl Drop for LoggedServer {
    /// A failing test must not leave its server running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
