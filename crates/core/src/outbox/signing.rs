//! Standard Webhooks signatures: `v1,` + base64 HMAC-SHA256 over `id.timestamp.body`, keyed
//! with the base64-decoded part of the buyer's `whsec_` secret.
//!
//! Owns only the arithmetic of a signature. Which headers carry it is the sender's business.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The signing key in a `whsec_…` secret.
pub struct SigningKey(Vec<u8>);

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the buyer's signing secret is not 'whsec_' followed by base64")]
pub struct InvalidSecret;

impl SigningKey {
    /// Reads a `whsec_…` secret. The prefix is optional, as in the reference libraries.
    pub fn from_secret(secret: &str) -> Result<SigningKey, InvalidSecret> {
        let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
        match STANDARD.decode(encoded) {
            Ok(key) if !key.is_empty() => Ok(SigningKey(key)),
            _ => Err(InvalidSecret),
        }
    }

    /// The `webhook-signature` header value for one message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC-SHA256 takes a key of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector published with the Standard Webhooks specification: matching it is
    /// what lets a buyer verify our webhooks with any of that specification's libraries.
    #[test]
    fn matches_the_standard_webhooks_test_vector() {
        let key = SigningKey::from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            key.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn any_change_changes_the_signature_and_bad_secrets_are_refused() {
        let key = SigningKey::from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let base = key.sign("msg_1", 1, b"{}");
        assert_ne!(base, key.sign("msg_2", 1, b"{}"));
        assert_ne!(base, key.sign("msg_1", 2, b"{}"));
        assert_ne!(base, key.sign("msg_1", 1, b"{ }"));
        assert_eq!(
            SigningKey::from_secret("whsec_not base64!").err(),
            Some(InvalidSecret)
        );
        assert_eq!(SigningKey::from_secret("whsec_").err(), Some(InvalidSecret));
    }
}
