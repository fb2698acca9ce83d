//! `leadrelay serve` as a real child process, for tests that kill or signal the server or
//! read what it logs (`.env("RUST_LOG", …)` on the command sets the level).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use super::{Reply, Request, TestCommand, lr, wait_until};

/// The binary serving on 127.0.0.1:0. Its stdout and stderr go to files (a pipe nobody
/// reads would stall a server that logs at `trace`). Killed with SIGKILL when dropped, so a
/// failing test never leaves a server running behind it.
pub struct ServeProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`, as the server printed it.
    pub base: String,
    /// The operator console's `http://127.0.0.1:PORT`, when it was turned on.
    pub console: Option<String>,
    logs: tempfile::TempDir,
}

impl ServeProcess {
    /// Starts `leadrelay --db DB serve --listen 127.0.0.1:0 EXTRA…` and waits until it
    /// prints the address it listens on.
    pub fn start(db: &Path, extra: &[&str]) -> ServeProcess {
        ServeProcess::start_with(lr(db, "serve --listen 127.0.0.1:0").args(extra))
    }

    /// Starts `command`, a `serve --listen 127.0.0.1:0 …` call (`.env("RUST_LOG", "trace")`
    /// for the whole log).
    pub fn start_with(command: TestCommand) -> ServeProcess {
        ServeProcess::spawn(command.command(false))
    }

    /// Starts `command`, which runs `leadrelay … serve --listen 127.0.0.1:0` in some way (a
    /// shell that sets the umask first), and waits until it prints its address. The operator
    /// console and the partner portal are off unless the command names a `--console-listen`
    /// or `--portal-listen` (their default ports would clash between tests).
    pub fn spawn(mut command: Command) -> ServeProcess {
        if !command.get_args().any(|arg| arg == "--portal-listen") {
            command.args(["--portal-listen", "off"]);
        }
        let console_flag = command.get_args().position(|arg| arg == "--console-listen");
        let console_on = match console_flag {
            Some(at) => command.get_args().nth(at + 1).is_some_and(|v| v != "off"),
            None => {
                command.args(["--console-listen", "off"]);
                false
            }
        };
        let logs = tempfile::tempdir().expect("a temp dir can be made");
        let file = |name: &str| {
            Stdio::from(std::fs::File::create(logs.path().join(name)).expect("a log file"))
        };
        let child = command
            .stdout(file("stdout"))
            .stderr(file("stderr"))
            .spawn()
            .expect("the binary starts");
        let mut server = ServeProcess {
            child,
            base: String::new(),
            console: None,
            logs,
        };
        let stdout = server.logs.path().join("stdout");
        let (mut base, mut console) = (None, None);
        // The wait ends as soon as the server prints or stops; the bound is only for one
        // that does neither (a loaded machine has taken 45 s for one CLI call).
        wait_until(
            Duration::from_secs(120),
            "the server to print its address",
            || {
                let printed = std::fs::read_to_string(&stdout).unwrap_or_default();
                base = address_after(&printed, "listening on");
                console = address_after(&printed, "operator console on");
                (base.is_some() && (console.is_some() || !console_on)) || server.exited()
            },
        );
        match base {
            Some(base) => server.base = base,
            None => panic!("the server ended before it listened:\n{}", server.output()),
        }
        server.console = console;
        server
    }

    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `host:port` of the server.
    pub fn addr(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// A request builder for `method` `path` on this server.
    pub fn request(&self, method: &str, path: &str) -> Request {
        Request::new(method, &format!("{}{path}", self.base))
    }

    /// A POST request builder for `path` on this server.
    pub fn post(&self, path: &str) -> Request {
        self.request("POST", path)
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path).send()
    }

    /// What the server printed so far, stdout then stderr.
    pub fn output(&self) -> String {
        format!("{}{}", self.read("stdout"), self.read("stderr"))
    }

    /// What the server logged so far (its stderr, in the binary's own log format).
    pub fn log(&self) -> String {
        self.read("stderr")
    }

    fn read(&self, name: &str) -> String {
        let path: PathBuf = self.logs.path().join(name);
        std::fs::read_to_string(path).expect("the log file reads")
    }

    /// SIGKILL: no shutdown, no cleanup, like a power cut; waits until it is gone.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL is sent");
        self.child.wait().expect("the killed server is reaped");
    }

    /// SIGTERM: a graceful stop; returns how the server exited.
    pub fn terminate(mut self) -> ExitStatus {
        self.sigterm()
    }

    /// SIGTERM; panics unless the server stops cleanly. Returns everything it printed.
    pub fn stop(mut self) -> String {
        let status = self.sigterm();
        assert!(
            status.success(),
            "a clean stop: {status:?}\n{}",
            self.output()
        );
        self.output()
    }

    fn sigterm(&mut self) -> ExitStatus {
        let status = Command::new("kill")
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

/// The `http://…` address on the first line of `printed` that contains `marker`.
fn address_after(printed: &str, marker: &str) -> Option<String> {
    printed
        .lines()
        .find(|line| line.contains(marker))
        .and_then(|line| line.split("http://").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|addr| format!("http://{addr}"))
}
