//! The integration document of a buyer (DESIGN.md section 18): parsing it from JSON and
//! checking every part, each problem with a JSON pointer into the document, as a mapping
//! draft is checked.
//!
//! `{"method", "format", "url"?, "headers"?, "body", "accept"?, "externalId"?,
//! "rejectReason"?, "sign"?}`. `body` is the mapping language of section 9 (checked by
//! `mapping::document::parse_body_rules`, one engine) read against the `lead.delivered`
//! event object. This module does not build requests (`request`) or judge answers
//! (`answer`).

use serde_json::{Map, Value};

use crate::mapping::document::{FieldRule, parse_body_rules, unknown_keys};
use crate::mapping::pointer::{Pointer, escape};
use crate::mapping::{MappingProblem, Problems};

const KEYS: &[&str] = &[
    "method",
    "format",
    "url",
    "headers",
    "body",
    "accept",
    "externalId",
    "rejectReason",
    "sign",
];
const ACCEPT_KEYS: &[&str] = &["status", "pointer", "equals"];
const METHODS: &[&str] = &["POST", "PUT", "PATCH"];

/// Headers the request sets itself: the format decides the content type, the client the
/// length and host, signing the Standard Webhooks headers.
const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
];

/// The longest header value and secret name accepted.
const HEADER_VALUE_MAX: usize = 4096;
const SECRET_NAME_MAX: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Form,
}

impl Format {
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Form => "application/x-www-form-urlencoded",
        }
    }
}

/// A header's value: written in the document, or a named secret of the buyer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderSource {
    Constant(String),
    Secret(String),
}

/// When an answer is the buyer taking the lead.
#[derive(Debug, Clone)]
pub struct Accept {
    /// The statuses that may accept; empty means any 2xx.
    pub status: Vec<u16>,
    /// A value in the answer's JSON body that must be there (and equal `equals` if given).
    pub pointer: Option<Pointer>,
    pub equals: Option<Value>,
}

/// A checked integration document.
#[derive(Debug, Clone)]
pub struct IntegrationDocument {
    pub method: &'static str,
    pub format: Format,
    /// Where the request goes; `None` is the buyer's webhook URL.
    pub url: Option<String>,
    pub headers: Vec<(String, HeaderSource)>,
    pub body: Vec<FieldRule>,
    pub accept: Accept,
    pub external_id: Option<Pointer>,
    pub reject_reason: Option<Pointer>,
    /// Whether the Standard Webhooks headers are added.
    pub sign: bool,
}

impl IntegrationDocument {
    /// Checks `document`; every problem has a path into it.
    pub fn parse(document: &Value) -> Result<IntegrationDocument, Problems> {
        let mut problems = Problems::default();
        let parsed = parse(document, &mut problems);
        match parsed {
            Some(parsed) if problems.is_empty() => Ok(parsed),
            _ => Err(problems),
        }
    }

    /// Parses a stored document (checked when it was stored). The error names the first
    /// problem.
    pub fn from_stored(text: &str) -> Result<IntegrationDocument, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        IntegrationDocument::parse(&value).map_err(|problems| match problems.list.first() {
            Some(first) => format!("{}: {}", first.path, first.message),
            None => "not an integration document".to_string(),
        })
    }

    /// The names of the secrets its headers send.
    pub(crate) fn secret_names(&self) -> Vec<&str> {
        self.headers
            .iter()
            .filter_map(|(_, value)| match value {
                HeaderSource::Secret(name) => Some(name.as_str()),
                HeaderSource::Constant(_) => None,
            })
            .collect()
    }

    /// The secrets its headers send that `is_set` says are not stored yet.
    pub fn missing_secrets(&self, is_set: impl Fn(&str) -> bool) -> Vec<&str> {
        let mut missing = self.secret_names();
        missing.retain(|name| !is_set(name));
        missing
    }
}

fn problem(problems: &mut Problems, path: impl Into<String>, code: &'static str, text: String) {
    problems.push(MappingProblem::new(path, code, text));
}

fn parse(document: &Value, problems: &mut Problems) -> Option<IntegrationDocument> {
    let Some(object) = document.as_object() else {
        problem(
            problems,
            "",
            "invalid_type",
            "an integration document must be a JSON object with \"body\" (and method, format, \
             headers, accept, externalId, rejectReason, url, sign)"
                .into(),
        );
        return None;
    };
    unknown_keys(object, KEYS, "", problems);
    let method = match object.get("method") {
        None => Some("POST"),
        Some(Value::String(m)) => {
            match METHODS.iter().find(|known| known.eq_ignore_ascii_case(m)) {
                Some(known) => Some(*known),
                None => {
                    problem(
                        problems,
                        "/method",
                        "invalid_value",
                        format!("method '{m}' is not supported; use POST, PUT or PATCH"),
                    );
                    None
                }
            }
        }
        Some(_) => {
            problem(
                problems,
                "/method",
                "invalid_type",
                "method must be a string: POST, PUT or PATCH".into(),
            );
            None
        }
    };
    let format = match object.get("format") {
        None => Some(Format::Json),
        Some(Value::String(f)) if f == "json" => Some(Format::Json),
        Some(Value::String(f)) if f == "form" => Some(Format::Form),
        Some(_) => {
            problem(
                problems,
                "/format",
                "invalid_value",
                "format must be \"json\" or \"form\"".into(),
            );
            None
        }
    };
    let url = match object.get("url") {
        None => None,
        Some(Value::String(url)) => match crate::outbound_url::check(url) {
            Ok(()) => Some(url.clone()),
            Err(e) => {
                problem(problems, "/url", "invalid_url", e.to_string());
                None
            }
        },
        Some(_) => {
            problem(
                problems,
                "/url",
                "invalid_type",
                "url must be a string, an http or https address".into(),
            );
            None
        }
    };
    let sign = parse_sign(object.get("sign"), problems);
    let headers = match object.get("headers") {
        None => Vec::new(),
        Some(Value::Object(headers)) => parse_headers(headers, problems),
        Some(_) => {
            problem(
                problems,
                "/headers",
                "invalid_type",
                "headers must be an object from header name to a string or {\"secret\": NAME}"
                    .into(),
            );
            Vec::new()
        }
    };
    let body = match object.get("body") {
        None => {
            problem(
                problems,
                "/body",
                "required",
                "body is required: an object from the buyer's field name to a rule".into(),
            );
            Vec::new()
        }
        Some(Value::Object(fields)) if fields.is_empty() => {
            problem(
                problems,
                "/body",
                "empty",
                "body must map at least one field".into(),
            );
            Vec::new()
        }
        Some(Value::Object(fields)) => parse_body_rules(fields, "/body", problems),
        Some(_) => {
            problem(
                problems,
                "/body",
                "invalid_type",
                "body must be an object from the buyer's field name to a rule".into(),
            );
            Vec::new()
        }
    };
    let accept = parse_accept(object.get("accept"), problems);
    let external_id = pointer_at(object.get("externalId"), "/externalId", problems);
    let reject_reason = pointer_at(object.get("rejectReason"), "/rejectReason", problems);
    Some(IntegrationDocument {
        method: method?,
        format: format?,
        url,
        headers,
        body,
        accept: accept?,
        external_id,
        reject_reason,
        sign,
    })
}

fn parse_sign(value: Option<&Value>, problems: &mut Problems) -> bool {
    match value {
        None => true,
        Some(Value::Bool(sign)) => *sign,
        Some(_) => {
            problem(
                problems,
                "/sign",
                "invalid_type",
                "sign must be true or false".into(),
            );
            true
        }
    }
}

fn parse_headers(
    headers: &Map<String, Value>,
    problems: &mut Problems,
) -> Vec<(String, HeaderSource)> {
    let mut parsed = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let path = format!("/headers/{}", escape(name));
        let name_ok = !name.is_empty() && name.bytes().all(is_token_byte);
        if !name_ok {
            problem(
                problems,
                &path,
                "invalid_header_name",
                format!("'{name}' is not a header name: letters, digits and !#$%&'*+-.^_`|~ only"),
            );
        } else if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            problem(
                problems,
                &path,
                "reserved_header",
                format!("{name} is set by leadrelay itself and cannot be given here"),
            );
        }
        let value = match value {
            Value::String(text) => match check_header_value(text) {
                Ok(()) => Some(HeaderSource::Constant(text.clone())),
                Err(why) => {
                    problem(problems, &path, "invalid_header_value", why);
                    None
                }
            },
            Value::Object(secret) => match (secret.get("secret"), secret.len()) {
                (Some(Value::String(secret_name)), 1) => match check_secret_name(secret_name) {
                    Ok(()) => Some(HeaderSource::Secret(secret_name.clone())),
                    Err(why) => {
                        problem(
                            problems,
                            format!("{path}/secret"),
                            "invalid_secret_name",
                            why,
                        );
                        None
                    }
                },
                _ => {
                    problem(
                        problems,
                        &path,
                        "invalid_type",
                        "a secret header is {\"secret\": NAME} and nothing else".into(),
                    );
                    None
                }
            },
            _ => {
                problem(
                    problems,
                    &path,
                    "invalid_type",
                    "a header value is a string or {\"secret\": NAME}".into(),
                );
                None
            }
        };
        if let (true, Some(value)) = (name_ok, value) {
            parsed.push((name.clone(), value));
        }
    }
    parsed
}

/// RFC 9110 token characters.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A header value (constant or secret) that can be sent: visible ASCII and spaces, not
/// too long.
pub(crate) fn check_header_value(text: &str) -> Result<(), String> {
    if text.len() > HEADER_VALUE_MAX {
        return Err(format!(
            "a header value is at most {HEADER_VALUE_MAX} bytes"
        ));
    }
    if !text
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
    {
        return Err(
            "a header value may hold visible ASCII characters and spaces only (no line breaks)"
                .into(),
        );
    }
    Ok(())
}

/// A secret's name: letters, digits, '-', '_' and '.', 1 to 64 characters.
pub(crate) fn check_secret_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > SECRET_NAME_MAX
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(format!(
            "'{name}' is not a secret name: 1 to {SECRET_NAME_MAX} letters, digits, '-', '_' or '.'"
        ));
    }
    Ok(())
}

fn pointer_at(value: Option<&Value>, path: &str, problems: &mut Problems) -> Option<Pointer> {
    pointer_into(value, path, "the buyer's answer, such as \"/id\"", problems)
}

/// The pointer `value` holds, if any; a problem at `path` when it is not one (`into` says
/// what it points into, with an example).
pub(crate) fn pointer_into(
    value: Option<&Value>,
    path: &str,
    into: &str,
    problems: &mut Problems,
) -> Option<Pointer> {
    match value {
        None => None,
        Some(Value::String(text)) => match Pointer::parse(text) {
            Ok(pointer) => Some(pointer),
            Err(why) => {
                problem(problems, path, "invalid_pointer", why);
                None
            }
        },
        Some(_) => {
            problem(
                problems,
                path,
                "invalid_type",
                format!("a JSON pointer string into {into} is expected"),
            );
            None
        }
    }
}

fn parse_accept(value: Option<&Value>, problems: &mut Problems) -> Option<Accept> {
    let mut accept = Accept {
        status: Vec::new(),
        pointer: None,
        equals: None,
    };
    let Some(value) = value else {
        return Some(accept);
    };
    let Some(object) = value.as_object() else {
        problem(
            problems,
            "/accept",
            "invalid_type",
            "accept must be an object with status, pointer and equals".into(),
        );
        return None;
    };
    unknown_keys(object, ACCEPT_KEYS, "/accept", problems);
    match object.get("status") {
        None => {}
        Some(Value::Array(statuses)) if !statuses.is_empty() => {
            for (index, status) in statuses.iter().enumerate() {
                match status.as_u64() {
                    Some(code @ 200..=299) => accept.status.push(code as u16),
                    _ => problem(
                        problems,
                        format!("/accept/status/{index}"),
                        "invalid_value",
                        format!("{status} cannot accept a lead: use a status from 200 to 299"),
                    ),
                }
            }
        }
        Some(_) => problem(
            problems,
            "/accept/status",
            "invalid_type",
            "status must be a non-empty array of 2xx statuses, such as [200, 201]".into(),
        ),
    }
    accept.pointer = pointer_at(object.get("pointer"), "/accept/pointer", problems);
    match object.get("equals") {
        None => {}
        Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
            if !object.contains_key("pointer") {
                problem(
                    problems,
                    "/accept/equals",
                    "equals_without_pointer",
                    "equals needs pointer, the place in the answer to compare".into(),
                );
            }
            accept.equals = Some(value.clone());
        }
        Some(_) => problem(
            problems,
            "/accept/equals",
            "invalid_type",
            "equals must be a string, number or boolean".into(),
        ),
    }
    Some(accept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(document: Value) -> Vec<(String, &'static str)> {
        IntegrationDocument::parse(&document)
            .expect_err("the document has problems")
            .list
            .into_iter()
            .map(|p| (p.path, p.code))
            .collect()
    }

    #[test]
    fn the_design_example_is_valid() {
        let parsed = IntegrationDocument::parse(&json!({
            "method": "POST", "format": "json",
            "headers": {"X-Api-Key": {"secret": "crm-key"}, "X-Team": "north"},
            "body": {"first_name": {"from": "/lead/firstName"},
                     "phone": {"from": "/lead/phone", "transform": ["digits"]},
                     "price": {"from": "/pricing/buyerPrice"},
                     "source": {"const": "leadrelay"}},
            "accept": {"status": [200, 201], "pointer": "/result", "equals": "success"},
            "externalId": "/lead_id",
            "rejectReason": "/message"}))
        .unwrap();
        assert_eq!(parsed.method, "POST");
        assert_eq!(parsed.format, Format::Json);
        assert_eq!(parsed.secret_names(), ["crm-key"]);
        assert_eq!(parsed.body.len(), 4);
        assert_eq!(parsed.accept.status, [200, 201]);
        assert!(parsed.sign);
    }

    #[test]
    fn every_problem_has_its_path() {
        let found = paths(json!({
            "method": "GET", "format": "xml", "url": "ftp://x",
            "headers": {"Content-Type": "text/plain", "X Bad": "v", "X-Key": {"secret": "a b"},
                        "X-Line": "a\nb"},
            "body": {"name": {"from": "lead/firstName"}, "x": {"const": "a", "transform": ["trim"]},
                     "y": {"from": "/a", "transform": ["shout"]}},
            "accept": {"status": [500], "equals": "ok", "extra": 1},
            "externalId": 3, "sign": "yes", "other": true}));
        let expected = [
            ("/other", "unknown_key"),
            ("/method", "invalid_value"),
            ("/format", "invalid_value"),
            ("/url", "invalid_url"),
            ("/sign", "invalid_type"),
            ("/headers/Content-Type", "reserved_header"),
            ("/headers/X Bad", "invalid_header_name"),
            ("/headers/X-Key/secret", "invalid_secret_name"),
            ("/headers/X-Line", "invalid_header_value"),
            ("/body/name/from", "invalid_pointer"),
            ("/body/x/transform", "not_applicable"),
            ("/body/y/transform/0", "unknown_transform"),
            ("/accept/extra", "unknown_key"),
            ("/accept/status/0", "invalid_value"),
            ("/accept/equals", "equals_without_pointer"),
            ("/externalId", "invalid_type"),
        ];
        for (path, code) in expected {
            assert!(
                found.iter().any(|(p, c)| p == path && *c == code),
                "{path} {code} missing from {found:?}"
            );
        }
        assert_eq!(found.len(), expected.len(), "{found:?}");
    }

    #[test]
    fn a_body_is_required() {
        assert_eq!(paths(json!({})), [("/body".to_string(), "required")]);
        assert_eq!(paths(json!({"body": {}})), [("/body".to_string(), "empty")]);
    }
}
