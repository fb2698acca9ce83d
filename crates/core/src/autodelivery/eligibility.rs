//! Which buyers may take a lead request, and for each one that may not, why.
//!
//! The candidates are every buyer of the workspace subscribed to the request's product,
//! paused ones included, so the decision answers "why did buyer X not get this lead?" for
//! each of them. The checks run in the order of DESIGN.md section 5 and the first failing
//! one names the reason: `buyer_paused`, `buyer_unhealthy` (its endpoint's circuit breaker
//! is open, DESIGN.md section 13), `filter_mismatch`, `schedule_closed`,
//! `daily_cap_reached`, `monthly_cap_reached`, `insufficient_balance`, `already_delivered`.
//!
//! Owns the checks. What feeds them: the subscribed buyers with their endpoint's health and
//! their cap counters from `subscribers` (read fresh, or in the ingest job as kept between
//! leads), and the request's holders from `delivery::transaction`. Nothing here grows with the file's history. The rules
//! themselves are stated once where they belong: a cap
//! reached in `caps::Limits::reached`, balance plus credit covering the price in
//! `ledger::covers` (the same rule that `delivery::deliver` re-checks). A buyer that ever
//! held a transaction of the request, whatever its state, does not get it again. It runs
//! inside the ingest writer job, so a count or balance it reads cannot change before the
//! delivery it allows is written. Choosing among eligible buyers is `select`.

use crate::db::PrepareKept;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

use super::Settings;
use super::filters;
use super::subscribers::{self, Subscribed};
pub(crate) use crate::bids::KnownBids;
use crate::caps::{self, Windows};
use crate::config::buyer::{Filter, Plan};
use crate::delivery::transaction;
use crate::ingest::model::{StoredLead, StoredRequest};
use crate::ledger;

/// A candidate's standing, from ineligible through the selection's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    BuyerPaused,
    BuyerUnhealthy,
    FilterMismatch,
    ScheduleClosed,
    DailyCapReached,
    MonthlyCapReached,
    InsufficientBalance,
    AlreadyDelivered,
    /// A bid-priced buyer that made no usable bid (passed, timed out, failed, or bid
    /// outside its min/max price).
    NoBid,
    /// Passed every check; selection decides between `Selected` and `NotSelected`.
    Eligible,
    Selected,
    NotSelected,
    /// Passed every check here, but the delivery itself refused (it re-checks its rules).
    DeliveryRefused,
}

impl Reason {
    pub(crate) fn code(self) -> &'static str {
        match self {
            Reason::BuyerPaused => "buyer_paused",
            Reason::BuyerUnhealthy => "buyer_unhealthy",
            Reason::FilterMismatch => "filter_mismatch",
            Reason::ScheduleClosed => "schedule_closed",
            Reason::DailyCapReached => "daily_cap_reached",
            Reason::MonthlyCapReached => "monthly_cap_reached",
            Reason::InsufficientBalance => "insufficient_balance",
            Reason::AlreadyDelivered => "already_delivered",
            Reason::NoBid => "no_bid",
            Reason::Eligible => "eligible",
            Reason::Selected => "selected",
            Reason::NotSelected => "not_selected",
            Reason::DeliveryRefused => "delivery_refused",
        }
    }

    pub(crate) fn is_eligible(self) -> bool {
        matches!(
            self,
            Reason::Eligible | Reason::Selected | Reason::NotSelected
        )
    }
}

/// A subscribed buyer with the terms that rank it and its verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub buyer_id: crate::ids::BuyerId,
    pub price_cents: i64,
    pub priority: i64,
    pub last_served_at: Option<i64>,
    pub created_at: i64,
    pub reason: Reason,
    /// What exactly failed (the filter's field, the cap and count, the amounts), for the
    /// operator.
    pub detail: Option<Detail>,
}

/// What the checks need to know about the moment and the place.
pub(crate) struct Context<'a> {
    pub(crate) lead: &'a StoredLead,
    pub(crate) request: &'a StoredRequest,
    pub(crate) tz: &'a TimeZone,
    pub(crate) now_ms: i64,
    pub(crate) windows: &'a Windows,
    /// Which bid-priced buyers may stand: none without bids, all while finding whom to ask,
    /// the ones asked once their bids are in.
    pub(crate) bidding: Bidding<'a>,
}

/// How a decision treats bid-priced buyers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bidding<'a> {
    /// No bid was asked for (`lead reroute`): a bid-priced buyer is `no_bid`.
    Without,
    /// Finding whom to ask, before the bid requests (`bids`): a bid-priced buyer passes, its
    /// balance checked once its bid is known.
    Asking,
    /// The bids are in ([`apply_bids`] prices the buyers asked); a bid-priced buyer not
    /// asked (subscribed since) has no bid to price it and is `no_bid`.
    Asked(&'a KnownBids),
}

/// The bidders of `request`'s product that are eligible for it now under `settings` (read
/// from the pool; the writer job checks again): none when auto-delivery is off.
pub(crate) fn eligible_bidders(
    conn: &Connection,
    lead: &StoredLead,
    request: &StoredRequest,
    settings: &Settings,
) -> rusqlite::Result<Vec<crate::bids::Bidder>> {
    if !settings.row.auto_delivery {
        return Ok(Vec::new());
    }
    let all = crate::bids::bidders(conn, &lead.workspace_id, &request.interest.product_id)?;
    if all.is_empty() {
        return Ok(all);
    }
    let candidates = candidates(
        conn,
        &Context {
            lead,
            request,
            tz: &settings.row.tz,
            now_ms: settings.now_ms,
            windows: &settings.windows,
            bidding: Bidding::Asking,
        },
    )?;
    let eligible: HashSet<&str> = candidates
        .iter()
        .filter(|c| c.reason == Reason::Eligible)
        .map(|c| c.buyer_id.as_str())
        .collect();
    Ok(all
        .into_iter()
        .filter(|b| eligible.contains(b.buyer_id.as_str()))
        .collect())
}

/// Every buyer of the workspace subscribed to the interest's product, each checked.
pub(crate) fn candidates(conn: &Connection, context: &Context) -> rusqlite::Result<Vec<Candidate>> {
    let subscribed = subscribers::read(
        conn,
        &context.lead.workspace_id,
        &context.request.interest.product_id,
    )?;
    checked(conn, context, &subscribed, None)
}

/// [`candidates`] of a request that no transaction holds (stored in this same job), whose
/// holders need no read. Runs in the ingest writer job, whose thread keeps the subscribed
/// buyers between leads (`subscribers::kept`).
pub(crate) fn candidates_unsold(
    conn: &Connection,
    context: &Context,
) -> rusqlite::Result<Vec<Candidate>> {
    let subscribed = subscribers::kept(
        conn,
        &context.lead.workspace_id,
        &context.request.interest.product_id,
    )?;
    checked(conn, context, &subscribed, Some(HashSet::new()))
}

/// The `subscribed` buyers checked against the request's `holders` (read when `None`).
fn checked(
    conn: &Connection,
    context: &Context,
    subscribed: &[Rc<Subscribed>],
    holders: Option<HashSet<crate::ids::BuyerId>>,
) -> rusqlite::Result<Vec<Candidate>> {
    if subscribed.is_empty() {
        return Ok(Vec::new());
    }
    let holders = match holders {
        Some(holders) => holders,
        None => transaction::buyers_of_request(conn, context.request.id)?,
    };
    let mut candidates = Vec::with_capacity(subscribed.len());
    for buyer in subscribed {
        let (reason, detail) = check(context, buyer, &holders);
        candidates.push(Candidate {
            buyer_id: buyer.buyer_id.clone(),
            price_cents: buyer.price_cents,
            priority: buyer.priority,
            last_served_at: buyer.last_served_at,
            created_at: buyer.created_at,
            reason,
            detail,
        });
    }
    Ok(candidates)
}

fn check(
    context: &Context,
    buyer: &Subscribed,
    holders: &std::collections::HashSet<crate::ids::BuyerId>,
) -> (Reason, Option<Detail>) {
    if buyer.paused {
        return (Reason::BuyerPaused, None);
    }
    if buyer.unhealthy {
        return (Reason::BuyerUnhealthy, None);
    }
    let may_bid = match context.bidding {
        Bidding::Without => false,
        Bidding::Asking => true,
        Bidding::Asked(known) => known.asked.contains(&buyer.buyer_id),
    };
    if buyer.bids && !may_bid {
        // A buyer not asked has no bid to price it.
        return (Reason::NoBid, None);
    }
    // Filters are written by `buyer subscribe` from checked input; a hand-edited row that
    // no longer reads matches nothing rather than everything.
    let filters = match &buyer.filters {
        Ok(filters) => filters,
        Err(e) => {
            return (
                Reason::FilterMismatch,
                Some(Detail::Unreadable {
                    error: format!("stored filters unreadable: {e}"),
                }),
            );
        }
    };
    // A required check step that did not pass excludes the buyer as a filter would, and
    // the trace names the step and its outcome (DESIGN.md section 22).
    if let Some(name) = &buyer.require_check
        && !crate::checks::CheckRecord::passed(&context.lead.checks, name)
    {
        let outcome = context
            .lead
            .checks
            .iter()
            .find(|record| &record.name == name)
            .map(|record| record.outcome);
        return (
            Reason::FilterMismatch,
            Some(Detail::RequireCheck {
                require_check: name.clone(),
                outcome,
            }),
        );
    }
    if let Some(index) = filters::first_mismatch(
        &filters[..],
        &context.lead.fields,
        &context.lead.checks,
        &context.request.interest,
    ) {
        return (
            Reason::FilterMismatch,
            Some(Detail::Filter {
                filters: Arc::clone(filters),
                index,
            }),
        );
    }
    if let Some(schedule) = &buyer.schedule {
        let at = Timestamp::from_millisecond(context.now_ms).unwrap_or(Timestamp::UNIX_EPOCH);
        let open = match &schedule.read {
            Ok(read) => read.is_open(at, context.tz),
            Err(_) => false,
        };
        if !open {
            let detail = Detail::Closed {
                schedule: Arc::clone(&schedule.shown),
                timezone: context.tz.iana_name().unwrap_or("UTC").to_owned(),
                error: schedule.read.as_ref().err().cloned(),
            };
            return (Reason::ScheduleClosed, Some(detail));
        }
    }
    if buyer.daily_cap.is_some() || buyer.monthly_cap.is_some() {
        let usage = buyer.caps.usage(context.windows);
        let limits = caps::Limits {
            daily: buyer.daily_cap,
            monthly: buyer.monthly_cap,
        };
        if let Some(reached) = limits.reached(&usage) {
            let reason = match reached.period {
                caps::Period::Day => Reason::DailyCapReached,
                caps::Period::Month => Reason::MonthlyCapReached,
            };
            return (
                reason,
                Some(Detail::Cap {
                    cap: reached.cap,
                    count: reached.count,
                }),
            );
        }
    }
    if buyer.plan == Plan::Prepaid
        && !buyer.bids
        && let Err(short) = ledger::covers(
            buyer.balance_cents,
            buyer.credit_limit_cents,
            buyer.price_cents,
        )
    {
        return (
            Reason::InsufficientBalance,
            Some(Detail::Short {
                buyer_price: crate::money::as_f64(buyer.price_cents),
                available: crate::money::as_f64(short.available_cents),
            }),
        );
    }
    if holders.contains(&buyer.buyer_id) {
        return (Reason::AlreadyDelivered, None);
    }
    (Reason::Eligible, None)
}

/// Why a candidate is not eligible (`Candidate::detail`), kept as the check found it and
/// written as JSON only with the trace: a tree of `Value`s built for every buyer whose
/// filter did not match cost the writer 3,400 instructions each (callgrind of
/// `examples/autodelivery_cost`, `LEADS=1000 ONLY=5`, four per lead). Its JSON is an object
/// of the variant's fields, camelCase, in their order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum Detail {
    /// The subscription's stored filters do not read.
    Unreadable {
        error: String,
    },
    /// A required check step the lead did not pass, with its outcome if it ran.
    RequireCheck {
        require_check: String,
        outcome: Option<crate::checks::Outcome>,
    },
    /// The subscription's filter at `index` did not match: shown as that filter.
    #[serde(serialize_with = "failed_filter")]
    Filter {
        filters: Arc<Vec<Filter>>,
        index: usize,
    },
    /// The buyer's schedule is closed now (or does not read: `error`).
    Closed {
        /// The buyer's stored schedule (free-form when it does not read).
        schedule: Arc<Value>,
        timezone: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    Cap {
        cap: i64,
        count: i64,
    },
    Short {
        buyer_price: f64,
        available: f64,
    },
    /// The delivery refused the buyer that passed every check here: its error as JSON.
    Refused(Value),
}

impl Detail {
    /// The field of the filter that did not match: all a partner is shown of a detail.
    pub(crate) fn filter_field(&self) -> Option<&str> {
        match self {
            Detail::Filter { filters, index } => Some(&filters[*index].field),
            _ => None,
        }
    }
}

/// [`Detail::Filter`] as the filter that failed: its field, operator and values.
fn failed_filter<S: serde::Serializer>(
    filters: &Arc<Vec<Filter>>,
    index: &usize,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    filters[*index].serialize(serializer)
}

/// Prices the eligible bid-priced candidates that were asked with their bids (`known`) and
/// checks a prepaid balance at that price, the same rule as for a fixed price
/// (`ledger::covers_unheld`); a bidder without a usable bid is `no_bid`.
pub(crate) fn apply_bids(
    conn: &Connection,
    candidates: &mut [Candidate],
    known: &KnownBids,
) -> rusqlite::Result<()> {
    use rusqlite::OptionalExtension;
    for candidate in candidates
        .iter_mut()
        .filter(|c| c.reason == Reason::Eligible && known.asked.contains(&c.buyer_id))
    {
        let Some(&price) = known.prices.get(&candidate.buyer_id) else {
            candidate.reason = Reason::NoBid;
            continue;
        };
        candidate.price_cents = price;
        let account: Option<(Plan, i64, i64, i64)> = conn
            .prepare_kept(
                "SELECT plan, balance_cents, held_cents, credit_limit_cents FROM buyers
                 WHERE id = ?1",
            )?
            .query_row([&candidate.buyer_id], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .optional()?;
        if let Some((Plan::Prepaid, balance, held, credit)) = account
            && let Err(short) = ledger::covers_unheld(balance, held, credit, price)
        {
            candidate.reason = Reason::InsufficientBalance;
            candidate.detail = Some(Detail::Short {
                buyer_price: crate::money::as_f64(price),
                available: crate::money::as_f64(short.available_cents),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{
        BuyerFixture, add_buyer, add_transaction, database, lead, request,
    };
    use super::*;

    /// Monday 2025-01-06 10:00 UTC.
    const NOW: i64 = 1_736_157_600_000;

    fn verdicts(
        conn: &Connection,
        lead: &StoredLead,
    ) -> Vec<(String, &'static str, Option<Value>)> {
        let windows = Windows::at(NOW, &TimeZone::UTC);
        let context = Context {
            lead,
            request: &request(&[("roof", "tile")]),
            tz: &TimeZone::UTC,
            now_ms: NOW,
            windows: &windows,
            bidding: Bidding::Without,
        };
        let mut found: Vec<_> = candidates(conn, &context)
            .unwrap()
            .into_iter()
            .map(|c| {
                let detail = c.detail.map(|d| serde_json::to_value(d).unwrap());
                (c.buyer_id.to_string(), c.reason.code(), detail)
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }

    #[test]
    fn each_buyer_gets_the_first_reason_that_applies() {
        let conn = database();
        let buyers = [
            ("a_ok", BuyerFixture::default()),
            (
                "b_paused",
                BuyerFixture {
                    status: "paused",
                    filters: r#"[{"field":"country","op":"equals","values":["AT"]}]"#,
                    ..Default::default()
                },
            ),
            (
                "c_filter",
                BuyerFixture {
                    filters: r#"[{"field":"country","op":"equals","values":["DE"]},
                                 {"field":"fieldValues.roof","op":"oneOf","values":["flat","metal"]}]"#,
                    ..Default::default()
                },
            ),
            (
                "d_closed",
                BuyerFixture {
                    schedule: Some(r#"[{"days":[6,7],"from":"00:00","to":"24:00"}]"#),
                    ..Default::default()
                },
            ),
            (
                "e_open",
                BuyerFixture {
                    schedule: Some(r#"[{"days":[1],"from":"09:00","to":"11:00"}]"#),
                    ..Default::default()
                },
            ),
            (
                "f_daily",
                BuyerFixture {
                    daily_cap: Some(1),
                    monthly_cap: Some(100),
                    ..Default::default()
                },
            ),
            (
                "g_monthly",
                BuyerFixture {
                    daily_cap: Some(5),
                    monthly_cap: Some(2),
                    ..Default::default()
                },
            ),
            (
                "h_poor",
                BuyerFixture {
                    plan: "prepaid",
                    balance_cents: 500,
                    credit_limit_cents: 499,
                    ..Default::default()
                },
            ),
            (
                "i_credit",
                BuyerFixture {
                    plan: "prepaid",
                    balance_cents: -200,
                    credit_limit_cents: 1200,
                    ..Default::default()
                },
            ),
            ("j_holder", BuyerFixture::default()),
        ];
        for (id, fixture) in &buyers {
            add_buyer(&conn, id, fixture);
        }
        // f_daily: one delivery today. g_monthly: two earlier this month, none today.
        add_transaction(
            &conn,
            crate::autodelivery::testing::old_request_id(),
            "f_daily",
            "solar",
            "delivered",
            NOW - 3_600_000,
        );
        add_transaction(
            &conn,
            crate::autodelivery::testing::old_request_id(),
            "g_monthly",
            "solar",
            "paid",
            NOW - 3 * 86_400_000,
        );
        add_transaction(
            &conn,
            crate::autodelivery::testing::old_request_id(),
            "g_monthly",
            "solar",
            "acknowledged",
            NOW - 4 * 86_400_000,
        );
        add_transaction(
            &conn,
            crate::autodelivery::testing::request_id(),
            "j_holder",
            "solar",
            "rejected",
            NOW - 60_000,
        );

        let lead = lead(&[("country", "DE")]);
        let found = verdicts(&conn, &lead);
        let codes: Vec<(&str, &str)> = found.iter().map(|(b, r, _)| (b.as_str(), *r)).collect();
        assert_eq!(
            codes,
            [
                ("a_ok", "eligible"),
                ("b_paused", "buyer_paused"),
                ("c_filter", "filter_mismatch"),
                ("d_closed", "schedule_closed"),
                ("e_open", "eligible"),
                ("f_daily", "daily_cap_reached"),
                ("g_monthly", "monthly_cap_reached"),
                ("h_poor", "insufficient_balance"),
                ("i_credit", "eligible"),
                ("j_holder", "already_delivered"),
            ]
        );
        assert_eq!(found[2].2.as_ref().unwrap()["field"], "fieldValues.roof");
        assert_eq!(found[2].2.as_ref().unwrap()["op"], "oneOf");
        assert_eq!(found[3].2.as_ref().unwrap()["timezone"], "UTC");
        assert_eq!(found[5].2, Some(json!({"cap": 1, "count": 1})));
        assert_eq!(found[6].2, Some(json!({"cap": 2, "count": 2})));
        assert_eq!(
            found[7].2,
            Some(json!({"buyerPrice": 10.0, "available": 9.99}))
        );
    }

    #[test]
    fn rejected_and_cancelled_transactions_give_their_cap_place_back() {
        let conn = database();
        let capped_at_two = BuyerFixture {
            daily_cap: Some(2),
            ..Default::default()
        };
        add_buyer(&conn, "capped", &capped_at_two);
        let capped = |status: &str, at: i64| {
            add_transaction(
                &conn,
                crate::autodelivery::testing::old_request_id(),
                "capped",
                "solar",
                status,
                at,
            )
        };
        capped("rejected", NOW - 60_000);
        capped("cancelled", NOW - 60_000);
        capped("delivered", NOW - 60_000);
        // Yesterday's delivery counts for the month, not for today.
        capped("delivered", NOW - 86_400_000);
        assert_eq!(verdicts(&conn, &lead(&[]))[0].1, "eligible");
        capped("acknowledged", NOW - 1);
        assert_eq!(verdicts(&conn, &lead(&[]))[0].1, "daily_cap_reached");
    }

    #[test]
    fn only_buyers_of_the_workspace_subscribed_to_the_product_are_candidates() {
        let conn = database();
        add_buyer(&conn, "sub", &BuyerFixture::default());
        let heat = BuyerFixture {
            product: "heat",
            ..Default::default()
        };
        add_buyer(&conn, "other_product", &heat);
        conn.execute_batch(
            "INSERT INTO buyers (id, workspace_id, name, webhook_url, signing_secret, created_at)
                 VALUES ('unsubscribed', 'ws', 'U', 'http://x.test/', 'whsec_x', 0);",
        )
        .unwrap();
        let found = verdicts(&conn, &lead(&[]));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "sub");
    }

    #[test]
    fn unreadable_stored_filters_match_nothing_and_say_why() {
        let conn = database();
        let odd = BuyerFixture {
            filters: "[{",
            ..Default::default()
        };
        add_buyer(&conn, "odd", &odd);
        add_buyer(&conn, "plain", &BuyerFixture::default());
        let found = verdicts(&conn, &lead(&[]));
        let odd = found.iter().find(|(id, ..)| id == "odd").unwrap();
        assert_eq!(odd.1, "filter_mismatch");
        let error = odd.2.as_ref().unwrap()["error"].as_str().unwrap();
        assert!(error.starts_with("stored filters unreadable: "), "{error}");
        let plain = found.iter().find(|(id, ..)| id == "plain").unwrap();
        assert_eq!(plain.1, "eligible");
    }

    #[test]
    fn an_unreadable_stored_schedule_is_closed() {
        let conn = database();
        let odd = BuyerFixture {
            schedule: Some(r#""whenever""#),
            ..Default::default()
        };
        add_buyer(&conn, "odd", &odd);
        let garbled = BuyerFixture {
            schedule: Some("{not json"),
            ..Default::default()
        };
        add_buyer(&conn, "garbled", &garbled);
        let found = verdicts(&conn, &lead(&[]));
        let detail = |index: usize| found[index].2.clone().unwrap();
        assert_eq!(
            (found[0].1, found[1].1),
            ("schedule_closed", "schedule_closed")
        );
        assert_eq!(found[0].0, "garbled");
        assert_eq!(
            detail(0)["schedule"],
            Value::Null,
            "not JSON: shown as null"
        );
        assert!(
            detail(0)["error"]
                .as_str()
                .unwrap()
                .contains("key must be a string")
        );
        assert_eq!(
            detail(1)["schedule"],
            "whenever",
            "JSON, not a schedule: shown"
        );
        assert_eq!(detail(1)["error"], "a schedule is an array of windows");
        assert_eq!(detail(1)["timezone"], "UTC");
    }
}
