//! The log: the line format, and warnings that would repeat many times a second.
//!
//! [`init`] sets up `env_logger` with a line that ends in `request_id=…` whenever the line
//! is written for a request (`request_id::current`): by the request's task, by the writer
//! running its job, by an outbox sender sending an event it caused. [`Repeated`] keeps a
//! warning that a failing disk or a dead buyer would write hundreds of times a second to
//! one line per interval, with the count of the lines it held back.
//!
//! Owns the format and the rate limiting of log lines; what is logged where belongs to
//! each module.

use std::fmt;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a [`Repeated`] warning is written at most.
pub const REPEAT_INTERVAL: Duration = Duration::from_secs(10);

/// The crates whose modules log. Their modules are named as `leadrelay::…` in the log and in
/// `RUST_LOG` (`leadrelay::db=debug`), as they were before the code was split into crates:
/// which crate a module is in is not the operator's business.
const CRATES: [&str; 4] = [
    "leadrelay_rules",
    "leadrelay_store",
    "leadrelay_core",
    "leadrelay_edge",
];

/// Sets up the process's logger: `RUST_LOG` when set, else `default_level`.
pub fn init(default_level: &str) {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level));
    let crates = crate_directives(&std::env::var("RUST_LOG").unwrap_or_default());
    if !crates.is_empty() {
        builder.parse_filters(&crates);
    }
    // The level is coloured on a terminal only, and the line is then written as formatted
    // (`Always` passes it through): left to env_logger, a line for a file or a pipe had
    // its colour codes stripped again byte by byte, 2% of the server's CPU time under
    // plain ingest, which logs a line per request (`perf record`, `bench/ingest.sh`).
    let coloured = colour_wanted(
        std::env::var("RUST_LOG_STYLE").ok().as_deref(),
        std::io::stderr().is_terminal(),
    );
    builder
        .write_style(env_logger::WriteStyle::Always)
        .format(move |buf, record| {
            let style = if coloured {
                buf.default_level_style(record.level())
            } else {
                env_logger::fmt::style::Style::new()
            };
            write!(
                buf,
                "[{} {style}{:<5}{style:#} {}] {}",
                buf.timestamp_millis(),
                record.level(),
                shown_target(record.target()),
                record.args()
            )?;
            if let Some(id) = crate::request_id::current() {
                write!(buf, " request_id={id}")?;
            }
            writeln!(buf)
        })
        .init();
}

/// Whether the log's level is coloured: as `RUST_LOG_STYLE` says (`always`, `never`),
/// else when the log goes to a terminal.
fn colour_wanted(style: Option<&str>, terminal: bool) -> bool {
    match style {
        Some("always") => true,
        Some("never") => false,
        _ => terminal,
    }
}

/// A log line that is written at most once per [`REPEAT_INTERVAL`]; the occurrences in
/// between are counted and reported with the next line written. One `static` per call
/// site:
///
/// ```
/// use leadrelay_store::logging::Repeated;
///
/// fn round_failed(e: &std::io::Error) {
///     static ROUND_FAILED: Repeated = Repeated::new();
///     if let Some(repeats) = ROUND_FAILED.admit() {
///         log::warn!("outbox: recording and claiming failed: {e}{repeats}");
///     }
/// }
/// round_failed(&std::io::Error::other("disk full"));
///
/// // Within an interval only the first line is written; the others are counted.
/// let repeated = Repeated::new();
/// assert!(repeated.admit().is_some());
/// assert!(repeated.admit().is_none());
/// ```
pub struct Repeated {
    state: Mutex<State>,
}

struct State {
    last_written: Option<Instant>,
    held_back: u64,
}

/// What a written line appends: nothing, or how many lines were held back since the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeats {
    held_back: u64,
    /// Whole seconds since the line was last written.
    since_secs: u64,
}

impl fmt::Display for Repeats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.held_back {
            0 => Ok(()),
            n => write!(f, " ({n} more like this in the last {} s)", self.since_secs),
        }
    }
}

impl Repeated {
    pub const fn new() -> Repeated {
        Repeated {
            state: Mutex::new(State {
                last_written: None,
                held_back: 0,
            }),
        }
    }

    /// `Some` when the line is to be written now (with the count to append), `None` when
    /// it is held back and counted.
    pub fn admit(&self) -> Option<Repeats> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> Option<Repeats> {
        // A poisoned lock only means another thread panicked while counting; the count is
        // still usable.
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match state.last_written {
            Some(last) if now.saturating_duration_since(last) < REPEAT_INTERVAL => {
                state.held_back += 1;
                None
            }
            last => {
                state.last_written = Some(now);
                Some(Repeats {
                    held_back: std::mem::take(&mut state.held_back),
                    since_secs: last
                        .map_or(0, |last| now.saturating_duration_since(last).as_secs()),
                })
            }
        }
    }
}

/// `target` as the log shows it: `leadrelay_store::db::writer` is `leadrelay::db::writer`.
fn shown_target(target: &str) -> std::borrow::Cow<'_, str> {
    CRATES
        .iter()
        .find_map(|name| {
            let rest = target.strip_prefix(name)?;
            (rest.is_empty() || rest.starts_with("::")).then(|| format!("leadrelay{rest}").into())
        })
        .unwrap_or(target.into())
}

/// The directives of `spec` (`RUST_LOG`'s syntax) that name a module as `leadrelay::…`,
/// once for each crate the module may be in (`leadrelay::db=debug` is
/// `leadrelay_store::db=debug` and the same in the other crates).
fn crate_directives(spec: &str) -> String {
    let directives = spec.split('/').next().unwrap_or_default();
    directives
        .split(',')
        .map(str::trim)
        .filter_map(|directive| directive.strip_prefix("leadrelay::"))
        .flat_map(|rest| CRATES.iter().map(move |name| format!("{name}::{rest}")))
        .collect::<Vec<_>>()
        .join(",")
}

impl Default for Repeated {
    fn default() -> Self {
        Repeated::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_is_coloured_on_a_terminal_unless_rust_log_style_says_otherwise() {
        assert!(colour_wanted(None, true));
        assert!(!colour_wanted(None, false));
        assert!(colour_wanted(Some("always"), false));
        assert!(!colour_wanted(Some("never"), true));
        assert!(colour_wanted(Some("auto"), true));
    }

    #[test]
    fn modules_are_named_as_leadrelay_in_lines_and_in_rust_log() {
        assert_eq!(
            shown_target("leadrelay_store::db::writer"),
            "leadrelay::db::writer"
        );
        assert_eq!(shown_target("leadrelay_edge"), "leadrelay");
        assert_eq!(shown_target("leadrelay"), "leadrelay");
        assert_eq!(
            shown_target("leadrelay_storefront::x"),
            "leadrelay_storefront::x"
        );
        assert_eq!(shown_target("hyper::proto"), "hyper::proto");
        assert_eq!(
            crate_directives("info, leadrelay::db=debug,hyper=warn/regex"),
            "leadrelay_rules::db=debug,leadrelay_store::db=debug,\
             leadrelay_core::db=debug,leadrelay_edge::db=debug"
        );
        assert_eq!(crate_directives("info"), "");
    }

    #[test]
    fn one_line_per_interval_with_the_count_of_the_others() {
        let repeated = Repeated::new();
        let start = Instant::now();
        let first = repeated.admit_at(start).expect("the first line is written");
        assert_eq!(first.to_string(), "");
        for ms in 1..=250 {
            assert_eq!(repeated.admit_at(start + Duration::from_millis(ms)), None);
        }
        let later = start + REPEAT_INTERVAL;
        let written = repeated.admit_at(later).expect("a new interval writes");
        assert_eq!(
            written.to_string(),
            " (250 more like this in the last 10 s)"
        );
        assert_eq!(repeated.admit_at(later + Duration::from_millis(1)), None);
        let much_later = later + 6 * REPEAT_INTERVAL;
        let written = repeated
            .admit_at(much_later)
            .expect("a new interval writes");
        assert_eq!(written.to_string(), " (1 more like this in the last 60 s)");
    }
}
