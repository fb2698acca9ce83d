//! The transaction state machine, as a pure function: given the state a transaction is in
//! and the move a caller asks for, say whether to apply it, whether it was applied already,
//! or whether it is not allowed (DESIGN.md section 4).
//!
//! Owns the moves and the verdict; the states are the transaction record's own
//! ([`Status`] of `delivery::transaction`). It does not touch the database, money or
//! history: `lifecycle::apply` acts on the verdict.

pub use crate::delivery::transaction::Status;

/// The rule "one more return stays within the buyer's return cap": with `returned` of the
/// `delivered` transactions of this month returned (requested, pending or approved), one
/// more is allowed while it keeps the share at or under `cap_bp` basis points. Exact
/// integers: 10% of 10 deliveries is one return, not 1.0000001.
pub(crate) fn return_cap_allows(cap_bp: i64, returned: i64, delivered: i64) -> bool {
    i128::from(returned + 1) * 10_000 <= i128::from(cap_bp) * i128::from(delivered)
}

/// The rule "the cancellation window is open": a transaction delivered at `delivered_at`
/// (ms) may be cancelled while less than `window_secs` have passed. Half-open, so a window
/// of 0 refuses every cancellation.
pub(crate) fn cancellation_window_open(delivered_at: i64, window_secs: i64, now: i64) -> bool {
    now.saturating_sub(delivered_at) < window_secs.saturating_mul(1000)
}

/// Whether no move leaves `status`.
#[cfg(test)]
pub(crate) fn is_final(status: Status) -> bool {
    matches!(status, Status::Rejected | Status::Paid | Status::Cancelled)
}

/// Whether the transaction no longer counts for its buyer: it ended without a sale.
pub(crate) fn is_void(status: Status) -> bool {
    !status.is_live()
}

/// What a lifecycle call asks for. Each move has exactly one target state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Move {
    /// partner-confirmation with `acknowledged`.
    Acknowledge,
    /// partner-confirmation with `rejected`.
    Reject,
    /// partner-payout-pending (or the buyer's `autoPayoutPending` after an acknowledge).
    MarkPayoutPending,
    /// partner-payout.
    CompletePayout,
    /// partner-cancellation.
    Cancel,
}

impl Move {
    #[cfg(test)]
    pub(crate) const ALL: [Move; 5] = [
        Move::Acknowledge,
        Move::Reject,
        Move::MarkPayoutPending,
        Move::CompletePayout,
        Move::Cancel,
    ];

    pub fn target(self) -> Status {
        match self {
            Move::Acknowledge => Status::Acknowledged,
            Move::Reject => Status::Rejected,
            Move::MarkPayoutPending => Status::PayoutPending,
            Move::CompletePayout => Status::Paid,
            Move::Cancel => Status::Cancelled,
        }
    }

    /// The buyer capability a move needs (DESIGN.md section 1: confirm, payout, cancel).
    pub(crate) fn capability(self) -> &'static str {
        match self {
            Move::Acknowledge | Move::Reject => "confirm",
            Move::MarkPayoutPending | Move::CompletePayout => "payout",
            Move::Cancel => "cancel",
        }
    }
}

/// What a move does to a transaction in a given state: the answer of the state machine.
/// (Named apart from `outbox::store::Verdict`, the verdict on a buyer's answer.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    /// Move the transaction to this state.
    Apply(Status),
    /// The transaction is in the move's target state, or has passed it on its way to where
    /// it is: success, nothing changes.
    AlreadyApplied,
    /// The move is not possible from here: 400 `transition_not_allowed`.
    NotAllowed,
    /// The transaction waits for the operator's decision on a return: 400
    /// `return_pending` until it is approved or denied.
    AwaitingReturn,
}

/// Decides `requested` for a transaction in `current`.
///
/// "Passed on the way" is read on the main line delivered → acknowledged → payout_pending →
/// paid: a paid transaction has been acknowledged and counts as past payout-pending (DESIGN
/// says so explicitly), a payout-pending one has been acknowledged. `rejected` and
/// `cancelled` are side exits: from the state alone it is not known how far along the main
/// line the transaction got before it left it (a cancellation may come straight after the
/// delivery), so only the exit's own move counts as already applied there.
pub(crate) fn decide(current: Status, requested: Move) -> Transition {
    use Move::*;
    use Status::*;
    use Transition::*;
    match (current, requested) {
        (Delivered, Acknowledge) => Apply(Acknowledged),
        (Delivered, Reject) => Apply(Rejected),
        (Delivered, Cancel) => Apply(Cancelled),
        (Delivered, MarkPayoutPending | CompletePayout) => NotAllowed,

        (Acknowledged, Acknowledge) => AlreadyApplied,
        (Acknowledged, MarkPayoutPending) => Apply(PayoutPending),
        (Acknowledged, CompletePayout) => Apply(Paid),
        (Acknowledged, Cancel) => Apply(Cancelled),
        (Acknowledged, Reject) => NotAllowed,

        (PayoutPending, Acknowledge | MarkPayoutPending) => AlreadyApplied,
        (PayoutPending, CompletePayout) => Apply(Paid),
        (PayoutPending, Cancel) => Apply(Cancelled),
        (PayoutPending, Reject) => NotAllowed,

        (Paid, Acknowledge | MarkPayoutPending | CompletePayout) => AlreadyApplied,
        (Paid, Reject | Cancel) => NotAllowed,

        (Rejected, Reject) => AlreadyApplied,
        (Rejected, Acknowledge | MarkPayoutPending | CompletePayout | Cancel) => NotAllowed,

        (Cancelled, Cancel) => AlreadyApplied,
        (Cancelled, Acknowledge | Reject | MarkPayoutPending | CompletePayout) => NotAllowed,

        // The return asked for is the cancellation asked again; every other move waits
        // for the decision (approved: cancelled; denied: back where it was).
        (ReturnRequested, Cancel) => AlreadyApplied,
        (ReturnRequested, Acknowledge | Reject | MarkPayoutPending | CompletePayout) => {
            AwaitingReturn
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Move::*;
    use super::Status::*;
    use super::Transition::*;
    use super::*;

    /// Every (state, move) pair with its expected verdict, written out so that the table is
    /// the specification: 7 states × 5 moves = 35 rows.
    const TABLE: [(Status, Move, Transition); 35] = [
        (Delivered, Acknowledge, Apply(Acknowledged)),
        (Delivered, Reject, Apply(Rejected)),
        (Delivered, MarkPayoutPending, NotAllowed),
        (Delivered, CompletePayout, NotAllowed),
        (Delivered, Cancel, Apply(Cancelled)),
        (Acknowledged, Acknowledge, AlreadyApplied),
        (Acknowledged, Reject, NotAllowed),
        (Acknowledged, MarkPayoutPending, Apply(PayoutPending)),
        (Acknowledged, CompletePayout, Apply(Paid)),
        (Acknowledged, Cancel, Apply(Cancelled)),
        (Rejected, Acknowledge, NotAllowed),
        (Rejected, Reject, AlreadyApplied),
        (Rejected, MarkPayoutPending, NotAllowed),
        (Rejected, CompletePayout, NotAllowed),
        (Rejected, Cancel, NotAllowed),
        (PayoutPending, Acknowledge, AlreadyApplied),
        (PayoutPending, Reject, NotAllowed),
        (PayoutPending, MarkPayoutPending, AlreadyApplied),
        (PayoutPending, CompletePayout, Apply(Paid)),
        (PayoutPending, Cancel, Apply(Cancelled)),
        (Paid, Acknowledge, AlreadyApplied),
        (Paid, Reject, NotAllowed),
        (Paid, MarkPayoutPending, AlreadyApplied),
        (Paid, CompletePayout, AlreadyApplied),
        (Paid, Cancel, NotAllowed),
        (Cancelled, Acknowledge, NotAllowed),
        (Cancelled, Reject, NotAllowed),
        (Cancelled, MarkPayoutPending, NotAllowed),
        (Cancelled, CompletePayout, NotAllowed),
        (Cancelled, Cancel, AlreadyApplied),
        (ReturnRequested, Acknowledge, AwaitingReturn),
        (ReturnRequested, Reject, AwaitingReturn),
        (ReturnRequested, MarkPayoutPending, AwaitingReturn),
        (ReturnRequested, CompletePayout, AwaitingReturn),
        (ReturnRequested, Cancel, AlreadyApplied),
    ];

    #[test]
    fn every_pair_has_the_specified_verdict() {
        for (state, requested, expected) in TABLE {
            assert_eq!(
                decide(state, requested),
                expected,
                "{} + {requested:?}",
                state.as_str()
            );
        }
        // The table covers each pair exactly once.
        for &state in Status::ALL {
            for requested in Move::ALL {
                let rows = TABLE
                    .iter()
                    .filter(|(s, m, _)| *s == state && *m == requested)
                    .count();
                assert_eq!(rows, 1, "{} + {requested:?}", state.as_str());
            }
        }
    }

    #[test]
    fn the_return_cap_is_a_share_of_the_month() {
        assert!(return_cap_allows(1000, 0, 10));
        assert!(!return_cap_allows(1000, 1, 10));
        assert!(!return_cap_allows(1000, 0, 9));
        assert!(return_cap_allows(1250, 0, 8));
        assert!(!return_cap_allows(0, 0, 1_000));
        assert!(return_cap_allows(10_000, 4, 5));
        assert!(!return_cap_allows(10_000, 5, 5));
    }

    #[test]
    fn the_machine_keeps_its_invariants() {
        for &state in Status::ALL {
            for requested in Move::ALL {
                let verdict = decide(state, requested);
                // A move to the state the transaction is in is never a change.
                if requested.target() == state {
                    assert_eq!(
                        verdict,
                        AlreadyApplied,
                        "{} + {requested:?}",
                        state.as_str()
                    );
                }
                // A final state never moves.
                if is_final(state) {
                    assert!(
                        !matches!(verdict, Apply(_)),
                        "{} + {requested:?}",
                        state.as_str()
                    );
                }
                // An applied move always lands on the move's own target.
                if let Apply(next) = verdict {
                    assert_eq!(
                        next,
                        requested.target(),
                        "{} + {requested:?}",
                        state.as_str()
                    );
                }
            }
        }
    }
}
