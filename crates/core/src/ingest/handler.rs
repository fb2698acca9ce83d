//! The steps of one ingest request (SPEC.md 4.2 and 4.3) before its writer job, the
//! pipeline of DESIGN.md section 2 up to the leads ready to store: admission (source and
//! secret, [`admit`]), validation against the kept products, normalisation and quality
//! ([`prepare`]), the suppression list ([`suppressed`]) and the check steps
//! ([`run_checks`]).
//!
//! Owns where each step runs: source lookup (with the products) and the suppression lookup
//! on the read pool, the rest on the request's task, never in a writer job. The order of the
//! steps, the bids and the writer job are `accept`'s; the HTTP half (path, headers,
//! reading the body, the status code) is `http::handlers::ingest`, which calls [`admit`]
//! before it reads the body and `accept::ingest` after.

use super::IngestError;
use super::catalog::Catalog;
use super::kept::{Admission, Kept, WorkspaceRules};
use super::problem::Problem;
use super::quality;
use super::shape::Item;
use super::store::PreparedLead;
use super::validate;
use crate::config::container::ContainerKind;
use crate::config::source::Source;
use crate::db::Db;

/// The source a request names, with its workspace's rules, if it exists, is enabled, is in
/// the named container and `presented` holds its secret. Source (404) and secret (401) are
/// decided before the body is read, as DESIGN.md orders them.
pub fn admit(
    db: &Db,
    kept: &Kept,
    kind: ContainerKind,
    container_id: String,
    source_id: String,
    presented: &[&str],
) -> Result<Admission, IngestError> {
    let admission = find_source(db, kept, kind, container_id, source_id)?;
    authenticate(&admission.source, presented)?;
    Ok(admission)
}

/// What [`admit`] would answer, from the kept copy and without reading the file, when the
/// copy holds the source and admits the request (enabled, in the path's container, its
/// secret presented): ingest's writer job then confirms the copy's stamp (`kept`'s
/// `StampCheck`). `None` otherwise, and the request goes to [`admit`], so a refusal always
/// rests on the file as it is now. Nor when the workspace runs check steps: they ask a third
/// party, which a request on a stale copy must not do.
pub fn admit_kept(
    kept: &Kept,
    kind: ContainerKind,
    container_id: &str,
    source_id: &str,
    presented: &[&str],
) -> Option<Admission> {
    let admission = kept.kept(&crate::ids::SourceId::from(source_id))?;
    let admits = reachable(&admission.source, kind, container_id)
        && admission.rules.steps.is_empty()
        && authenticate(&admission.source, presented).is_ok();
    admits.then_some(admission)
}

/// Whether `source` takes leads through a path naming a container of `kind` with id
/// `container_id`: enabled, and in that container.
fn reachable(source: &Source, kind: ContainerKind, container_id: &str) -> bool {
    source.takes_leads() && source.container_kind == kind && source.container_id == container_id
}

/// The enabled source named by the path, in the container the path names; anything else
/// is 404, so a source cannot be reached through another channel's or table's path.
///
/// This read, like the product lookup, runs on the request's task rather than through
/// `Db::read`: it is one primary-key lookup on a pooled connection (microseconds, and WAL
/// readers never wait for the writer), while a hop to a blocking thread and back costs
/// more than the query and, on two cores, limits how many leads a second the server takes.
/// What it reads is kept between requests while the file's stamp says it is unchanged
/// (`kept`).
fn find_source(
    db: &Db,
    kept: &Kept,
    kind: ContainerKind,
    container_id: String,
    source_id: String,
) -> Result<Admission, IngestError> {
    if !crate::ids::is_valid(&container_id) || !crate::ids::is_valid(&source_id) {
        return Err(IngestError::SourceNotFound);
    }
    let source_id = crate::ids::SourceId::from(source_id);
    match db.read_blocking(|conn| kept.find(conn, &source_id))? {
        Some(admission) if reachable(&admission.source, kind, &container_id) => Ok(admission),
        _ => Err(IngestError::SourceNotFound),
    }
}

/// The source's secret, when it has one, among the presented ones (or its previous one
/// during a rotation's overlap); compared in constant time.
fn authenticate(source: &Source, presented: &[&str]) -> Result<(), IngestError> {
    if !source.secret.is_set() {
        return Ok(());
    }
    if presented.is_empty() {
        return Err(IngestError::SecretMissing);
    }
    if !source.secret.accepts(presented, crate::clock::now_ms()) {
        return Err(IngestError::SecretInvalid);
    }
    Ok(())
}

/// One item after validation: ready to store, or its problems.
pub(crate) enum Prepared {
    /// A lead for the writer, and the warnings its answer carries.
    Valid(Box<PreparedLead>, Vec<Problem>),
    Invalid {
        external_id: Option<String>,
        problems: Vec<Problem>,
        /// The ping the lead was the post of: its reservations are given back.
        ping_id: Option<String>,
        warnings: Vec<Problem>,
    },
}

/// Completes an item's validation (products) and prepares it for the writer.
pub(crate) fn prepare(item: Item, catalog: &Catalog) -> Prepared {
    let Item {
        draft,
        mut problems,
        raw,
        ..
    } = item;
    let Some(mut draft) = draft else {
        return Prepared::Invalid {
            external_id: None,
            problems,
            ping_id: None,
            warnings: Vec::new(),
        };
    };
    let warnings = std::mem::take(&mut draft.warnings);
    let lead = validate::complete(draft, catalog, &mut problems);
    if !problems.is_empty() {
        return Prepared::Invalid {
            external_id: lead.fields.external_id,
            problems,
            ping_id: lead.ping_id,
            warnings,
        };
    }
    let quality = quality::assess(&lead.fields);
    Prepared::Valid(Box::new(PreparedLead::new(lead, raw, quality)), warnings)
}

/// The leads of `leads` (by index) whose email or phone is on the workspace's suppression
/// list, with the field that is (DESIGN.md section 22), to be refused; under the
/// workspace's `flag` action they are flagged in place instead and none is returned. No
/// read at all when the workspace never wrote a list (no allocation: the empty `Vec`
/// allocates nothing), one indexed lookup per contact on the pool otherwise.
pub(crate) fn suppressed(
    db: &Db,
    rules: &WorkspaceRules,
    target: &Source,
    leads: &mut [PreparedLead],
) -> Result<Vec<(usize, &'static str)>, IngestError> {
    use crate::config::workspace::SuppressionAction;
    use crate::suppression::Kind;
    let Some(list) = &rules.suppression else {
        return Ok(Vec::new());
    };
    db.read_blocking(|conn| {
        let mut refused = Vec::new();
        for (index, lead) in leads.iter_mut().enumerate() {
            let mut field = None;
            for (kind, key) in [
                (Kind::Email, &lead.email_key),
                (Kind::Phone, &lead.phone_key),
            ] {
                if let Some(key) = key
                    && list.holds_key(conn, &target.workspace_id, kind, key)?
                {
                    field = Some(kind.as_str());
                    break;
                }
            }
            match (field, list.action) {
                (None, _) => {}
                (Some(_), SuppressionAction::Flag) => lead.flag_suppressed(),
                (Some(field), SuppressionAction::Reject) => refused.push((index, field)),
            }
        }
        Ok(refused)
    })
}

/// Runs the workspace's check steps for `leads` (DESIGN.md section 22), all at once, each
/// within its timeout counted from the request's arrival, on this task (never inside a
/// writer job), and records their outcomes and flags on each lead; returns the leads (by
/// index) that a step rejects, with the step's name. Nothing to do when the workspace has
/// no steps.
pub(crate) async fn run_checks(
    checks: &crate::checks::CheckClient,
    arrived: std::time::Instant,
    rules: &WorkspaceRules,
    leads: &mut [PreparedLead],
) -> Result<Vec<(usize, String)>, IngestError> {
    let steps = &rules.steps;
    if leads.is_empty() || steps.is_empty() {
        return Ok(Vec::new());
    }
    let bodies: Vec<serde_json::Value> = leads
        .iter()
        .map(|lead| serde_json::to_value(&lead.lead.fields).unwrap_or_default())
        .collect();
    let verdicts = checks.run(steps, &bodies, arrived).await;
    let mut rejected = Vec::new();
    for (index, (lead, verdict)) in leads.iter_mut().zip(verdicts).enumerate() {
        if let Some(name) = verdict.rejected_by {
            rejected.push((index, name));
        }
        lead.set_checks(verdict.records, verdict.flags);
    }
    Ok(rejected)
}

/// The problem of a lead a check step rejects; `base` is the lead's pointer.
pub(crate) fn check_failed_problem(base: &str, name: &str) -> Problem {
    Problem::new(
        base.to_string(),
        "check_failed",
        format!("the lead did not pass check step '{name}'"),
    )
}

/// The problem of a lead refused as suppressed; `base` is the lead's pointer.
pub(crate) fn suppressed_problem(base: &str, field: &str) -> Problem {
    Problem::new(
        format!("{base}/{field}"),
        "suppressed",
        format!("the {field} is on the workspace's suppression list"),
    )
}
