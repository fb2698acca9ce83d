//! Applying a checked mapping document to a partner's body, giving a native ingest body.
//!
//! For each target the rule's steps run in a fixed order (documented in docs/ingest.md):
//! take the value (`from`, `const` or `template`), turn it into a string, `split`/`part`,
//! each `transform` in order, `map`; a value that is missing, null or empty at the end is
//! absent, so `default` applies or the target is left out; finally the value takes the
//! target's type. Problems point into the partner's body (`/contacts/3/optin`). This module
//! does not validate the native result: ingest does, with its own paths.

use serde_json::{Map, Value};

use super::document::{
    FieldRule, MappingDocument, Placement, Split, Template, Transform, ValueKind, ValueSource,
};
use super::pointer::Pointer;
use super::{MappingProblem, Problems};
use leadrelay_rules::problem::type_name;

/// Transforms `body` with `document`: one native Lead object, or a native batch
/// `{"leads": [...]}` when the document has `items`. On failure every problem found (up
/// to [`super::MAX_PROBLEMS`]) with its path in `body`.
pub fn transform(document: &MappingDocument, body: &Value) -> Result<Value, Problems> {
    let mut problems = Problems::default();
    if !body.is_object() && !body.is_array() {
        problems.push(MappingProblem::new(
            "",
            "invalid_type",
            format!(
                "the body must be a JSON object or array for this mapping, not {}",
                type_name(body)
            ),
        ));
        return Err(problems);
    }
    let native = match &document.items {
        None => Value::Object(map_lead(
            &document.rules,
            body,
            &Base::whole(),
            &mut problems,
        )),
        Some(items) => match items.lookup(body) {
            Some(Value::Array(elements)) => {
                let leads = elements
                    .iter()
                    .enumerate()
                    .map(|(index, element)| {
                        let base = Base {
                            prefix: &items.text,
                            index: Some(index),
                        };
                        Value::Object(map_lead(&document.rules, element, &base, &mut problems))
                    })
                    .collect();
                let mut batch = Map::with_capacity(1);
                batch.insert("leads".into(), Value::Array(leads));
                Value::Object(batch)
            }
            found => {
                let found = found.map_or("nothing", type_name);
                problems.push(MappingProblem::new(
                    items.text.clone(),
                    "not_an_array",
                    format!("the mapping's items must be an array here, found {found}"),
                ));
                return Err(problems);
            }
        },
    };
    if problems.is_empty() {
        Ok(native)
    } else {
        Err(problems)
    }
}

/// Applies body rules (`document::parse_body_rules`) to `input`, one object: what a buyer's
/// integration sends, read against the `lead.delivered` event. Problems point into `input`.
pub fn map_object(rules: &[FieldRule], input: &Value) -> Result<Map<String, Value>, Problems> {
    let mut problems = Problems::default();
    let object = map_lead(rules, input, &Base::whole(), &mut problems);
    if problems.is_empty() {
        Ok(object)
    } else {
        Err(problems)
    }
}

/// Where the value being mapped sits in the body, to build problem paths only when a
/// problem occurs.
struct Base<'a> {
    prefix: &'a str,
    index: Option<usize>,
}

impl Base<'_> {
    fn whole() -> Base<'static> {
        Base {
            prefix: "",
            index: None,
        }
    }

    /// The path in the body of `pointer` (relative to this item).
    fn path(&self, pointer: &str) -> String {
        match self.index {
            Some(index) => format!("{}/{index}{pointer}", self.prefix),
            None => format!("{}{pointer}", self.prefix),
        }
    }
}

/// What a rule's steps give.
enum RuleValue {
    Value(Value),
    Absent,
    /// A problem was recorded.
    Failed,
}

fn map_lead(
    rules: &[FieldRule],
    item: &Value,
    base: &Base,
    problems: &mut Problems,
) -> Map<String, Value> {
    let mut lead = Map::new();
    for rule in rules {
        let value = match evaluate(rule, item, base, problems) {
            RuleValue::Value(value) => value,
            RuleValue::Absent => match &rule.default {
                Some(default) => default.clone(),
                None => continue,
            },
            RuleValue::Failed => continue,
        };
        match &rule.target.placement {
            Placement::Lead(field) => {
                lead.insert((*field).to_string(), value);
            }
            Placement::CaptureMetadata(name) => {
                let capture = object_entry(&mut lead, "capture");
                object_entry(capture, "metadata").insert(name.clone(), value);
            }
            Placement::FieldValue(name) => {
                object_entry(&mut lead, "fieldValues").insert(name.clone(), value);
            }
            Placement::Key(name) => {
                lead.insert(name.clone(), value);
            }
        }
    }
    lead
}

fn object_entry<'m>(map: &'m mut Map<String, Value>, key: &str) -> &'m mut Map<String, Value> {
    let entry = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    match entry {
        Value::Object(inner) => inner,
        _ => unreachable!("only this function writes {key}, always as an object"),
    }
}

fn evaluate(rule: &FieldRule, item: &Value, base: &Base, problems: &mut Problems) -> RuleValue {
    // The path a later problem (a value that is not a boolean) is reported at.
    let source_path = |pointer: &str| base.path(pointer);
    let (text, at) = match &rule.source {
        ValueSource::Const(value) => return RuleValue::Value(value.clone()),
        // A value taken as it is keeps its JSON type where the target allows any.
        ValueSource::From(pointer)
            if rule.target.kind == ValueKind::Any
                && rule.split.is_none()
                && rule.transforms.is_empty()
                && rule.map.is_none() =>
        {
            return match scalar_at(pointer, item, base, problems) {
                Ok(None) => RuleValue::Absent,
                Ok(Some(Value::String(s))) if s.is_empty() => RuleValue::Absent,
                Ok(Some(value)) => RuleValue::Value(value.clone()),
                Err(()) => RuleValue::Failed,
            };
        }
        ValueSource::From(pointer) => match read_scalar(pointer, item, base, problems) {
            Ok(Some(text)) => (text, pointer.text.as_str()),
            Ok(None) => return RuleValue::Absent,
            Err(()) => return RuleValue::Failed,
        },
        ValueSource::Template(template) => match render(template, item, base, problems) {
            Ok(Some(text)) => (text, ""),
            Ok(None) => return RuleValue::Absent,
            Err(()) => return RuleValue::Failed,
        },
    };
    let text = match &rule.split {
        Some(split) => match split_part(&text, split) {
            Some(part) => part.to_string(),
            None => return RuleValue::Absent,
        },
        None => text,
    };
    let text = rule
        .transforms
        .iter()
        .fold(text, |text, transform| apply(*transform, text));
    if let Some(replacement) = rule.map.as_ref().and_then(|map| map.get(&text)) {
        // Replacements were checked against the target's type when the document was.
        return match replacement {
            Some(value) => RuleValue::Value(value.clone()),
            None => RuleValue::Absent,
        };
    }
    if text.is_empty() {
        return RuleValue::Absent;
    }
    match rule.target.kind {
        ValueKind::Text | ValueKind::Any => RuleValue::Value(Value::String(text)),
        ValueKind::Boolean => match parse_boolean_text(&text) {
            Some(b) => RuleValue::Value(Value::Bool(b)),
            None => {
                problems.push(MappingProblem::new(
                    source_path(at),
                    "not_a_boolean",
                    format!(
                        "expected a boolean (true, false, \"yes\", \"no\", 1 or 0), found '{text}'"
                    ),
                ));
                RuleValue::Failed
            }
        },
    }
}

/// The scalar (string, number or boolean) at `pointer`; `None` when it is missing or null.
fn scalar_at<'v>(
    pointer: &Pointer,
    item: &'v Value,
    base: &Base,
    problems: &mut Problems,
) -> Result<Option<&'v Value>, ()> {
    match pointer.lookup(item) {
        None | Some(Value::Null) => Ok(None),
        Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => Ok(Some(value)),
        Some(value) => {
            problems.push(MappingProblem::new(
                base.path(&pointer.text),
                "not_a_scalar",
                format!(
                    "expected a string, number or boolean, found {}",
                    type_name(value)
                ),
            ));
            Err(())
        }
    }
}

/// The text of the scalar at `pointer`; `None` when it is missing or null.
fn read_scalar(
    pointer: &Pointer,
    item: &Value,
    base: &Base,
    problems: &mut Problems,
) -> Result<Option<String>, ()> {
    Ok(scalar_at(pointer, item, base, problems)?.and_then(scalar_text))
}

/// Fills in a template; missing or null placeholders are empty. `None` when all of them
/// are missing, so a template over an absent person does not produce a lone space.
fn render(
    template: &Template,
    item: &Value,
    base: &Base,
    problems: &mut Problems,
) -> Result<Option<String>, ()> {
    let mut out = String::new();
    let mut found_any = false;
    let mut failed = false;
    for piece in &template.pieces {
        match piece {
            super::document::Piece::Literal(text) => out.push_str(text),
            super::document::Piece::Placeholder(pointer) => {
                match read_scalar(pointer, item, base, problems) {
                    Ok(Some(text)) => {
                        found_any = true;
                        out.push_str(&text);
                    }
                    Ok(None) => {}
                    Err(()) => failed = true,
                }
            }
        }
    }
    if failed {
        Err(())
    } else if found_any {
        Ok(Some(out))
    } else {
        Ok(None)
    }
}

fn split_part<'t>(text: &'t str, split: &Split) -> Option<&'t str> {
    let parts: Vec<&str> = if split.on_whitespace {
        text.split_whitespace().collect()
    } else {
        text.split(split.separator.as_str()).collect()
    };
    let index = if split.part >= 0 {
        usize::try_from(split.part).ok()?
    } else {
        parts
            .len()
            .checked_sub(usize::try_from(split.part.unsigned_abs()).ok()?)?
    };
    parts.get(index).copied()
}

fn apply(transform: Transform, text: String) -> String {
    match transform {
        Transform::Trim => {
            let trimmed = text.trim();
            if trimmed.len() == text.len() {
                text
            } else {
                trimmed.to_string()
            }
        }
        Transform::Lowercase => text.to_lowercase(),
        Transform::Uppercase => text.to_uppercase(),
        Transform::Digits => text.chars().filter(char::is_ascii_digit).collect(),
    }
}

/// The text form of a string, number or boolean; `None` for null, arrays and objects.
pub fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A boolean from true/false, 1/0 or the strings "true"/"false", "yes"/"no", "1"/"0"
/// (any case, surrounding white space ignored).
pub fn parse_boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_f64() {
            Some(1.0) => Some(true),
            Some(0.0) => Some(false),
            _ => None,
        },
        Value::String(s) => parse_boolean_text(s),
        _ => None,
    }
}

fn parse_boolean_text(text: &str) -> Option<bool> {
    let text = text.trim();
    if ["true", "yes", "1"]
        .iter()
        .any(|t| text.eq_ignore_ascii_case(t))
    {
        Some(true)
    } else if ["false", "no", "0"]
        .iter()
        .any(|t| text.eq_ignore_ascii_case(t))
    {
        Some(false)
    } else {
        None
    }
}
