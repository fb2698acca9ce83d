//! Every error answer of the ingest path, for documents that list them (a source's posting
//! instructions): each made by [`super::error`]'s one mapping of errors to answers from the
//! error the path returns, so the list shows the real codes and bodies. A unit test checks
//! that every code the OpenAPI document names for the ingest operations is here.

use serde_json::Value;

use super::error::{Error, HttpError};
use crate::ingest::IngestError;

/// One error answer: its status, code, when it happens and its body.
pub(crate) struct ErrorExample {
    pub(crate) status: u16,
    pub(crate) code: String,
    pub(crate) when: &'static str,
    pub(crate) example: Value,
}

/// Every error the ingest path answers, each made by the real mapping of errors to answers.
pub(crate) fn ingest_errors() -> Vec<ErrorExample> {
    use crate::db::DbError;
    use crate::ingest::problem::Problem;
    use crate::mapping::{MappingError, MappingProblem, Problems};
    let ping = |code: &'static str, message: &str| {
        Error::Ingest(IngestError::Ping {
            code,
            message: message.into(),
        })
    };
    let mut mapping_problems = Problems::default();
    mapping_problems.push(MappingProblem::new(
        "/contacts/0/mail",
        "not_a_scalar",
        "expected a string, number or boolean, found an array",
    ));
    let invalid_json =
        serde_json::from_str::<Value>("{\"firstName\": ").expect_err("a cut-off body is not JSON");
    let cases: Vec<(&'static str, Error)> = vec![
        (
            "the body is not JSON",
            HttpError::InvalidJson { json: invalid_json }.into(),
        ),
        (
            "`Content-Encoding: gzip` with a body that is not gzip",
            HttpError::BadGzip("invalid gzip header".into()).into(),
        ),
        (
            "the connection failed while the body was sent",
            HttpError::BodyUnreadable("connection reset".into()).into(),
        ),
        (
            "the body or a lead is not valid; every problem has a JSON pointer `path` and a \
             `code`: required, too_short, too_long, invalid_type, unknown_property, \
             unknown_product, invalid_value, conflict, duplicate_product, not_allowed, \
             too_few_items, too_many_items, suppressed",
            IngestError::lead_invalid(vec![Problem::new(
                "/firstName",
                "required",
                "firstName is required",
            )])
            .into(),
        ),
        (
            "the body does not fit the source's published mapping",
            IngestError::Mapping(MappingError::transform(
                "the published mapping (version 1) of source 'example'".into(),
                mapping_problems,
            ))
            .into(),
        ),
        (
            "a post names a `pingId` that is not an accepted ping of this source",
            ping(
                "ping_unknown",
                "no accepted ping 'png_01JD7Q4N9V' of this source",
            ),
        ),
        (
            "a post names a ping that was posted before",
            ping(
                "ping_used",
                "ping 'png_01JD7Q4N9V' was used by an earlier post",
            ),
        ),
        (
            "a post after its ping's `expiresAt`",
            ping(
                "ping_expired",
                "ping 'png_01JD7Q4N9V' expired at 2026-01-01T00:00:00.000Z",
            ),
        ),
        (
            "the post's email or phone does not hash to the ping's, or it has no interest \
             in the ping's product",
            ping(
                "ping_mismatch",
                "the lead's email does not match the emailSha256 of ping 'png_01JD7Q4N9V'",
            ),
        ),
        (
            "a ping carries personal data (names, email, phone, street, house number)",
            crate::ping::PingError::PersonalData(vec![Problem::new(
                "/email",
                "not_allowed",
                "a ping carries no personal data",
            )])
            .into(),
        ),
        (
            "the source needs its secret and none was sent, or another one",
            IngestError::SecretMissing.into(),
        ),
        (
            "no such source at this path, or it is disabled",
            IngestError::SourceNotFound.into(),
        ),
        (
            "a method other than POST",
            HttpError::MethodNotAllowed {
                method: hyper::Method::GET,
                path: "/api/webhooks/…/leads".into(),
                allow: "POST".into(),
            }
            .into(),
        ),
        (
            "the body was not received in time",
            HttpError::BodyTimeout.into(),
        ),
        (
            "the body is larger than the limit (after decompression)",
            HttpError::PayloadTooLarge {
                limit: super::ServerConfig::default().body_limit,
            }
            .into(),
        ),
        (
            "`Content-Type` is not `application/json`",
            HttpError::UnsupportedMediaType {
                media_type: "text/plain".into(),
            }
            .into(),
        ),
        (
            "`Content-Encoding` other than gzip or identity",
            HttpError::UnsupportedEncoding {
                encoding: "br".into(),
            }
            .into(),
        ),
        (
            "too many requests from your address: wait `Retry-After` seconds",
            HttpError::RateLimited {
                retry_after_secs: 1,
            }
            .into(),
        ),
        (
            "the service is under load: wait `Retry-After` seconds, then send the same \
             request again",
            DbError::Overloaded.into(),
        ),
        (
            "the service is busy or restarting: retry after `Retry-After` seconds",
            DbError::WriterGone.into(),
        ),
    ];
    let answers = cases
        .into_iter()
        .map(|(when, error)| (when, super::error::example_answer(error)));
    // The storage faults and the internal error are logged where they are answered, so
    // their examples are made without the logging.
    let unlogged = super::error::unlogged_examples().into_iter().map(|answer| {
        let when = if answer.1.pointer("/error/code") == Some(&Value::from("internal_error")) {
            "a fault on the service's side; nothing was applied"
        } else {
            "the service's disk is full or cannot be written; retry later"
        };
        (when, answer)
    });
    answers
        .chain(unlogged)
        .map(|(when, (status, example))| ErrorExample {
            status,
            code: example
                .pointer("/error/code")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            when,
            example,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every error code the ingest operations of the OpenAPI document name, in their
    /// answers' descriptions: `(code)`, and the lists after "Codes:".
    fn openapi_ingest_codes() -> BTreeSet<String> {
        let document: Value = serde_json::from_str(crate::openapi::DOCUMENT)
            .expect("the embedded OpenAPI document is JSON");
        let mut codes = BTreeSet::new();
        for path in [
            "/api/webhooks/channels/{channelId}/sources/{sourceId}/leads",
            "/api/webhooks/lead-tables/{tableId}/sources/{sourceId}/leads",
            "/api/ping/channels/{channelId}/sources/{sourceId}",
        ] {
            let responses = document["paths"][path]["post"]["responses"]
                .as_object()
                .expect("the operation has responses");
            for response in responses.values() {
                let response = match response["$ref"].as_str() {
                    Some(reference) => document
                        .pointer(reference.trim_start_matches('#'))
                        .expect("a reference resolves"),
                    None => response,
                };
                let description = response["description"].as_str().unwrap_or_default();
                codes.extend(codes_in(description));
            }
        }
        codes
    }

    /// Snake-case words (`invalid_json`) and single words in parentheses (`(unauthorized)`).
    fn codes_in(text: &str) -> Vec<String> {
        let mut found = Vec::new();
        for word in text.split(|c: char| !(c.is_ascii_lowercase() || c == '_')) {
            if word.contains('_') && !word.starts_with('_') && !word.ends_with('_') {
                found.push(word.to_string());
            }
        }
        for part in text.split('(').skip(1) {
            let word: String = part
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            let closes = part[word.len()..].starts_with([')', ',', ':']);
            if !word.is_empty() && closes && word.len() > 3 {
                found.push(word);
            }
        }
        found
    }

    #[test]
    fn every_error_code_the_ingest_path_can_return_is_documented() {
        let documented: BTreeSet<String> = ingest_errors().into_iter().map(|e| e.code).collect();
        let named = openapi_ingest_codes();
        assert!(named.contains("validation_failed"), "{named:?}");
        let missing: Vec<&String> = named.difference(&documented).collect();
        assert!(
            missing.is_empty(),
            "codes not in the instructions: {missing:?}"
        );
        for code in [
            "not_found",
            "unauthorized",
            "validation_failed",
            "ping_unknown",
            "ping_used",
            "ping_expired",
            "ping_mismatch",
            "mapping_error",
            "internal_error",
            "overloaded",
            "unavailable",
            "disk_full",
            "read_only",
            "io_error",
            "personal_data_in_ping",
        ] {
            assert!(documented.contains(code), "{code} is not documented");
        }
    }
}
