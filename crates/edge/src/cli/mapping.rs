//! `leadrelay mapping …`: store a checked draft, preview it on a sample, publish it, show
//! both versions, withdraw the published one.
//!
//! Owns the flags, reading the files and printing. The language and its checks live in
//! `crate::mapping`; a document or sample with problems prints every problem with its path
//! (on stderr as text, or as the HTTP error body on stdout with `--json`) and exits 1.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use serde_json::Value;

use super::output::Output;
use crate::ingest::catalog::{self, References};
use crate::ingest::problem::Problem;
use crate::ingest::shape::{self, Shape};
use crate::ingest::validate;
use crate::mapping::{MappingDocument, MappingError, store};

#[derive(Debug, Subcommand)]
pub enum MappingCommand {
    /// Check a mapping document and store it as the source's draft (ingest is unchanged).
    #[command(
        after_help = "Example:\n  leadrelay mapping set sunpartner --file sunpartner-mapping.json"
    )]
    Set {
        /// The source's id.
        source: crate::ids::SourceId,
        /// The mapping document (JSON); `-` reads standard input.
        #[arg(long)]
        file: PathBuf,
    },
    /// Run the draft on a sample partner body and print the native lead(s) it produces.
    #[command(
        after_help = "Example:\n  leadrelay mapping preview sunpartner --file sunpartner-sample.json"
    )]
    Preview {
        /// The source's id.
        source: crate::ids::SourceId,
        /// A sample body as the partner would send it (JSON); `-` reads standard input.
        #[arg(long)]
        file: PathBuf,
        /// Run the published mapping instead of the draft.
        #[arg(long)]
        published: bool,
    },
    /// Make the draft the live mapping: ingest uses it from the next request on.
    #[command(after_help = "Example:\n  leadrelay mapping publish sunpartner")]
    Publish {
        /// The source's id.
        source: crate::ids::SourceId,
    },
    /// Withdraw the published mapping: the source takes the native shapes again.
    #[command(after_help = "Example:\n  leadrelay mapping unpublish sunpartner")]
    Unpublish {
        /// The source's id.
        source: crate::ids::SourceId,
    },
    /// Show the draft and the published mapping with their times and version.
    #[command(after_help = "Example:\n  leadrelay mapping show sunpartner")]
    Show {
        /// The source's id.
        source: crate::ids::SourceId,
    },
}

/// The audit entry of a publication or its withdrawal (`changed`: whether it did anything).
fn record_publication(
    conn: &rusqlite::Connection,
    actor: &crate::audit::Actor,
    action: &str,
    source: &crate::ids::SourceId,
    changed: bool,
) -> rusqlite::Result<()> {
    let changes = crate::audit::Changes::new().set("changed", Value::Null, changed);
    crate::audit::record(
        conn,
        actor,
        action,
        source.as_str(),
        &changes,
        crate::clock::now_ms(),
    )
}

pub(super) fn run(path: &Path, out: &Output, command: MappingCommand) -> anyhow::Result<ExitCode> {
    match command {
        MappingCommand::Set { source, file } => {
            let document = read_json_file(&file)?;
            let db = super::setup::open(path)?;
            let actor = super::actor();
            let stored = db.write_blocking(move |conn| {
                let state = store::set_draft(conn, &source, &document)?;
                let changes = crate::audit::Changes::new().set("draft", Value::Null, document);
                let now = crate::clock::now_ms();
                crate::audit::record(
                    conn,
                    &actor,
                    "mapping.set_draft",
                    source.as_str(),
                    &changes,
                    now,
                )?;
                Ok::<_, crate::mapping::MappingError>(state)
            });
            db.close();
            match stored {
                Ok(state) => {
                    let shown = state.to_json();
                    let note = format!(
                        "draft mapping of source '{id}' stored ({})\n\
                         try it:     leadrelay mapping preview {id} --file SAMPLE\n\
                         publish it: leadrelay mapping publish {id}",
                        summary(&shown["draft"]["document"]),
                        id = state.source_id
                    );
                    print_state(out, &shown, &note);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => problems_or_error(out, e),
            }
        }
        MappingCommand::Preview {
            source,
            file,
            published,
        } => {
            let sample = read_json_file(&file)?;
            let db = super::setup::open(path)?;
            let previewed = db.read_blocking(|conn| preview(conn, &source, published, &sample));
            db.close();
            match previewed? {
                Ok(preview) => {
                    print_preview(out, &source, published, preview);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => problems_or_error(out, e),
            }
        }
        MappingCommand::Publish { source } => {
            let db = super::setup::open(path)?;
            let actor = super::actor();
            let published = db.write_blocking(move |conn| {
                let done = store::publish(conn, &source)?;
                record_publication(conn, &actor, "mapping.publish", &source, done.1)?;
                Ok::<_, crate::mapping::MappingError>(done)
            });
            db.close();
            match published {
                Ok((state, changed)) => {
                    let shown = changed_state(&state, changed);
                    let note = if changed {
                        format!(
                            "source '{}': published mapping version {}; ingest uses it from \
                             the next request on",
                            state.source_id, state.version
                        )
                    } else {
                        format!(
                            "source '{}': the draft equals the published version {}; nothing \
                             changed",
                            state.source_id, state.version
                        )
                    };
                    print_state(out, &shown, &note);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => problems_or_error(out, e),
            }
        }
        MappingCommand::Unpublish { source } => {
            let db = super::setup::open(path)?;
            let actor = super::actor();
            let withdrawn = db.write_blocking(move |conn| {
                let done = store::unpublish(conn, &source)?;
                record_publication(conn, &actor, "mapping.unpublish", &source, done.1)?;
                Ok::<_, crate::mapping::MappingError>(done)
            });
            db.close();
            let (state, changed) = withdrawn?;
            let shown = changed_state(&state, changed);
            let note = if changed {
                format!(
                    "source '{}': published mapping withdrawn; the source takes the native \
                     shapes from the next request on",
                    state.source_id
                )
            } else {
                format!(
                    "source '{}' has no published mapping; nothing changed",
                    state.source_id
                )
            };
            print_state(out, &shown, &note);
            Ok(ExitCode::SUCCESS)
        }
        MappingCommand::Show { source } => {
            let db = super::setup::open(path)?;
            let state = db.read_blocking(|conn| store::state(conn, &source));
            db.close();
            print_state(out, &state?.to_json(), "");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Reads a JSON file (or standard input for `-`).
fn read_json_file(file: &Path) -> anyhow::Result<Value> {
    let text = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read standard input")?;
        text
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
    };
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not valid JSON: {e}",
            if file == Path::new("-") {
                "standard input".to_string()
            } else {
                file.display().to_string()
            }
        )
    })
}

/// Prints the problems of a bad document or sample and exits 1; other errors go to `main`.
fn problems_or_error(out: &Output, e: MappingError) -> anyhow::Result<ExitCode> {
    if e.problems().is_empty() {
        return Err(e.into());
    }
    if out.is_json() {
        out.print(&e.to_json());
    } else {
        eprint!("error: {e}\n{}", problem_lines(e.problems()));
    }
    Ok(ExitCode::FAILURE)
}

/// One line per problem, `  PATH: MESSAGE (CODE)`, as mapping and integration documents
/// report them.
pub(super) fn problem_lines(problems: &[crate::mapping::MappingProblem]) -> String {
    let mut text = String::new();
    for problem in problems {
        let path = if problem.path.is_empty() {
            "(whole document)"
        } else {
            &problem.path
        };
        text.push_str(&format!(
            "  {path}: {} ({})\n",
            problem.message, problem.code
        ));
    }
    text
}

/// Prints a mapping state: all of it with `--json`; as text a note on the change, or
/// (with an empty note, for `show`) both documents with one rule per line.
fn print_state(out: &Output, state: &Value, note: &str) {
    if out.is_json() {
        out.print(state);
        return;
    }
    if !note.is_empty() {
        println!("{note}");
        return;
    }
    println!("source: {}", state["sourceId"].as_str().unwrap_or_default());
    match state["published"].as_object() {
        None => println!("published: none (the source takes the native shapes)"),
        Some(published) => {
            println!(
                "published: version {}, {}",
                published["version"],
                published["publishedAt"].as_str().unwrap_or_default()
            );
            print!("{}", document_text(&published["document"]));
        }
    }
    match state["draft"].as_object() {
        None => println!("draft: none"),
        Some(draft) => {
            let updated = draft["updatedAt"].as_str().unwrap_or_default();
            if state["unpublishedChanges"] == true {
                println!("draft: stored {updated}, not published");
                print!("{}", document_text(&draft["document"]));
            } else {
                println!("draft: stored {updated}, same as the published version");
            }
        }
    }
}

/// A document as text: `items` and one `target  rule` line per field, rules as compact
/// JSON, the way they are written.
fn document_text(document: &Value) -> String {
    let mut text = String::new();
    if let Some(items) = document["items"].as_str() {
        text.push_str(&format!("  items: {items}\n"));
    }
    let Some(fields) = document["fields"].as_object() else {
        return format!("  {document}\n");
    };
    let width = fields.keys().map(|k| k.chars().count()).max().unwrap_or(0);
    for (target, rule) in fields {
        text.push_str(&format!("  {target:width$}  {rule}\n"));
    }
    text
}

/// "7 targets, a batch from /contacts".
fn summary(document: &Value) -> String {
    let targets = document["fields"].as_object().map_or(0, |f| f.len());
    let noun = if targets == 1 { "target" } else { "targets" };
    match document["items"].as_str() {
        Some(items) => format!("{targets} {noun}, a batch from the array at '{items}'"),
        None => format!("{targets} {noun}, one lead per body"),
    }
}

/// A sample run through a stored mapping, and what native validation says about it.
struct Preview {
    version: i64,
    native: Value,
    problems: Vec<Problem>,
}

/// Runs the draft (or the published mapping) of `source_id` on `sample`. The inner `Err`
/// is a sample the mapping cannot transform, with its problems; the outer one any other
/// failure.
fn preview(
    conn: &rusqlite::Connection,
    source_id: &crate::ids::SourceId,
    published: bool,
    sample: &Value,
) -> anyhow::Result<Result<Preview, MappingError>> {
    let state = store::state(conn, source_id)?;
    let (stored, name) = if published {
        (
            state.published.as_ref(),
            format!("the published mapping (version {})", state.version),
        )
    } else {
        (state.draft.as_ref(), "the draft mapping".to_string())
    };
    let Some(stored) = stored else {
        anyhow::bail!(
            "source '{source_id}' has no {} mapping",
            if published { "published" } else { "draft" }
        );
    };
    let document = MappingDocument::from_stored(&stored.text)
        .map_err(|why| anyhow::anyhow!("{name} of source '{source_id}' is not valid: {why}"))?;
    let native = match crate::mapping::transform(&document, sample) {
        Ok(native) => native,
        Err(problems) => return Ok(Err(MappingError::transform(name, problems))),
    };
    let problems = native_problems(conn, source_id, &native)?;
    Ok(Ok(Preview {
        version: state.version,
        native,
        problems,
    }))
}

/// What ingest's validation would say about `native` on `source`: whole-body problems
/// (shape, batch size) and each lead's problems, products included, with paths in the
/// native body. Duplicates and idempotency depend on the moment of ingest and are not
/// checked.
fn native_problems(
    conn: &rusqlite::Connection,
    source_id: &crate::ids::SourceId,
    native: &Value,
) -> anyhow::Result<Vec<Problem>> {
    let source = crate::config::source::get(conn, source_id)?;
    let items = match shape::detect(native.clone(), None, source.container_kind) {
        Err(problems) => return Ok(problems),
        Ok(Shape::Single(item)) => vec![*item],
        Ok(Shape::Batch(items)) => items,
    };
    let references = References::of(items.iter().filter_map(|item| item.draft.as_ref()));
    let catalog = catalog::load(conn, &source.workspace_id, &references)?;
    let mut problems = Vec::new();
    for item in items {
        problems.extend(item.problems);
        if let Some(draft) = item.draft {
            validate::complete(draft, &catalog, &mut problems);
        }
    }
    Ok(problems)
}

/// `source mapping preview --json`: what the mapping made of the sample, and whether
/// ingest would take it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PreviewView<'a> {
    source_id: &'a crate::ids::SourceId,
    mapping: &'static str,
    version: i64,
    leads: usize,
    /// The native leads the mapping made: free-form, as the partner's fields are.
    native: &'a Value,
    validation: ValidationView<'a>,
}

#[derive(serde::Serialize)]
struct ValidationView<'a> {
    valid: bool,
    problems: &'a [Problem],
}

/// A mapping's state after `publish` or `unpublish`, with whether the command changed it.
#[derive(serde::Serialize)]
struct ChangedState<'a> {
    #[serde(flatten)]
    state: store::MappingStateView<'a>,
    changed: bool,
}

fn changed_state(state: &store::MappingState, changed: bool) -> Value {
    serde_json::to_value(ChangedState {
        state: state.view(),
        changed,
    })
    .expect("a view is plain data and serialises")
}

fn print_preview(out: &Output, source: &crate::ids::SourceId, published: bool, preview: Preview) {
    let Preview {
        version,
        native,
        problems,
    } = preview;
    let leads = native["leads"].as_array().map_or(1, Vec::len);
    if out.is_json() {
        out.show(&PreviewView {
            source_id: source,
            mapping: if published { "published" } else { "draft" },
            version,
            leads,
            native: &native,
            validation: ValidationView {
                valid: problems.is_empty(),
                problems: &problems,
            },
        });
        return;
    }
    let kind = if native.get("leads").is_some() {
        format!(
            "a batch of {leads} native lead{}",
            if leads == 1 { "" } else { "s" }
        )
    } else {
        "one native lead".to_string()
    };
    let which = if published {
        "published mapping"
    } else {
        "draft mapping"
    };
    println!("the {which} of source '{source}' turns the sample into {kind}:");
    println!("{}", indented_json(&native));
    if problems.is_empty() {
        println!("native validation: passed (duplicates and idempotency are checked at ingest)");
    } else {
        println!(
            "native validation: {} (paths in the native body above):",
            crate::mapping::count_text(problems.len(), problems.len())
        );
        for problem in problems {
            println!("  {}: {} ({})", problem.path, problem.message, problem.code);
        }
    }
}

fn indented_json(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).expect("a Value always serialises");
    text.lines()
        .map(|line| format!("  {line}\n"))
        .collect::<String>()
        .trim_end()
        .to_string()
}
