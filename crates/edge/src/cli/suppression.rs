//! `leadrelay suppression add|import|remove|check|list` (DESIGN.md section 22). The list is
//! `suppression`'s; this file parses flags, streams an import's CSV in batches and prints.
//! No command prints or logs a suppressed value.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgGroup, Args, Subcommand};
use serde::Serialize;
use serde_json::Value;

use super::output::Output;
use crate::db::Db;
use crate::suppression::{self, Imported, Kind};

/// Rows per writer job of an import: a few thousand keep each job short (other writers
/// wait for it) and the memory of an import of any size bounded.
const IMPORT_BATCH: usize = 4000;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("contact").required(true).args(["email", "phone"])))]
pub struct Contact {
    /// The workspace whose list it is.
    #[arg(long)]
    workspace: String,
    /// An email (matched trimmed and lower-cased, as the duplicate rule compares).
    #[arg(long)]
    email: Option<String>,
    /// A phone number (matched by its digits).
    #[arg(long)]
    phone: Option<String>,
}

impl Contact {
    fn kind_value(&self) -> (Kind, &str) {
        match (&self.email, &self.phone) {
            (Some(email), _) => (Kind::Email, email),
            (_, Some(phone)) => (Kind::Phone, phone),
            (None, None) => unreachable!("clap requires --email or --phone"),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum SuppressionCommand {
    /// Suppress an email or a phone: leads with it are refused (or flagged) from now on.
    #[command(
        after_help = "Example:\n  leadrelay suppression add --workspace acme --email ann@example.org --reason opt-out"
    )]
    Add {
        #[command(flatten)]
        contact: Contact,
        /// Why (e.g. `opt-out`, a ticket number; never the value itself).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Suppress every email and phone of a CSV file whose header row names `email` and/or
    /// `phone`; prints how many were added, already present and unusable.
    #[command(
        after_help = "Example:\n  leadrelay suppression import --workspace acme --file dnc.csv"
    )]
    Import {
        /// The workspace whose list it is.
        #[arg(long)]
        workspace: String,
        /// The CSV file.
        #[arg(long)]
        file: PathBuf,
        /// The reason stored with each entry added.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Take an email or a phone off the list.
    #[command(
        after_help = "Example:\n  leadrelay suppression remove --workspace acme --phone '+49 151 12345678'"
    )]
    Remove {
        #[command(flatten)]
        contact: Contact,
    },
    /// Whether an email or a phone is suppressed, with the reason and when.
    #[command(
        after_help = "Example:\n  leadrelay suppression check --workspace acme --email ann@example.org"
    )]
    Check {
        #[command(flatten)]
        contact: Contact,
    },
    /// The entries of a list, newest first: id (the start of the keyed hash), kind, reason,
    /// when added. Never the values: the list does not hold them.
    #[command(after_help = "Example:\n  leadrelay suppression list --workspace acme")]
    List {
        /// The workspace whose list it is.
        #[arg(long)]
        workspace: String,
        /// At most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: u64,
    },
}

pub(super) fn run(
    path: &Path,
    out: &Output,
    command: SuppressionCommand,
) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let result = match command {
        SuppressionCommand::Add { contact, reason } => add(&db, out, contact, reason),
        SuppressionCommand::Import {
            workspace,
            file,
            reason,
        } => import(&db, out, workspace, &file, reason),
        SuppressionCommand::Remove { contact } => remove(&db, out, contact),
        SuppressionCommand::Check { contact } => check(&db, out, &contact),
        SuppressionCommand::List { workspace, limit } => list(&db, out, &workspace, limit),
    };
    db.close();
    result
}

fn add(
    db: &Db,
    out: &Output,
    contact: Contact,
    reason: Option<String>,
) -> anyhow::Result<ExitCode> {
    let actor = super::actor();
    let added = db.write_blocking(move |conn| {
        let (kind, value) = contact.kind_value();
        let now = crate::clock::now_ms();
        let added = suppression::add(
            conn,
            &contact.workspace,
            kind,
            value,
            reason.as_deref(),
            now,
        )?;
        // The value is never written, not even hashed: only its kind and the reason.
        let changes = crate::audit::Changes::new()
            .set("kind", Value::Null, kind.as_str())
            .set("reason", Value::Null, reason.as_deref())
            .set("added", Value::Null, added);
        crate::audit::record(
            conn,
            &actor,
            "suppression.add",
            &contact.workspace,
            &changes,
            now,
        )?;
        Ok::<_, suppression::SuppressionError>(added)
    })?;
    out.show(&Added {
        added,
        already_present: !added,
    });
    Ok(ExitCode::SUCCESS)
}

/// What `suppression add` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Added {
    added: bool,
    already_present: bool,
}

/// What `suppression check` prints: whether the contact is on the list, and why and since
/// when (null when not).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Checked {
    suppressed: bool,
    reason: Option<String>,
    added_at: Option<String>,
}

/// What `suppression import` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ImportCounts {
    added: u64,
    already_present: u64,
    unusable: u64,
}

fn remove(db: &Db, out: &Output, contact: Contact) -> anyhow::Result<ExitCode> {
    let actor = super::actor();
    let removed = db.write_blocking(move |conn| {
        let (kind, value) = contact.kind_value();
        let removed = suppression::remove(conn, &contact.workspace, kind, value)?;
        let changes = crate::audit::Changes::new()
            .set("kind", Value::Null, kind.as_str())
            .set("removed", Value::Null, removed);
        let now = crate::clock::now_ms();
        crate::audit::record(
            conn,
            &actor,
            "suppression.remove",
            &contact.workspace,
            &changes,
            now,
        )?;
        Ok::<_, suppression::SuppressionError>(removed)
    })?;
    out.show(&super::output::Removed { removed });
    Ok(ExitCode::SUCCESS)
}

fn check(db: &Db, out: &Output, contact: &Contact) -> anyhow::Result<ExitCode> {
    let (kind, value) = contact.kind_value();
    let entry =
        db.read_blocking(|conn| suppression::check(conn, &contact.workspace, kind, value))?;
    out.show(&Checked {
        suppressed: entry.is_some(),
        added_at: entry
            .as_ref()
            .map(|entry| crate::clock::iso(entry.added_at)),
        reason: entry.and_then(|entry| entry.reason),
    });
    Ok(ExitCode::SUCCESS)
}

fn list(db: &Db, out: &Output, workspace: &str, limit: u64) -> anyhow::Result<ExitCode> {
    let entries = db.read_blocking(|conn| {
        suppression::list(
            conn,
            workspace,
            usize::try_from(limit).unwrap_or(usize::MAX),
        )
    })?;
    let shown: Vec<Value> = entries.iter().map(suppression::Entry::to_json).collect();
    out.print_list(&shown);
    Ok(ExitCode::SUCCESS)
}

/// Streams the CSV: one writer job per [`IMPORT_BATCH`] rows, so memory stays bounded
/// whatever the file's size.
fn import(
    db: &Db,
    out: &Output,
    workspace: String,
    file: &Path,
    reason: Option<String>,
) -> anyhow::Result<ExitCode> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    let headers = reader.headers()?.clone();
    let column = |name: &str| {
        headers.iter().position(|h| {
            h.trim()
                .trim_start_matches('\u{feff}')
                .eq_ignore_ascii_case(name)
        })
    };
    let (email, phone) = (column("email"), column("phone"));
    if email.is_none() && phone.is_none() {
        anyhow::bail!(
            "the header row of {} names neither email nor phone",
            file.display()
        );
    }
    let mut counts = Imported::default();
    let mut batch: Vec<(Kind, String)> = Vec::with_capacity(IMPORT_BATCH);
    let mut record = csv::StringRecord::new();
    loop {
        let more = match reader.read_record(&mut record) {
            Ok(more) => more,
            // A row the CSV reader cannot take (e.g. not UTF-8) counts as unusable.
            Err(_) => {
                counts.unusable += 1;
                continue;
            }
        };
        if more {
            for (index, kind) in [(email, Kind::Email), (phone, Kind::Phone)] {
                match index.map(|i| record.get(i).unwrap_or("").trim()) {
                    Some("") | None => {}
                    Some(value) => batch.push((kind, value.to_string())),
                }
            }
        }
        if batch.len() >= IMPORT_BATCH || (!more && !batch.is_empty()) {
            let values = std::mem::replace(&mut batch, Vec::with_capacity(IMPORT_BATCH));
            let workspace = workspace.clone();
            let reason = reason.clone();
            let actor = super::actor();
            counts.add(db.write_blocking(move |conn| {
                let now = crate::clock::now_ms();
                let done =
                    suppression::import_batch(conn, &workspace, &values, reason.as_deref(), now)?;
                // One entry per batch, with its size: never a value.
                let changes = crate::audit::Changes::new()
                    .set("rows", Value::Null, values.len())
                    .set("reason", Value::Null, reason.as_deref());
                crate::audit::record(
                    conn,
                    &actor,
                    "suppression.import",
                    &workspace,
                    &changes,
                    now,
                )?;
                Ok::<_, suppression::SuppressionError>(done)
            })?);
        }
        if !more {
            break;
        }
    }
    out.show(&ImportCounts {
        added: counts.added,
        already_present: counts.already_present,
        unusable: counts.unusable,
    });
    Ok(ExitCode::SUCCESS)
}
