//! Ping/post (DESIGN.md section 14): a partner sends a lead without personal data (the
//! ping), learns at once whether and for how much it sells, and posts the full lead to the
//! normal ingest endpoints with the ping's id; the post is sold exactly as promised.
//!
//! - [`input`]: the ping's body, personal data refused.
//! - [`route`]: the decision and the reservations, in one writer job, on auto-delivery's
//!   rules and selection.
//! - [`post`]: the post's checks and its delivery to the reserved buyers, inside the ingest
//!   writer job (called by `accept::job`).
//! - [`store`]: owner of `pings` and `ping_reservations`; expiry.
//!
//! Bids are asked for through `bids`, before the writer job.
//!
//! Reservations hold cap places (`caps::hold`) and prepaid balance (`ledger::hold`) until
//! the ping is posted, expires or is released; nothing else writes them.
//!
//! Does not own the HTTP half (`http::handlers::ping`), the ingest pipeline, deliveries,
//! the counters or the ledger.

pub(crate) mod input;
pub(crate) mod post;
pub(crate) mod route;
pub mod store;

use std::time::Instant;

use serde_json::Value;

use crate::config::container::ContainerKind;
use crate::config::source::Source;
use crate::db::{Db, DbError};
use crate::ingest::IngestError;
use crate::ingest::catalog::{self, References};
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::model::{StoredLead, StoredRequest};
use crate::ingest::problem::Problem;
use crate::ingest::quality::QualityStatus;
use crate::ingest::status::{LeadStatus, RequestStatus};
use crate::ingest::validate;
use crate::metrics::Metrics;
use crate::outbox::bid::BidClient;
use route::{PingAnswer, PreparedPing};

/// Why a ping got no answer of its own (an accepted or rejected ping is an answer).
#[derive(Debug, thiserror::Error)]
pub enum PingError {
    /// Names, email, phone, street or house number in a ping: every path.
    #[error("{}", personal_data_message(.0))]
    PersonalData(Vec<Problem>),
    /// Admission (source, secret) and validation, as for ingest.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error("internal error: {0}")]
    Internal(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// The message of a ping refused for personal data: the paths to remove.
pub fn personal_data_message(problems: &[Problem]) -> String {
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    format!(
        "a ping carries no personal data (names, email, phone, street, house number); remove {}",
        paths.join(", ")
    )
}

impl From<rusqlite::Error> for PingError {
    fn from(e: rusqlite::Error) -> Self {
        PingError::Db(DbError::Sqlite(e))
    }
}

impl From<crate::autodelivery::AutoDeliveryError> for PingError {
    fn from(e: crate::autodelivery::AutoDeliveryError) -> Self {
        match e {
            crate::autodelivery::AutoDeliveryError::Db(db) => PingError::Db(db),
            other => PingError::Internal(other.to_string()),
        }
    }
}

/// Answers a ping sent to `source` (admitted by `ingest::handler::admit`, so 404 and 401
/// came first) with `body`: checks it, then decides and reserves in one writer job.
/// `arrived`: when the HTTP request arrived, from which the bid timeouts count.
pub async fn answer(
    db: &Db,
    metrics: &Metrics,
    bid_client: &BidClient,
    source: Source,
    body: Value,
    arrived: Instant,
) -> Result<Value, PingError> {
    let started = Instant::now();
    let answered = decide(db, metrics, bid_client, source, body, arrived).await;
    let outcome = match &answered {
        Ok(answer) => answer.status.as_str(),
        Err(PingError::PersonalData(_)) | Err(PingError::Ingest(_)) => "invalid",
        Err(_) => "error",
    };
    metrics.ping(outcome, started.elapsed());
    Ok(answered?.to_json())
}

async fn decide(
    db: &Db,
    metrics: &Metrics,
    bid_client: &BidClient,
    source: Source,
    body: Value,
    arrived: Instant,
) -> Result<PingAnswer, PingError> {
    if source.container_kind != ContainerKind::Channel {
        return Err(IngestError::SourceNotFound.into());
    }
    let text = body.to_string();
    let draft = input::parse(body).map_err(|refusal| match refusal {
        input::Refusal::PersonalData(problems) => PingError::PersonalData(problems),
        input::Refusal::Invalid(problems) => IngestError::lead_invalid(problems).into(),
    })?;
    let references = References::of(std::iter::once(&draft.lead));
    let catalog = db.read_blocking(|conn| {
        catalog::load(conn, &source.workspace_id, &references).map_err(IngestError::from)
    })?;
    let mut problems = Vec::new();
    let lead = validate::complete(draft.lead, &catalog, &mut problems);
    if !problems.is_empty() {
        return Err(IngestError::lead_invalid(problems).into());
    }
    let now = crate::clock::now_ms();
    let id = crate::ids::new("png");
    let interest = lead
        .interests
        .into_iter()
        .next()
        .ok_or_else(|| PingError::Internal("a ping without its product".into()))?;
    let prepared = PreparedPing {
        id,
        lead: StoredLead {
            id: crate::ids::LeadId::generate(),
            source_id: source.id.clone(),
            container_id: source.container_id.clone(),
            container_kind: source.container_kind,
            workspace_id: source.workspace_id.clone(),
            fields: lead.fields,
            quality_status: QualityStatus::Ok,
            quality_reasons: Vec::new(),
            duplicate_status: DuplicateStatus::Unique,
            duplicate_match: None,
            status: LeadStatus::Active,
            erased_at: None,
            checks: Vec::new(),
            created_at: now,
            requests: vec![StoredRequest {
                id: crate::ids::LeadRequestId::generate(),
                position: 0,
                interest,
                status: RequestStatus::Open,
                decision: None,
                created_at: now,
            }],
        },
        email_sha256: draft.email_sha256,
        phone_sha256: draft.phone_sha256,
        body: text,
    };
    // Bid-priced buyers are asked first, on this task (never inside the writer job); the
    // job then decides with their bids as prices. A product without bid-priced
    // subscriptions (the catalog says so) costs no read here.
    let has_bidders = catalog
        .by_id(&prepared.request().interest.product_id)
        .or_else(|| catalog.by_slug(&prepared.request().interest.product_slug))
        .is_some_and(|p| p.bid_subscriptions);
    let bids = if has_bidders {
        ask_bidders(db, metrics, bid_client, &prepared, now, arrived).await?
    } else {
        crate::bids::Bids::default()
    };
    let now = crate::clock::now_ms();
    db.write(move |conn| route::decide(conn, &prepared, &bids, now))
        .await
}

/// The bids of the ping's bid-priced buyers that are eligible now: read on the pool, then
/// asked on this task, each within its timeout.
async fn ask_bidders(
    db: &Db,
    metrics: &Metrics,
    bid_client: &BidClient,
    prepared: &PreparedPing,
    now: i64,
    arrived: Instant,
) -> Result<crate::bids::Bids, PingError> {
    let found = db.read_blocking(|conn| {
        let Some(settings) = crate::autodelivery::Settings::load_for(
            conn,
            &prepared.lead.container_id,
            &prepared.lead.source_id,
            now,
        )?
        else {
            return Ok(None);
        };
        let bidders = crate::autodelivery::eligibility::eligible_bidders(
            conn,
            &prepared.lead,
            prepared.request(),
            &settings,
        )?;
        Ok::<_, PingError>(Some((
            bidders,
            settings.row.mode.as_str(),
            settings.row.ping_ttl_ms,
        )))
    })?;
    let Some((bidders, mode, ttl)) = found else {
        return Ok(crate::bids::Bids::default());
    };
    if bidders.is_empty() {
        return Ok(crate::bids::Bids::default());
    }
    let asking = crate::bids::asking(&prepared.lead, prepared.request(), bidders, mode, now + ttl);
    let collected = crate::bids::collect(bid_client, vec![asking], arrived)
        .await
        .pop()
        .unwrap_or_default();
    for bid in &collected.recorded {
        metrics.bid(&bid.buyer_id, bid.outcome, bid.latency_ms);
    }
    Ok(collected)
}

/// `serve`'s sweep: once a second, ends every accepted ping whose time has passed, until
/// `stopped` completes. Lazy freeing (every job that reads caps or balances ends lapsed
/// pings first) makes the sweep a matter of tidiness, not of correctness. A read finds
/// whether anything is due, so an idle server writes nothing.
pub async fn run_sweep(db: Db, stopped: impl std::future::Future<Output = ()>) {
    let mut ticker = tokio::time::interval(std::time::Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            () = &mut stopped => return,
            _ = ticker.tick() => {}
        }
        let now = crate::clock::now_ms();
        let due = db.read_blocking(|conn| store::any_due(conn, now).map_err(DbError::from));
        if !matches!(due, Ok(true)) {
            continue;
        }
        let swept = db
            .write(move |conn| store::expire_due(conn, now).map_err(DbError::from))
            .await;
        match swept {
            Ok(n) => log::debug!("ping sweep: {n} reservations expired"),
            Err(e) => log::warn!("ping sweep: {e}"),
        }
    }
}
