//! One ingest request (SPEC.md 4.2 and 4.3) for channel and lead-table sources, from its
//! source to its answer: the pipeline of DESIGN.md section 2.
//!
//! Owns the order of the steps and where each runs: source lookup and product lookup on
//! the read pool, parsing, validation, normalisation and quality on the request's task,
//! the bids for leads to be auto-delivered to bid-priced buyers ([`ask_for_bids`]: read
//! on the pool, asked on the task), and one writer job for all of a request's leads. The
//! steps themselves live in the sibling modules. The HTTP half (path, headers, reading the body, the status code) is
//! `http::handlers::ingest`, which calls [`admit`] before it reads the body and [`ingest`]
//! after.

use std::sync::Arc;

use serde_json::Value;

use super::IngestError;
use super::catalog::{self, Catalog, References};
use super::problem::Problem;
use super::quality;
use super::result::{self, Answer, ItemFacts, Reply};
use super::shape::{self, Item, Shape};
use super::store::{self, PreparedLead, StoreOutcome};
use super::validate;
use crate::config::container::ContainerKind;
use crate::config::kept_sources::KeptSources;
use crate::config::source::Source;
use crate::db::Db;
use crate::metrics::Metrics;
use crate::outbox::Notifier;
use crate::outbox::bid::BidClient;

/// What an ingest request uses besides its own input: the database, the outbox workers'
/// wake-up, the counters, the bid client and when the HTTP request arrived (bid timeouts
/// count from it).
pub struct Services<'a> {
    pub db: &'a Db,
    pub outbox: &'a Notifier,
    pub metrics: &'a Metrics,
    pub bids: &'a BidClient,
    /// The check client (DESIGN.md section 22): the workspace's check steps run through it.
    pub checks: &'a crate::checks::CheckClient,
    pub arrived: std::time::Instant,
}

/// The source a request names, if it exists, is enabled, is in the named container and
/// `presented` holds its secret. Source (404) and secret (401) are decided before the body
/// is read, as DESIGN.md orders them.
pub fn admit(
    db: &Db,
    sources: &KeptSources,
    kind: ContainerKind,
    container_id: String,
    source_id: String,
    presented: &[&str],
) -> Result<Source, IngestError> {
    let source = find_source(db, sources, kind, container_id, source_id)?;
    authenticate(&source, presented)?;
    Ok(source)
}

/// Ingests the JSON `body` sent to `source` (`raw` is its text, stored as the lead's raw
/// body) and returns the answer.
pub async fn ingest(
    services: &Services<'_>,
    source: Source,
    body: Value,
    raw: Option<String>,
) -> Result<Reply, IngestError> {
    // A published partner-native mapping (DESIGN.md section 9) transforms `body` into a
    // native shape here, before shape detection (400 `mapping_error` on failure). The
    // mapped leads are then stored as JSON, since the received text is not their text.
    let (body, raw) = match source.mapping_published {
        Some(_) => (crate::mapping::apply_published(&source, body)?, None),
        None => (body, raw),
    };
    let shape =
        shape::detect(body, raw, source.container_kind).map_err(IngestError::body_invalid)?;
    let target = Arc::new(source);
    match shape {
        Shape::Single(item) => {
            let answered = ingest_single(services, target, *item).await;
            // A single lead that fails validation is answered 400; it still counts as a
            // lead received and rejected.
            if matches!(answered, Err(IngestError::Invalid { .. })) {
                services
                    .metrics
                    .ingest_result(result::Status::Rejected.as_str());
            }
            answered
        }
        Shape::Batch(items) => ingest_batch(services, target, items).await,
    }
}

/// Counts every lead's result status (once per lead) for `/metrics`.
fn count_results(metrics: &Metrics, answers: &[Answer]) {
    for answer in answers {
        metrics.ingest_result(answer.status().as_str());
    }
}

/// The enabled source named by the path, in the container the path names; anything else
/// is 404, so a source cannot be reached through another channel's or table's path.
///
/// This read, like the product lookup, runs on the request's task rather than through
/// `Db::read`: it is one primary-key lookup on a pooled connection (microseconds, and WAL
/// readers never wait for the writer), while a hop to a blocking thread and back costs
/// more than the query and, on two cores, limits how many leads a second the server takes.
fn find_source(
    db: &Db,
    sources: &KeptSources,
    kind: ContainerKind,
    container_id: String,
    source_id: String,
) -> Result<Source, IngestError> {
    if !crate::ids::is_valid(&container_id) || !crate::ids::is_valid(&source_id) {
        return Err(IngestError::SourceNotFound);
    }
    let found =
        db.read_blocking(|conn| sources.find(conn, &source_id).map_err(IngestError::from))?;
    match found {
        Some(source)
            if source.takes_leads()
                && source.container_kind == kind
                && source.container_id == container_id =>
        {
            Ok(source)
        }
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

/// The products the items' interests name, read once for the whole request (on the
/// request's task, as `find_source` explains).
fn load_catalog(db: &Db, target: &Source, items: &[Item]) -> Result<Catalog, IngestError> {
    let references = References::of(items.iter().filter_map(|item| item.draft.as_ref()));
    if references.is_empty() {
        return Ok(Catalog::default());
    }
    db.read_blocking(|conn| {
        catalog::load(conn, &target.workspace_id, &references).map_err(IngestError::from)
    })
}

/// One item after validation: ready to store, or its problems.
enum Prepared {
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
fn prepare(item: Item, catalog: &Catalog) -> Prepared {
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
/// workspace's `flag` action they are flagged in place instead and none is returned. One
/// primary-key read on the pool when the workspace never wrote a list (no allocation:
/// the empty `Vec` allocates nothing), one indexed lookup per contact otherwise.
fn suppressed(
    db: &Db,
    target: &Source,
    leads: &mut [PreparedLead],
) -> Result<Vec<(usize, &'static str)>, IngestError> {
    use crate::config::workspace::SuppressionAction;
    use crate::suppression::{self, Kind};
    db.read_blocking(|conn| {
        let Some(list) = suppression::lookup(conn, &target.workspace_id)? else {
            return Ok(Vec::new());
        };
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
/// index) that a step rejects, with the step's name. One indexed read when the workspace
/// has no steps.
async fn run_checks(
    services: &Services<'_>,
    target: &Source,
    leads: &mut [PreparedLead],
) -> Result<Vec<(usize, String)>, IngestError> {
    if leads.is_empty() {
        return Ok(Vec::new());
    }
    let steps = services.db.read_blocking(|conn| {
        crate::checks::store::for_workspace(conn, &target.workspace_id)
            .map_err(|e| IngestError::Internal(e.to_string()))
    })?;
    if steps.is_empty() {
        return Ok(Vec::new());
    }
    let bodies: Vec<serde_json::Value> = leads
        .iter()
        .map(|lead| serde_json::to_value(&lead.lead.fields).unwrap_or_default())
        .collect();
    let verdicts = services.checks.run(&steps, &bodies, services.arrived).await;
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
fn check_failed_problem(base: &str, name: &str) -> Problem {
    Problem::new(
        base.to_string(),
        "check_failed",
        format!("the lead did not pass check step '{name}'"),
    )
}

/// The problem of a lead refused as suppressed; `base` is the lead's pointer.
fn suppressed_problem(base: &str, field: &str) -> Problem {
    Problem::new(
        format!("{base}/{field}"),
        "suppressed",
        format!("the {field} is on the workspace's suppression list"),
    )
}

/// Stores `leads` in one writer job; answers after the commit. Events that auto-delivery wrote in that job are
/// committed now, so the outbox workers are woken to send them at once rather than at
/// their next poll.
async fn write(
    services: &Services<'_>,
    target: Arc<Source>,
    leads: Vec<PreparedLead>,
) -> Result<Vec<StoreOutcome>, IngestError> {
    let (outcomes, leads) = services
        .db
        .write_deferring(&crate::report::buckets::ROLLUP, move |conn| {
            let outcomes = store::store_all(conn, &target, &leads, crate::clock::now_ms())?;
            // The leads go back so that their memory is freed here, not on the writer
            // thread, which every request waits for.
            Ok::<_, IngestError>((outcomes, leads))
        })
        .await?;
    drop(leads);
    if outcomes
        .iter()
        .any(|o| matches!(o, StoreOutcome::Created { auto_delivered, .. } if *auto_delivered > 0))
    {
        services.outbox.notify();
    }
    Ok(outcomes)
}

/// Whether `interest`'s product has bid-priced subscriptions (the catalog read it).
fn bid_on(catalog: &Catalog, interest: &crate::ingest::model::Interest) -> bool {
    catalog
        .by_id(&interest.product_id)
        .or_else(|| catalog.by_slug(&interest.product_slug))
        .is_some_and(|product| product.bid_subscriptions)
}

/// Per lead of `leads` (a request's, in order), whether the writer job will not decide it
/// for auto-delivery: a replay (of a stored lead or of an earlier one of the request with
/// its externalId), or a duplicate under `target`'s rule (of a stored lead, or of an
/// earlier one of the request that the job stores), which the job rejects or keeps for
/// review. Read on the pool with the job's own lookups; the job decides again.
fn undecided(
    conn: &rusqlite::Connection,
    target: &Source,
    leads: &[PreparedLead],
    now: i64,
) -> Result<Vec<bool>, IngestError> {
    use crate::config::source::DedupeAction;
    let fields = &target.dedupe.fields;
    let same = |a: &Option<String>, b: &Option<String>| a.is_some() && a == b;
    let mut stored: Vec<&PreparedLead> = Vec::new();
    let mut undecided = Vec::with_capacity(leads.len());
    for lead in leads {
        let external_id = lead.lead.fields.external_id.as_deref();
        let replay = external_id.is_some()
            && stored
                .iter()
                .any(|earlier| earlier.lead.fields.external_id.as_deref() == external_id)
            || store::is_replay(conn, target, lead)?;
        if replay {
            undecided.push(true);
            continue;
        }
        let duplicate = stored.iter().any(|earlier| {
            fields.iter().any(|field| match field.as_str() {
                "email" => same(&lead.email_key, &earlier.email_key),
                "phone" => same(&lead.phone_key, &earlier.phone_key),
                _ => false,
            })
        }) || store::duplicate_match(conn, target, lead, now)?.is_some();
        if !duplicate || target.dedupe.action == DedupeAction::Review {
            stored.push(lead);
        }
        undecided.push(duplicate);
    }
    Ok(undecided)
}

/// Collects the bids for every interest of `leads` that auto-delivery will decide in a
/// product with bid-priced subscriptions (DESIGN.md section 14) and hands them to each
/// lead for the writer job (`PreparedLead::bids`), which re-checks eligibility with them
/// and records them. The eligible bidders are read on the pool (one read for the whole
/// request), every bid request of the request goes out at once, and this task waits for
/// each at most its buyer's `--bid-timeout`: never inside a writer job. Nothing is read
/// for leads in products no one bids on (the catalog knows), nor for a lead that will
/// not be decided (quality invalid, not routing-ready, a replay of a stored externalId, a
/// duplicate under the source's rule, a post's interest in its ping's product,
/// auto-delivery off): a lead refused, or kept for review, asks no buyer for a bid.
async fn ask_for_bids(
    services: &Services<'_>,
    target: &Source,
    catalog: &Catalog,
    leads: &mut [PreparedLead],
) -> Result<(), IngestError> {
    let wanted: Vec<(usize, usize)> = leads
        .iter()
        .enumerate()
        .filter(|(_, lead)| lead.quality.status != quality::QualityStatus::Invalid)
        .flat_map(|(index, lead)| {
            lead.lead
                .interests
                .iter()
                .enumerate()
                .filter(|(_, i)| {
                    i.trigger_auto_delivery && i.routing_ready != Some(false) && bid_on(catalog, i)
                })
                .map(move |(position, _)| (index, position))
        })
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let now = crate::clock::now_ms();
    let mut asked = Vec::new();
    let asking = services.db.read_blocking(|conn| {
        let Some(settings) =
            crate::autodelivery::Settings::load_for(conn, &target.container_id, &target.id, now)?
        else {
            return Ok(Vec::new());
        };
        let last = wanted.last().map_or(0, |(index, _)| *index);
        let undecided = undecided(conn, target, &leads[..=last], now)?;
        let mut asking = Vec::new();
        for (index, position) in wanted {
            let lead = &leads[index];
            if undecided[index] {
                continue;
            }
            // A post's interest in its ping's product goes to the ping's reserved buyers.
            if let Some(ping_id) = &lead.lead.ping_id
                && let Some(ping) = crate::ping::store::find(conn, ping_id)?
                && lead
                    .lead
                    .interests
                    .iter()
                    .position(|i| i.product_id == ping.product_id)
                    == Some(position)
            {
                continue;
            }
            let stored = store::unstored_lead(target, lead, now);
            let request = &stored.requests[position];
            let bidders = crate::autodelivery::eligibility::eligible_bidders(
                conn, &stored, request, &settings,
            )?;
            if bidders.is_empty() {
                continue;
            }
            // The bid holds until the lead is decided: when the slowest may answer.
            let decided_by = now + bidders.iter().map(|b| b.timeout_ms()).max().unwrap_or(0);
            let mode = settings.mode.as_str();
            asked.push((index, position));
            asking.push(crate::bids::asking(
                &stored, request, bidders, mode, decided_by,
            ));
        }
        Ok::<_, IngestError>(asking)
    })?;
    if asking.is_empty() {
        return Ok(());
    }
    let collected = crate::bids::collect(services.bids, asking, services.arrived).await;
    for ((index, position), bids) in asked.into_iter().zip(collected) {
        for bid in &bids.recorded {
            services
                .metrics
                .bid(&bid.buyer_id, bid.outcome, bid.latency_ms);
        }
        let lead = &mut leads[index];
        lead.bids.resize(lead.lead.interests.len(), None);
        lead.bids[position] = Some(bids);
    }
    Ok(())
}

/// What the `invalid` leads of a request that failed validation leave behind, in one
/// writer job (only when there are any): their count in the reports (received, rejected)
/// and the reservations of their pings given back (DESIGN.md section 14).
async fn refuse_invalid(
    services: &Services<'_>,
    target: &Arc<Source>,
    invalid: usize,
    ping_ids: Vec<String>,
) -> Result<(), IngestError> {
    if invalid == 0 {
        return Ok(());
    }
    let target = target.clone();
    services
        .db
        .write_deferring(&crate::report::buckets::ROLLUP, move |conn| {
            let now = crate::clock::now_ms();
            store::count_invalid(conn, &target, invalid, now)?;
            for ping_id in &ping_ids {
                crate::ping::post::release_invalid(conn, &target.id, ping_id, now)?;
            }
            Ok::<_, IngestError>(())
        })
        .await
}

async fn ingest_single(
    services: &Services<'_>,
    target: Arc<Source>,
    item: Item,
) -> Result<Reply, IngestError> {
    let catalog = load_catalog(services.db, &target, std::slice::from_ref(&item))?;
    let (mut lead, warnings) = match prepare(item, &catalog) {
        Prepared::Valid(lead, warnings) => (*lead, warnings),
        Prepared::Invalid {
            problems, ping_id, ..
        } => {
            refuse_invalid(services, &target, 1, ping_id.into_iter().collect()).await?;
            return Err(IngestError::lead_invalid(problems));
        }
    };
    if let Some((_, field)) =
        suppressed(services.db, &target, std::slice::from_mut(&mut lead))?.pop()
    {
        let ping_id = lead.lead.ping_id.take();
        refuse_invalid(services, &target, 1, ping_id.into_iter().collect()).await?;
        return Err(IngestError::lead_invalid(vec![suppressed_problem(
            "", field,
        )]));
    }
    if let Some((_, name)) = run_checks(services, &target, std::slice::from_mut(&mut lead))
        .await?
        .pop()
    {
        let ping_id = lead.lead.ping_id.take();
        refuse_invalid(services, &target, 1, ping_id.into_iter().collect()).await?;
        return Err(IngestError::lead_invalid(vec![check_failed_problem(
            "", &name,
        )]));
    }
    ask_for_bids(services, &target, &catalog, std::slice::from_mut(&mut lead)).await?;
    let outcome = write(services, target.clone(), vec![lead])
        .await?
        .pop()
        .ok_or_else(|| IngestError::Internal("the writer returned no outcome".into()))?;
    if let StoreOutcome::PingRefused { refusal, .. } = outcome {
        services
            .metrics
            .ingest_result(result::Status::Rejected.as_str());
        return Err(IngestError::Ping {
            code: refusal.code,
            message: refusal.message,
        });
    }
    let created = outcome.created();
    let answer = outcome.into_answer(&target).with_warnings(warnings);
    count_results(services.metrics, std::slice::from_ref(&answer));
    Ok(result::single(&target, &answer, created))
}

async fn ingest_batch(
    services: &Services<'_>,
    target: Arc<Source>,
    items: Vec<Item>,
) -> Result<Reply, IngestError> {
    let catalog = load_catalog(services.db, &target, &items)?;
    let mut answers: Vec<Option<Answer>> = Vec::with_capacity(items.len());
    let mut valid = Vec::with_capacity(items.len());
    let mut valid_positions = Vec::with_capacity(items.len());
    let mut valid_warnings = Vec::with_capacity(items.len());
    let mut invalid_pings = Vec::new();
    for (position, item) in items.into_iter().enumerate() {
        match prepare(item, &catalog) {
            Prepared::Valid(lead, warnings) => {
                valid_positions.push(position);
                valid.push(*lead);
                valid_warnings.push(warnings);
                answers.push(None);
            }
            Prepared::Invalid {
                external_id,
                problems,
                ping_id,
                warnings,
            } => {
                invalid_pings.extend(ping_id);
                answers.push(Some(
                    Answer::Fresh(Box::new(ItemFacts::invalid(external_id, problems)))
                        .with_warnings(warnings),
                ))
            }
        }
    }
    // Refused as suppressed: answered like a validation error, in the batch's order.
    for (index, field) in suppressed(services.db, &target, &mut valid)?
        .into_iter()
        .rev()
    {
        let position = valid_positions.remove(index);
        let lead = valid.remove(index);
        valid_warnings.remove(index);
        invalid_pings.extend(lead.lead.ping_id);
        answers[position] = Some(Answer::Fresh(Box::new(ItemFacts::invalid(
            lead.lead.fields.external_id,
            vec![suppressed_problem(&format!("/leads/{position}"), field)],
        ))));
    }
    // Rejected by a check step: answered like a validation error, in the batch's order.
    for (index, name) in run_checks(services, &target, &mut valid)
        .await?
        .into_iter()
        .rev()
    {
        let position = valid_positions.remove(index);
        let lead = valid.remove(index);
        valid_warnings.remove(index);
        invalid_pings.extend(lead.lead.ping_id);
        answers[position] = Some(Answer::Fresh(Box::new(ItemFacts::invalid(
            lead.lead.fields.external_id,
            vec![check_failed_problem(&format!("/leads/{position}"), &name)],
        ))));
    }
    let invalid = answers.iter().filter(|a| a.is_some()).count();
    refuse_invalid(services, &target, invalid, invalid_pings).await?;
    if !valid.is_empty() {
        ask_for_bids(services, &target, &catalog, &mut valid).await?;
        let outcomes = write(services, target.clone(), valid).await?;
        for ((position, outcome), warnings) in valid_positions
            .into_iter()
            .zip(outcomes)
            .zip(valid_warnings)
        {
            answers[position] = Some(
                match outcome {
                    // The refusal names the item's own pingId.
                    StoreOutcome::PingRefused {
                        external_id,
                        refusal,
                    } => Answer::Fresh(Box::new(ItemFacts::invalid(
                        external_id,
                        vec![Problem::new(
                            format!("/leads/{position}/pingId"),
                            refusal.code,
                            refusal.message,
                        )],
                    ))),
                    other => other.into_answer(&target),
                }
                .with_warnings(warnings),
            );
        }
    }
    let answers: Vec<Answer> = answers
        .into_iter()
        .map(|answer| {
            answer.ok_or_else(|| IngestError::Internal("a batch item was not answered".into()))
        })
        .collect::<Result<_, _>>()?;
    count_results(services.metrics, &answers);
    Ok(result::batch(&target, &answers))
}
