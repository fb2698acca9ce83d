//! The CLI in a test, one line per call (the shape of ripgrep's `TestCommand`).
//!
//! ```text
//! lr(&db, "buyer subscribe b --product solar --price 25").json();
//! lr(&db, format!("deliver --request {request} --buyer b")).json();
//! lr(&db, "source show nope").fails(1).stderr_contains("unknown source 'nope'");
//! lr(&db, "mapping preview landing --sample").arg(sample.to_string()).json();
//! ```
//!
//! The line is split into words as a POSIX shell splits them, so quotes keep spaces together
//! (`--reason 'customer withdrew'`); `.arg(…)` adds one word exactly as given, for values the
//! test does not control. Every run is `leadrelay --db DB [--json] WORDS…` of the real binary.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;

/// `leadrelay --db DB` followed by the words of `line`.
pub fn lr(db: impl AsRef<Path>, line: impl AsRef<str>) -> TestCommand {
    TestCommand {
        db: Some(db.as_ref().to_path_buf()),
        words: Vec::new(),
        envs: Vec::new(),
        stdin: None,
    }
    .line(line)
}

/// One CLI call being built; run it with [`json`](Self::json), [`ok`](Self::ok),
/// [`fails`](Self::fails) or [`output`](Self::output).
#[must_use = "a TestCommand does nothing until it is run"]
pub struct TestCommand {
    db: Option<PathBuf>,
    words: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    stdin: Option<Vec<u8>>,
}

impl TestCommand {
    /// The words of `line`, split as a POSIX shell splits them.
    pub fn line(mut self, line: impl AsRef<str>) -> TestCommand {
        let line = line.as_ref();
        let words = shlex::split(line).unwrap_or_else(|| panic!("unbalanced quotes in {line:?}"));
        self.words.extend(words.into_iter().map(OsString::from));
        self
    }

    /// One word, exactly as given.
    pub fn arg(mut self, word: impl AsRef<OsStr>) -> TestCommand {
        self.words.push(word.as_ref().to_os_string());
        self
    }

    /// Several words, each exactly as given.
    pub fn args<I, S>(mut self, words: I) -> TestCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.words
            .extend(words.into_iter().map(|w| w.as_ref().to_os_string()));
        self
    }

    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> TestCommand {
        self.envs
            .push((name.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// Writes `bytes` to the command's standard input (then closes it).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> TestCommand {
        self.stdin = Some(bytes.into());
        self
    }

    /// The command as `std::process::Command`, for a test that spawns it itself.
    pub fn command(&self, json: bool) -> std::process::Command {
        let mut command = super::bin();
        if let Some(db) = &self.db {
            command.arg("--db").arg(db);
        }
        if json {
            command.arg("--json");
        }
        command.args(&self.words);
        for (name, value) in &self.envs {
            command.env(name, value);
        }
        command
    }

    /// Runs the command, whatever its exit code.
    pub fn output(self) -> Output {
        self.run(false)
    }

    /// Runs it; panics with its stderr unless it exits 0. Returns its stdout.
    pub fn ok(self) -> String {
        let output = self.run(false);
        self.assert_success(&output);
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs it with `--json`; panics unless it exits 0 and prints JSON. Returns the JSON.
    pub fn json(self) -> Value {
        let output = self.run(true);
        self.assert_success(&output);
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "{self} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&output.stdout)
            )
        })
    }

    /// Runs it; panics unless it exits with `code` (1 for a refused operation, 2 for bad
    /// usage). Returns what it printed.
    pub fn fails(self, code: i32) -> Failure {
        self.failure(false, code)
    }

    /// [`fails`](Self::fails) with `--json` (for commands that report on stdout as JSON
    /// when they fail, like `check`).
    pub fn fails_json(self, code: i32) -> Failure {
        self.failure(true, code)
    }

    fn failure(self, json: bool, code: i32) -> Failure {
        let output = self.run(json);
        let failure = Failure {
            command: self.to_string(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        assert_eq!(
            output.status.code(),
            Some(code),
            "{self} exit code; stdout:\n{}\nstderr:\n{}",
            failure.stdout,
            failure.stderr
        );
        failure
    }

    fn run(&self, json: bool) -> Output {
        let mut command = self.command(json);
        let Some(input) = &self.stdin else {
            return command.output().expect("the binary runs");
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(input)
            .expect("the command reads its input");
        child.wait_with_output().expect("the binary runs")
    }

    fn assert_success(&self, output: &Output) {
        assert!(
            output.status.success(),
            "{self} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl fmt::Display for TestCommand {
    /// `leadrelay WORDS…` as a shell line, for failure messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`leadrelay")?;
        for word in &self.words {
            let word = word.to_string_lossy();
            match shlex::try_quote(&word) {
                Ok(quoted) => write!(f, " {quoted}")?,
                Err(_) => write!(f, " {word:?}")?,
            }
        }
        write!(f, "`")
    }
}

/// What a command that failed as expected printed.
#[derive(Debug)]
pub struct Failure {
    command: String,
    pub stdout: String,
    pub stderr: String,
}

impl Failure {
    /// Panics unless stderr contains `text`.
    pub fn stderr_contains(&self, text: &str) -> &Failure {
        assert!(
            self.stderr.contains(text),
            "{}: stderr lacks {text:?}:\n{}",
            self.command,
            self.stderr
        );
        self
    }

    /// Stdout as JSON; panics when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{} printed no JSON ({e}): {}", self.command, self.stdout))
    }
}
