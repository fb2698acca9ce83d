//! Validation of a native Lead and its interests, in two steps.
//!
//! [`lead`] checks one Lead object without the database: required names, `externalId`
//! length, the type of every field, no unknown properties in `capture` or in an interest,
//! and a flat capture field that disagrees with the `capture` object. It keeps unknown Lead
//! properties as additional properties and leaves the interests as [`InterestDraft`]s.
//! [`complete`] then resolves each interest's product in the source's workspace and checks
//! the product's fields. Every problem is collected, none stops the others from being
//! found. Whole-body rules (which shape, batch size) belong to `shape`.

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::catalog::Catalog;
use super::model::{Capture, Interest, Lead, LeadFields};
use super::problem::{Problem, child, index, type_name};
use leadrelay_rules::fields::FIELD_NAMES;

/// The longest `externalId` (SPEC.md section 8), counted in characters.
pub const EXTERNAL_ID_MAX_CHARS: usize = 128;

/// A Lead after the first step: its own fields are final, its interests still name their
/// products by slug or id, unresolved (resolving them needs the database, which this step
/// does not touch).
#[derive(Debug, Clone, Default)]
pub struct LeadDraft {
    pub fields: LeadFields,
    pub interests: Vec<InterestDraft>,
    /// The accepted ping this lead is the post of (`pingId`, DESIGN.md section 14).
    pub ping_id: Option<String>,
    /// Additional properties that look like a misspelt Lead field ([`misspelt`]): kept,
    /// and named in the answer's `warnings`.
    pub warnings: Vec<Problem>,
}

/// An interest whose product is not resolved yet.
#[derive(Debug, Clone, PartialEq)]
pub struct InterestDraft {
    /// Pointer of the object that holds the interest's fields: the interest object, or the
    /// Lead itself for the interest shortcut fields.
    pub path: String,
    pub product_slug: Option<String>,
    pub product_id: Option<String>,
    pub routing_ready: Option<bool>,
    pub trigger_auto_delivery: Option<bool>,
    pub field_values: Map<String, Value>,
}

impl InterestDraft {
    /// The pointer that names this interest's product (for problems about the product).
    fn product_path(&self) -> String {
        if self.product_slug.is_some() {
            child(&self.path, "productSlug")
        } else {
            child(&self.path, "productId")
        }
    }
}

/// The interest shortcut fields of a Lead, gathered before deciding whether they form an
/// interest.
#[derive(Default)]
struct Shortcut {
    product_slug: Option<String>,
    product_id: Option<String>,
    routing_ready: Option<bool>,
    trigger_auto_delivery: Option<bool>,
    field_values: Option<Map<String, Value>>,
}

/// Checks one Lead object found at `base` (a JSON pointer, "" for the whole body).
pub fn lead(map: Map<String, Value>, base: &str, problems: &mut Vec<Problem>) -> LeadDraft {
    let mut lead = LeadFields::default();
    let mut first_name = None;
    let mut last_name = None;
    let mut flat = Capture::default();
    let mut grouped: Option<Capture> = None;
    let mut shortcut = Shortcut::default();
    let mut request = None;
    let mut requests = Vec::new();
    let mut ping_id = None;
    let mut warnings = Vec::new();

    for (key, value) in map {
        let p = &mut *problems;
        match key.as_str() {
            "externalId" => lead.external_id = string(value, base, &key, p),
            "pingId" => ping_id = string(value, base, &key, p),
            "firstName" => first_name = string(value, base, &key, p),
            "lastName" => last_name = string(value, base, &key, p),
            "email" => lead.person.email = string(value, base, &key, p),
            "phone" => lead.person.phone = string(value, base, &key, p),
            "street" => lead.person.street = string(value, base, &key, p),
            "houseNumber" => lead.person.house_number = string(value, base, &key, p),
            "postalCode" => lead.person.postal_code = string(value, base, &key, p),
            "city" => lead.person.city = string(value, base, &key, p),
            "country" => lead.person.country = string(value, base, &key, p),
            "consentStatus" => lead.consent.status = string(value, base, &key, p),
            "legalBasis" => lead.consent.legal_basis = string(value, base, &key, p),
            "consentCapturedAt" => lead.consent.captured_at = string(value, base, &key, p),
            "consentTextVersion" => lead.consent.text_version = string(value, base, &key, p),
            "capturedByExternalId" => flat.captured_by_external_id = string(value, base, &key, p),
            "capturedByName" => flat.captured_by_name = string(value, base, &key, p),
            "capturedByTeam" => flat.captured_by_team = string(value, base, &key, p),
            "capturedAt" => flat.captured_at = string(value, base, &key, p),
            "captureMethod" => flat.capture_method = string(value, base, &key, p),
            "capture" => {
                grouped = object(value, base, &key, p).map(|m| capture(m, &child(base, &key), p))
            }
            "request" => {
                request = object(value, base, &key, p).map(|m| interest(m, child(base, &key), p))
            }
            "requests" => requests = interest_list(value, base, &key, p),
            "productSlug" => shortcut.product_slug = string(value, base, &key, p),
            "productId" => shortcut.product_id = string(value, base, &key, p),
            "routingReady" => shortcut.routing_ready = boolean(value, base, &key, p),
            "triggerAutoDelivery" => shortcut.trigger_auto_delivery = boolean(value, base, &key, p),
            "fieldValues" => {
                shortcut.field_values =
                    object(value, base, &key, p).map(|m| field_values(m, &child(base, &key), p))
            }
            _ => {
                if let Some(field) = misspelt_kept(&key) {
                    warnings.push(Problem::new(
                        child(base, &key),
                        "unknown_property",
                        format!("not a Lead field; did you mean {field}?"),
                    ));
                }
                lead.additional.insert(key, value);
            }
        }
    }

    lead.person.first_name = required_name(first_name, base, "firstName", problems);
    lead.person.last_name = required_name(last_name, base, "lastName", problems);
    if let Some(external_id) = &lead.external_id {
        check_external_id(external_id, &child(base, "externalId"), problems);
    }
    lead.capture = merge_capture(flat, grouped, base, problems);

    let mut interests = Vec::new();
    if shortcut.product_slug.is_some() || shortcut.product_id.is_some() {
        interests.push(InterestDraft {
            path: base.to_string(),
            product_slug: shortcut.product_slug,
            product_id: shortcut.product_id,
            routing_ready: shortcut.routing_ready,
            trigger_auto_delivery: shortcut.trigger_auto_delivery,
            field_values: shortcut.field_values.unwrap_or_default(),
        });
    } else {
        let given: Vec<&str> = [
            ("fieldValues", shortcut.field_values.is_some()),
            ("routingReady", shortcut.routing_ready.is_some()),
            (
                "triggerAutoDelivery",
                shortcut.trigger_auto_delivery.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect();
        if !given.is_empty() {
            problems.push(Problem::new(
                child(base, "productSlug"),
                "required",
                format!(
                    "productSlug or productId is required with the interest fields {}",
                    given.join(", ")
                ),
            ));
        }
    }
    interests.extend(request);
    interests.extend(requests);
    LeadDraft {
        fields: lead,
        interests,
        ping_id,
        warnings,
    }
}

/// The Lead's properties that are not text fields of [`FIELD_NAMES`].
const STRUCTURE_NAMES: [&str; 9] = [
    "capture",
    "request",
    "requests",
    "productSlug",
    "productId",
    "routingReady",
    "triggerAutoDelivery",
    "fieldValues",
    "pingId",
];

/// The Lead field an additional property's name is most likely a misspelling of: the
/// nearest within two edits, letters compared without case (a transposition, `emial`,
/// counting as one; `postcode` is two from `postalCode`). Runs only for
/// additional properties, so a lead without one pays nothing.
pub fn misspelt(key: &str) -> Option<&'static str> {
    FIELD_NAMES
        .iter()
        .chain(&STRUCTURE_NAMES)
        .filter_map(|field| Some((edits_within_two(key.as_bytes(), field.as_bytes())?, *field)))
        .min_by_key(|(edits, _)| *edits)
        .map(|(_, field)| field)
}

/// The longest additional property name whose [`misspelt`] answer a thread keeps: longer
/// ones are never within two edits of a Lead field and are answered at once, and the bound
/// keeps what a client's made-up names can make a thread hold small.
const LONGEST_KEPT_NAME: usize = 64;

/// The most additional property names whose answers a thread keeps; past it they are
/// dropped and kept anew.
const MOST_KEPT_NAMES: usize = 1024;

thread_local! {
    /// [`misspelt`]'s answer for each additional property name this thread has seen.
    static MISSPELT: RefCell<HashMap<Box<str>, Option<&'static str>>> =
        RefCell::new(HashMap::new());
}

/// [`misspelt`], answered from what this thread kept for the same name. Partners send the
/// same few additional properties (`utmSource` and the like) with every lead, and comparing
/// one with every Lead field name took about 3% of the server's CPU per lead under plain
/// single-lead ingest with one such property (perf of `serve`, the HTTP workers' leaf
/// functions); its answer depends on the name alone.
fn misspelt_kept(key: &str) -> Option<&'static str> {
    if key.len() > LONGEST_KEPT_NAME {
        return misspelt(key);
    }
    MISSPELT.with(|kept| {
        let mut kept = kept.borrow_mut();
        if let Some(answer) = kept.get(key) {
            return *answer;
        }
        let answer = misspelt(key);
        if kept.len() >= MOST_KEPT_NAMES {
            kept.clear();
        }
        kept.insert(key.into(), answer);
        answer
    })
}

/// The optimal-string-alignment distance of `a` and `b` (insertions, deletions,
/// substitutions and swaps of neighbours, by byte, ASCII letters without case) when it is
/// at most two.
///
/// Runs for every additional property of every lead (`utm_source` and the like, which
/// partners send often) against each Lead field name, so it stops at the first row of the
/// table whose every cell is past two: no later row can come back under it (a swap reaches
/// back two rows, but the cell it comes from already bounds the row between).
fn edits_within_two(a: &[u8], b: &[u8]) -> Option<usize> {
    const MOST: u8 = 2;
    if a.len().abs_diff(b.len()) > usize::from(MOST) || a.len() > 64 || b.len() > 64 {
        return None;
    }
    // Three rows of the distance table, each at most 65 cells (the bound above), of at
    // most 128 edits each: on the stack, and only the used width set.
    let width = b.len() + 1;
    let mut before = [0u8; 65];
    let mut previous = [0u8; 65];
    let mut current = [0u8; 65];
    for (j, cell) in (0u8..).zip(&mut previous[..width]) {
        *cell = j;
    }
    for (i, row) in (1..=a.len()).zip(1u8..) {
        current[0] = row;
        let mut row_least = row;
        for j in 1..width {
            let cost = u8::from(!a[i - 1].eq_ignore_ascii_case(&b[j - 1]));
            let mut best = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1
                && j > 1
                && a[i - 1].eq_ignore_ascii_case(&b[j - 2])
                && a[i - 2].eq_ignore_ascii_case(&b[j - 1])
            {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
            row_least = row_least.min(best);
        }
        if row_least > MOST {
            return None;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    Some(usize::from(previous[b.len()])).filter(|edits| *edits <= usize::from(MOST))
}

/// Checks an `externalId` value: 1 to 128 characters. True when it is valid.
pub fn check_external_id(external_id: &str, path: &str, problems: &mut Vec<Problem>) -> bool {
    let length = external_id.chars().count();
    let problem = if length == 0 {
        Problem::new(path, "too_short", "externalId must not be empty")
    } else if length > EXTERNAL_ID_MAX_CHARS {
        Problem::new(
            path,
            "too_long",
            format!("externalId must be at most {EXTERNAL_ID_MAX_CHARS} characters, not {length}"),
        )
    } else {
        return true;
    };
    problems.push(problem);
    false
}

/// Checks one InterestRequest object found at `path`.
pub fn interest(
    map: Map<String, Value>,
    path: String,
    problems: &mut Vec<Problem>,
) -> InterestDraft {
    let mut draft = InterestDraft {
        path,
        product_slug: None,
        product_id: None,
        routing_ready: None,
        trigger_auto_delivery: None,
        field_values: Map::new(),
    };
    // A product named with the wrong type is reported as such, not also as missing.
    let mut product_mistyped = false;
    for (key, value) in map {
        let base = draft.path.as_str();
        match key.as_str() {
            "productSlug" | "productId" => {
                let given = !value.is_null();
                let name = string(value, base, &key, problems);
                product_mistyped |= given && name.is_none();
                if key == "productSlug" {
                    draft.product_slug = name;
                } else {
                    draft.product_id = name;
                }
            }
            "routingReady" => draft.routing_ready = boolean(value, base, &key, problems),
            "triggerAutoDelivery" => {
                draft.trigger_auto_delivery = boolean(value, base, &key, problems)
            }
            "fieldValues" => {
                if let Some(m) = object(value, base, &key, problems) {
                    draft.field_values = field_values(m, &child(base, &key), problems);
                }
            }
            _ => problems.push(Problem::new(
                child(base, &key),
                "unknown_property",
                format!("an interest has no property '{key}'"),
            )),
        }
    }
    if draft.product_slug.is_none() && draft.product_id.is_none() && !product_mistyped {
        problems.push(Problem::new(
            child(&draft.path, "productSlug"),
            "required",
            "an interest names its product by productSlug or productId",
        ));
    }
    draft
}

/// Checks an array of interests (`requests`, `interests`) at `base`/`key`; null counts as
/// absent.
pub fn interest_list(
    value: Value,
    base: &str,
    key: &str,
    problems: &mut Vec<Problem>,
) -> Vec<InterestDraft> {
    let path = child(base, key);
    match value {
        Value::Null => Vec::new(),
        Value::Array(items) => {
            let mut drafts = Vec::with_capacity(items.len());
            for (position, item) in items.into_iter().enumerate() {
                let item_path = index(&path, position);
                match item {
                    Value::Object(m) => drafts.push(interest(m, item_path, problems)),
                    other => problems.push(Problem::new(
                        item_path,
                        "invalid_type",
                        format!("an interest must be an object, not {}", type_name(&other)),
                    )),
                }
            }
            drafts
        }
        other => {
            problems.push(Problem::new(
                path,
                "invalid_type",
                format!("must be an array of interests, not {}", type_name(&other)),
            ));
            Vec::new()
        }
    }
}

/// Resolves the interests' products and checks their fields. The lead is complete when no
/// problem was added; interests that name the same product twice with the same answers
/// count once.
pub fn complete(draft: LeadDraft, catalog: &Catalog, problems: &mut Vec<Problem>) -> Lead {
    let LeadDraft {
        fields,
        interests,
        ping_id,
        warnings: _,
    } = draft;
    let mut lead = Lead {
        fields,
        ping_id,
        interests: Vec::with_capacity(interests.len()),
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    for draft in interests {
        let Some(product) = resolve_product(&draft, catalog, problems) else {
            continue;
        };
        let fields_path = child(&draft.path, "fieldValues");
        for field in &product.fields {
            let value = draft.field_values.get(&field.name);
            let answered = value
                .and_then(Value::as_str)
                .filter(|text| !text.trim().is_empty());
            match (answered, &field.allowed_values) {
                (None, _) if field.required => problems.push(Problem::new(
                    child(&fields_path, &field.name),
                    "required",
                    format!(
                        "product '{}' requires the field '{}'",
                        product.slug, field.name
                    ),
                )),
                (Some(text), Some(allowed)) if !allowed.iter().any(|a| a == text) => {
                    problems.push(Problem::new(
                        child(&fields_path, &field.name),
                        "invalid_value",
                        format!(
                            "field '{}' of product '{}' must be one of: {}",
                            field.name,
                            product.slug,
                            allowed.join(", ")
                        ),
                    ))
                }
                _ => {}
            }
        }
        let product_path = draft.product_path();
        let interest = Interest {
            product_id: product.id.clone(),
            product_slug: product.slug.clone(),
            product_name: product.name.clone(),
            routing_ready: draft.routing_ready,
            trigger_auto_delivery: draft.trigger_auto_delivery.unwrap_or(false),
            field_values: draft.field_values,
        };
        match seen.get(&product.id) {
            Some(&earlier) if lead.interests[earlier] == interest => {}
            Some(_) => problems.push(Problem::new(
                product_path,
                "duplicate_product",
                format!(
                    "product '{}' is named by more than one interest with different answers",
                    product.slug
                ),
            )),
            None => {
                seen.insert(product.id.clone(), lead.interests.len());
                lead.interests.push(interest);
            }
        }
    }
    lead
}

/// The product an interest names, or `None` with the problem recorded.
fn resolve_product<'c>(
    draft: &InterestDraft,
    catalog: &'c Catalog,
    problems: &mut Vec<Problem>,
) -> Option<&'c crate::config::product::Product> {
    let by_slug = draft.product_slug.as_deref().map(|slug| {
        let found = catalog.by_slug(slug);
        if found.is_none() {
            problems.push(Problem::new(
                child(&draft.path, "productSlug"),
                "unknown_product",
                format!("no product with slug '{slug}' in this workspace"),
            ));
        }
        found
    });
    let by_id = draft.product_id.as_deref().map(|id| {
        let found = catalog.by_id(id);
        if found.is_none() {
            problems.push(Problem::new(
                child(&draft.path, "productId"),
                "unknown_product",
                format!("no product with id '{id}' in this workspace"),
            ));
        }
        found
    });
    match (by_slug, by_id) {
        (Some(Some(a)), Some(Some(b))) if a.id != b.id => {
            problems.push(Problem::new(
                child(&draft.path, "productId"),
                "conflict",
                format!(
                    "productSlug '{}' and productId '{}' name different products",
                    a.slug, b.id
                ),
            ));
            None
        }
        (Some(Some(product)), None | Some(Some(_))) | (None, Some(Some(product))) => Some(product),
        _ => None,
    }
}

fn required_name(
    value: Option<String>,
    base: &str,
    key: &str,
    problems: &mut Vec<Problem>,
) -> String {
    match value {
        Some(name) if !name.is_empty() => name,
        Some(_) => {
            problems.push(Problem::new(
                child(base, key),
                "too_short",
                format!("{key} must not be empty"),
            ));
            String::new()
        }
        None => {
            // A value of the wrong type was reported already; do not report it twice.
            let path = child(base, key);
            if !problems.iter().any(|p| p.path == path) {
                problems.push(Problem::new(path, "required", format!("{key} is required")));
            }
            String::new()
        }
    }
}

/// Checks the `capture` object at `path`: only the capture fields and `metadata`.
fn capture(map: Map<String, Value>, path: &str, problems: &mut Vec<Problem>) -> Capture {
    let mut capture = Capture::default();
    for (key, value) in map {
        let p = &mut *problems;
        match key.as_str() {
            "capturedByExternalId" => {
                capture.captured_by_external_id = string(value, path, &key, p)
            }
            "capturedByName" => capture.captured_by_name = string(value, path, &key, p),
            "capturedByTeam" => capture.captured_by_team = string(value, path, &key, p),
            "capturedAt" => capture.captured_at = string(value, path, &key, p),
            "captureMethod" => capture.capture_method = string(value, path, &key, p),
            "metadata" => capture.metadata = object(value, path, &key, p),
            _ => p.push(Problem::new(
                child(path, &key),
                "unknown_property",
                format!("capture has no property '{key}'"),
            )),
        }
    }
    capture
}

/// Merges the flat capture fields with the `capture` object; a field given in both with
/// different values is a conflict.
fn merge_capture(
    flat: Capture,
    grouped: Option<Capture>,
    base: &str,
    problems: &mut Vec<Problem>,
) -> Capture {
    let Some(grouped) = grouped else {
        return flat;
    };
    let capture_path = child(base, "capture");
    let mut pick = |key: &str, flat: Option<String>, grouped: Option<String>| match (flat, grouped)
    {
        (Some(a), Some(b)) if a != b => {
            problems.push(Problem::new(
                child(&capture_path, key),
                "conflict",
                format!("capture.{key} differs from the flat field {key}"),
            ));
            Some(a)
        }
        (a, b) => a.or(b),
    };
    Capture {
        captured_by_external_id: pick(
            "capturedByExternalId",
            flat.captured_by_external_id,
            grouped.captured_by_external_id,
        ),
        captured_by_name: pick(
            "capturedByName",
            flat.captured_by_name,
            grouped.captured_by_name,
        ),
        captured_by_team: pick(
            "capturedByTeam",
            flat.captured_by_team,
            grouped.captured_by_team,
        ),
        captured_at: pick("capturedAt", flat.captured_at, grouped.captured_at),
        capture_method: pick("captureMethod", flat.capture_method, grouped.capture_method),
        metadata: grouped.metadata,
    }
}

/// Checks `fieldValues` at `path`: every value a string (or null, "no answer").
pub(crate) fn field_values(
    map: Map<String, Value>,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Map<String, Value> {
    let mut values = Map::new();
    for (name, value) in map {
        match value {
            Value::String(_) | Value::Null => {
                values.insert(name, value);
            }
            other => problems.push(Problem::new(
                child(path, &name),
                "invalid_type",
                format!("a field value must be a string, not {}", type_name(&other)),
            )),
        }
    }
    values
}

/// A string field; null counts as absent, any other type is a problem.
pub fn string(value: Value, base: &str, key: &str, problems: &mut Vec<Problem>) -> Option<String> {
    match value {
        Value::String(text) => Some(text),
        Value::Null => None,
        other => {
            problems.push(Problem::new(
                child(base, key),
                "invalid_type",
                format!("{key} must be a string, not {}", type_name(&other)),
            ));
            None
        }
    }
}

/// A boolean field; null counts as absent.
pub fn boolean(value: Value, base: &str, key: &str, problems: &mut Vec<Problem>) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(flag),
        Value::Null => None,
        other => {
            problems.push(Problem::new(
                child(base, key),
                "invalid_type",
                format!("{key} must be a boolean, not {}", type_name(&other)),
            ));
            None
        }
    }
}

/// An object field; null counts as absent.
pub fn object(
    value: Value,
    base: &str,
    key: &str,
    problems: &mut Vec<Problem>,
) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        Value::Null => None,
        other => {
            problems.push(Problem::new(
                child(base, key),
                "invalid_type",
                format!("{key} must be an object, not {}", type_name(&other)),
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_two_edits_from_a_lead_field_is_taken_for_it() {
        for (key, field) in [
            ("emial", Some("email")),
            ("Email", Some("email")),
            ("e_mail", Some("email")),
            ("phoen", Some("phone")),
            ("postcode", Some("postalCode")),
            ("fristName", Some("firstName")),
            ("productslug", Some("productSlug")),
            ("utmSource", None),
            ("gclid", None),
            ("", None),
        ] {
            assert_eq!(misspelt(key), field, "{key}");
        }
        assert_eq!(edits_within_two(b"abc", b"abc"), Some(0));
        assert_eq!(edits_within_two(b"abcd", b"badc"), Some(2));
        assert_eq!(edits_within_two(b"abcdef", b"abc"), None);
    }

    #[test]
    fn a_kept_answer_is_the_answer_for_its_own_name() {
        let names = [
            "emial",
            "utmSource",
            "postcode",
            "gclid",
            "Email",
            "fristName",
            "",
        ];
        // Fresh, then kept, then again after more names than a thread keeps pushed them out.
        for _ in 0..2 {
            for name in names {
                assert_eq!(misspelt_kept(name), misspelt(name), "{name}");
            }
        }
        for n in 0..MOST_KEPT_NAMES + 10 {
            misspelt_kept(&format!("custom{n}"));
        }
        for name in names {
            assert_eq!(misspelt_kept(name), misspelt(name), "{name}");
        }
        let long = format!("emial{}", "x".repeat(LONGEST_KEPT_NAME));
        assert_eq!(misspelt_kept(&long), None);
        assert!(MISSPELT.with(|kept| !kept.borrow().contains_key(long.as_str())));
        assert_eq!(misspelt_kept("emial"), Some("email"));
        assert_eq!(misspelt_kept("utmSource"), None);
    }

    /// The whole table, no early stop: what the early stop must agree with.
    fn full_distance(a: &[u8], b: &[u8]) -> usize {
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(!a[i - 1].eq_ignore_ascii_case(&b[j - 1]));
                d[i][j] = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
                }
            }
        }
        d[a.len()][b.len()]
    }

    #[test]
    fn stopping_early_agrees_with_the_whole_table() {
        // Strings over three letters, so that swaps and near misses are common.
        let mut state = 0x2545_f491_u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        let word = |next: &mut dyn FnMut() -> u32| -> Vec<u8> {
            let len = (next() % 9) as usize;
            (0..len).map(|_| b"abc"[(next() % 3) as usize]).collect()
        };
        let mut within = 0;
        for _ in 0..20_000 {
            let (a, b) = (word(&mut next), word(&mut next));
            let expected = Some(full_distance(&a, &b)).filter(|d| *d <= 2);
            within += usize::from(expected.is_some());
            assert_eq!(edits_within_two(&a, &b), expected, "{a:?} {b:?}");
        }
        assert!(within > 1_000, "{within}");
    }
}
