//! The bids of an accepted request (DESIGN.md section 14): which of its leads' interests
//! auto-delivery will decide among bid-priced buyers, and their bids, collected on the
//! request's task before the writer job, which re-checks eligibility with them and records
//! them.

use super::Services;
use crate::bids::Bids;
use crate::config::source::Source;
use crate::ingest::IngestError;
use crate::ingest::catalog::Catalog;
use crate::ingest::quality;
use crate::ingest::store::{self, PreparedLead};

/// The bids collected for a request's leads: per lead (by index), per interest (by
/// position). Empty when none was asked for, as is a lead's entry.
pub(crate) type Collected = Vec<Vec<Option<Bids>>>;

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
/// product with bid-priced subscriptions (DESIGN.md section 14), for the writer job
/// (`job::store_all`), which re-checks eligibility with them and records them. The eligible bidders are read on the pool (one read for the whole
/// request), every bid request of the request goes out at once, and this task waits for
/// each at most its buyer's `--bid-timeout`: never inside a writer job. Nothing is read
/// for leads in products no one bids on (the catalog knows), nor for a lead that will
/// not be decided (quality invalid, not routing-ready, a replay of a stored externalId, a
/// duplicate under the source's rule, a post's interest in its ping's product,
/// auto-delivery off): a lead refused, or kept for review, asks no buyer for a bid.
pub(super) async fn ask_for_bids(
    services: &Services<'_>,
    target: &Source,
    catalog: &Catalog,
    leads: &[PreparedLead],
) -> Result<Collected, IngestError> {
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
        return Ok(Collected::new());
    }
    let now = crate::clock::now_ms();
    let mut asked = Vec::new();
    let asking = services.db.read_blocking(|conn| {
        // No buyer is asked on a stale admission.
        crate::ingest::kept::confirm_in(conn, services.stamp.pending())?;
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
            let mode = settings.row.mode.as_str();
            asked.push((index, position));
            asking.push(crate::bids::asking(
                &stored, request, bidders, mode, decided_by,
            ));
        }
        Ok::<_, IngestError>(asking)
    })?;
    services.stamp.mark_confirmed();
    if asking.is_empty() {
        return Ok(Collected::new());
    }
    let collected = crate::bids::collect(services.bids, asking, services.arrived).await;
    let mut by_lead = Collected::new();
    by_lead.resize_with(leads.len(), Vec::new);
    for ((index, position), bids) in asked.into_iter().zip(collected) {
        for bid in &bids.recorded {
            services
                .metrics
                .bid(&bid.buyer_id, bid.outcome, bid.latency_ms);
        }
        let lead = &mut by_lead[index];
        lead.resize(leads[index].lead.interests.len(), None);
        lead[position] = Some(bids);
    }
    Ok(by_lead)
}
