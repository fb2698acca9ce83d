//! The use case that accepts leads: one ingest request (SPEC.md 4.2 and 4.3) for channel
//! and lead-table sources, from its admitted source and body to its answer, the pipeline
//! of DESIGN.md section 2.
//!
//! Owns the order of the steps and composes their owners: `ingest`'s steps on the
//! request's task (mapping, shape, validation, quality, suppression, check steps), the
//! bids for leads to be auto-delivered to bid-priced buyers ([`bids`]: read on the pool,
//! asked on the task), and ONE writer job for all of a request's leads ([`job`]:
//! idempotency, a post's ping, the duplicate rule, the inserts, auto-delivery, the bids'
//! records and the reports' counts), then the answer ([`answer`]). The owners return
//! facts (a replay, the duplicate verdict, the inserted ids, the lead as stored, a claim,
//! a decision) and this module hands them on, so `ingest` names none of the modules above
//! it. The HTTP half (path, headers, reading the body, the status code) is
//! `http::handlers::ingest`, which calls `ingest::handler::admit` before it reads the body
//! and [`ingest`] after.
//!
//! Does not own a table: the leads and lead requests are `ingest::store`'s, the pings
//! `ping::store`'s, the bids `bids`', the transactions and events those of `delivery` and
//! `outbox`.

pub(crate) mod answer;
mod bids;
pub mod job;
#[cfg(test)]
mod job_tests;

use std::sync::Arc;

use serde_json::Value;

use crate::config::source::Source;
use crate::db::{Db, Undo};
use crate::ingest::IngestError;
use crate::ingest::handler::{self, Prepared};
use crate::ingest::kept::{self, Admission, StampCheck, WorkspaceRules};
use crate::ingest::problem::Problem;
use crate::ingest::shape::{self, Item, Shape};
use crate::ingest::store::PreparedLead;
use crate::metrics::Metrics;
use crate::outbox::Notifier;
use crate::outbox::bid::BidClient;
use answer::{Answer, ItemFacts, Reply};
use job::StoreOutcome;

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
    /// Whether the admission is confirmed as the file's: the first writer job confirms it
    /// before it writes, the bids before they are asked (`Err(Stale)` when it moved).
    pub stamp: &'a StampCheck,
}

/// Ingests the JSON `body` sent to `source` (`raw` is its text, stored as the lead's raw
/// body) and returns the answer.
pub async fn ingest(
    services: &Services<'_>,
    Admission {
        source: target,
        rules,
        ..
    }: Admission,
    body: Value,
    raw: Option<String>,
) -> Result<Reply, IngestError> {
    // A published partner-native mapping (DESIGN.md section 9) transforms `body` into a
    // native shape here, before shape detection (400 `mapping_error` on failure). The
    // mapped leads are then stored as JSON, since the received text is not their text.
    let (body, raw) = match target.mapping_published {
        Some(_) => (crate::mapping::apply_published(&target, body)?, None),
        None => (body, raw),
    };
    let shape =
        shape::detect(body, raw, target.container_kind).map_err(IngestError::body_invalid)?;
    match shape {
        Shape::Single(item) => {
            let answered = ingest_single(services, target, &rules, *item).await;
            // A single lead that fails validation is answered 400; it still counts as a
            // lead received and rejected.
            if matches!(answered, Err(IngestError::Invalid { .. })) {
                services
                    .metrics
                    .ingest_result(answer::Status::Rejected.as_str());
            }
            answered
        }
        Shape::Batch(items) => ingest_batch(services, target, &rules, items).await,
    }
}

/// Counts every lead's result status (once per lead) for `/metrics`.
fn count_results(metrics: &Metrics, answers: &[Answer]) {
    for answer in answers {
        metrics.ingest_result(answer.status().as_str());
    }
}

/// Runs `f` as one of the request's writer jobs, leaving the report roll-up to its group:
/// first, in the job's own transaction, it confirms the admission's stamp (`kept`), so a
/// job on a stale admission fails before it writes, whatever the job is.
async fn write_job<T, F>(services: &Services<'_>, undo: Undo, f: F) -> Result<T, IngestError>
where
    F: FnOnce(&rusqlite::Connection) -> Result<T, IngestError> + Send + 'static,
    T: Send + 'static,
{
    let expected = services.stamp.pending();
    let done = services
        .db
        .write_deferring(&crate::report::buckets::ROLLUP, undo, move |conn| {
            kept::confirm_in(conn, expected)?;
            f(conn)
        })
        .await?;
    services.stamp.mark_confirmed();
    Ok(done)
}

/// Stores `leads` (with the bids collected for them) in one writer job; answers after the
/// commit. Events that auto-delivery wrote in that job are committed now, so the outbox
/// workers are woken to send them at once rather than at their next poll.
async fn write(
    services: &Services<'_>,
    target: Arc<Source>,
    leads: Vec<PreparedLead>,
    bids: bids::Collected,
) -> Result<Vec<StoreOutcome>, IngestError> {
    // Without a savepoint: the job's refusals are outcomes, so only the database or a bug
    // fails it (or a stale admission, before it writes), and the savepoint would copy
    // every page the lead changes.
    let (outcomes, leads) = write_job(services, Undo::Group, move |conn| {
        let outcomes = job::store_with_bids(conn, &target, &leads, &bids, crate::clock::now_ms())?;
        // The leads go back so that their memory is freed here, not on the writer
        // thread, which every request waits for.
        Ok((outcomes, (leads, bids)))
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
    write_job(services, Undo::Savepoint, move |conn| {
        let now = crate::clock::now_ms();
        job::count_invalid(conn, &target, invalid, now)?;
        for ping_id in &ping_ids {
            crate::ping::post::release_invalid(conn, &target.id, ping_id, now)?;
        }
        Ok(())
    })
    .await
}

async fn ingest_single(
    services: &Services<'_>,
    target: Arc<Source>,
    rules: &WorkspaceRules,
    item: Item,
) -> Result<Reply, IngestError> {
    let (mut lead, warnings) = match handler::prepare(item, &rules.products) {
        Prepared::Valid(lead, warnings) => (*lead, warnings),
        Prepared::Invalid {
            problems, ping_id, ..
        } => {
            refuse_invalid(services, &target, 1, ping_id.into_iter().collect()).await?;
            return Err(IngestError::lead_invalid(problems));
        }
    };
    if let Some((_, field)) =
        handler::suppressed(services.db, rules, &target, std::slice::from_mut(&mut lead))?.pop()
    {
        let ping_id = lead.lead.ping_id.take();
        refuse_invalid(services, &target, 1, ping_id.into_iter().collect()).await?;
        return Err(IngestError::lead_invalid(vec![
            handler::suppressed_problem("", field),
        ]));
    }
    if let Some((_, name)) = handler::run_checks(
        services.checks,
        services.arrived,
        rules,
        std::slice::from_mut(&mut lead),
    )
    .await?
    .pop()
    {
        let ping_id = lead.lead.ping_id.take();
        refuse_invalid(services, &target, 1, ping_id.into_iter().collect()).await?;
        return Err(IngestError::lead_invalid(vec![
            handler::check_failed_problem("", &name),
        ]));
    }
    let bids = bids::ask_for_bids(
        services,
        &target,
        &rules.products,
        std::slice::from_ref(&lead),
    )
    .await?;
    let outcome = write(services, target.clone(), vec![lead], bids)
        .await?
        .pop()
        .ok_or_else(|| IngestError::Internal("the writer returned no outcome".into()))?;
    if let StoreOutcome::PingRefused { refusal, .. } = outcome {
        services
            .metrics
            .ingest_result(answer::Status::Rejected.as_str());
        return Err(IngestError::Ping {
            code: refusal.code,
            message: refusal.message,
        });
    }
    let created = outcome.created();
    let answer = outcome.into_answer(&target).with_warnings(warnings);
    count_results(services.metrics, std::slice::from_ref(&answer));
    Ok(answer::single(&target, &answer, created))
}

/// A batch's valid leads (with their positions and warnings) beside its answers, while
/// some are still refused.
struct Pending<'a> {
    valid: &'a mut Vec<PreparedLead>,
    positions: &'a mut Vec<usize>,
    warnings: &'a mut Vec<Vec<Problem>>,
    invalid_pings: &'a mut Vec<String>,
    answers: &'a mut [Option<Answer>],
}

impl Pending<'_> {
    /// Takes the `refused` leads (by index into the valid ones, ascending, each with why)
    /// out of the valid ones and answers each at its position with the problem `problem`
    /// makes from the lead's pointer and why.
    fn refuse<T>(&mut self, refused: Vec<(usize, T)>, problem: impl Fn(&str, T) -> Problem) {
        for (index, why) in refused.into_iter().rev() {
            let position = self.positions.remove(index);
            let lead = self.valid.remove(index);
            self.warnings.remove(index);
            self.invalid_pings.extend(lead.lead.ping_id);
            self.answers[position] = Some(Answer::Fresh(Box::new(ItemFacts::invalid(
                lead.lead.fields.external_id,
                vec![problem(&format!("/leads/{position}"), why)],
            ))));
        }
    }
}

async fn ingest_batch(
    services: &Services<'_>,
    target: Arc<Source>,
    rules: &WorkspaceRules,
    items: Vec<Item>,
) -> Result<Reply, IngestError> {
    let mut answers: Vec<Option<Answer>> = Vec::with_capacity(items.len());
    let mut valid = Vec::with_capacity(items.len());
    let mut valid_positions = Vec::with_capacity(items.len());
    let mut valid_warnings = Vec::with_capacity(items.len());
    let mut invalid_pings = Vec::new();
    for (position, item) in items.into_iter().enumerate() {
        match handler::prepare(item, &rules.products) {
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
    // Refused as suppressed, then rejected by a check step: each answered like a validation
    // error, in the batch's order.
    let suppressed = handler::suppressed(services.db, rules, &target, &mut valid)?;
    let mut pending = Pending {
        valid: &mut valid,
        positions: &mut valid_positions,
        warnings: &mut valid_warnings,
        invalid_pings: &mut invalid_pings,
        answers: &mut answers,
    };
    pending.refuse(suppressed, |base, field| {
        handler::suppressed_problem(base, field)
    });
    let rejected =
        handler::run_checks(services.checks, services.arrived, rules, pending.valid).await?;
    pending.refuse(rejected, |base, name| {
        handler::check_failed_problem(base, &name)
    });
    let invalid = answers.iter().filter(|a| a.is_some()).count();
    refuse_invalid(services, &target, invalid, invalid_pings).await?;
    if !valid.is_empty() {
        let bids = bids::ask_for_bids(services, &target, &rules.products, &valid).await?;
        let outcomes = write(services, target.clone(), valid, bids).await?;
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
    Ok(answer::batch(&target, &answers))
}
