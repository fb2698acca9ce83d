//! Record identifiers: a type prefix and a ULID (`lead_01JD…`), so ids say what they name
//! and sort by creation time.
//!
//! Also owns the rule for operator-chosen ids of configuration objects.

/// A new id with the given prefix, e.g. `new("lead")` → `lead_01JD3…`.
pub fn new(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new())
}

/// Whether `id` is acceptable as an operator-chosen id: 1 to 64 characters of ASCII letters,
/// digits, `-`, `_` and `.`. Keeping ids to this set means they never need escaping in a
/// URL path, and a percent-encoded or traversal trick in a path can never name a record.
pub fn is_valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && id != "."
        && id != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_prefixed_unique_and_sortable() {
        let a = new("lead");
        let b = new("lead");
        assert!(a.starts_with("lead_"));
        assert_eq!(a.len(), "lead_".len() + 26);
        assert_ne!(a, b);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(new("lead") > a);
    }

    #[test]
    fn operator_ids_are_restricted_to_a_safe_set() {
        for ok in ["acme", "src-1", "ws_2", "a.b", "X9"] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "%2e", "é", &"x".repeat(65)] {
            assert!(!is_valid(bad), "{bad}");
        }
    }
}
