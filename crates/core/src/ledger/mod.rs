//! The money ledger (DESIGN.md section 11): every money move is one append-only row, and a
//! buyer's balance is the sum of its rows.
//!
//! Owns the `ledger_entries` table and the `buyers.balance_cents` column, a cache of each
//! buyer's sum that [`post`] updates in the same statement sequence (so in the same writer
//! job) as the row. Nothing else writes either: a fund, a delivery's charge, a price change,
//! a refund, a supplier's cost and its reversal, an operator's adjustment all call
//! [`post`]. `leadrelay check` compares the cache with the sums ([`query::balance_mismatches`]).
//! Also owns the money rule "balance plus credit limit covers the amount" ([`covers`]),
//! which delivery, auto-delivery's eligibility and a repricing all apply.
//!
//! Also owns `buyers.held_cents`, what ping reservations hold of a prepaid balance ([`hold`],
//! [`unhold`]; not money moves, so no rows), and [`covers_unheld`].
//!
//! It does not own when money moves (delivery, lifecycle, `buyer fund` decide that) nor the
//! transaction's own amounts (`delivery::transaction`).
//!
//! Signs: a row's amount is what it does to its party's account. For a buyer that is the
//! prepaid balance: `fund` +, `charge` −, `refund` +, `price_change` and `adjustment` either
//! way. For a supplier it is what the operator owes: `supplier_cost` +, `supplier_reversal` −.
//! Postpaid buyers are invoiced from their transactions; they have no prepaid balance, so a
//! delivery to one moves no money here (its `charged_cents` is 0).

pub mod query;

use crate::db::PrepareKept;
use rusqlite::{Connection, params};

use crate::db::stored::stored_enum;

pub use query::ListFilter;

stored_enum! {
    /// What moved the money.
    pub enum Kind as "ledger kind" {
        /// The operator added money to a prepaid balance (`buyer fund`).
        Fund = "fund",
        /// A delivery charged a prepaid buyer.
        Charge = "charge",
        /// An acknowledge with a new `buyerPrice` charged or returned the difference.
        PriceChange = "price_change",
        /// A rejection or cancellation returned a charge.
        Refund = "refund",
        /// A delivery bought the lead from its supplier.
        SupplierCost = "supplier_cost",
        /// The supplier confirmed a cancellation: the cost goes back.
        SupplierReversal = "supplier_reversal",
        /// The operator's correction (also the opening balance of a migrated file).
        Adjustment = "adjustment",
    }
}

impl Kind {
    /// Whether `amount_cents` has the sign this kind moves money in (see the module's
    /// header); a row of 0 moves nothing and is never written.
    pub(crate) fn admits(self, amount_cents: i64) -> bool {
        match self {
            Kind::Fund | Kind::Refund | Kind::SupplierCost => amount_cents > 0,
            Kind::Charge | Kind::SupplierReversal => amount_cents < 0,
            Kind::PriceChange | Kind::Adjustment => amount_cents != 0,
        }
    }
}

/// Whose account a row moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Party<'a> {
    Buyer(&'a crate::ids::BuyerId),
    Supplier(&'a crate::ids::SupplierId),
}

/// One money move, ready to post.
#[derive(Debug, Clone)]
pub(crate) struct Posting<'a> {
    pub(crate) workspace_id: &'a str,
    pub party: Party<'a>,
    pub transaction_id: Option<&'a crate::ids::TransactionId>,
    pub kind: Kind,
    /// Signed, as [`Kind::admits`] says.
    pub amount_cents: i64,
    pub reason: Option<&'a str>,
    /// `operator`, `auto-delivery`, `buyer:<id>`, `supplier:<id>`, …
    pub actor: &'a str,
    pub at: i64,
}

/// Removes the reason text of transaction `transaction_id`'s refund rows for an erasure: a
/// refund's reason carries the buyer's words about the lead, which may name its person.
/// The one change to a written row: amounts, kinds, parties and times never change.
pub(crate) fn erase_reasons(
    conn: &Connection,
    transaction_id: &crate::ids::TransactionId,
) -> rusqlite::Result<u64> {
    let changed = conn
        .prepare_kept(
            "UPDATE ledger_entries SET reason = NULL
             WHERE transaction_id = ?1 AND kind = 'refund' AND reason IS NOT NULL",
        )?
        .execute([transaction_id])?;
    Ok(changed as u64)
}

/// Appends the row and, for a buyer, moves the cached balance by the same amount. Runs
/// inside the caller's writer job, so the row and the cache commit together or not at all.
/// Returns the row's id.
///
/// The amount's sign is the caller's promise ([`Kind::admits`]); a row of 0 is a bug in the
/// caller, which decides first whether money moves at all.
pub(crate) fn post(conn: &Connection, posting: &Posting) -> rusqlite::Result<i64> {
    debug_assert!(
        posting.kind.admits(posting.amount_cents),
        "a {} of {} cents",
        posting.kind,
        posting.amount_cents
    );
    let (buyer_id, supplier_id) = match posting.party {
        Party::Buyer(id) => (Some(id), None),
        Party::Supplier(id) => (None, Some(id.as_str())),
    };
    let id = conn
        .prepare_kept(
            "INSERT INTO ledger_entries (at, workspace_id, buyer_id, supplier_id, transaction_id,
                kind, amount_cents, reason, actor)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             RETURNING id",
        )?
        .query_row(
            params![
                posting.at,
                posting.workspace_id,
                buyer_id,
                supplier_id,
                posting.transaction_id,
                posting.kind,
                posting.amount_cents,
                posting.reason,
                posting.actor
            ],
            |row| row.get(0),
        )?;
    if let Some(buyer_id) = buyer_id {
        conn.prepare_kept("UPDATE buyers SET balance_cents = balance_cents + ?2 WHERE id = ?1")?
            .execute(params![buyer_id, posting.amount_cents])?;
    }
    Ok(id)
}

/// Why an operator's move on a buyer's balance is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BalanceError {
    /// The move would take the balance past ±[`crate::money::MAX_BALANCE_CENTS`].
    #[error(
        "{} of {} would take buyer '{buyer_id}' from a balance of {} to {}, past the bound of \
         ±{}",
        kind.as_str(),
        crate::money::display(*amount_cents),
        crate::money::display(*balance_cents),
        crate::money::display(i128::from(*balance_cents) + i128::from(*amount_cents)),
        crate::money::BOUND_TEXT
    )]
    OutOfRange {
        buyer_id: crate::ids::BuyerId,
        kind: Kind,
        balance_cents: i64,
        amount_cents: i64,
    },
    #[error(transparent)]
    Db(#[from] rusqlite::Error),
}

/// [`post`] for a move the operator makes on a buyer's balance (`fund`, `adjustment`):
/// refused, with nothing written, when it would take the balance past
/// ±[`crate::money::MAX_BALANCE_CENTS`]. Charges, refunds and price changes need no such
/// check: a charge is covered by balance plus a bounded credit limit, and a refund or a
/// lower price only returns what a charge took.
pub(crate) fn post_to_balance(conn: &Connection, posting: &Posting) -> Result<i64, BalanceError> {
    let Party::Buyer(buyer_id) = posting.party else {
        return Ok(post(conn, posting)?);
    };
    let balance_cents: i64 = conn
        .prepare_kept("SELECT balance_cents FROM buyers WHERE id = ?1")?
        .query_row([buyer_id], |row| row.get(0))?;
    if crate::money::moved_balance(balance_cents, posting.amount_cents).is_none() {
        return Err(BalanceError::OutOfRange {
            buyer_id: buyer_id.clone(),
            kind: posting.kind,
            balance_cents,
            amount_cents: posting.amount_cents,
        });
    }
    Ok(post(conn, posting)?)
}

/// A prepaid account that cannot take a charge: what it has available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// Balance plus credit limit (saturated at the `i64` range).
    pub available_cents: i64,
}

/// The rule "balance plus credit limit covers the amount": whether a prepaid account with
/// `balance_cents` and `credit_limit_cents` may be charged `amount_cents` more. Computed
/// without overflow whatever the stored numbers. The one statement of the rule: delivery,
/// auto-delivery's eligibility and an acknowledge's new price all ask it.
pub(crate) fn covers(
    balance_cents: i64,
    credit_limit_cents: i64,
    amount_cents: i64,
) -> Result<(), Shortfall> {
    let available = i128::from(balance_cents) + i128::from(credit_limit_cents);
    if i128::from(amount_cents) <= available {
        Ok(())
    } else {
        Err(Shortfall {
            available_cents: balance_cents.saturating_add(credit_limit_cents),
        })
    }
}

/// What live ping reservations hold of a prepaid buyer's balance (`buyers.held_cents`).
/// A hold is not a money move and writes no ledger row: it only keeps that much of the
/// balance from other deliveries and pings until the reservation is posted (then the
/// delivery's `charge` takes its place) or lapses. Holding in the ledger as rows would
/// double every ping's cost in rows and make `ledger list` and reports show moves that never
/// happened.
pub(crate) fn held(conn: &Connection, buyer_id: &crate::ids::BuyerId) -> rusqlite::Result<i64> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .prepare_kept("SELECT held_cents FROM buyers WHERE id = ?1")?
        .query_row([buyer_id], |row| row.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Holds `cents` of the buyer's balance (a reservation was taken).
pub(crate) fn hold(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    cents: i64,
) -> rusqlite::Result<()> {
    if cents > 0 {
        conn.prepare_kept("UPDATE buyers SET held_cents = held_cents + ?2 WHERE id = ?1")?
            .execute(params![buyer_id, cents])?;
    }
    Ok(())
}

/// Gives back a hold taken by [`hold`] (the reservation was posted or ended). Never below 0.
pub(crate) fn unhold(
    conn: &Connection,
    buyer_id: &crate::ids::BuyerId,
    cents: i64,
) -> rusqlite::Result<()> {
    if cents > 0 {
        conn.prepare_kept("UPDATE buyers SET held_cents = max(held_cents - ?2, 0) WHERE id = ?1")?
            .execute(params![buyer_id, cents])?;
    }
    Ok(())
}

/// [`covers`] for a balance of which `held_cents` is held by reservations: what is held is
/// not available.
pub(crate) fn covers_unheld(
    balance_cents: i64,
    held_cents: i64,
    credit_limit_cents: i64,
    amount_cents: i64,
) -> Result<(), Shortfall> {
    covers(
        balance_cents.saturating_sub(held_cents),
        credit_limit_cents,
        amount_cents,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_plus_credit_covers_the_amount_or_says_what_is_available() {
        assert_eq!(covers(500, 500, 1000), Ok(()));
        assert_eq!(
            covers(500, 499, 1000),
            Err(Shortfall {
                available_cents: 999
            })
        );
        assert_eq!(
            covers(-200, 1200, 1000),
            Ok(()),
            "credit covers a negative balance"
        );
        assert_eq!(covers(0, 0, 0), Ok(()), "a free lead needs no money");
        assert_eq!(
            covers(i64::MAX, i64::MAX, i64::MAX),
            Ok(()),
            "no overflow on huge numbers"
        );
        assert_eq!(
            covers(i64::MIN, 0, 1),
            Err(Shortfall {
                available_cents: i64::MIN
            })
        );
    }

    #[test]
    fn each_kind_moves_money_one_way() {
        assert!(Kind::Fund.admits(1) && !Kind::Fund.admits(-1));
        assert!(Kind::Charge.admits(-1) && !Kind::Charge.admits(1));
        assert!(Kind::Refund.admits(1) && !Kind::Refund.admits(-1));
        assert!(Kind::SupplierCost.admits(1) && !Kind::SupplierCost.admits(-1));
        assert!(Kind::SupplierReversal.admits(-1) && !Kind::SupplierReversal.admits(1));
        assert!(Kind::PriceChange.admits(1) && Kind::PriceChange.admits(-1));
        assert!(Kind::Adjustment.admits(1) && Kind::Adjustment.admits(-1));
        for &kind in Kind::ALL {
            assert!(!kind.admits(0), "{kind}: a row of 0 is never written");
        }
    }

    #[test]
    fn a_post_writes_the_row_and_moves_only_a_buyers_cached_balance() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::apply_migrations(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'W', 0);
             INSERT INTO buyers (id, workspace_id, name, webhook_url, signing_secret, plan,
                 created_at)
                 VALUES ('b', 'ws', 'B', 'http://x.test/', 'whsec_x', 'prepaid', 0);
             INSERT INTO suppliers (id, workspace_id, name, key_hash, created_at)
                 VALUES ('s', 'ws', 'S', 'h', 0);",
        )
        .unwrap();
        let supplier = crate::ids::SupplierId::from("s");
        let buyer = crate::ids::BuyerId::from("b");
        let posting = |party, kind, amount_cents| Posting {
            workspace_id: "ws",
            party,
            transaction_id: None,
            kind,
            amount_cents,
            reason: Some("test"),
            actor: "operator",
            at: 7,
        };
        post(&conn, &posting(Party::Buyer(&buyer), Kind::Fund, 5000)).unwrap();
        post(
            &conn,
            &posting(Party::Buyer(&buyer), Kind::Adjustment, -1250),
        )
        .unwrap();
        post(
            &conn,
            &posting(Party::Supplier(&supplier), Kind::SupplierCost, 400),
        )
        .unwrap();
        let cached: i64 = conn
            .query_row("SELECT balance_cents FROM buyers WHERE id = 'b'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(cached, 3750);
        assert_eq!(
            query::buyer_balance(&conn, &crate::ids::BuyerId::from("b")).unwrap(),
            3750
        );
        assert_eq!(query::supplier_balance(&conn, &supplier).unwrap(), 400);
        assert_eq!(query::balance_mismatches(&conn).unwrap(), Vec::new());
    }
}
