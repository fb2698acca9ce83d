//! Which native shape a body is (SPEC.md 2.4): a batch (`leads`), a person wrapper
//! (`person`, channel endpoint only) or a Lead, and the whole-body rules of each.
//!
//! Owns turning a parsed body into the leads it carries: one item for a Lead or a person
//! wrapper, 1 to 100 independent items for a batch. Problems that concern the whole body
//! (not an object, `leads` not an array or of the wrong size, a wrapper on a lead table)
//! end the request; problems of one lead stay with its item. Per-field checks are
//! `validate`'s.

use serde_json::{Map, Value};

use super::problem::{Problem, child, index, type_name};
use super::validate::{self, LeadDraft};
use crate::config::container::ContainerKind;

/// The most leads one batch may hold (SPEC.md section 8).
pub const MAX_BATCH: usize = 100;

/// The leads of a body.
#[derive(Debug)]
pub enum Shape {
    /// A Lead or a person wrapper: one lead, answered as `{"item": …}`.
    Single(Box<Item>),
    /// A batch: each item is answered on its own.
    Batch(Vec<Item>),
}

/// One lead of a body as received, checked as far as possible without the database: its
/// text (stored with the lead), the problems found so far and, when it is an object at
/// all, its [`LeadDraft`]. It differs from a validated lead because a body's item may be
/// anything (a batch answers for each one, also for a string or a number), and whole-body
/// steps (the person wrapper) still change the draft.
#[derive(Debug)]
pub struct Item {
    /// `None` when the item is not even an object.
    pub draft: Option<LeadDraft>,
    pub problems: Vec<Problem>,
    /// The item's JSON as received, stored with the lead.
    pub raw: String,
}

/// Splits `body` into its leads. `raw` is the body's text when `body` is exactly what was
/// received; items are serialised otherwise. `Err` holds whole-body problems.
pub fn detect(
    body: Value,
    raw: Option<String>,
    kind: ContainerKind,
) -> Result<Shape, Vec<Problem>> {
    let Value::Object(map) = body else {
        return Err(vec![Problem::new(
            "",
            "invalid_type",
            format!("the body must be a JSON object, not {}", type_name(&body)),
        )]);
    };
    if map.contains_key("leads") {
        return batch(map);
    }
    if map.contains_key("person") {
        if kind == ContainerKind::Table {
            return Err(vec![Problem::new(
                "/person",
                "not_allowed",
                "the person wrapper is accepted on channel sources only; send a Lead or a batch",
            )]);
        }
        let raw = raw.unwrap_or_else(|| to_text(&Value::Object(map.clone())));
        return wrapper(map, raw);
    }
    let raw = raw.unwrap_or_else(|| to_text(&Value::Object(map.clone())));
    let mut problems = Vec::new();
    let draft = validate::lead(map, "", &mut problems);
    Ok(Shape::Single(Box::new(Item {
        draft: Some(draft),
        problems,
        raw,
    })))
}

fn to_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a serde_json::Value always serialises")
}

fn batch(map: Map<String, Value>) -> Result<Shape, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut leads = None;
    for (key, value) in map {
        match key.as_str() {
            "leads" => leads = Some(value),
            "person" => problems.push(Problem::new(
                "/person",
                "not_allowed",
                "a body is a batch (leads) or a person wrapper (person), not both",
            )),
            _ => problems.push(Problem::new(
                child("", &key),
                "unknown_property",
                format!("a batch has only the property 'leads', not '{key}'"),
            )),
        }
    }
    let items = match leads {
        Some(Value::Array(items)) => items,
        other => {
            let found = other.as_ref().map_or("nothing", type_name);
            problems.push(Problem::new(
                "/leads",
                "invalid_type",
                format!("leads must be an array of 1 to {MAX_BATCH} leads, not {found}"),
            ));
            return Err(problems);
        }
    };
    if items.is_empty() {
        problems.push(Problem::new(
            "/leads",
            "too_few_items",
            format!("leads must hold 1 to {MAX_BATCH} leads, not 0"),
        ));
    } else if items.len() > MAX_BATCH {
        problems.push(Problem::new(
            "/leads",
            "too_many_items",
            format!(
                "leads must hold 1 to {MAX_BATCH} leads, not {}",
                items.len()
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let items = items
        .into_iter()
        .enumerate()
        .map(|(position, value)| {
            let raw = to_text(&value);
            let path = index("/leads", position);
            let mut problems = Vec::new();
            let draft = match value {
                Value::Object(map) => Some(validate::lead(map, &path, &mut problems)),
                other => {
                    problems.push(Problem::new(
                        path,
                        "invalid_type",
                        format!("a lead must be an object, not {}", type_name(&other)),
                    ));
                    None
                }
            };
            Item {
                draft,
                problems,
                raw,
            }
        })
        .collect();
    Ok(Shape::Batch(items))
}

/// A person wrapper: the person's Lead plus the wrapper's external id and interests. Its
/// problems belong to its one lead, so they are the item's.
fn wrapper(map: Map<String, Value>, raw: String) -> Result<Shape, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut person = None;
    let mut external_id = None;
    let mut trigger_auto_delivery = None;
    let mut interests = Vec::new();
    let mut request = None;
    let mut requests = Vec::new();
    for (key, value) in map {
        let p = &mut problems;
        match key.as_str() {
            "person" => person = Some(value),
            "externalId" => external_id = validate::string(value, "", &key, p),
            "triggerAutoDelivery" => trigger_auto_delivery = validate::boolean(value, "", &key, p),
            "interests" => interests = validate::interest_list(value, "", &key, p),
            "request" => {
                request = validate::object(value, "", &key, p)
                    .map(|m| validate::interest(m, child("", &key), p))
            }
            "requests" => requests = validate::interest_list(value, "", &key, p),
            _ => p.push(Problem::new(
                child("", &key),
                "unknown_property",
                format!("a person wrapper has no property '{key}'"),
            )),
        }
    }
    let mut draft = match person {
        Some(Value::Object(map)) => validate::lead(map, "/person", &mut problems),
        other => {
            let found = other.as_ref().map_or("nothing", type_name);
            problems.insert(
                0,
                Problem::new(
                    "/person",
                    "invalid_type",
                    format!("person must be a Lead object, not {found}"),
                ),
            );
            return Err(problems);
        }
    };
    if let Some(wrapper_id) = external_id
        && validate::check_external_id(&wrapper_id, "/externalId", &mut problems)
    {
        match &draft.fields.external_id {
            Some(person_id) if *person_id != wrapper_id => problems.push(Problem::new(
                "/externalId",
                "conflict",
                "externalId differs from person.externalId; send one of them",
            )),
            Some(_) => {}
            None => draft.fields.external_id = Some(wrapper_id),
        }
    }
    draft.interests.extend(interests);
    draft.interests.extend(request);
    draft.interests.extend(requests);
    if let Some(trigger) = trigger_auto_delivery {
        for interest in &mut draft.interests {
            interest.trigger_auto_delivery.get_or_insert(trigger);
        }
    }
    Ok(Shape::Single(Box::new(Item {
        draft: Some(draft),
        problems,
        raw,
    })))
}
