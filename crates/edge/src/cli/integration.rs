//! `leadrelay buyer integration …`: a buyer's delivery method (DESIGN.md section 18): set a
//! checked integration document, show it, preview the exact request for a lead, reset to
//! the generic webhook, and store named secrets.
//!
//! Owns the flags, reading the files and standard input, and printing. The document, its
//! checks and the request are `crate::integration`'s. A document with problems prints
//! every problem with its path (stderr, or the error body on stdout with `--json`) and
//! exits 1. No secret value is ever printed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use serde_json::Value;

use super::output::Output;
use crate::integration::request::{build, masked};
use crate::integration::{IntegrationError, store};

#[derive(Debug, Subcommand)]
pub enum IntegrationCommand {
    /// Check an integration document and make it the buyer's delivery method: leads are
    /// posted into the buyer's own API and its answers read by the document's rules.
    #[command(
        after_help = "Example:\n  leadrelay buyer integration set sunco --file sunco-crm.json"
    )]
    Set {
        /// The buyer's id.
        buyer: crate::ids::BuyerId,
        /// The integration document (JSON); `-` reads standard input.
        #[arg(long)]
        file: PathBuf,
    },
    /// Show the buyer's delivery method: generic or mapped with its document, the URL, and
    /// which secrets are set (never their values) or still missing.
    #[command(after_help = "Example:\n  leadrelay buyer integration show sunco --json")]
    Show {
        /// The buyer's id.
        buyer: crate::ids::BuyerId,
    },
    /// Print the exact request the buyer would get for a lead (method, URL, headers with
    /// secrets masked, body) without sending it.
    #[command(
        after_help = "Example:\n  leadrelay buyer integration preview sunco --lead lead_01J0000000000000000000000"
    )]
    Preview {
        /// The buyer's id.
        buyer: crate::ids::BuyerId,
        /// The lead's id.
        #[arg(long)]
        lead: String,
    },
    /// Back to the generic signed `lead.delivered` webhook; the integration's secrets are
    /// deleted.
    #[command(after_help = "Example:\n  leadrelay buyer integration reset sunco")]
    Reset {
        /// The buyer's id.
        buyer: crate::ids::BuyerId,
    },
    /// Store a named secret the integration's headers send (`{"secret": NAME}`). The value
    /// is never printed or shown again.
    #[command(
        after_help = "Example:\n  leadrelay buyer integration secret sunco crm-key --value -"
    )]
    Secret {
        /// The buyer's id.
        buyer: crate::ids::BuyerId,
        /// The secret's name, as the document names it.
        name: String,
        /// The value; `-` reads it from standard input (a trailing newline is dropped).
        #[arg(long)]
        value: String,
    },
}

pub(super) fn run(
    path: &Path,
    out: &Output,
    command: IntegrationCommand,
) -> anyhow::Result<ExitCode> {
    match command {
        IntegrationCommand::Set { buyer, file } => {
            let text = read_text(&file)?;
            let object = buyer.to_string();
            let stored = write(path, "integration.set", object, move |conn| {
                store::set(conn, &buyer, &text)
            })?;
            finish(out, stored, |shown| {
                println!(
                    "buyer '{}' now takes leads through its own API ({})",
                    shown["buyerId"].as_str().unwrap_or_default(),
                    shown["url"].as_str().unwrap_or_default()
                );
                missing_note(shown);
            })
        }
        IntegrationCommand::Show { buyer } => {
            let shown = read(path, move |conn| store::show(conn, &buyer))?;
            finish(out, shown, print_show)
        }
        IntegrationCommand::Preview { buyer, lead } => {
            let previewed = read(path, move |conn| preview(conn, &buyer, &lead))?;
            finish(out, previewed, print_request)
        }
        IntegrationCommand::Reset { buyer } => {
            let object = buyer.to_string();
            let reset = write(path, "integration.reset", object, move |conn| {
                store::reset(conn, &buyer)
            })?;
            finish(out, reset, |shown| {
                println!(
                    "buyer '{}' takes the generic signed webhook again",
                    shown["buyerId"].as_str().unwrap_or_default()
                );
            })
        }
        IntegrationCommand::Secret { buyer, name, value } => {
            let value = secret_value(value)?;
            let object = buyer.to_string();
            let stored = write(path, "integration.secret", object, move |conn| {
                store::set_secret(conn, &buyer, &name, &value, crate::clock::now_ms())
            })?;
            finish(out, stored, |shown| {
                println!(
                    "secret '{}' of buyer '{}' stored (it is not shown again)",
                    shown["secret"].as_str().unwrap_or_default(),
                    shown["buyerId"].as_str().unwrap_or_default()
                );
            })
        }
    }
}

type Outcome = Result<Value, IntegrationError>;

/// Opens the database, runs `change` as one write job with its audit entry (`action` on
/// buyer `object`; the view's secret names appear as "rotated") and closes it again.
fn write(
    path: &Path,
    action: &'static str,
    object: String,
    change: impl FnOnce(&rusqlite::Connection) -> Outcome + Send + 'static,
) -> anyhow::Result<Outcome> {
    let db = super::setup::open(path)?;
    let actor = super::actor();
    let done = db.write_blocking(move |conn| {
        let shown = change(conn)?;
        let changes = crate::audit::diff(&Value::Null, &shown);
        let now = crate::clock::now_ms();
        crate::audit::record(conn, &actor, action, &object, &changes, now)?;
        Ok(shown)
    });
    db.close();
    Ok(done)
}

/// Opens the database, runs `query` and closes it again.
fn read(
    path: &Path,
    query: impl FnOnce(&rusqlite::Connection) -> Outcome,
) -> anyhow::Result<Outcome> {
    let db = super::setup::open(path)?;
    let done = db.read_blocking(query);
    db.close();
    Ok(done)
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

/// A secret's value as given to `--value`; `-` reads it from standard input (a trailing
/// newline is dropped).
pub(super) fn secret_value(value: String) -> anyhow::Result<String> {
    if value != "-" {
        return Ok(value);
    }
    let text = read_stdin()?;
    let trimmed = text.strip_suffix('\n').unwrap_or(&text);
    Ok(trimmed.strip_suffix('\r').unwrap_or(trimmed).to_string())
}

fn read_stdin() -> anyhow::Result<String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read standard input")?;
    Ok(text)
}

/// The text of `file`; `-` reads standard input.
pub(super) fn read_text(file: &Path) -> anyhow::Result<String> {
    if file == Path::new("-") {
        read_stdin()
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))
    }
}

/// The request of `buyer_id` for `lead_id`, as JSON with secrets masked.
fn preview(
    conn: &rusqlite::Connection,
    buyer_id: &crate::ids::BuyerId,
    lead_id: &str,
) -> Result<Value, IntegrationError> {
    let buyer = crate::config::buyer::find(conn, buyer_id)?
        .ok_or_else(|| IntegrationError::BuyerNotFound(buyer_id.clone()))?;
    // Text that is not one of our lead ids names no lead.
    let lead = match crate::ids::LeadId::parse(lead_id) {
        Some(id) => crate::ingest::view::find(conn, id)?,
        None => None,
    }
    .ok_or_else(|| IntegrationError::LeadNotFound(lead_id.into()))?;
    let event = crate::delivery::preview::event_for(conn, &lead, &buyer).map_err(|e| match e {
        crate::delivery::DeliveryError::Db(db) => IntegrationError::Db(db),
        other => IntegrationError::LeadNotFound(format!("{lead_id} ({other})")),
    })?;
    let signing = ["webhook-id", "webhook-timestamp", "webhook-signature"];
    let Some(document) = store::document(conn, &buyer.id)? else {
        let mut headers = serde_json::Map::new();
        headers.insert("Content-Type".into(), "application/json".into());
        for name in signing {
            headers.insert(name.into(), ADDED_WHEN_SENT.into());
        }
        return Ok(RequestPreview {
            buyer_id: &buyer.id,
            kind: "generic",
            method: "POST".into(),
            url: buyer.webhook_url.as_str().into(),
            headers,
            body: event,
            missing_secrets: Vec::new(),
        }
        .to_json());
    };
    let names = store::secret_names(conn, &buyer.id)?;
    // Values are masked in what is printed: the stored ones are not even read.
    let built = build(&document, &event, &buyer.webhook_url, |name| {
        Some(masked(name))
    })?;
    let Value::Object(mut masked) = built.masked_json() else {
        unreachable!("masked_json is an object")
    };
    let mut take = |key: &str| masked.remove(key).unwrap_or_default();
    let (method, url, body) = (take("method"), take("url"), take("body"));
    let mut headers = match take("headers") {
        Value::Object(headers) => headers,
        _ => serde_json::Map::new(),
    };
    if document.sign {
        for name in signing {
            headers.insert(name.into(), ADDED_WHEN_SENT.into());
        }
    }
    Ok(RequestPreview {
        buyer_id: &buyer.id,
        kind: "mapped",
        method,
        url,
        headers,
        body,
        missing_secrets: document
            .missing_secrets(|wanted| names.iter().any(|(name, _)| name == wanted)),
    }
    .to_json())
}

/// What a signing header shows in a preview: its value depends on the moment of sending.
const ADDED_WHEN_SENT: &str = "(added when sent)";

/// `buyer integration preview --json`: the request a buyer would get, secrets masked.
/// The headers and the body are the buyer's document's (free-form).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestPreview<'a> {
    buyer_id: &'a crate::ids::BuyerId,
    kind: &'static str,
    method: Value,
    url: Value,
    headers: serde_json::Map<String, Value>,
    body: Value,
    missing_secrets: Vec<&'a str>,
}

impl RequestPreview<'_> {
    fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a view is plain data and serialises")
    }
}

/// A previewed request as text: the request line, the headers, the body.
fn print_request(request: &Value) {
    println!(
        "{} {}",
        request["method"].as_str().unwrap_or_default(),
        request["url"].as_str().unwrap_or_default()
    );
    if let Some(headers) = request["headers"].as_object() {
        for (name, value) in headers {
            println!("{name}: {}", value.as_str().unwrap_or_default());
        }
    }
    println!();
    match &request["body"] {
        Value::String(text) => println!("{text}"),
        body => println!(
            "{}",
            serde_json::to_string_pretty(body).unwrap_or_else(|_| body.to_string())
        ),
    }
    missing_note(request);
}

fn print_show(shown: &Value) {
    println!("buyer: {}", shown["buyerId"].as_str().unwrap_or_default());
    println!(
        "integration: {}",
        shown["kind"].as_str().unwrap_or_default()
    );
    println!("url: {}", shown["url"].as_str().unwrap_or_default());
    if let Some(document) = shown["document"].as_object() {
        println!(
            "document:\n{}",
            serde_json::to_string_pretty(document).unwrap_or_default()
        );
    }
    let names: Vec<&str> = shown["secrets"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["name"].as_str()).collect())
        .unwrap_or_default();
    if !names.is_empty() {
        println!("secrets set: {}", names.join(", "));
    }
    missing_note(shown);
}

fn missing_note(shown: &Value) {
    let missing: Vec<&str> = shown["missingSecrets"]
        .as_array()
        .map(|m| m.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for name in missing {
        eprintln!(
            "warning: secret '{name}' is not set; leads wait until it is: \
             leadrelay buyer integration secret {} {name} --value -",
            shown["buyerId"].as_str().unwrap_or("BUYER")
        );
    }
}

/// Prints a refused operation (every problem of a bad document with its path) and exits 1.
fn failed(out: &Output, e: IntegrationError) -> anyhow::Result<ExitCode> {
    if matches!(e, IntegrationError::Db(_) | IntegrationError::Stored { .. }) {
        return Err(e.into());
    }
    if out.is_json() {
        out.print(&e.to_json());
    } else {
        let mut text = format!("error: {e}\n");
        if let IntegrationError::InvalidDocument { problems, .. } = &e {
            text.push_str(&super::mapping::problem_lines(problems));
        }
        eprint!("{text}");
    }
    Ok(ExitCode::FAILURE)
}

/// The document of `text`, for tests of the CLI's examples.
#[cfg(test)]
fn parses(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .ok()
        .is_some_and(|v| crate::integration::IntegrationDocument::parse(&v).is_ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_readme_documents_parse() {
        assert!(super::parses(include_str!(
            "../../../../docs/examples/crm-integration.json"
        )));
        assert!(super::parses(include_str!(
            "../../../../docs/examples/form-integration.json"
        )));
    }
}
