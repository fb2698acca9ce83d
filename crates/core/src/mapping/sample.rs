//! An example of the partner's own JSON for a mapping: the body that the mapping turns into a
//! given native lead, so that posting instructions show partners their own shape
//! (DESIGN.md section 21). Built by running each rule backwards: a `from` pointer gets the
//! value the target should have (the partner's key of a `map` that gives it), split parts
//! are joined again, a template's placeholders share the value's words. `const` rules need
//! nothing from the partner.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::document::{FieldRule, MappingDocument, Placement, ValueKind, ValueSource};
use super::pointer::Pointer;

/// The partner body that `document` maps to `lead` (a native Lead object) as far as the
/// rules allow; targets `lead` does not give get the text `example`.
pub fn example_body(document: &MappingDocument, lead: &Map<String, Value>) -> Value {
    let mut item = Value::Object(Map::new());
    // Split rules reading one pointer, by the pointer's text.
    let mut splits: BTreeMap<String, SplitParts> = BTreeMap::new();
    for rule in &document.rules {
        let Some(wanted) = wanted_value(rule, lead) else {
            continue;
        };
        let given = partner_value(rule, wanted);
        match &rule.source {
            ValueSource::Const(_) => {}
            ValueSource::From(pointer) => match &rule.split {
                Some(split) => {
                    let separator = if split.on_whitespace {
                        " ".to_string()
                    } else {
                        split.separator.clone()
                    };
                    splits
                        .entry(pointer.text.clone())
                        .or_insert_with(|| SplitParts {
                            pointer: pointer.clone(),
                            separator,
                            parts: Vec::new(),
                        })
                        .parts
                        .push((split.part, text_of(&given)));
                }
                None => set(&mut item, pointer, given),
            },
            ValueSource::Template(template) => {
                let placeholders: Vec<&Pointer> = template
                    .pieces
                    .iter()
                    .filter_map(|piece| match piece {
                        super::document::Piece::Placeholder(pointer) => Some(pointer),
                        super::document::Piece::Literal(_) => None,
                    })
                    .collect();
                if placeholders.is_empty() {
                    continue;
                }
                // The last placeholders take one word each from the end ("{/street}
                // {/no}" of "Main Street 12"), the first one the rest.
                let text = text_of(&given);
                let words: Vec<&str> = text.split_whitespace().collect();
                let first_len = words.len().saturating_sub(placeholders.len() - 1).max(1);
                let (first, rest) = words.split_at(first_len.min(words.len()));
                let mut parts = vec![first.join(" ")];
                parts.extend(rest.iter().map(|word| word.to_string()));
                for (index, pointer) in placeholders.iter().enumerate() {
                    let part = parts.get(index).cloned().unwrap_or_default();
                    set(&mut item, pointer, Value::String(part));
                }
            }
        }
    }
    for SplitParts {
        pointer,
        separator,
        mut parts,
    } in splits.into_values()
    {
        // Parts from the start first, then those counted from the end.
        parts.sort_by_key(|(part, _)| if *part < 0 { i64::MAX + part } else { *part });
        let joined: Vec<String> = parts.into_iter().map(|(_, text)| text).collect();
        set(&mut item, &pointer, Value::String(joined.join(&separator)));
    }
    match &document.items {
        None => item,
        Some(items) if items.tokens().is_empty() => Value::Array(vec![item]),
        Some(items) => {
            let mut body = Value::Object(Map::new());
            set(&mut body, items, Value::Array(vec![item]));
            body
        }
    }
}

/// The parts of one partner value that split rules take apart.
struct SplitParts {
    pointer: Pointer,
    separator: String,
    /// By index: from the start when not negative, `-1` the last.
    parts: Vec<(i64, String)>,
}

/// What the native lead has for the rule's target.
fn wanted_value(rule: &FieldRule, lead: &Map<String, Value>) -> Option<Value> {
    let found = match &rule.target.placement {
        Placement::Lead(name) => lead.get(*name).cloned(),
        Placement::FieldValue(name) => lead
            .get("fieldValues")
            .and_then(|values| values.get(name))
            .cloned(),
        Placement::CaptureMetadata(name) => lead
            .get("capture")
            .and_then(|capture| capture.pointer(&format!("/metadata/{name}")))
            .cloned(),
        // A buyer's body, not a partner's.
        Placement::Key(_) => return None,
    };
    Some(found.unwrap_or(match rule.target.kind {
        ValueKind::Boolean => Value::Bool(true),
        ValueKind::Text | ValueKind::Any => Value::String("example".into()),
    }))
}

/// What the partner sends so that the rule gives `wanted`: the key of a `map` that gives
/// it, else `wanted` itself.
fn partner_value(rule: &FieldRule, wanted: Value) -> Value {
    let Some(map) = &rule.map else {
        return wanted;
    };
    let wanted_text = text_of(&wanted);
    let mut keys: Vec<&String> = map
        .iter()
        .filter(|(_, to)| to.as_ref().is_some_and(|to| text_of(to) == wanted_text))
        .map(|(from, _)| from)
        .collect();
    keys.sort();
    match keys.first() {
        Some(key) => Value::String((*key).clone()),
        None => wanted,
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Puts `value` at `pointer` inside `root`, making objects on the way; a value already
/// there stays (two rules reading one pointer agree on the first).
fn set(root: &mut Value, pointer: &Pointer, value: Value) {
    let Some((last, path)) = pointer.tokens().split_last() else {
        return;
    };
    let mut current = root;
    for token in path {
        let Value::Object(map) = current else {
            return;
        };
        current = map
            .entry(token.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Value::Object(map) = current {
        map.entry(last.clone()).or_insert(value);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_example_body_of_the_documented_mapping_maps_back_to_the_lead() {
        let document: Value = serde_json::from_str(include_str!(
            "../../../../docs/examples/sunpartner-mapping.json"
        ))
        .expect("the example mapping is JSON");
        let document = MappingDocument::parse(&document).expect("a valid document");
        let lead = json!({
            "externalId": "x-1", "firstName": "Jane", "lastName": "Doe",
            "email": "jane@example.com", "phone": "+49 170 5550101", "street": "Main Street 12",
            "postalCode": "10115", "country": "DE", "consentStatus": "granted", "fieldValues": {"roof": "flat"}
        });
        let lead = lead.as_object().expect("an object");
        let body = example_body(&document, lead);
        let contact = &body["contacts"][0];
        assert_eq!(contact["fullName"], "Jane Doe");
        assert_eq!(
            contact["address"],
            json!({"street": "Main Street", "no": "12", "zip": "10115", "country": "DE"})
        );
        assert_eq!(contact["optIn"], "true", "the partner's key of the map");
        assert_eq!(contact["roofType"], "Flach");
        let native = super::super::transform(&document, &body).expect("the body maps");
        let mapped = native["leads"][0].as_object().expect("one lead");
        for key in [
            "externalId",
            "firstName",
            "lastName",
            "email",
            "street",
            "country",
        ] {
            assert_eq!(mapped[key], lead[key], "{key}");
        }
        assert_eq!(mapped["phone"], "491705550101");
        assert_eq!(mapped["consentStatus"], "granted");
        assert_eq!(mapped["fieldValues"]["roof"], "flat");
    }
}
