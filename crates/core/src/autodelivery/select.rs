//! The order in which eligible buyers get a lead request: highest price first, then higher
//! priority, then the buyer served longest ago (never served before anyone served), then
//! the older account and finally the id, so the order is total and the same every time.
//! Equal terms therefore take turns: whoever got the last lead goes to the back.
//!
//! Owns only the ranking; how many buyers are taken (one in exclusive mode, up to the
//! container's maximum in multi mode) and trying the next one when a delivery is refused is
//! the orchestration in `mod.rs`.

use std::cmp::Ordering;

use super::eligibility::Candidate;

/// Sorts `candidates` best first. Ineligible ones are ranked too, so the decision lists
/// every buyer in one readable order.
pub(crate) fn rank(candidates: &mut [Candidate]) {
    candidates.sort_by(compare);
}

fn compare(a: &Candidate, b: &Candidate) -> Ordering {
    b.price_cents
        .cmp(&a.price_cents)
        .then(b.priority.cmp(&a.priority))
        .then(served_order(a.last_served_at, b.last_served_at))
        .then(a.created_at.cmp(&b.created_at))
        .then_with(|| a.buyer_id.cmp(&b.buyer_id))
}

/// Never served first, then the earliest served.
fn served_order(a: Option<i64>, b: Option<i64>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => a.cmp(&b),
    }
}

#[cfg(test)]
mod tests {
    use super::super::eligibility::Reason;
    use super::*;

    fn candidate(
        id: &str,
        price: i64,
        priority: i64,
        served: Option<i64>,
        created: i64,
    ) -> Candidate {
        Candidate {
            buyer_id: id.into(),
            price_cents: price,
            priority,
            last_served_at: served,
            created_at: created,
            reason: Reason::Eligible,
            detail: None,
        }
    }

    fn ranked(mut candidates: Vec<Candidate>) -> Vec<String> {
        rank(&mut candidates);
        candidates
            .into_iter()
            .map(|c| c.buyer_id.to_string())
            .collect()
    }

    #[test]
    fn price_then_priority_then_longest_ago_served() {
        let order = ranked(vec![
            candidate("cheap", 500, 9, None, 0),
            candidate("served_late", 1000, 1, Some(300), 0),
            candidate("high_priority", 1000, 5, Some(999), 0),
            candidate("served_early", 1000, 1, Some(100), 0),
            candidate("never_served", 1000, 1, None, 50),
            candidate("never_served_older", 1000, 1, None, 10),
            candidate("rich", 1500, -3, Some(1), 0),
        ]);
        assert_eq!(
            order,
            [
                "rich",
                "high_priority",
                "never_served_older",
                "never_served",
                "served_early",
                "served_late",
                "cheap"
            ]
        );
    }

    #[test]
    fn the_order_is_total() {
        let a = ranked(vec![
            candidate("b", 1, 1, None, 0),
            candidate("a", 1, 1, None, 0),
        ]);
        let b = ranked(vec![
            candidate("a", 1, 1, None, 0),
            candidate("b", 1, 1, None, 0),
        ]);
        assert_eq!(a, ["a", "b"]);
        assert_eq!(a, b);
    }
}
