//! What a buyer's own API answered, under its integration's rules (DESIGN.md section 18):
//! the lead taken (with the buyer's id for it), the lead refused (with the buyer's
//! reason), or an answer to try again later.
//!
//! Pure: the outbox's sender calls [`judge`] with the status and body it read, and turns
//! the result into its verdict.

use serde_json::Value;

use super::document::IntegrationDocument;
use crate::mapping::engine::scalar_text;

/// The longest partner id taken from an answer, like the interface's `externalId`.
const PARTNER_ID_MAX: usize = 128;
/// The longest refusal reason kept.
const REASON_MAX: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// The answer meets `accept`.
    Accepted { external_id: Option<String> },
    /// A 2xx that does not meet `accept`, or a 4xx other than 408 and 429.
    Refused { reason: String },
    /// 408, 429 or 5xx: the buyer could not take it now.
    Retry,
    /// A 3xx: redirects are not followed, as for the generic webhook.
    Redirect,
}

/// Judges an answer of `status` with `body` under `document`'s rules.
pub fn judge(document: &IntegrationDocument, status: u16, body: &[u8]) -> Judged {
    match status {
        408 | 429 | 500..=599 => return Judged::Retry,
        300..=399 => return Judged::Redirect,
        _ => {}
    }
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let status_ok = if document.accept.status.is_empty() {
        (200..=299).contains(&status)
    } else {
        document.accept.status.contains(&status)
    };
    let value_ok = match &document.accept.pointer {
        None => true,
        Some(pointer) => {
            let found = parsed.as_ref().and_then(|body| pointer.lookup(body));
            match (&document.accept.equals, found) {
                (_, None | Some(Value::Null)) => false,
                (None, Some(Value::Bool(b))) => *b,
                (None, Some(_)) => true,
                // "success" matches "success", 1 matches "1": buyers differ in types.
                (Some(expected), Some(found)) => {
                    found == expected
                        || scalar_text(found).is_some_and(|f| Some(f) == scalar_text(expected))
                }
            }
        }
    };
    if status_ok && value_ok {
        let external_id = document
            .external_id
            .as_ref()
            .and_then(|pointer| parsed.as_ref().and_then(|body| pointer.lookup(body)))
            .and_then(scalar_text)
            .filter(|id| !id.is_empty() && id.chars().count() <= PARTNER_ID_MAX);
        return Judged::Accepted { external_id };
    }
    let given = document
        .reject_reason
        .as_ref()
        .and_then(|pointer| parsed.as_ref().and_then(|body| pointer.lookup(body)))
        .and_then(scalar_text)
        .filter(|reason| !reason.trim().is_empty());
    let reason = match given {
        Some(reason) => reason.chars().take(REASON_MAX).collect(),
        None if (200..=299).contains(&status) => {
            format!("HTTP {status}: the answer does not meet the integration's accept rule")
        }
        None => format!("HTTP {status}"),
    };
    Judged::Refused { reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document(accept: Value) -> IntegrationDocument {
        IntegrationDocument::parse(&json!({
            "body": {"x": {"const": "y"}},
            "accept": accept,
            "externalId": "/lead_id",
            "rejectReason": "/message"}))
        .unwrap()
    }

    #[test]
    fn answers_are_judged_as_designed() {
        let doc =
            document(json!({"status": [200, 201], "pointer": "/result", "equals": "success"}));
        assert_eq!(
            judge(&doc, 200, br#"{"result": "success", "lead_id": "x"}"#),
            Judged::Accepted {
                external_id: Some("x".into())
            }
        );
        assert_eq!(
            judge(&doc, 201, br#"{"result": "success", "lead_id": 42}"#),
            Judged::Accepted {
                external_id: Some("42".into())
            }
        );
        assert_eq!(
            judge(
                &doc,
                200,
                br#"{"result": "failure", "message": "duplicate"}"#
            ),
            Judged::Refused {
                reason: "duplicate".into()
            }
        );
        assert!(matches!(
            judge(&doc, 202, br#"{"result": "success"}"#),
            Judged::Refused { .. }
        ));
        assert!(matches!(
            judge(&doc, 200, b"<html>ok</html>"),
            Judged::Refused { .. }
        ));
        assert_eq!(
            judge(&doc, 422, br#"{"message": "outside area"}"#),
            Judged::Refused {
                reason: "outside area".into()
            }
        );
        assert_eq!(
            judge(&doc, 404, b""),
            Judged::Refused {
                reason: "HTTP 404".into()
            }
        );
        for status in [408, 429, 500, 503] {
            assert_eq!(judge(&doc, status, b""), Judged::Retry, "{status}");
        }
        assert_eq!(judge(&doc, 302, b""), Judged::Redirect);
    }

    #[test]
    fn without_accept_any_2xx_takes_the_lead() {
        let doc = document(json!({}));
        assert_eq!(
            judge(&doc, 204, b""),
            Judged::Accepted { external_id: None }
        );
        let flag = document(json!({"pointer": "/ok"}));
        assert!(matches!(
            judge(&flag, 200, br#"{"ok": true}"#),
            Judged::Accepted { .. }
        ));
        assert!(matches!(
            judge(&flag, 200, br#"{"ok": false}"#),
            Judged::Refused { .. }
        ));
    }
}
