//! The mapping document: parsing it from JSON and checking every part of it.
//!
//! A document is `{"items": "/pointer"?, "fields": {TARGET: RULE}}` (DESIGN.md section 9).
//! Checking collects every problem, each with a JSON pointer into the document (for example
//! `/fields/email/transform/1`), so an operator fixes them all in one round. A checked
//! document holds parsed pointers, templates and normalised values, so applying it to a
//! body ([`super::engine`]) never parses anything again. This module does not apply
//! documents and does not store them.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::pointer::{Pointer, escape};
use super::{MappingProblem, Problems};
use leadrelay_rules::fields::FIELD_NAMES;

/// Interest shortcuts that take a string value.
const INTEREST_TEXT_TARGETS: &[&str] = &["productSlug", "productId"];

/// The targets that take a string value: the Lead's fields of SPEC.md section 2.1 (with
/// the consent and capture fields: `ingest::model::FIELD_NAMES`, the one list of them),
/// then the interest shortcuts.
pub fn text_targets() -> impl Iterator<Item = &'static str> {
    FIELD_NAMES.iter().chain(INTEREST_TEXT_TARGETS).copied()
}

/// Interest shortcuts that take a boolean value.
pub const BOOLEAN_TARGETS: &[&str] = &["routingReady", "triggerAutoDelivery"];

/// Target prefixes followed by a name of the mapper's choice.
pub const CAPTURE_METADATA_PREFIX: &str = "capture.metadata.";
pub const FIELD_VALUES_PREFIX: &str = "fieldValues.";

/// The transforms, in the order the documentation lists them.
pub const TRANSFORMS: &[&str] = &["trim", "lowercase", "uppercase", "digits"];

const DOCUMENT_KEYS: &[&str] = &["items", "fields"];
const RULE_KEYS: &[&str] = &[
    "from",
    "const",
    "template",
    "default",
    "map",
    "split",
    "part",
    "transform",
];
const SOURCE_KEYS: &[&str] = &["from", "const", "template"];

/// A checked mapping document.
#[derive(Debug, Clone)]
pub struct MappingDocument {
    /// Where the array of partner records is; `None` maps the body to one Lead.
    pub items: Option<Pointer>,
    /// One rule per target, in document order.
    pub rules: Vec<FieldRule>,
}

/// How one target gets its value.
#[derive(Debug, Clone)]
pub struct FieldRule {
    pub target: Target,
    pub source: ValueSource,
    /// Used when the value is absent; already in the target's type.
    pub default: Option<Value>,
    /// Replaces a (split, transformed) string; `None` as a replacement makes it absent.
    pub map: Option<HashMap<String, Option<Value>>>,
    pub split: Option<Split>,
    pub transforms: Vec<Transform>,
}

#[derive(Debug, Clone)]
pub enum ValueSource {
    /// A JSON pointer into the item (or the body without `items`).
    From(Pointer),
    /// A fixed value, already in the target's type.
    Const(Value),
    Template(Template),
}

/// Where a target's value goes in the native Lead, and its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub placement: Placement,
    pub kind: ValueKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A property of the Lead itself.
    Lead(&'static str),
    /// `capture.metadata.NAME`.
    CaptureMetadata(String),
    /// `fieldValues.NAME`.
    FieldValue(String),
    /// A key of the buyer's own body (`buyer integration`): any name, at the top level.
    Key(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Text,
    Boolean,
    /// A buyer's body field: a value read with `from` and no step keeps its JSON type (a
    /// price stays a number); a value a step changed is text; a const is kept as written.
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub separator: String,
    /// From the start when not negative; `-1` is the last part.
    pub part: i64,
    /// A separator of only spaces splits on runs of white space, so "Ada  Lovelace" has
    /// two parts, not three.
    pub on_whitespace: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    Trim,
    Lowercase,
    Uppercase,
    Digits,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Literal(String),
    Placeholder(Pointer),
}

impl MappingDocument {
    /// Checks `document`; every problem has a path into it.
    pub fn parse(document: &Value) -> Result<MappingDocument, Problems> {
        let mut problems = Problems::default();
        let parsed = parse_document(document, &mut problems);
        match parsed {
            Some(parsed) if problems.is_empty() => Ok(parsed),
            _ => Err(problems),
        }
    }

    /// Parses a stored document (checked when it was stored). The error names the first
    /// problem, for a log line.
    pub fn from_stored(text: &str) -> Result<MappingDocument, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        MappingDocument::parse(&value).map_err(|problems| match problems.list.first() {
            Some(first) => format!("{}: {}", first.path, first.message),
            None => "not a mapping document".to_string(),
        })
    }
}

fn parse_document(document: &Value, problems: &mut Problems) -> Option<MappingDocument> {
    let Some(object) = document.as_object() else {
        problems.push(MappingProblem::new(
            "",
            "invalid_type",
            "a mapping document must be a JSON object with \"fields\" (and optionally \"items\")",
        ));
        return None;
    };
    unknown_keys(object, DOCUMENT_KEYS, "", problems);
    let items = match object.get("items") {
        None => None,
        Some(Value::String(text)) => pointer(text, || "/items".to_string(), problems),
        Some(_) => {
            problems.push(MappingProblem::new(
                "/items",
                "invalid_type",
                "items must be a JSON pointer string, such as \"/contacts\"",
            ));
            None
        }
    };
    let rules = match object.get("fields") {
        None => {
            problems.push(MappingProblem::new(
                "/fields",
                "required",
                "fields is required: an object from target to rule",
            ));
            Vec::new()
        }
        Some(Value::Object(fields)) if fields.is_empty() => {
            problems.push(MappingProblem::new(
                "/fields",
                "empty",
                "fields must map at least one target",
            ));
            Vec::new()
        }
        Some(Value::Object(fields)) => fields
            .iter()
            .filter_map(|(name, rule)| {
                parse_rule(name, rule, &format!("/fields/{}", escape(name)), problems)
            })
            .collect(),
        Some(_) => {
            problems.push(MappingProblem::new(
                "/fields",
                "invalid_type",
                "fields must be an object from target to rule",
            ));
            Vec::new()
        }
    };
    Some(MappingDocument { items, rules })
}

/// A problem for each key of `object` (at `path`) that is not one of `known`.
pub(crate) fn unknown_keys(
    object: &Map<String, Value>,
    known: &[&str],
    path: &str,
    problems: &mut Problems,
) {
    for key in object.keys() {
        if !known.contains(&key.as_str()) {
            problems.push(MappingProblem::new(
                format!("{path}/{}", escape(key)),
                "unknown_key",
                format!("unknown key '{key}'; use {}", or_list(known)),
            ));
        }
    }
}

/// Parses a pointer; `path` builds the problem's path, only when there is a problem.
fn pointer(text: &str, path: impl Fn() -> String, problems: &mut Problems) -> Option<Pointer> {
    match Pointer::parse(text) {
        Ok(pointer) => Some(pointer),
        Err(why) => {
            problems.push(MappingProblem::new(path(), "invalid_pointer", why));
            None
        }
    }
}

/// The target named `name`, or the reason it names none.
pub fn parse_target(name: &str) -> Result<Target, String> {
    if let Some(field) = text_targets().find(|&f| f == name) {
        return Ok(Target {
            placement: Placement::Lead(field),
            kind: ValueKind::Text,
        });
    }
    if let Some(&field) = BOOLEAN_TARGETS.iter().find(|&&f| f == name) {
        return Ok(Target {
            placement: Placement::Lead(field),
            kind: ValueKind::Boolean,
        });
    }
    for (prefix, make) in [
        (
            CAPTURE_METADATA_PREFIX,
            Placement::CaptureMetadata as fn(String) -> Placement,
        ),
        (FIELD_VALUES_PREFIX, Placement::FieldValue),
    ] {
        if let Some(rest) = name.strip_prefix(prefix) {
            if rest.is_empty() {
                return Err(format!("target '{name}' needs a name after '{prefix}'"));
            }
            return Ok(Target {
                placement: make(rest.to_string()),
                kind: ValueKind::Text,
            });
        }
    }
    let squashed = squash(name);
    let known = || text_targets().chain(BOOLEAN_TARGETS.iter().copied());
    let suggestion = known().find(|known| squash(known) == squashed);
    Err(match suggestion {
        Some(known) => format!("unknown target '{name}'; did you mean '{known}'?"),
        None => format!(
            "unknown target '{name}'; use a Lead field ({}), {CAPTURE_METADATA_PREFIX}NAME or \
             {FIELD_VALUES_PREFIX}NAME",
            known().collect::<Vec<_>>().join(", ")
        ),
    })
}

/// A name without case, '_' and '-', to suggest `firstName` for `first_name`.
fn squash(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

fn parse_rule(name: &str, rule: &Value, path: &str, problems: &mut Problems) -> Option<FieldRule> {
    let target = match parse_target(name) {
        Ok(target) => Some(target),
        Err(why) => {
            problems.push(MappingProblem::new(path, "unknown_target", why));
            None
        }
    };
    parse_rule_for(target, rule, path, problems)
}

/// Checks the rules of a buyer's body (`buyer integration`'s `body`): the same language
/// as a mapping's `fields`, where each target is a key of the buyer's own body, with a path
/// under `path` (`/body`) for each problem.
pub fn parse_body_rules(
    fields: &Map<String, Value>,
    path: &str,
    problems: &mut Problems,
) -> Vec<FieldRule> {
    fields
        .iter()
        .filter_map(|(name, rule)| {
            let at = format!("{path}/{}", escape(name));
            let target = if name.is_empty() {
                problems.push(MappingProblem::new(
                    &at,
                    "unknown_target",
                    "a body key must not be empty",
                ));
                None
            } else {
                Some(Target {
                    placement: Placement::Key(name.clone()),
                    kind: ValueKind::Any,
                })
            };
            parse_rule_for(target, rule, &at, problems)
        })
        .collect()
}

fn parse_rule_for(
    target: Option<Target>,
    rule: &Value,
    path: &str,
    problems: &mut Problems,
) -> Option<FieldRule> {
    let Some(rule) = rule.as_object() else {
        problems.push(MappingProblem::new(
            path,
            "invalid_type",
            "a rule must be an object with one of from, const or template",
        ));
        return None;
    };
    unknown_keys(rule, RULE_KEYS, path, problems);
    // Without a valid target the values cannot be checked against its type; text is the
    // more permissive guess and avoids a second problem for the same mistake.
    let kind = target.as_ref().map_or(ValueKind::Text, |t| t.kind);

    let given: Vec<&str> = SOURCE_KEYS
        .iter()
        .copied()
        .filter(|key| rule.contains_key(*key))
        .collect();
    if given.is_empty() {
        problems.push(MappingProblem::new(
            path,
            "missing_source",
            "a rule needs one of from, const or template",
        ));
    }
    for extra in given.iter().skip(1) {
        problems.push(MappingProblem::new(
            format!("{path}/{extra}"),
            "conflicting_source",
            format!(
                "a rule takes only one of from, const or template; this one has {}",
                given.join(" and ")
            ),
        ));
    }
    let source = match given.first().copied() {
        Some("from") => match &rule["from"] {
            Value::String(text) => {
                pointer(text, || format!("{path}/from"), problems).map(ValueSource::From)
            }
            _ => {
                problems.push(MappingProblem::new(
                    format!("{path}/from"),
                    "invalid_type",
                    "from must be a JSON pointer string, such as \"/email\"",
                ));
                None
            }
        },
        Some("const") => {
            if let Some(step) = ["default", "map", "split", "part", "transform"]
                .into_iter()
                .find(|key| rule.contains_key(*key))
            {
                problems.push(MappingProblem::new(
                    format!("{path}/{step}"),
                    "not_applicable",
                    format!(
                        "{step} does not apply to a const value; write the final value as const"
                    ),
                ));
            }
            fixed_value(
                &rule["const"],
                kind,
                || format!("{path}/const"),
                "const",
                problems,
            )
            .and_then(|value| match value {
                Some(value) => Some(ValueSource::Const(value)),
                None => {
                    problems.push(MappingProblem::new(
                        format!("{path}/const"),
                        "invalid_value",
                        "const must not be null; leave the target out instead",
                    ));
                    None
                }
            })
        }
        Some(_) => match &rule["template"] {
            Value::String(text) => match parse_template(text) {
                Ok(template) => Some(ValueSource::Template(template)),
                Err(why) => {
                    problems.push(MappingProblem::new(
                        format!("{path}/template"),
                        "invalid_template",
                        why,
                    ));
                    None
                }
            },
            _ => {
                problems.push(MappingProblem::new(
                    format!("{path}/template"),
                    "invalid_type",
                    "template must be a string, such as \"{/first} {/last}\"",
                ));
                None
            }
        },
        None => None,
    };

    let default = match rule.get("default") {
        None => None,
        Some(value) => {
            match fixed_value(
                value,
                kind,
                || format!("{path}/default"),
                "default",
                problems,
            ) {
                Some(Some(value)) => Some(value),
                Some(None) => {
                    problems.push(MappingProblem::new(
                        format!("{path}/default"),
                        "invalid_value",
                        "default must not be null; leave default out instead",
                    ));
                    None
                }
                None => None,
            }
        }
    };
    let map = rule
        .get("map")
        .and_then(|value| parse_map(value, kind, path, problems));
    let split = parse_split(rule, path, problems);
    let transforms = rule
        .get("transform")
        .map(|value| parse_transforms(value, path, problems))
        .unwrap_or_default();

    Some(FieldRule {
        target: target?,
        source: source?,
        default,
        map,
        split,
        transforms,
    })
}

/// Checks a fixed value (`const`, `default`, a `map` replacement) against the target's
/// type and returns it normalised: a string for text targets (numbers and booleans in
/// their JSON form), a boolean for boolean targets, `Some(None)` for null. `None` when it
/// does not fit (a problem was added).
fn fixed_value(
    value: &Value,
    kind: ValueKind,
    path: impl Fn() -> String,
    what: &str,
    problems: &mut Problems,
) -> Option<Option<Value>> {
    if value.is_null() {
        return Some(None);
    }
    let normalised = match kind {
        ValueKind::Any => match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => value.clone(),
            _ => {
                problems.push(MappingProblem::new(
                    path(),
                    "invalid_value",
                    format!("{what} must be a string, number or boolean"),
                ));
                return None;
            }
        },
        ValueKind::Text => match value {
            Value::String(s) if s.is_empty() => {
                problems.push(MappingProblem::new(
                    path(),
                    "invalid_value",
                    format!("{what} must not be an empty string"),
                ));
                return None;
            }
            Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                Value::String(super::engine::scalar_text(value).expect("a scalar has a text form"))
            }
            _ => {
                problems.push(MappingProblem::new(
                    path(),
                    "invalid_value",
                    format!("{what} must be a string, number or boolean for this target"),
                ));
                return None;
            }
        },
        ValueKind::Boolean => match super::engine::parse_boolean(value) {
            Some(b) => Value::Bool(b),
            None => {
                problems.push(MappingProblem::new(
                    path(),
                    "invalid_value",
                    format!(
                        "{what} must be a boolean for this target: true, false, \"yes\", \"no\", 1 or 0"
                    ),
                ));
                return None;
            }
        },
    };
    Some(Some(normalised))
}

fn parse_map(
    value: &Value,
    kind: ValueKind,
    path: &str,
    problems: &mut Problems,
) -> Option<HashMap<String, Option<Value>>> {
    let Some(entries) = value.as_object() else {
        problems.push(MappingProblem::new(
            format!("{path}/map"),
            "invalid_type",
            "map must be an object from a partner value to a native value, such as {\"Y\": \"granted\"}",
        ));
        return None;
    };
    let mut map = HashMap::with_capacity(entries.len());
    for (key, replacement) in entries {
        let entry_path = || format!("{path}/map/{}", escape(key));
        if let Some(normalised) =
            fixed_value(replacement, kind, entry_path, "a map value", problems)
        {
            map.insert(key.clone(), normalised);
        }
    }
    Some(map)
}

fn parse_split(rule: &Map<String, Value>, path: &str, problems: &mut Problems) -> Option<Split> {
    let part = match rule.get("part") {
        None => None,
        Some(value) => match value.as_i64() {
            Some(part) => Some(part),
            None => {
                problems.push(MappingProblem::new(
                    format!("{path}/part"),
                    "invalid_type",
                    "part must be a whole number: 0 is the first part, -1 the last",
                ));
                None
            }
        },
    };
    match rule.get("split") {
        None => {
            if rule.contains_key("part") {
                problems.push(MappingProblem::new(
                    format!("{path}/part"),
                    "part_without_split",
                    "part needs split, the separator to split the value on",
                ));
            }
            None
        }
        Some(Value::String(separator)) if !separator.is_empty() => {
            if !rule.contains_key("part") {
                problems.push(MappingProblem::new(
                    format!("{path}/split"),
                    "split_without_part",
                    "split needs part, the index of the part to keep (0 is the first, -1 the last)",
                ));
            }
            Some(Split {
                separator: separator.clone(),
                part: part?,
                on_whitespace: separator.chars().all(|c| c == ' '),
            })
        }
        Some(_) => {
            problems.push(MappingProblem::new(
                format!("{path}/split"),
                "invalid_type",
                "split must be a non-empty string, the separator",
            ));
            None
        }
    }
}

fn parse_transforms(value: &Value, path: &str, problems: &mut Problems) -> Vec<Transform> {
    let Some(names) = value.as_array() else {
        problems.push(MappingProblem::new(
            format!("{path}/transform"),
            "invalid_type",
            format!("transform must be an array of {}", or_list(TRANSFORMS)),
        ));
        return Vec::new();
    };
    let mut transforms = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let transform = match name.as_str() {
            Some("trim") => Transform::Trim,
            Some("lowercase") => Transform::Lowercase,
            Some("uppercase") => Transform::Uppercase,
            Some("digits") => Transform::Digits,
            other => {
                let shown = other.map_or_else(|| name.to_string(), |s| format!("'{s}'"));
                problems.push(MappingProblem::new(
                    format!("{path}/transform/{index}"),
                    "unknown_transform",
                    format!("unknown transform {shown}; use {}", or_list(TRANSFORMS)),
                ));
                continue;
            }
        };
        transforms.push(transform);
    }
    transforms
}

/// Parses `"{/first} {/last}"`: placeholders are JSON pointers in braces; `{{` and `}}`
/// stand for literal braces.
pub fn parse_template(text: &str) -> Result<Template, String> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                literal.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                literal.push('}');
            }
            '{' => {
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some('{') | None => {
                            return Err(format!(
                                "'{{' at '{{{inner}' is not closed by '}}'; write '{{{{' for a literal brace"
                            ));
                        }
                        Some(c) => inner.push(c),
                    }
                }
                let pointer = Pointer::parse(&inner)
                    .map_err(|why| format!("placeholder {{{inner}}}: {why}"))?;
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Placeholder(pointer));
            }
            '}' => {
                return Err("'}' without '{'; write '}}' for a literal brace".to_string());
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    if !pieces.iter().any(|p| matches!(p, Piece::Placeholder(_))) {
        return Err(
            "a template needs at least one placeholder such as {/name}; use const for a fixed value"
                .to_string(),
        );
    }
    Ok(Template { pieces })
}

/// "a, b or c".
fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
