//! Normalised contact keys and the plausibility of an email address or phone number.
//!
//! Owns what "a valid email" and "a valid phone" mean (used by quality) and the keys the
//! duplicate rule compares: the email trimmed and lower-cased, the phone as its digits.
//! Stored person fields keep what the partner sent; only these keys are normalised.
//!
//! The keys are stored and indexed as [`key_hash`]es (`leads.email_key`, `phone_key`): a
//! 48-bit number takes 6 bytes where the key's text repeated the email (39 bytes for the
//! benchmark's lead, in the row and again in the index). Whoever finds leads by a hash
//! compares each one's stored email or phone, normalised, with the key: a collision is
//! never a match.

/// The duplicate key of an email: trimmed and lower-cased, when it is a plausible address.
pub fn email_key(email: &str) -> Option<String> {
    let email = email.trim();
    is_valid_email(email).then(|| email.to_lowercase())
}

/// The duplicate key of a phone number: its digits, when it is a plausible number.
pub fn phone_key(phone: &str) -> Option<String> {
    phone_digits(phone)
}

/// The stored form of a duplicate key: the first 48 bits of its SHA-256, as a signed
/// number (SQLite stores it in 6 bytes). Never changes: stored hashes must keep matching.
pub fn key_hash(key: &str) -> i64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // The arithmetic shift keeps the sign: the value lies in [-2^47, 2^47).
    i64::from_be_bytes(first) >> 16
}

/// Whether the stored `email` has duplicate key `key` (a hash match confirmed).
pub fn email_matches(email: Option<&str>, key: &str) -> bool {
    email.and_then(email_key).is_some_and(|k| k == key)
}

/// Whether the stored `phone` has duplicate key `key`.
pub fn phone_matches(phone: Option<&str>, key: &str) -> bool {
    phone.and_then(phone_key).is_some_and(|k| k == key)
}

/// Whether `email` (already trimmed) looks like `local@domain.tld`: one `@`, a local part
/// without spaces, a domain of dot-separated labels of letters, digits and hyphens, and a
/// top-level label of at least two letters.
pub fn is_valid_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    if local.is_empty()
        || local.len() > 64
        || domain.len() > 253
        || local
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '@')
    {
        return false;
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2 {
        return false;
    }
    let label_ok = |label: &&str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_alphanumeric() || c == '-')
    };
    let tld = labels[labels.len() - 1];
    labels.iter().all(label_ok) && tld.chars().count() >= 2 && tld.chars().all(char::is_alphabetic)
}

/// The digits of `phone` when it is plausible: only digits and the separators `+`, space,
/// `-`, `(`, `)`, `.` and `/`, a `+` only in front, and 7 to 15 digits (E.164 allows 15).
pub fn phone_digits(phone: &str) -> Option<String> {
    let phone = phone.trim();
    let mut digits = String::with_capacity(phone.len());
    for (position, c) in phone.char_indices() {
        match c {
            '0'..='9' => digits.push(c),
            '+' if position == 0 => {}
            ' ' | '-' | '(' | ')' | '.' | '/' => {}
            _ => return None,
        }
    }
    (7..=15).contains(&digits.len()).then_some(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        for ok in ["a@b.de", "Jane.Doe+tag@mail.example.com", "x@münchen.de"] {
            assert!(is_valid_email(ok), "{ok}");
        }
        for bad in [
            "", "a", "a@b", "@b.de", "a@.de", "a@b.c", "a b@c.de", "a@b..de", "a@b.d3", "a@@b.de",
            "a@-b.de",
        ] {
            assert!(!is_valid_email(bad), "{bad}");
        }
        assert_eq!(
            email_key("  Jane@Example.COM ").as_deref(),
            Some("jane@example.com")
        );
        assert_eq!(email_key("nope"), None);
    }

    #[test]
    fn key_hashes_are_48_bit_and_never_change() {
        // Stored in files: if this fails, every stored key stops matching.
        assert_eq!(key_hash("jane@example.com"), key_hash("jane@example.com"));
        assert_eq!(key_hash("jane@example.com"), -126_960_499_306_955);
        assert_eq!(key_hash("49301234567"), 52_363_105_995_538);
        for key in ["", "a", "jane@example.com", "49301234567"] {
            let hash = key_hash(key);
            assert!(
                (-(1i64 << 47)..(1i64 << 47)).contains(&hash),
                "{key}: {hash}"
            );
        }
        assert!(email_matches(Some(" Jane@Example.COM"), "jane@example.com"));
        assert!(!email_matches(
            Some("other@example.com"),
            "jane@example.com"
        ));
        assert!(!email_matches(None, "jane@example.com"));
        assert!(phone_matches(Some("+49 (30) 123-4567"), "49301234567"));
    }

    #[test]
    fn phones() {
        assert_eq!(
            phone_digits("+49 (30) 123-4567").as_deref(),
            Some("49301234567")
        );
        assert_eq!(phone_digits("030/1234567").as_deref(), Some("0301234567"));
        for bad in [
            "123456",
            "1234567890123456",
            "12a4567",
            "12+34567",
            "",
            "n/a",
        ] {
            assert_eq!(phone_digits(bad), None, "{bad}");
        }
    }
}
