//! Fuzz target: the partner-native mapping engine. An input that is a JSON array
//! `[document, body]` is a mapping document and a partner body; any other JSON input is a
//! body for each of a few fixed documents that use every part of the mapping language.
//! Parsing the document, transforming the body and validating the native result must never
//! panic, and a transformed body is always a JSON object.

#![no_main]

use std::sync::OnceLock;

use leadrelay::config::container::ContainerKind;
use leadrelay::ingest::catalog::Catalog;
use leadrelay::ingest::shape::{self, Shape};
use leadrelay::ingest::validate;
use leadrelay::mapping::document::MappingDocument;
use leadrelay::mapping::engine;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fn fixed_documents() -> &'static [MappingDocument] {
    static DOCUMENTS: OnceLock<Vec<MappingDocument>> = OnceLock::new();
    DOCUMENTS.get_or_init(|| {
        [
            json!({
                "items": "/contacts",
                "fields": {
                    "externalId": {"from": "/ref"},
                    "firstName": {"from": "/fullName", "split": " ", "part": 0},
                    "lastName": {"from": "/fullName", "split": " ", "part": -1},
                    "email": {"from": "/mail", "transform": ["trim", "lowercase"]},
                    "phone": {"from": "/tel", "transform": ["digits"]},
                    "street": {"template": "{/address/street} {/address/no}", "transform": ["trim"]},
                    "country": {"from": "/address/country", "transform": ["uppercase"], "default": "DE"},
                    "consentStatus": {"from": "/optIn", "map": {"true": "granted", "false": "denied"}},
                    "capture.metadata.campaign": {"from": "/utm/campaign"},
                    "productSlug": {"const": "solar"},
                    "routingReady": {"from": "/ready"},
                    "fieldValues.roof": {"from": "/details/roof", "default": "unknown"}
                }
            }),
            json!({
                "fields": {
                    "firstName": {"template": "{/first} {/~1odd/~0x}"},
                    "lastName": {"from": "/last", "split": ",", "part": 3},
                    "triggerAutoDelivery": {"from": "/auto", "map": {"yes": "true", "no": "false"}},
                    "productId": {"from": "/0/1"},
                    "fieldValues.size": {"const": 7}
                }
            }),
        ]
        .iter()
        .map(|d| MappingDocument::parse(d).expect("the fixed documents are valid"))
        .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    match input.as_array().map(Vec::as_slice) {
        Some([document, body]) => {
            if let Ok(document) = MappingDocument::parse(document) {
                apply(&document, body);
            }
        }
        _ => {
            for document in fixed_documents() {
                apply(document, &input);
            }
        }
    }
});

fn apply(document: &MappingDocument, body: &Value) {
    let Ok(native) = engine::transform(document, body) else {
        return;
    };
    assert!(native.is_object(), "a mapping gives a native body");
    let catalog = Catalog::default();
    let items = match shape::detect(native, None, ContainerKind::Channel) {
        Ok(Shape::Single(item)) => vec![*item],
        Ok(Shape::Batch(items)) => items,
        Err(_) => return,
    };
    for item in items {
        let mut problems = item.problems;
        if let Some(draft) = item.draft {
            let _ = validate::complete(draft, &catalog, &mut problems);
        }
    }
}
