//! Automated delivery, Delivery 1.0 (DESIGN.md section 5): for each interest of a new lead
//! that asks for it (`triggerAutoDelivery`), decide whether and to whom the lead goes, and
//! deliver it, inside the writer job that accepts the lead (`accept::job`).
//!
//! The steps, each ending the evaluation with its reason code when it fails: routing ready,
//! accepted and not a duplicate under review, quality not invalid, auto-delivery on in the
//! container, the evaluator's score reaching the container's threshold (`evaluator`,
//! `features`), eligible buyers (`eligibility` with `filters`, `schedule`, `caps`), and the
//! selection (`select`), which calls `delivery::deliver_lead` for each buyer taken, handing
//! on the lead as the job stored it. The decision (`decision`) is returned for the
//! ingest answer and stored on the lead request. When a buyer's API refuses a lead it got
//! this way, `waterfall` runs the same decision again for the next buyer.
//!
//! Owns choosing buyers and explaining the choice. It does not own the delivery itself
//! (`delivery`: transaction, charge, event), storing the lead (`ingest`) or sending the
//! event (`outbox`).

pub(crate) mod decision;
mod decision_text;
pub(crate) mod eligibility;
pub mod evaluator;
pub mod features;
pub(crate) mod filters;
pub use leadrelay_rules::schedule;
pub(crate) mod select;
pub(crate) mod stored_features;
pub(crate) mod subscribers;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod weights;

use crate::db::PrepareKept;
use std::sync::Arc;

use jiff::tz::TimeZone;
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;
use serde_json::Value;

use crate::caps::Windows;
use crate::config::container::DeliveryMode;
use crate::config::product::FieldDef;
use crate::db::DbError;
use crate::delivery::{self, DeliveryError, DeliveryTerms, LeadDelivery};
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::model::{StoredLead, StoredRequest};
use crate::ingest::quality::QualityStatus;
use decision::{AutoDelivery, Delivery, RequestDecision, RequestReason};
use eligibility::{Bidding, Candidate, KnownBids, Reason};
use evaluator::Weights;

/// Who auto-delivery's transactions name as their creator in the history.
pub(crate) const ACTOR: &str = "auto-delivery";

/// Errors that stop auto-delivery, and with it the ingest job it runs in. A buyer who is not
/// eligible, or a delivery that is refused, is a decision, not an error.
#[derive(Debug, thiserror::Error)]
pub enum AutoDeliveryError {
    /// A record the lead refers to is missing: `kind` names it. Ingest has just written
    /// the lead, so this means the data changed under us or a bug; the job rolls back.
    #[error("auto-delivery: {kind} '{id}' not found")]
    Missing { kind: &'static str, id: String },
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for AutoDeliveryError {
    fn from(e: rusqlite::Error) -> Self {
        AutoDeliveryError::Db(DbError::Sqlite(e))
    }
}

impl From<AutoDeliveryError> for crate::ingest::IngestError {
    fn from(e: AutoDeliveryError) -> Self {
        match e {
            AutoDeliveryError::Db(db) => crate::ingest::IngestError::Db(db),
            missing @ AutoDeliveryError::Missing { .. } => {
                crate::ingest::IngestError::Internal(missing.to_string())
            }
        }
    }
}

/// Evaluates every interest of `lead` that asked for automated delivery, delivers where
/// the rules allow, stores each decision on its lead request, and returns the ingest
/// result's `autoDelivery`; `None` when no interest asked for it.
///
/// Runs inside the ingest writer job right after the lead and its interests are written,
/// and takes the lead as that job wrote it (it is not read back), so the caps, balances
/// and earlier transactions it reads cannot change before its deliveries are written. The
/// interests are decided one after another: a delivery for the first counts against the
/// caps and balance the second sees. `now_ms` is the moment that schedules and cap windows
/// are taken at.
///
/// `bids`: the bids collected for the lead's interests before the job (by position,
/// `bids`), which price the bid-priced buyers asked; a request without them has none.
///
/// `duplicates_seen` is how many earlier leads of the workspace had the lead's email or
/// phone (`ingest::dedupe::seen_before`, counted by the job before its insert), for the
/// evaluator's `duplicatesSeen`.
///
/// The caller pokes the outbox notifier after the job commits when
/// [`AutoDelivery::delivered`] is more than zero.
pub(crate) fn run_for_lead(
    conn: &Connection,
    lead: &StoredLead,
    duplicates_seen: u32,
    bids: &[Option<crate::bids::Bids>],
    now_ms: i64,
) -> Result<Option<AutoDelivery>, AutoDeliveryError> {
    let missing = |kind: &'static str, id: &str| AutoDeliveryError::Missing {
        kind,
        id: id.to_string(),
    };
    let mut asked = lead
        .requests
        .iter()
        .filter(|r| r.interest.trigger_auto_delivery)
        .peekable();
    if asked.peek().is_none() {
        return Ok(None);
    }
    let mut settings = subscribers::kept_settings(conn, &lead.container_id, &lead.source_id)?
        .ok_or_else(|| missing("container", &lead.container_id))
        .map(|row| Settings::at(row, now_ms))?;
    settings.duplicates_seen = duplicates_seen;
    let mut requests = Vec::new();
    for request in asked {
        let known = usize::try_from(request.position)
            .ok()
            .and_then(|position| bids.get(position)?.as_ref())
            .map(|bids| &bids.known);
        // Stored in this same job: no transaction holds the request yet.
        let decision = decide(conn, lead, request, &settings, known, Sold::Never)?;
        decision::store(conn, &decision)?;
        requests.push(decision);
    }
    Ok(Some(AutoDelivery { requests }))
}

/// What a decision depends on besides the lead: the settings read of the file (the
/// container's delivery settings, the workspace's time zone and evaluator weights, the
/// source's supplier cost and revenue share: [`SettingsRow`], kept between leads) and the
/// moment with its cap windows. A ping is decided on the same settings (`ping`); and the
/// duplicates seen before.
pub(crate) struct Settings {
    pub(crate) row: Arc<SettingsRow>,
    /// The supplier cost of the lead: the source's (`row`), or what a waterfall's ping
    /// pays instead.
    pub(crate) source_cost_cents: Option<i64>,
    pub(crate) duplicates_seen: u32,
    pub(crate) now_ms: i64,
    pub(crate) windows: Windows,
}

impl Settings {
    pub(crate) fn load(
        conn: &Connection,
        lead: &StoredLead,
        now_ms: i64,
    ) -> rusqlite::Result<Option<Settings>> {
        Settings::load_for(conn, &lead.container_id, &lead.source_id, now_ms)
    }

    /// The settings of a lead (or ping) from `source_id` in `container_id` at `now_ms`;
    /// `None` when the container is missing.
    pub(crate) fn load_for(
        conn: &Connection,
        container_id: &str,
        source_id: &crate::ids::SourceId,
        now_ms: i64,
    ) -> rusqlite::Result<Option<Settings>> {
        Ok(SettingsRow::read(conn, container_id, source_id)?
            .map(|row| Settings::at(Arc::new(row), now_ms)))
    }

    /// `row`'s settings at `now_ms` (its cap windows in the workspace's time zone), with no
    /// duplicates seen yet.
    pub(crate) fn at(row: Arc<SettingsRow>, now_ms: i64) -> Settings {
        Settings {
            source_cost_cents: row.source_cost_cents,
            duplicates_seen: 0,
            now_ms,
            windows: Windows::at(now_ms, &row.tz),
            row,
        }
    }

    /// How many buyers a request goes to: one in exclusive mode, up to the container's
    /// maximum in multi mode.
    pub(crate) fn wanted(&self) -> usize {
        match self.row.mode {
            DeliveryMode::Exclusive => 1,
            DeliveryMode::Multi => self.row.max_buyers.max(1) as usize,
        }
    }
}

/// What [`Settings`] reads of the file, for leads from one source in one container: all
/// but the moment and the duplicates seen. Auto-delivery keeps it between leads
/// (`subscribers::kept_settings`).
pub(crate) struct SettingsRow {
    pub(crate) auto_delivery: bool,
    pub(crate) mode: DeliveryMode,
    pub(crate) max_buyers: i64,
    pub(crate) threshold: i64,
    pub(crate) source_cost_cents: Option<i64>,
    /// The source's `--revenue-share` in hundredths of a percent (pings' payout).
    pub(crate) revenue_share_bp: Option<i64>,
    /// How long an accepted ping holds its reservations (`--ping-ttl`).
    pub(crate) ping_ttl_ms: i64,
    pub(crate) tz: TimeZone,
    pub(crate) weights: Weights,
    /// The container's waterfall (DESIGN.md section 18): on, and at most this many steps.
    pub(crate) waterfall: bool,
    pub(crate) waterfall_max: i64,
}

impl SettingsRow {
    /// The row of leads from `source_id` in `container_id`, read now (one query); `None`
    /// when the container is missing.
    pub(crate) fn read(
        conn: &Connection,
        container_id: &str,
        source_id: &crate::ids::SourceId,
    ) -> rusqlite::Result<Option<SettingsRow>> {
        let row = conn
            .prepare_kept(
                "SELECT c.auto_delivery, c.delivery_mode, c.max_buyers, c.score_threshold,
                        w.id, w.timezone, w.evaluator_weights,
                        s.supplier_cost_cents, s.revenue_share_bp, c.ping_ttl_ms,
                        c.waterfall, c.waterfall_max
                 FROM containers c JOIN workspaces w ON w.id = c.workspace_id
                 LEFT JOIN sources s ON s.id = ?2
                 WHERE c.id = ?1",
            )?
            .query_row(rusqlite::params![container_id, source_id], |row| {
                Ok((
                    (
                        row.get::<_, bool>(0)?,
                        row.get::<_, DeliveryMode>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, i64>(3)?,
                    ),
                    row.get::<_, String>(4)?,
                    row.get::<_, String>(5)?,
                    row.get::<_, Option<String>>(6)?,
                    (
                        row.get::<_, Option<i64>>(7)?,
                        row.get::<_, Option<i64>>(8)?,
                        row.get::<_, i64>(9)?,
                    ),
                    (row.get::<_, bool>(10)?, row.get::<_, i64>(11)?),
                ))
            })
            .optional()?;
        let Some((
            (auto_delivery, mode, max_buyers, threshold),
            workspace_id,
            zone,
            weights,
            (source_cost_cents, revenue_share_bp, ping_ttl_ms),
            (waterfall, waterfall_max),
        )) = row
        else {
            return Ok(None);
        };
        // The zone was checked when the workspace was created; a name the bundled database
        // no longer knows counts in UTC rather than stopping ingest.
        let tz = TimeZone::get(&zone).unwrap_or_else(|_| {
            log::warn!("workspace {workspace_id}: unknown time zone '{zone}', counting in UTC");
            TimeZone::UTC
        });
        Ok(Some(SettingsRow {
            auto_delivery,
            mode,
            max_buyers,
            threshold,
            source_cost_cents,
            revenue_share_bp,
            ping_ttl_ms,
            weights: evaluator::from_stored(&workspace_id, weights.as_deref()).0,
            tz,
            waterfall,
            waterfall_max,
        }))
    }
}

/// What auto-delivery needs of a product: its required fields and the fields with a list
/// of allowed values (for the evaluator), and its default supplier cost (for the delivery).
pub(crate) struct ProductTerms {
    pub(crate) required_fields: Vec<String>,
    pub(crate) choice_fields: Vec<String>,
    pub(crate) default_cost_cents: Option<i64>,
}

/// The terms of `product_id`; `None` when there is no such product.
pub(crate) fn product_terms(
    conn: &Connection,
    product_id: &str,
) -> rusqlite::Result<Option<ProductTerms>> {
    let found: Option<(String, Option<i64>)> = conn
        .prepare_kept("SELECT fields, default_supplier_cost_cents FROM products WHERE id = ?1")?
        .query_row([product_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(found.map(|(fields, default_cost_cents)| {
        // Written by `product create` from checked definitions.
        let fields = serde_json::from_str::<Vec<FieldDef>>(&fields).unwrap_or_default();
        let names = |keep: fn(&FieldDef) -> bool| {
            fields
                .iter()
                .filter(|f| keep(f))
                .map(|f| f.name.clone())
                .collect()
        };
        ProductTerms {
            required_fields: names(|f| f.required),
            choice_fields: names(|f| f.allowed_values.is_some()),
            default_cost_cents,
        }
    }))
}

/// The hour the lead was captured (its `capturedAt` when it gives a readable one, else
/// `now_ms`) in the time zone `tz`.
fn local_hour(captured_at: Option<&str>, now_ms: i64, tz: &TimeZone) -> u8 {
    let at = captured_at
        .and_then(crate::clock::parse_iso)
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .or_else(|| jiff::Timestamp::from_millisecond(now_ms).ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    at.to_zoned(tz.clone()).hour() as u8
}

/// The evaluator's features of `lead` for `request` under `settings` (a ping's too, which
/// then replaces what it cannot have).
pub(crate) fn features_for(
    lead: &StoredLead,
    request: &StoredRequest,
    settings: &Settings,
    product: &ProductTerms,
) -> features::Features {
    let required: Vec<&str> = product.required_fields.iter().map(String::as_str).collect();
    let choices: Vec<&str> = product.choice_fields.iter().map(String::as_str).collect();
    let context = features::Context {
        source_id: lead.source_id.as_str(),
        required_fields: &required,
        choice_fields: &choices,
        duplicates_seen: settings.duplicates_seen,
        local_hour: local_hour(
            lead.fields.capture.captured_at.as_deref(),
            settings.now_ms,
            &settings.row.tz,
        ),
    };
    features::extract(lead, &request.interest, &context)
}

/// The steps of DESIGN.md section 5 for one interest; the first that fails ends it.
/// `bids`: the bids made for the request (collected before the ingest job, or recorded,
/// when the waterfall decides again), which price the bid-priced buyers asked; without
/// them a bid-priced buyer is `no_bid`.
/// `sold`: whether a transaction may hold the request already.
pub(crate) fn decide(
    conn: &Connection,
    lead: &StoredLead,
    request: &StoredRequest,
    settings: &Settings,
    bids: Option<&KnownBids>,
    sold: Sold,
) -> Result<RequestDecision, AutoDeliveryError> {
    let stop = |reason, evaluation, candidates| RequestDecision {
        request_id: decision::Subject::Request(request.id),
        reason,
        evaluation,
        deliveries: Vec::new(),
        candidates,
        decided_at: settings.now_ms,
    };
    if request.interest.routing_ready == Some(false) {
        return Ok(stop(RequestReason::NotRoutingReady, None, Vec::new()));
    }
    if lead.duplicate_status == DuplicateStatus::Review {
        return Ok(stop(RequestReason::DuplicateReview, None, Vec::new()));
    }
    if lead.quality_status == QualityStatus::Invalid {
        return Ok(stop(RequestReason::QualityInvalid, None, Vec::new()));
    }
    if !settings.row.auto_delivery {
        return Ok(stop(RequestReason::AutoDeliveryDisabled, None, Vec::new()));
    }

    let product_id = &request.interest.product_id;
    let product = subscribers::kept_product_terms(conn, product_id)?.ok_or_else(|| {
        AutoDeliveryError::Missing {
            kind: "product",
            id: product_id.clone(),
        }
    })?;
    let features = features_for(lead, request, settings, &product);
    let evaluation = evaluator::evaluate(&features, &settings.row.weights, settings.row.threshold);
    if !evaluation.passed {
        return Ok(stop(
            RequestReason::ScoreBelowThreshold,
            Some(evaluation),
            Vec::new(),
        ));
    }

    let context = eligibility::Context {
        lead,
        request,
        tz: &settings.row.tz,
        now_ms: settings.now_ms,
        windows: &settings.windows,
        bidding: bids.map_or(Bidding::Without, Bidding::Asked),
    };
    let mut candidates = match sold {
        Sold::Never => eligibility::candidates_unsold(conn, &context)?,
        Sold::Maybe => eligibility::candidates(conn, &context)?,
    };
    if let Some(known) = bids {
        eligibility::apply_bids(conn, &mut candidates, known)?;
    }
    select::rank(&mut candidates);
    let terms = DeliveryTerms {
        mode: settings.row.mode,
        max_buyers: settings.row.max_buyers,
        supplier_cost_cents: settings
            .source_cost_cents
            .or(product.default_cost_cents)
            .unwrap_or(0),
        cap_windows: Some(settings.windows),
    };
    let deliveries = take(
        conn,
        (lead, request),
        terms,
        (settings.wanted(), sold),
        bids,
        &mut candidates,
    )?;
    if !deliveries.is_empty() {
        stored_features::record(conn, request.id, &lead.container_id, &features)?;
    }
    Ok(RequestDecision {
        request_id: decision::Subject::Request(request.id),
        reason: if deliveries.is_empty() {
            RequestReason::NoEligibleBuyer
        } else {
            RequestReason::Delivered
        },
        evaluation: Some(evaluation),
        deliveries,
        candidates,
        decided_at: settings.now_ms,
    })
}

/// Whether a transaction may hold a request when it is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sold {
    /// The request was stored in the deciding job: nothing holds it yet.
    Never,
    /// A decision again (`lead reroute`, the waterfall): its transactions are read.
    Maybe,
}

/// What trying to take one candidate came to.
pub(crate) enum Attempt<T> {
    Taken(T),
    /// Refused for this buyer (the detail says why, for the operator); `request_full` when
    /// no later buyer can take the request either.
    Refused {
        request_full: bool,
        detail: Value,
    },
}

/// The one selection: goes through the eligible candidates in rank order and tries to take
/// each (`attempt`) until `wanted` are taken, marking each `Selected`, `NotSelected` or
/// `DeliveryRefused`. Auto-delivery takes by delivering, a ping by reserving.
pub(crate) fn take_ranked<T>(
    candidates: &mut [Candidate],
    wanted: usize,
    mut attempt: impl FnMut(&Candidate) -> Result<Attempt<T>, AutoDeliveryError>,
) -> Result<Vec<T>, AutoDeliveryError> {
    let mut taken = Vec::new();
    let mut request_full = false;
    for candidate in candidates
        .iter_mut()
        .filter(|c| c.reason == Reason::Eligible)
    {
        if request_full || taken.len() >= wanted {
            candidate.reason = Reason::NotSelected;
            continue;
        }
        match attempt(candidate)? {
            Attempt::Taken(one) => {
                candidate.reason = Reason::Selected;
                taken.push(one);
            }
            Attempt::Refused {
                request_full: full,
                detail,
            } => {
                request_full = full;
                candidate.reason = Reason::DeliveryRefused;
                candidate.detail = Some(eligibility::Detail::Refused(detail));
            }
        }
    }
    Ok(taken)
}

/// Delivers to the eligible candidates in rank order: one in exclusive mode, up to the
/// container's maximum in multi mode. A delivery refused for this buyer moves on to the
/// next; one refused for the request (it is full) ends the round.
/// A buyer priced by its bid (`bids`) is sold at it, the transaction naming the bid.
/// Every caller stores the decision in the same job, which sets the request's status.
fn take(
    conn: &Connection,
    (lead, request): (&StoredLead, &StoredRequest),
    terms: DeliveryTerms,
    (wanted, sold): (usize, Sold),
    bids: Option<&KnownBids>,
    candidates: &mut [Candidate],
) -> Result<Vec<Delivery>, AutoDeliveryError> {
    // A refused delivery writes nothing, so a request stored in this job stays unsold
    // until the first delivery of it.
    let mut unsold = sold == Sold::Never;
    take_ranked(candidates, wanted, |candidate| {
        let order = LeadDelivery {
            bid: bids.and_then(|known| known.bid_of(&candidate.buyer_id)),
            lead,
            request,
            terms,
            buyer_id: &candidate.buyer_id,
            price_cents: Some(candidate.price_cents),
            actor: ACTOR,
        };
        let known = delivery::Known {
            unsold,
            status_by_caller: true,
        };
        let delivered = delivery::deliver_known(conn, &order, known);
        if delivered.is_ok() {
            unsold = false;
        }
        refusal_of(
            delivered.map(|delivered| Delivery {
                transaction_id: delivered.transaction_id,
                buyer_id: delivered.buyer_id,
                price_cents: delivered.buyer_price_cents,
                mode: delivered.delivery_mode,
            }),
            request.id,
            &candidate.buyer_id,
        )
    })
}

/// A delivery's result as an [`Attempt`]: a refusal is logged and named in the candidate's
/// detail; a database error stops the job.
pub(crate) fn refusal_of<T>(
    result: Result<T, DeliveryError>,
    request_id: impl std::fmt::Display,
    buyer_id: &crate::ids::BuyerId,
) -> Result<Attempt<T>, AutoDeliveryError> {
    match result {
        Ok(taken) => Ok(Attempt::Taken(taken)),
        Err(DeliveryError::Db(e)) => Err(AutoDeliveryError::Db(e)),
        Err(refused) => {
            log::warn!("delivery of {request_id} to {buyer_id} refused: {refused}");
            Ok(Attempt::Refused {
                request_full: matches!(
                    refused,
                    DeliveryError::AlreadyDelivered { .. }
                        | DeliveryError::MaxBuyersReached { .. }
                        | DeliveryError::LeadNotActive { .. }
                ),
                detail: serde_json::to_value(RefusalDetail {
                    code: refused.code(),
                    message: refused.to_string(),
                })
                .expect("two strings serialise"),
            })
        }
    }
}

/// The detail of a candidate whose delivery was refused: the refusal's code and message.
#[derive(Serialize)]
struct RefusalDetail {
    code: &'static str,
    message: String,
}

/// Why `lead reroute` was refused.
#[derive(Debug, thiserror::Error)]
pub enum RerouteError {
    #[error("unknown lead '{0}'")]
    NotFound(String),
    #[error("lead '{lead_id}' is {status} and cannot be delivered")]
    NotActive {
        lead_id: crate::ids::LeadId,
        status: String,
    },
    #[error("lead '{0}' has no open request: each is held by a live transaction (void it first)")]
    NothingOpen(crate::ids::LeadId),
    #[error(transparent)]
    AutoDelivery(#[from] AutoDeliveryError),
}

impl From<rusqlite::Error> for RerouteError {
    fn from(e: rusqlite::Error) -> Self {
        RerouteError::AutoDelivery(e.into())
    }
}

impl From<DbError> for RerouteError {
    fn from(e: DbError) -> Self {
        RerouteError::AutoDelivery(AutoDeliveryError::Db(e))
    }
}

/// Runs auto-delivery again for every request of lead `lead_id` that no live transaction
/// holds (`lead reroute`, DESIGN.md section 13): the steps of [`run_for_lead`] as of `now_ms`,
/// whether or not the partner asked for automated delivery (the operator does now). A
/// buyer that held the request before, its transaction voided or rejected, is not eligible
/// again (`already_delivered`). Each decision replaces the request's stored one; the
/// operator's view of them is returned.
pub fn reroute(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
    now_ms: i64,
) -> Result<AutoDelivery, RerouteError> {
    let lead = crate::ingest::view::find(conn, lead_id)?
        .ok_or_else(|| RerouteError::NotFound(lead_id.to_string()))?;
    if lead.status != crate::ingest::status::LeadStatus::Active {
        return Err(RerouteError::NotActive {
            lead_id: lead.id,
            status: lead.status.as_str().replace('_', " "),
        });
    }
    let settings =
        Settings::load(conn, &lead, now_ms)?.ok_or_else(|| AutoDeliveryError::Missing {
            kind: "container",
            id: lead.container_id.clone(),
        })?;
    let mut requests = Vec::new();
    for request in &lead.requests {
        let held = crate::delivery::transaction::of_request(conn, request.id)?
            .iter()
            .any(|t| t.status.is_live());
        if held {
            continue;
        }
        let decision = decide(conn, &lead, request, &settings, None, Sold::Maybe)?;
        decision::store(conn, &decision)?;
        requests.push(decision);
    }
    if requests.is_empty() {
        return Err(RerouteError::NothingOpen(lead.id));
    }
    Ok(AutoDelivery { requests })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hour_of_day_is_the_capture_time_in_the_workspace_zone() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        let noon_utc = crate::clock::parse_iso("2025-01-15T12:00:00Z").unwrap();
        assert_eq!(
            local_hour(Some("2025-07-01T22:30:00Z"), noon_utc, &berlin),
            0,
            "CEST"
        );
        assert_eq!(local_hour(Some("2025-01-01T05:10:00+01:00"), 0, &berlin), 5);
        assert_eq!(
            local_hour(None, noon_utc, &berlin),
            13,
            "no capture time: now, CET"
        );
        assert_eq!(
            local_hour(Some("last tuesday"), noon_utc, &TimeZone::UTC),
            12
        );
    }
}
