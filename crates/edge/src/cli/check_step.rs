//! `leadrelay check-step set|list|show|remove|preview|secret` (DESIGN.md section 22): the
//! third-party checks ingest runs for a workspace's leads.
//!
//! Owns the flags, reading the files and standard input, running a preview once against
//! the real service, and printing. The document, its checks, the request and the decision
//! are `crate::checks`'. A document with problems prints every problem with its path
//! (stderr, or the error body on stdout with `--json`) and exits 1. No secret value is
//! ever printed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use super::integration::{read_text, secret_value};
use super::output::Output;
use crate::checks::{CheckError, store};

#[derive(Debug, Subcommand)]
pub enum CheckStepCommand {
    /// Check a step document and store it as a step of the workspace: from the next lead
    /// on, ingest asks the step's service about each lead before storing it.
    #[command(
        after_help = "Example:\n  leadrelay check-step set --workspace acme --name cert --file trustedform.json"
    )]
    Set {
        /// The workspace whose leads it checks.
        #[arg(long)]
        workspace: String,
        /// The step's name: letters, digits, '-' and '_'.
        #[arg(long)]
        name: String,
        /// The step document (JSON); `-` reads standard input.
        #[arg(long)]
        file: PathBuf,
    },
    /// The check steps, of one workspace or of all.
    #[command(after_help = "Example:\n  leadrelay check-step list --workspace acme")]
    List {
        /// Only this workspace's steps.
        #[arg(long)]
        workspace: Option<String>,
    },
    /// A step's document and which secrets are set (never their values) or still missing.
    #[command(after_help = "Example:\n  leadrelay check-step show cert --json")]
    Show {
        /// The step's name.
        name: String,
    },
    /// Remove a step and its secrets: leads are no longer checked by it.
    #[command(after_help = "Example:\n  leadrelay check-step remove cert")]
    Remove {
        /// The step's name.
        name: String,
    },
    /// Run a step once for a lead against the real service and print the request (secrets
    /// masked) and the decision. Nothing is stored.
    #[command(after_help = "Example:\n  leadrelay check-step preview cert --lead lead.json")]
    Preview {
        /// The step's name.
        name: String,
        /// A Lead object as a partner posts it (JSON); `-` reads standard input.
        #[arg(long)]
        lead: PathBuf,
    },
    /// Store a named secret the step's headers send (`{"secret": KEY}`). The value is never
    /// printed or shown again.
    #[command(after_help = "Example:\n  leadrelay check-step secret cert cert-key --value -")]
    Secret {
        /// The step's name.
        name: String,
        /// The secret's name, as the document names it.
        key: String,
        /// The value; `-` reads it from standard input (a trailing newline is dropped).
        #[arg(long)]
        value: String,
    },
}

type Outcome = Result<Value, CheckError>;

pub(super) fn run(
    path: &Path,
    out: &Output,
    command: CheckStepCommand,
) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let done = match command {
        CheckStepCommand::Set {
            workspace,
            name,
            file,
        } => {
            let text = read_text(&file)?;
            let actor = super::actor();
            let done = db.write_blocking(move |conn| {
                let now = crate::clock::now_ms();
                let before = store::show(conn, &name).unwrap_or(Value::Null);
                let shown = store::set(conn, &workspace, &name, &text, now)?;
                crate::audit::record_diff(
                    conn,
                    &actor,
                    "check_step.set",
                    &name,
                    &before,
                    &shown,
                    now,
                )?;
                Ok(shown)
            });
            finish(out, done, |shown| {
                println!(
                    "check step '{}' of workspace '{}' stored",
                    shown["name"].as_str().unwrap_or_default(),
                    shown["workspaceId"].as_str().unwrap_or_default()
                );
                missing_note(shown);
            })
        }
        CheckStepCommand::List { workspace } => {
            let done = db
                .read_blocking(|conn| store::list(conn, workspace.as_deref()))
                .map(Value::Array);
            finish(out, done, |listed| {
                for step in listed.as_array().into_iter().flatten() {
                    println!(
                        "{}  {}  {}  onFail={} onError={}",
                        step["name"].as_str().unwrap_or_default(),
                        step["workspaceId"].as_str().unwrap_or_default(),
                        step["url"].as_str().unwrap_or_default(),
                        step["onFail"].as_str().unwrap_or_default(),
                        step["onError"].as_str().unwrap_or_default()
                    );
                }
            })
        }
        CheckStepCommand::Show { name } => {
            let done = db.read_blocking(|conn| store::show(conn, &name));
            finish(out, done, |shown| {
                println!(
                    "{}",
                    serde_json::to_string_pretty(shown).unwrap_or_default()
                );
                missing_note(shown);
            })
        }
        CheckStepCommand::Remove { name } => {
            let actor = super::actor();
            let done = db.write_blocking(move |conn| {
                let removed = store::remove(conn, &name)?;
                let changes = crate::audit::Changes::new().set("state", "live", "removed");
                crate::audit::record(
                    conn,
                    &actor,
                    "check_step.remove",
                    &name,
                    &changes,
                    crate::clock::now_ms(),
                )?;
                Ok(removed)
            });
            finish(out, done, |shown| {
                println!(
                    "check step '{}' removed",
                    shown["name"].as_str().unwrap_or_default()
                );
            })
        }
        CheckStepCommand::Preview { name, lead } => {
            let text = read_text(&lead)?;
            let step = db.read_blocking(|conn| store::find(conn, &name));
            let done = match step {
                Ok(step) => preview(&step, &text),
                Err(e) => Err(e),
            };
            finish(out, done, print_preview)
        }
        CheckStepCommand::Secret { name, key, value } => {
            let value = secret_value(value)?;
            let actor = super::actor();
            let done = db.write_blocking(move |conn| {
                let now = crate::clock::now_ms();
                let stored = store::set_secret(conn, &name, &key, &value, now)?;
                // The secret's value never enters the log: only that it changed.
                let changes = crate::audit::Changes::new().set(
                    &format!("secret.{key}"),
                    Value::Null,
                    crate::audit::ROTATED,
                );
                crate::audit::record(conn, &actor, "check_step.secret", &name, &changes, now)?;
                Ok(stored)
            });
            finish(out, done, |shown| {
                println!(
                    "secret '{}' of check step '{}' stored (it is not shown again)",
                    shown["secret"].as_str().unwrap_or_default(),
                    shown["name"].as_str().unwrap_or_default()
                );
            })
        }
    };
    db.close();
    done
}

/// Runs `step` once for the Lead object `text` (read as ingest reads a lead) against the
/// real service; the request with secrets masked, and the decision.
fn preview(step: &crate::checks::run::Step, text: &str) -> Outcome {
    let Ok(Value::Object(body)) = serde_json::from_str::<Value>(text) else {
        return Err(CheckError::InvalidLead("expected a Lead object".into()));
    };
    let draft = crate::ingest::validate::lead(body, "", &mut Vec::new());
    let lead = serde_json::to_value(&draft.fields).unwrap_or_default();
    // `masked_json` shows each secret header as its name, never its value.
    let request = crate::checks::run::build(step, &lead)
        .ok()
        .map(|built| built.masked_json());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CheckError::InvalidLead(format!("cannot start the client: {e}")))?;
    let client = crate::outbox::check::client(crate::outbound_url::Reach::default());
    let verdict = runtime.block_on(client.run(
        std::slice::from_ref(step),
        std::slice::from_ref(&lead),
        std::time::Instant::now(),
    ));
    let verdict = verdict.into_iter().next().unwrap_or_default();
    let action = match (&verdict.rejected_by, verdict.flags.first()) {
        (Some(_), _) => Action::Decided("reject"),
        (None, Some(flag)) => Action::Flag { flag },
        (None, None) => Action::Decided("pass"),
    };
    Ok(serde_json::to_value(PreviewView {
        name: &step.name,
        request,
        check: verdict.records.first(),
        action,
    })
    .expect("a view is plain data and serialises"))
}

/// `check step preview --json`: the request as sent (secrets masked; free-form, as the
/// step's template made it), the check's record and what ingest would do.
#[derive(serde::Serialize)]
struct PreviewView<'a> {
    name: &'a str,
    request: Option<Value>,
    check: Option<&'a crate::checks::run::CheckRecord>,
    action: Action<'a>,
}

/// `"reject"`, `"pass"`, or `{"flag": …}`.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Action<'a> {
    Decided(&'static str),
    Flag { flag: &'a str },
}

fn print_preview(shown: &Value) {
    let request = &shown["request"];
    if request.is_object() {
        println!(
            "{} {}",
            request["method"].as_str().unwrap_or_default(),
            request["url"].as_str().unwrap_or_default()
        );
        for (name, value) in request["headers"].as_object().into_iter().flatten() {
            println!("{name}: {}", value.as_str().unwrap_or_default());
        }
        println!();
        println!("{}", request["body"]);
        println!();
    }
    let check = &shown["check"];
    println!(
        "outcome: {} ({} ms)",
        check["outcome"].as_str().unwrap_or_default(),
        check["latencyMs"]
    );
    if let Some(reason) = check["reason"].as_str() {
        println!("reason: {reason}");
    }
    if check["kept"]
        .as_object()
        .is_some_and(|kept| !kept.is_empty())
    {
        println!("kept: {}", check["kept"]);
    }
    println!("action: {}", shown["action"]);
}

/// Prints what a command did (as JSON under `--json`, else as `say` puts it), or why it
/// was refused.
fn finish(out: &Output, done: Outcome, say: impl FnOnce(&Value)) -> anyhow::Result<ExitCode> {
    match done {
        Ok(shown) if out.is_json() => out.print(&shown),
        Ok(shown) => say(&shown),
        Err(e) => return failed(out, e),
    }
    Ok(ExitCode::SUCCESS)
}

fn missing_note(shown: &Value) {
    for name in shown["missingSecrets"].as_array().into_iter().flatten() {
        let name = name.as_str().unwrap_or_default();
        eprintln!(
            "warning: secret '{name}' is not set; the step ends in error until it is: \
             leadrelay check-step secret {} {name} --value -",
            shown["name"].as_str().unwrap_or("STEP")
        );
    }
}

/// Prints a refused operation (every problem of a bad document with its path) and exits 1.
fn failed(out: &Output, e: CheckError) -> anyhow::Result<ExitCode> {
    if matches!(e, CheckError::Db(_) | CheckError::Stored { .. }) {
        return Err(e.into());
    }
    if out.is_json() {
        out.print(&e.to_json());
    } else {
        let mut text = format!("error: {e}\n");
        if let CheckError::InvalidDocument { problems, .. } = &e {
            text.push_str(&super::mapping::problem_lines(problems));
        }
        eprint!("{text}");
    }
    Ok(ExitCode::FAILURE)
}
