//! The writer job that accepts a request's leads: for each, in order, idempotency, a
//! post's ping, the duplicate rule, the inserts, then auto-delivery or the post's delivery
//! and the record of the bids, with the lead counted in the reports, all in one job on the
//! writer thread.
//!
//! Composes the owners, each of which returns its facts: `ingest::store` (a replay, the
//! duplicate verdict, the ids of the inserted rows, the lead as stored), `ping::post` (a
//! claim or a refusal, the post's decision), `autodelivery` (the decisions), `bids` (one
//! row per bid) and `report` (the counts, summed once per job by `db::Deferred`).
//! Auto-delivery runs inside this job so that caps and balances cannot race, and it gets
//! the lead as just written rather than reading it back.

use rusqlite::Connection;

use super::answer::{ItemFacts, Status};
use crate::autodelivery::decision::{AutoDelivery, RequestDecision};
use crate::bids::Bids;
use crate::config::source::Source;
use crate::ingest::IngestError;
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::model::StoredLead;
use crate::ingest::store::{self, PreparedLead, StoredFacts};
use crate::report::Received;

/// What happened to one prepared lead in the writer job.
#[derive(Debug)]
pub enum StoreOutcome {
    /// Stored: accepted, or a duplicate kept for review. `item` is the answer.
    Created {
        item: ItemFacts,
        /// Transactions auto-delivery created for it; the outbox is woken when any were.
        auto_delivered: usize,
    },
    /// The source has a lead with this externalId already: what its answer is rebuilt
    /// from.
    Replay(StoredFacts),
    /// A duplicate under a rule with action `reject`: nothing was stored.
    DuplicateRejected { item: ItemFacts },
    /// A post whose ping was refused (DESIGN.md section 14): nothing was stored.
    PingRefused {
        external_id: Option<String>,
        refusal: crate::ping::post::PingRefusal,
    },
}

/// Stores `leads` in order, with no bids; one outcome per lead. Runs as (part of) one
/// writer job: an error rolls back the whole job, so a request's leads are stored all or
/// none.
pub fn store_all(
    conn: &Connection,
    source: &Source,
    leads: &[PreparedLead],
    now: i64,
) -> Result<Vec<StoreOutcome>, IngestError> {
    store_with_bids(conn, source, leads, &[], now)
}

/// [`store_all`] with the bids collected for the leads before the job, by lead (index)
/// and interest (position); a lead without an entry had none asked for.
pub(crate) fn store_with_bids(
    conn: &Connection,
    source: &Source,
    leads: &[PreparedLead],
    bids: &[Vec<Option<Bids>>],
    now: i64,
) -> Result<Vec<StoreOutcome>, IngestError> {
    let mut outcomes = Vec::with_capacity(leads.len());
    let mut statements = store::Statements::new(conn)?;
    for (index, lead) in leads.iter().enumerate() {
        let bids = bids.get(index).map_or(&[][..], Vec::as_slice);
        outcomes.push(store_one(conn, &mut statements, source, lead, bids, now)?);
    }
    Ok(outcomes)
}

/// Counts `count` leads of a request to `source` that failed validation (never stored) in
/// the reports, as received and rejected, in the writer job that answers for them.
pub(super) fn count_invalid(
    conn: &Connection,
    source: &Source,
    count: usize,
    now: i64,
) -> rusqlite::Result<()> {
    if count == 0 {
        return Ok(());
    }
    count_received(conn, source, None, Received::Invalid, count, now)
}

fn store_one(
    conn: &Connection,
    statements: &mut store::Statements,
    source: &Source,
    lead: &PreparedLead,
    bids: &[Option<Bids>],
    now: i64,
) -> Result<StoreOutcome, IngestError> {
    if let Some(found) = store::replay(conn, statements, source, lead)? {
        return Ok(StoreOutcome::Replay(found));
    }
    let external_id = lead.lead.fields.external_id.as_deref();

    // A post (DESIGN.md section 14): its ping is claimed here, after idempotency (a
    // replayed post answers as the first did) and before anything is stored.
    let claim = match &lead.lead.ping_id {
        None => None,
        Some(ping_id) => match crate::ping::post::claim(conn, source, ping_id, lead, now)? {
            Ok(claim) => Some(claim),
            Err(refusal) => {
                // Answered as a lead that failed validation, and counted so.
                count_received(
                    conn,
                    source,
                    lead.lead.interests.first().map(|i| i.product_id.as_str()),
                    Received::Invalid,
                    1,
                    now,
                )?;
                return Ok(StoreOutcome::PingRefused {
                    external_id: external_id.map(str::to_string),
                    refusal,
                });
            }
        },
    };

    // The evaluator's `duplicatesSeen`, counted before the insert so that auto-delivery
    // never reads the leads table after it; only for leads that ask for auto-delivery. It
    // looks for the lead's email and phone keys in the whole workspace at any time, where
    // the duplicate rule looks in the same workspace or a part of it, in a window: when it
    // finds none, no rule can, and the rule's own lookups of the same keys are left out.
    let duplicates_seen = if lead.lead.interests.iter().any(|i| i.trigger_auto_delivery) {
        Some(store::seen_before(
            conn,
            source,
            lead,
            crate::autodelivery::features::DUPLICATES_SEEN_CAP,
        )?)
    } else {
        None
    };
    let ingest = if duplicates_seen == Some(0) {
        store::judged_unique(lead)
    } else {
        store::judge(conn, source, lead, now)?
    };
    let duplicate_status = ingest.duplicate_status;
    count_received(
        conn,
        source,
        lead.lead.interests.first().map(|i| i.product_id.as_str()),
        match duplicate_status {
            DuplicateStatus::Unique => Received::Accepted,
            DuplicateStatus::Review => Received::DuplicateKept,
            DuplicateStatus::Rejected => Received::DuplicateDropped,
        },
        1,
        now,
    )?;
    if duplicate_status == DuplicateStatus::Rejected {
        if let Some(claim) = &claim {
            crate::ping::post::release(conn, claim, "duplicate_rejected", None, now)?;
        }
        return Ok(StoreOutcome::DuplicateRejected {
            item: ItemFacts {
                status: Status::Rejected,
                lead_id: None,
                external_id: external_id.map(str::to_string),
                request_ids: Vec::new(),
                ingest: Some(ingest),
                errors: Vec::new(),
                warnings: Vec::new(),
                auto_delivery: None,
            },
        });
    }

    let inserted = store::insert(conn, statements, source, lead, &ingest, now)?;
    let lead_id = inserted.lead_id;
    let mut item = ItemFacts {
        status: match duplicate_status {
            DuplicateStatus::Unique => Status::Accepted,
            _ => Status::Duplicate,
        },
        lead_id: Some(lead_id),
        external_id: external_id.map(str::to_string),
        request_ids: inserted.request_ids,
        ingest: Some(ingest),
        errors: Vec::new(),
        warnings: Vec::new(),
        auto_delivery: None,
    };
    // Auto-delivery (DESIGN.md section 5) runs here, inside this same writer job, so that
    // caps and balances cannot race; it gets the lead as just written rather than reading
    // it back. Its decisions are stored on the requests, where a replay finds them. A
    // post's request in its ping's product goes to the reserved buyers instead, whatever
    // it asked for.
    let mut auto_delivered = 0;
    let ping_position = claim.as_ref().and_then(|c| c.request_position(lead));
    let wants_auto = lead
        .lead
        .interests
        .iter()
        .enumerate()
        .any(|(position, i)| i.trigger_auto_delivery && Some(position) != ping_position);
    if claim.is_some() || wants_auto {
        let mut stored = store::stored_lead(
            source,
            lead,
            lead_id,
            &item.request_ids,
            item.ingest.as_ref(),
            now,
        );
        let mut requests = Vec::new();
        if let (Some(claim), Some(position)) = (&claim, ping_position) {
            let request = stored.requests.remove(position);
            requests.push(crate::ping::post::complete(
                conn, claim, &stored, &request, now,
            )?);
        }
        if let Some(duplicates_seen) = duplicates_seen.filter(|_| wants_auto) {
            // Lapsed reservations hold nothing auto-delivery reads.
            crate::ping::store::expire_due(conn, now)?;
            if let Some(auto) =
                crate::autodelivery::run_for_lead(conn, &stored, duplicates_seen, bids, now)?
            {
                record_bids(conn, &stored, bids, &auto.requests, now)?;
                requests.extend(auto.requests);
            }
        }
        let auto = AutoDelivery { requests };
        auto_delivered = auto.delivered();
        item.auto_delivery = Some(auto);
    }
    Ok(StoreOutcome::Created {
        item,
        auto_delivered,
    })
}

/// Counts `count` leads received from `source` as `how` in the reports, under the product
/// of their first interest (`None` for leads that failed validation).
fn count_received(
    conn: &Connection,
    source: &Source,
    product_id: Option<&str>,
    how: Received,
    count: usize,
    now: i64,
) -> rusqlite::Result<()> {
    crate::report::leads_received(
        conn,
        &source.workspace_id,
        &source.id,
        product_id,
        how,
        i64::try_from(count).unwrap_or(i64::MAX),
        now,
    )
}

/// Records the bids asked for the lead's requests (`bids`, by position) with whether each
/// won, in the job that decided them.
fn record_bids(
    conn: &Connection,
    stored: &StoredLead,
    bids: &[Option<Bids>],
    decided: &[RequestDecision],
    now: i64,
) -> rusqlite::Result<()> {
    for (request, asked) in stored.requests.iter().filter_map(|request| {
        let position = usize::try_from(request.position).ok()?;
        Some((request, bids.get(position)?.as_ref()?))
    }) {
        let taken: Vec<&str> = decided
            .iter()
            .filter(|d| d.request_id == request.id)
            .flat_map(|d| d.deliveries.iter().map(|d| d.buyer_id.as_str()))
            .collect();
        for bid in &asked.recorded {
            let won = asked.won(bid, &taken);
            crate::bids::record(conn, crate::bids::Owner::Request(request.id), bid, won, now)?;
        }
    }
    Ok(())
}
