//! Finding the transaction a buyer call names and checking that the caller may act on it,
//! in the order DESIGN.md section 4 gives: no credential → 401; no such transaction → 404;
//! its buyer has no secret → 403; wrong secret → 401; capability missing → 403.
//!
//! Owns the lookup by `transactionId` or partner external id (optionally narrowed by
//! `buyerAccountId`, then by the presented secret) and the credential check. It does not
//! move anything: `apply` does, with the transaction this module vouches for.

use crate::db::PrepareKept;
use rusqlite::{Connection, params};

use super::error::LifecycleError;
use super::input::Address;
use crate::config::buyer::{self, Buyer};

/// A transaction the caller may act on, and its buyer.
#[derive(Debug, Clone)]
pub(crate) struct Authorized {
    pub transaction_id: crate::ids::TransactionId,
    pub buyer: Buyer,
}

/// The transactions of one buyer that an address matches.
struct BuyerMatches {
    buyer_id: crate::ids::BuyerId,
    /// How many of the buyer's transactions match.
    count: usize,
    /// One of them (the oldest); the only one when `count` is 1.
    first: crate::ids::TransactionId,
}

/// Candidates for `address`, grouped by buyer. Grouping keeps the work per call bounded by
/// the number of buyers, even when a buyer gives the same external id to many leads.
fn candidates(conn: &Connection, address: &Address) -> rusqlite::Result<Vec<BuyerMatches>> {
    let map = |row: &rusqlite::Row| -> rusqlite::Result<BuyerMatches> {
        Ok(BuyerMatches {
            buyer_id: row.get(0)?,
            count: row.get::<_, i64>(1)? as usize,
            first: row.get(2)?,
        })
    };
    let found = if let Some(transaction_id) = &address.transaction_id {
        // Every id the caller gave must fit the transaction: a call never acts on a
        // transaction it did not mean.
        conn.prepare_kept(
            "SELECT buyer_id, 1, id FROM transactions
             WHERE id = ?1
               AND (?2 IS NULL OR partner_external_id = ?2)
               AND (?3 IS NULL OR buyer_id = ?3)",
        )?
        .query_map(
            params![
                transaction_id,
                address.external_id,
                address.buyer_account_id
            ],
            map,
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?
    } else {
        // Oldest first: `min(id)` is the oldest, as ids sort by creation time.
        conn.prepare_kept(
            "SELECT buyer_id, count(*), min(id) FROM transactions
             WHERE partner_external_id = ?1 AND (?2 IS NULL OR buyer_id = ?2)
             GROUP BY buyer_id ORDER BY buyer_id",
        )?
        .query_map(params![address.external_id, address.buyer_account_id], map)?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    Ok(found)
}

/// Finds the transaction `address` names and checks that `presented` is its buyer's secret
/// and that the buyer has `capability`.
pub(crate) fn authorize(
    conn: &Connection,
    address: &Address,
    presented: &[&str],
    capability: &'static str,
) -> Result<Authorized, LifecycleError> {
    if presented.is_empty() {
        return Err(LifecycleError::MissingCredential);
    }
    let now = crate::clock::now_ms();
    let mut buyers = Vec::new();
    for matches in candidates(conn, address)? {
        // The foreign key guarantees the buyer exists. An archived buyer's transactions
        // answer as unknown: its lifecycle calls end with it.
        if let Some(buyer) = buyer::find(conn, &matches.buyer_id)?
            && !buyer.is_archived()
        {
            buyers.push((buyer, matches));
        }
    }
    let total: usize = buyers.iter().map(|(_, m)| m.count).sum();
    if total == 0 {
        return Err(LifecycleError::TransactionNotFound);
    }
    let (buyer, matches) = if total == 1 {
        let (buyer, matches) = buyers.pop().expect("one match means one buyer");
        if !buyer.secret.is_set() {
            return Err(LifecycleError::BuyerSecretNotConfigured);
        }
        if !buyer.secret.accepts(presented, now) {
            return Err(LifecycleError::InvalidCredential);
        }
        (buyer, matches)
    } else {
        // Several transactions share the external id: keep those whose buyer's secret was
        // presented. Every buyer's hash is checked, so timing does not tell which matched.
        let any_secret = buyers.iter().any(|(b, _)| b.secret.is_set());
        let mut narrowed: Vec<(Buyer, BuyerMatches)> = buyers
            .into_iter()
            .filter(|(b, _)| b.secret.accepts(presented, now))
            .collect();
        let remaining: usize = narrowed.iter().map(|(_, m)| m.count).sum();
        match remaining {
            0 if any_secret => return Err(LifecycleError::InvalidCredential),
            0 => return Err(LifecycleError::BuyerSecretNotConfigured),
            1 => narrowed.pop().expect("one match means one buyer"),
            matches => return Err(LifecycleError::AmbiguousExternalId { matches }),
        }
    };
    if !buyer.has_capability(capability) {
        return Err(LifecycleError::CapabilityDenied { capability });
    }
    Ok(Authorized {
        transaction_id: matches.first,
        buyer,
    })
}
