//! The two ingest endpoints (SPEC.md 4.2 and 4.3): one handler for channel and lead-table
//! sources, running the pipeline of DESIGN.md section 2.
//!
//! Owns the order of the steps and where each runs: source lookup and product lookup on
//! the read pool, parsing, validation, normalisation and quality on the request's task,
//! and one writer job for all of a request's leads. The steps themselves live in the
//! sibling modules.

use std::sync::Arc;

use hyper::HeaderMap;

use super::IngestError;
use super::catalog::{self, Catalog, References};
use super::problem::Problem;
use super::quality;
use super::result::{self, BatchAnswer};
use super::shape::{self, Item, Shape};
use super::store::{self, Outcome, PreparedLead, Target};
use super::validate;
use crate::config::container::ContainerKind;
use crate::config::source::{self, Source};
use crate::db::Db;
use crate::http::router::Params;
use crate::http::{ApiError, AppState, Request, Response, auth, body, response};

/// `POST /api/webhooks/channels/{channelId}/sources/{sourceId}/leads` (`kind` channel) and
/// `POST /api/webhooks/lead-tables/{tableId}/sources/{sourceId}/leads` (`kind` table).
pub async fn handle(
    state: &AppState,
    request: Request,
    kind: ContainerKind,
    params: Params,
) -> Result<Response, ApiError> {
    let [container_id, source_id] =
        <[String; 2]>::try_from(params).map_err(|_| ApiError::from(IngestError::SourceNotFound))?;
    let source = find_source(&state.db, kind, container_id, source_id).await?;
    authenticate(&source, request.headers())?;
    let bytes = body::read_bytes(request, state.config.body_limit).await?;
    let body = body::parse_json(&bytes)?;
    // A body that parsed as JSON is UTF-8 text.
    let raw = std::str::from_utf8(&bytes).ok().map(str::to_string);
    // A published partner-native mapping (DESIGN.md section 9) transforms `body` into a
    // native shape here, before shape detection (400 `mapping_error` on failure). The
    // mapped leads are then stored as JSON, since the received text is not their text.
    let (body, raw) = match source.mapping_published {
        Some(_) => (crate::mapping::apply_published(&source, body)?, None),
        None => (body, raw),
    };
    let shape = shape::detect(body, raw, kind).map_err(IngestError::body_invalid)?;
    let target = Arc::new(Target::of(&source));
    let writer = Writer {
        db: &state.db,
        outbox: &state.outbox,
    };
    let (status, answer) = match shape {
        Shape::Single(item) => ingest_single(&writer, target, *item).await?,
        Shape::Batch(items) => ingest_batch(&writer, target, items).await?,
    };
    Ok(response::json(status, &answer))
}

/// The enabled source named by the path, in the container the path names; anything else
/// is 404, so a source cannot be reached through another channel's or table's path.
async fn find_source(
    db: &Db,
    kind: ContainerKind,
    container_id: String,
    source_id: String,
) -> Result<Source, IngestError> {
    if !crate::ids::is_valid(&container_id) || !crate::ids::is_valid(&source_id) {
        return Err(IngestError::SourceNotFound);
    }
    let found = db
        .read(move |conn| source::find(conn, &source_id).map_err(IngestError::from))
        .await?;
    match found {
        Some(source)
            if source.enabled
                && source.container_kind == kind
                && source.container_id == container_id =>
        {
            Ok(source)
        }
        _ => Err(IngestError::SourceNotFound),
    }
}

/// The source's secret, when it has one, in either header; compared in constant time.
fn authenticate(source: &Source, headers: &HeaderMap) -> Result<(), IngestError> {
    let Some(stored_hash) = &source.secret_hash else {
        return Ok(());
    };
    let presented = auth::presented_secrets(headers);
    if presented.is_empty() {
        return Err(IngestError::SecretMissing);
    }
    if !auth::any_matches(&presented, stored_hash) {
        return Err(IngestError::SecretInvalid);
    }
    Ok(())
}

/// The products the items' interests name, read once for the whole request.
async fn load_catalog(db: &Db, target: &Target, items: &[Item]) -> Result<Catalog, IngestError> {
    let references = References::of(items.iter().filter_map(|item| item.draft.as_ref()));
    if references.is_empty() {
        return Ok(Catalog::default());
    }
    let workspace_id = target.workspace_id.clone();
    db.read(move |conn| catalog::load(conn, &workspace_id, &references).map_err(IngestError::from))
        .await
}

/// One item after validation: ready to store, or its problems.
enum Prepared {
    Valid(Box<PreparedLead>),
    Invalid {
        external_id: Option<String>,
        problems: Vec<Problem>,
    },
}

/// Completes an item's validation (products) and prepares it for the writer.
fn prepare(item: Item, catalog: &Catalog) -> Prepared {
    let Item {
        draft,
        mut problems,
        raw,
        ..
    } = item;
    let Some(draft) = draft else {
        return Prepared::Invalid {
            external_id: None,
            problems,
        };
    };
    let lead = validate::complete(draft, catalog, &mut problems);
    if !problems.is_empty() {
        return Prepared::Invalid {
            external_id: lead.external_id,
            problems,
        };
    }
    let quality = quality::assess(&lead);
    Prepared::Valid(Box::new(PreparedLead::new(lead, raw, quality)))
}

/// Where the leads are written, and the outbox to wake when auto-delivery created events.
struct Writer<'a> {
    db: &'a Db,
    outbox: &'a crate::outbox::Notifier,
}

/// Stores `leads` in one writer job; answers after the commit. Events that auto-delivery
/// wrote in that job are committed now, so the outbox workers are woken to send them at
/// once rather than at their next poll.
async fn write(
    writer: &Writer<'_>,
    target: Arc<Target>,
    leads: Vec<PreparedLead>,
) -> Result<Vec<Outcome>, IngestError> {
    let outcomes = writer
        .db
        .write(move |conn| store::store_all(conn, &target, &leads, crate::clock::now_ms()))
        .await?;
    if outcomes
        .iter()
        .any(|o| matches!(o, Outcome::Created { auto_delivered, .. } if *auto_delivered > 0))
    {
        writer.outbox.notify();
    }
    Ok(outcomes)
}

async fn ingest_single(
    writer: &Writer<'_>,
    target: Arc<Target>,
    item: Item,
) -> Result<(hyper::StatusCode, serde_json::Value), IngestError> {
    let catalog = load_catalog(writer.db, &target, std::slice::from_ref(&item)).await?;
    let lead = match prepare(item, &catalog) {
        Prepared::Valid(lead) => *lead,
        Prepared::Invalid { problems, .. } => return Err(IngestError::lead_invalid(problems)),
    };
    let outcome = write(writer, target.clone(), vec![lead])
        .await?
        .pop()
        .ok_or_else(|| IngestError::Internal("the writer returned no outcome".into()))?;
    let created = outcome.created();
    Ok(result::single(outcome.into_item(&target), created))
}

async fn ingest_batch(
    writer: &Writer<'_>,
    target: Arc<Target>,
    items: Vec<Item>,
) -> Result<(hyper::StatusCode, serde_json::Value), IngestError> {
    let catalog = load_catalog(writer.db, &target, &items).await?;
    let count = items.len();
    let prepared: Vec<Prepared> = items
        .into_iter()
        .map(|item| prepare(item, &catalog))
        .collect();
    let mut answer = BatchAnswer::with_capacity(count);
    let mut invalid = Vec::new();
    let mut valid = Vec::with_capacity(count);
    let mut valid_positions = Vec::with_capacity(count);
    for (position, item) in prepared.into_iter().enumerate() {
        match item {
            Prepared::Valid(lead) => {
                valid_positions.push(position);
                valid.push(*lead);
            }
            Prepared::Invalid {
                external_id,
                problems,
            } => invalid.push((position, external_id, problems)),
        }
    }
    let outcomes = if valid.is_empty() {
        Vec::new()
    } else {
        write(writer, target.clone(), valid).await?
    };
    let mut stored = valid_positions.into_iter().zip(outcomes).peekable();
    let mut rejected = invalid.into_iter().peekable();
    for position in 0..count {
        if stored.peek().is_some_and(|(p, _)| *p == position) {
            let (_, outcome) = stored.next().expect("peeked just now");
            answer.push(position, outcome.into_item(&target));
        } else if let Some((_, external_id, problems)) =
            rejected.next_if(|(p, _, _)| *p == position)
        {
            answer.push(
                position,
                result::invalid_item(&target, external_id.as_deref(), &problems),
            );
        }
    }
    Ok(answer.finish())
}
