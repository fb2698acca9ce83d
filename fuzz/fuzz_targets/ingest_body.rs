//! Fuzz target: a request body, as bytes, through everything ingest does with it before the
//! database: JSON parsing, shape detection (Lead, person wrapper, batch) for a channel and
//! for a lead table, validation of every lead and the quality assessment. Nothing may
//! panic, and every validation problem must name a place in the body.

#![no_main]

use leadrelay::config::container::ContainerKind;
use leadrelay::ingest::catalog::Catalog;
use leadrelay::ingest::shape::{self, Shape};
use leadrelay::ingest::{quality, validate};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(body) = leadrelay::http::body::parse_json(data) else {
        return;
    };
    let raw = std::str::from_utf8(data).ok().map(str::to_string);
    for kind in [ContainerKind::Channel, ContainerKind::Table] {
        check(&body, raw.clone(), kind);
    }
});

fn check(body: &Value, raw: Option<String>, kind: ContainerKind) {
    let catalog = Catalog::default();
    let mut problems = Vec::new();
    match shape::detect(body.clone(), raw, kind) {
        Err(found) => {
            assert!(!found.is_empty(), "a refused body names a problem");
            problems.extend(found);
        }
        Ok(Shape::Single(item)) => problems.extend(validate_item(*item, &catalog)),
        Ok(Shape::Batch(items)) => {
            assert!((1..=shape::MAX_BATCH).contains(&items.len()));
            for item in items {
                problems.extend(validate_item(item, &catalog));
            }
        }
    }
    for problem in problems {
        assert!(
            parent_exists(body, &problem.path),
            "problem {problem:?} names no place in the body"
        );
    }
}

fn validate_item(
    item: shape::Item,
    catalog: &Catalog,
) -> Vec<leadrelay::ingest::problem::Problem> {
    let mut problems = item.problems;
    if let Some(draft) = item.draft {
        let lead = validate::complete(draft, catalog, &mut problems);
        let _ = quality::assess(&lead);
    }
    problems
}

/// Whether the object or array holding the place `pointer` names exists in `body`.
fn parent_exists(body: &Value, pointer: &str) -> bool {
    if pointer.is_empty() {
        return true;
    }
    match pointer.rfind('/') {
        Some(cut) => body
            .pointer(&pointer[..cut])
            .is_some_and(|parent| parent.is_object() || parent.is_array()),
        None => false,
    }
}
