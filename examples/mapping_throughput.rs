//! Measures the mapping engine: how fast a published mapping turns partner bodies into
//! native ones. Run with `cargo run --release --example mapping_throughput`.
//!
//! It maps docs/ingest.md's partner batch (100 contacts, the largest batch ingest accepts) and
//! a single contact many times, parsing the stored document once per body as ingest does.

use std::time::Instant;

use leadrelay::mapping::{MappingDocument, transform};
use serde_json::{Value, json};

fn main() {
    let document = json!({"items": "/contacts", "fields": {
        "externalId": {"from": "/id"},
        "firstName": {"from": "/name", "split": " ", "part": 0},
        "lastName": {"from": "/name", "split": " ", "part": -1},
        "email": {"from": "/mail", "transform": ["trim", "lowercase"]},
        "phone": {"from": "/tel", "transform": ["digits"]},
        "consentStatus": {"from": "/optin", "map": {"true": "granted", "false": "denied"}},
        "routingReady": {"from": "/ready", "default": true},
        "productSlug": {"const": "solar"},
        "street": {"template": "{/address/street} {/address/no}", "transform": ["trim"]},
        "capture.metadata.campaign": {"from": "/utm/campaign"},
        "fieldValues.roof": {"from": "/details/roof", "default": "unknown"}}});
    let stored = document.to_string();
    let contact = |i: usize| {
        json!({"id": format!("c-{i}"), "name": "Ada King Lovelace", "mail": " ADA@Example.ORG ",
               "tel": "+49 170 1234567", "optin": i.is_multiple_of(2), "utm": {"campaign": "spring"},
               "address": {"street": "Main Street", "no": i}, "details": {"roof": "tile"}})
    };
    let batch = json!({"contacts": (0..100).map(contact).collect::<Vec<_>>()});
    let single_document = {
        let mut d = document.clone();
        d.as_object_mut().expect("an object").remove("items");
        d.to_string()
    };
    let single = contact(1);

    run("batch of 100 contacts", &stored, &batch, 2_000, 100);
    run("single contact", &single_document, &single, 200_000, 1);
    breakdown(&single_document, &single);
}

fn run(what: &str, stored: &str, body: &Value, rounds: usize, leads_per_body: usize) {
    // Warm up, and prove the mapping works on this body.
    let document = MappingDocument::from_stored(stored).expect("the benchmark document is valid");
    transform(&document, body).expect("the benchmark body fits");
    let started = Instant::now();
    for _ in 0..rounds {
        let document = MappingDocument::from_stored(stored).expect("checked above");
        std::hint::black_box(transform(&document, body).expect("checked above"));
    }
    let elapsed = started.elapsed();
    let per_body = elapsed / rounds as u32;
    let leads_per_second = (rounds * leads_per_body) as f64 / elapsed.as_secs_f64();
    println!(
        "{what}: {rounds} bodies in {elapsed:.2?}: {per_body:.2?} per body (document parse included), {leads_per_second:.0} leads/s"
    );
}
/// Where the time of one body goes: reading the stored text, checking the document, and
/// transforming the body.
fn breakdown(stored: &str, body: &Value) {
    let rounds = 100_000u32;
    let started = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(serde_json::from_str::<Value>(stored).expect("valid JSON"));
    }
    let json = started.elapsed() / rounds;
    let value: Value = serde_json::from_str(stored).expect("valid JSON");
    let started = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(MappingDocument::parse(&value).expect("a valid document"));
    }
    let check = started.elapsed() / rounds;
    let document = MappingDocument::parse(&value).expect("a valid document");
    let started = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(transform(&document, body).expect("the body fits"));
    }
    let mapped = started.elapsed() / rounds;
    println!(
        "single contact, per body: JSON of the document {json:.2?}, check {check:.2?}, transform {mapped:.2?}"
    );
}
