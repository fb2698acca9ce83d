//! A check step's document (DESIGN.md section 22): parsing it from JSON and checking every
//! part, each problem with a JSON pointer into the document.
//!
//! `{"url", "method"?, "format"?, "when"?, "headers"?, "body", "pass"?, "keep"?, "onFail"?,
//! "onError"?, "timeoutMs"?, "cacheTtl"?}`. The request (`url`, `method`, `format`,
//! `headers`, `body`) and the `pass` rule are a buyer integration's request and `accept`
//! rule (section 18), checked and later built and judged by `integration`'s one engine: a
//! step is an integration document plus what only a step has (`when`, `keep`, the actions,
//! the timeout, the cache).

use std::time::Duration;

use serde_json::{Map, Value};

use crate::integration::IntegrationDocument;
use crate::integration::document::pointer_into;
use crate::mapping::document::unknown_keys;
use crate::mapping::pointer::{Pointer, escape};
use crate::mapping::{MappingProblem, Problems};

const KEYS: &[&str] = &[
    "url",
    "method",
    "format",
    "when",
    "headers",
    "body",
    "pass",
    "keep",
    "onFail",
    "onError",
    "timeoutMs",
    "cacheTtl",
];

/// The keys a step shares with an integration document, and what each is called there.
const REQUEST_KEYS: &[(&str, &str)] = &[
    ("url", "url"),
    ("method", "method"),
    ("format", "format"),
    ("headers", "headers"),
    ("body", "body"),
    ("pass", "accept"),
];

/// The timeout when the document gives none, and the longest allowed: a partner waits for
/// the answer.
const TIMEOUT_DEFAULT_MS: u64 = 2_000;
const TIMEOUT_MAX_MS: u64 = 10_000;
/// The longest an answer may be kept.
const CACHE_TTL_MAX: Duration = Duration::from_secs(30 * 24 * 3600);
/// At most this many values are kept from an answer, each under a name of at most 64
/// characters.
const KEEP_MAX: usize = 20;
const KEEP_NAME_MAX: usize = 64;

/// What an outcome does to the lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The item is rejected with code `check_failed`; nothing is stored.
    Reject,
    /// Stored with quality reason `check_failed:NAME` or `check_error:NAME`; never
    /// auto-delivered.
    Flag,
    /// Stored as if the step had passed.
    Pass,
}

impl Action {
    fn parse(text: &str) -> Option<Action> {
        match text {
            "reject" => Some(Action::Reject),
            "flag" => Some(Action::Flag),
            "pass" => Some(Action::Pass),
            _ => None,
        }
    }
}

/// A checked step document.
#[derive(Debug, Clone)]
pub struct CheckDocument {
    /// The request and the pass rule (as `accept`), as an integration document reads them.
    pub request: IntegrationDocument,
    pub url: String,
    /// The step runs only for leads with a value there.
    pub when: Option<Pointer>,
    /// Answer values stored on the lead, by name.
    pub keep: Vec<(String, Pointer)>,
    pub on_fail: Action,
    pub on_error: Action,
    pub timeout: Duration,
    /// How long an answer is reused for the same request; zero: never.
    pub cache_ttl: Duration,
}

impl CheckDocument {
    /// Checks `document`; every problem has a path into it.
    pub fn parse(document: &Value) -> Result<CheckDocument, Problems> {
        let mut problems = Problems::default();
        let parsed = parse(document, &mut problems);
        match parsed {
            Some(parsed) if problems.is_empty() => Ok(parsed),
            _ => Err(problems),
        }
    }

    /// Parses a stored document (checked when it was stored). The error names the first
    /// problem.
    pub fn from_stored(text: &str) -> Result<CheckDocument, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        CheckDocument::parse(&value).map_err(|problems| match problems.list.first() {
            Some(first) => format!("{}: {}", first.path, first.message),
            None => "not a check step document".to_string(),
        })
    }
}

fn problem(problems: &mut Problems, path: impl Into<String>, code: &'static str, text: String) {
    problems.push(MappingProblem::new(path, code, text));
}

fn parse(document: &Value, problems: &mut Problems) -> Option<CheckDocument> {
    let Some(object) = document.as_object() else {
        problem(
            problems,
            "",
            "invalid_type",
            "a check step document must be a JSON object with \"url\" and \"body\" (and \
             method, format, when, headers, pass, keep, onFail, onError, timeoutMs, cacheTtl)"
                .into(),
        );
        return None;
    };
    unknown_keys(object, KEYS, "", problems);
    let url = match object.get("url") {
        Some(Value::String(url)) => Some(url.clone()),
        Some(_) => None,
        None => {
            problem(
                problems,
                "/url",
                "required",
                "url is required: the http or https address of the service".into(),
            );
            None
        }
    };
    let request = request(object, problems);
    let when = pointer_at(object.get("when"), "/when", problems);
    let keep = parse_keep(object.get("keep"), problems);
    let on_fail = action(object.get("onFail"), "/onFail", Action::Reject, problems);
    let on_error = action(object.get("onError"), "/onError", Action::Flag, problems);
    let timeout = match object.get("timeoutMs") {
        None => Some(Duration::from_millis(TIMEOUT_DEFAULT_MS)),
        Some(value) => match value.as_u64() {
            Some(ms @ 1..=TIMEOUT_MAX_MS) => Some(Duration::from_millis(ms)),
            _ => {
                problem(
                    problems,
                    "/timeoutMs",
                    "invalid_value",
                    format!(
                        "timeoutMs must be a whole number of milliseconds from 1 to {TIMEOUT_MAX_MS}"
                    ),
                );
                None
            }
        },
    };
    let cache_ttl = match object.get("cacheTtl") {
        None => Some(Duration::ZERO),
        Some(Value::String(text)) => match crate::duration::parse(text) {
            Ok(ttl) if ttl <= CACHE_TTL_MAX => Some(ttl),
            Ok(_) => {
                problem(
                    problems,
                    "/cacheTtl",
                    "invalid_value",
                    "cacheTtl is at most 30d".into(),
                );
                None
            }
            Err(e) => {
                problem(problems, "/cacheTtl", "invalid_value", e.to_string());
                None
            }
        },
        Some(_) => {
            problem(
                problems,
                "/cacheTtl",
                "invalid_type",
                "cacheTtl must be a duration such as \"24h\"".into(),
            );
            None
        }
    };
    Some(CheckDocument {
        request: request?,
        url: url?,
        when,
        keep,
        on_fail: on_fail?,
        on_error: on_error?,
        timeout: timeout?,
        cache_ttl: cache_ttl?,
    })
}

/// The request and the pass rule, checked by the integration document's parser; its
/// problems' paths are turned back into this document's (`/accept` is `/pass` here).
fn request(object: &Map<String, Value>, problems: &mut Problems) -> Option<IntegrationDocument> {
    let mut embedded = Map::new();
    for (ours, theirs) in REQUEST_KEYS {
        if let Some(value) = object.get(*ours) {
            embedded.insert((*theirs).to_string(), value.clone());
        }
    }
    // A step's request carries no Standard Webhooks signature: the service is no buyer.
    embedded.insert("sign".into(), Value::Bool(false));
    match IntegrationDocument::parse(&Value::Object(embedded)) {
        Ok(parsed) => Some(parsed),
        Err(found) => {
            for mut found in found.list {
                if let Some(rest) = found.path.strip_prefix("/accept") {
                    found.path = format!("/pass{rest}");
                }
                problems.push(found);
            }
            None
        }
    }
}

fn pointer_at(value: Option<&Value>, path: &str, problems: &mut Problems) -> Option<Pointer> {
    let into = if path == "/when" {
        "the lead, such as \"/consentCertificateUrl\""
    } else {
        "the service's answer, such as \"/expires_at\""
    };
    pointer_into(value, path, into, problems)
}

fn action(
    value: Option<&Value>,
    path: &str,
    default: Action,
    problems: &mut Problems,
) -> Option<Action> {
    match value {
        None => Some(default),
        Some(Value::String(text)) if Action::parse(text).is_some() => Action::parse(text),
        Some(_) => {
            problem(
                problems,
                path,
                "invalid_value",
                format!("{} must be \"reject\", \"flag\" or \"pass\"", &path[1..]),
            );
            None
        }
    }
}

fn parse_keep(value: Option<&Value>, problems: &mut Problems) -> Vec<(String, Pointer)> {
    let Some(value) = value else {
        return Vec::new();
    };
    let Some(object) = value.as_object() else {
        problem(
            problems,
            "/keep",
            "invalid_type",
            "keep must be an object from a name to a JSON pointer into the answer".into(),
        );
        return Vec::new();
    };
    if object.len() > KEEP_MAX {
        problem(
            problems,
            "/keep",
            "too_many",
            format!("keep names at most {KEEP_MAX} values"),
        );
    }
    let mut kept = Vec::with_capacity(object.len());
    for (name, pointer) in object {
        let path = format!("/keep/{}", escape(name));
        if name.is_empty()
            || name.len() > KEEP_NAME_MAX
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        {
            problem(
                problems,
                &path,
                "invalid_name",
                format!(
                    "'{name}' is not a kept value's name: 1 to {KEEP_NAME_MAX} letters, digits, '-' or '_'"
                ),
            );
            continue;
        }
        if let Some(pointer) = pointer_at(Some(pointer), &path, problems) {
            kept.push((name.clone(), pointer));
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_design_example_is_valid() {
        let parsed = CheckDocument::parse(&json!({
            "url": "https://cert.example/claim", "method": "POST", "format": "json",
            "when": "/consentCertificateUrl",
            "headers": {"Authorization": {"secret": "cert-key"}},
            "body": {"cert_url": {"from": "/consentCertificateUrl"}, "email": {"from": "/email"}},
            "pass": {"status": [200], "pointer": "/outcome", "equals": "success"},
            "keep": {"certificateExpires": "/expires_at"},
            "onFail": "reject", "onError": "flag", "timeoutMs": 2000, "cacheTtl": "24h"}))
        .unwrap();
        assert_eq!(parsed.on_fail, Action::Reject);
        assert_eq!(parsed.on_error, Action::Flag);
        assert_eq!(parsed.cache_ttl, Duration::from_secs(24 * 3600));
        assert_eq!(parsed.keep.len(), 1);
        assert!(!parsed.request.sign);
        assert_eq!(parsed.request.accept.status, [200]);
    }

    #[test]
    fn every_problem_has_its_path() {
        let found: Vec<(String, &str)> = CheckDocument::parse(&json!({
            "url": "http://user:pw@cert.example/", "when": "x", "body": {"a": {"from": "b"}},
            "pass": {"status": [500]}, "keep": {"bad name": "/x", "ok": 3},
            "onFail": "drop", "timeoutMs": 0, "cacheTtl": "1y", "extra": 1}))
        .unwrap_err()
        .list
        .into_iter()
        .map(|p| (p.path, p.code))
        .collect();
        for (path, code) in [
            ("/extra", "unknown_key"),
            ("/url", "invalid_url"),
            ("/body/a/from", "invalid_pointer"),
            ("/pass/status/0", "invalid_value"),
            ("/when", "invalid_pointer"),
            ("/keep/bad name", "invalid_name"),
            ("/keep/ok", "invalid_type"),
            ("/onFail", "invalid_value"),
            ("/timeoutMs", "invalid_value"),
            ("/cacheTtl", "invalid_value"),
        ] {
            assert!(
                found.iter().any(|(p, c)| p == path && *c == code),
                "{path} {code} missing from {found:?}"
            );
        }
        let missing = CheckDocument::parse(&json!({"body": {"a": {"const": 1}}})).unwrap_err();
        assert_eq!(missing.list[0].path, "/url");
    }
}
