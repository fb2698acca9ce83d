//! Inbound secrets with a rotation's overlap: the current secret's hash and, for a while
//! after a rotation, the previous one's.
//!
//! Owns the rule "this presented secret is accepted now" ([`StoredSecret::accepts`]) for
//! source secrets, buyer lifecycle secrets and supplier keys, and the arithmetic of a
//! rotation ([`Rotation`]). The columns are the owning record's (`sources`, `buyers`,
//! `suppliers`); the comparison itself is `secrets::any_matches`.

use std::time::Duration;

/// A secret as stored: the current one's hash (none: the record takes no secret) and, during
/// an overlap, the previous one's hash with the instant it stops being accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredSecret {
    pub current: Option<String>,
    pub previous: Option<Previous>,
}

/// The secret before the last rotation, accepted until `valid_until` (ms, exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previous {
    pub hash: String,
    pub valid_until: i64,
}

impl StoredSecret {
    /// From the stored columns: current hash, previous hash and its end.
    pub(crate) fn from_columns(
        current: Option<String>,
        previous: Option<String>,
        valid_until: Option<i64>,
    ) -> StoredSecret {
        StoredSecret {
            current,
            previous: previous
                .zip(valid_until)
                .map(|(hash, valid_until)| Previous { hash, valid_until }),
        }
    }

    pub fn is_set(&self) -> bool {
        self.current.is_some()
    }

    /// Whether one of `presented` is the current secret, or the previous one while its
    /// overlap lasts at `now_ms`. Both hashes are always compared (in constant time), so
    /// the time taken does not tell which one matched.
    pub fn accepts(&self, presented: &[&str], now_ms: i64) -> bool {
        let current = self
            .current
            .as_deref()
            .is_some_and(|stored| crate::secrets::any_matches(presented, stored));
        let previous = self
            .previous
            .as_ref()
            .is_some_and(|previous| crate::secrets::any_matches(presented, &previous.hash));
        let overlap_open = self
            .previous
            .as_ref()
            .is_some_and(|previous| now_ms < previous.valid_until);
        current | (previous & overlap_open)
    }

    /// When the previous secret stops being accepted, if one is still accepted at `now_ms`.
    pub fn previous_valid_until(&self, now_ms: i64) -> Option<i64> {
        self.previous
            .as_ref()
            .map(|p| p.valid_until)
            .filter(|until| now_ms < *until)
    }
}

/// What a rotation at `now` with `overlap` keeps of the old value (a hash, or the signing
/// secret itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rotation<T> {
    /// The old value and the end of its overlap; `None` when the old value is cut off at
    /// once (no overlap) or there was none.
    pub previous: Option<(T, i64)>,
    /// What to print as `oldValidUntil`: the end of the overlap, `now` for a cut-off, `None`
    /// when there was no old value.
    pub old_valid_until: Option<i64>,
}

impl<T> Rotation<T> {
    pub(crate) fn of(old: Option<T>, overlap: Duration, now: i64) -> Rotation<T> {
        let overlap_ms = i64::try_from(overlap.as_millis()).unwrap_or(i64::MAX);
        let until = now.saturating_add(overlap_ms);
        match old {
            None => Rotation {
                previous: None,
                old_valid_until: None,
            },
            Some(_) if overlap_ms == 0 => Rotation {
                previous: None,
                old_valid_until: Some(now),
            },
            Some(old) => Rotation {
                previous: Some((old, until)),
                old_valid_until: Some(until),
            },
        }
    }

    /// The previous value for its column.
    pub(crate) fn previous_value(&self) -> Option<&T> {
        self.previous.as_ref().map(|(value, _)| value)
    }

    /// The end of the overlap for its column.
    pub(crate) fn previous_until(&self) -> Option<i64> {
        self.previous.as_ref().map(|(_, until)| *until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(current: &str, previous: Option<(&str, i64)>) -> StoredSecret {
        StoredSecret {
            current: Some(crate::secrets::hash(current)),
            previous: previous.map(|(p, until)| Previous {
                hash: crate::secrets::hash(p),
                valid_until: until,
            }),
        }
    }

    #[test]
    fn the_previous_secret_is_accepted_only_before_the_end_of_its_overlap() {
        let secret = stored("new-secret-value", Some(("old-secret-value", 1_000)));
        assert!(secret.accepts(&["new-secret-value"], 5_000));
        assert!(secret.accepts(&["old-secret-value"], 999));
        assert!(
            !secret.accepts(&["old-secret-value"], 1_000),
            "exclusive end"
        );
        assert!(!secret.accepts(&["wrong"], 0));
        assert!(secret.accepts(&["wrong", "old-secret-value"], 0));
        assert!(!StoredSecret::default().accepts(&["anything"], 0));
        assert_eq!(secret.previous_valid_until(999), Some(1_000));
        assert_eq!(secret.previous_valid_until(1_000), None);
    }

    #[test]
    fn a_rotation_keeps_the_old_value_only_with_an_overlap() {
        let cut = Rotation::of(Some("h"), Duration::ZERO, 100);
        assert_eq!((cut.previous, cut.old_valid_until), (None, Some(100)));
        let kept = Rotation::of(Some("h"), Duration::from_secs(2), 100);
        assert_eq!(kept.previous, Some(("h", 2_100)));
        assert_eq!(kept.old_valid_until, Some(2_100));
        let none = Rotation::<&str>::of(None, Duration::from_secs(2), 100);
        assert_eq!((none.previous, none.old_valid_until), (None, None));
    }
}
