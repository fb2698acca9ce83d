//! Secrets and keys: generation, hashing and constant-time comparison.
//!
//! Inbound secrets (source ingest secrets, buyer lifecycle secrets, supplier keys) are only
//! ever compared, so only their SHA-256 is stored. They are 256-bit random values, so a
//! plain fast hash is enough: there is nothing to brute-force that a slow password hash
//! would protect, and ingest must check a secret on every request. The buyer's outbound
//! signing secret (`whsec_…`) signs, so it is stored as is.

use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A new random secret: `prefix` + 256 random bits, URL-safe base64 (no padding).
pub fn generate(prefix: &str) -> String {
    let bytes = random_bytes::<32>();
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// A new Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes.
pub fn generate_signing_secret() -> String {
    let bytes = random_bytes::<32>();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the operating system's random source is available");
    bytes
}

/// The stored form of an inbound secret: lower-case hex SHA-256.
pub fn hash(secret: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(secret.as_bytes());
    let mut text = String::with_capacity(2 * digest.len());
    for byte in digest {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    text
}

/// Whether `presented` hashes to `stored_hash`. Hashing first gives equal-length inputs, and
/// the comparison takes the same time wherever the first difference is.
pub fn verify(presented: &str, stored_hash: &str) -> bool {
    let presented_hash = hash(presented);
    presented_hash
        .as_bytes()
        .ct_eq(stored_hash.as_bytes())
        .into()
}

/// Whether any presented secret matches `stored_hash`. Each candidate is hashed and compared
/// in constant time, and every candidate is checked (no early exit), so the time taken does
/// not depend on which one matched.
pub fn any_matches(presented: &[&str], stored_hash: &str) -> bool {
    presented
        .iter()
        .fold(false, |found, p| verify(p, stored_hash) | found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_matches_checks_the_hash() {
        let stored = hash("right");
        assert!(any_matches(&["wrong", "right"], &stored));
        assert!(!any_matches(&["wrong"], &stored));
        assert!(!any_matches(&[], &stored));
    }

    #[test]
    fn generated_secrets_are_long_random_and_prefixed() {
        let a = generate("lrs_");
        let b = generate("lrs_");
        assert!(a.starts_with("lrs_"));
        assert_eq!(a.len(), 4 + 43);
        assert_ne!(a, b);
        assert!(generate_signing_secret().starts_with("whsec_"));
    }

    #[test]
    fn hash_is_lower_case_hex_sha256() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn verify_accepts_only_the_right_secret() {
        let secret = generate("lrs_");
        let stored = hash(&secret);
        assert!(verify(&secret, &stored));
        assert!(!verify(&generate("lrs_"), &stored));
        assert!(!verify("", &stored));
        assert_ne!(stored, secret, "the stored form is not the secret");
    }
}
