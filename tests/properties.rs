//! Property tests: random JSON and mutated valid bodies fed to the ingest shape detection and
//! validation, to the mapping engine, and over HTTP to the real ingest and lifecycle
//! endpoints. Nothing may panic; every HTTP answer is a 2xx or a 4xx (never a 5xx or a
//! dropped connection), every 4xx carries its error code, and every validation problem
//! points at a place that exists in the body that was sent.
//!
//! Runs are deterministic (a fixed seed) so CI never flakes; `PROPTEST_CASES=N` runs more
//! cases, and `bench/fuzz.sh` explores without a seed through the cargo-fuzz targets.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{Map, Value, json};

use crate::util::{TestServer, basic_setup, buyer, lr, source, table_source};
use leadrelay::config::container::ContainerKind;
use leadrelay::ingest::catalog::Catalog;
use leadrelay::ingest::shape::{self, Shape};
use leadrelay::ingest::validate;
use leadrelay::mapping::document::{BOOLEAN_TARGETS, MappingDocument, TRANSFORMS, text_targets};
use leadrelay::mapping::engine;

/// Cases per property: 128 by default (a few seconds), `PROPTEST_CASES` for more.
fn runner(default_cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default_cases);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// Property names the ingest code knows, so random objects often look like leads.
const KNOWN_KEYS: &[&str] = &[
    "externalId",
    "firstName",
    "lastName",
    "email",
    "phone",
    "postalCode",
    "country",
    "consentStatus",
    "capturedAt",
    "captureMethod",
    "capture",
    "metadata",
    "request",
    "requests",
    "interests",
    "productSlug",
    "productId",
    "routingReady",
    "triggerAutoDelivery",
    "fieldValues",
    "person",
    "leads",
    "solar",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KNOWN_KEYS).prop_map(str::to_string),
        1 => "[a-zA-Z~/0-9 ]{0,6}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(
            &[
                "",
                " ",
                "solar",
                "ann@example.com",
                "+49 30 1234567",
                "granted",
                "\u{0}",
                "ü😀"
            ][..]
        )
        .prop_map(str::to_string),
        ".{0,16}",
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
}

/// Any JSON value, up to a few levels deep, with keys that ingest knows mixed in.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            btree_map(key(), inner, 0..8).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid native lead with an interest in `solar`.
fn valid_lead(n: u64) -> Value {
    json!({
        "externalId": format!("prop-{n}"),
        "firstName": "Ann",
        "lastName": "Lee",
        "email": format!("ann{n}@example.com"),
        "consentStatus": "granted",
        "capture": {"capturedAt": "2026-01-01T00:00:00Z", "metadata": {"page": "/x"}},
        "request": {"productSlug": "solar", "fieldValues": {"roof": "tile"}},
    })
}

/// A valid body of each shape: a Lead, a person wrapper, a batch.
fn valid_body() -> impl Strategy<Value = Value> {
    (any::<u64>(), 0..3u8).prop_map(|(n, shape)| match shape {
        0 => valid_lead(n),
        1 => json!({"person": valid_lead(n), "interests": [{"productSlug": "solar"}], "triggerAutoDelivery": false}),
        _ => json!({"leads": [valid_lead(n), valid_lead(n.wrapping_add(1))]}),
    })
}

/// Replaces, removes or adds one value somewhere in `body`, chosen by `path_choice`.
fn mutate(body: &mut Value, path_choice: &[usize], action: u8, replacement: Value, key: String) {
    // Walk down to an object or array first, then edit it through its pointer.
    let mut pointer = String::new();
    let mut at: &Value = body;
    for choice in path_choice {
        let next = match at {
            Value::Object(map) if !map.is_empty() => {
                let (key, child) = map.iter().nth(choice % map.len()).expect("in range");
                Some((key.replace('~', "~0").replace('/', "~1"), child))
            }
            Value::Array(items) if !items.is_empty() => {
                let index = choice % items.len();
                Some((index.to_string(), &items[index]))
            }
            _ => None,
        };
        match next {
            Some((segment, child)) if child.is_object() || child.is_array() => {
                pointer.push('/');
                pointer.push_str(&segment);
                at = child;
            }
            _ => break,
        }
    }
    let at = body
        .pointer_mut(&pointer)
        .expect("the pointer was just walked");
    match (at, action % 3) {
        (Value::Object(map), 0) if !map.is_empty() => {
            let key = map.keys().next().expect("not empty").clone();
            map.remove(&key);
        }
        (Value::Object(map), 1) => {
            map.insert(key, replacement);
        }
        (Value::Object(map), _) if !map.is_empty() => {
            let key = map.keys().next_back().expect("not empty").clone();
            map.insert(key, replacement);
        }
        (Value::Array(items), 0) if !items.is_empty() => {
            items.pop();
        }
        (Value::Array(items), _) => items.push(replacement),
        (other, _) => *other = replacement,
    }
}

fn mutated_body() -> impl Strategy<Value = Value> {
    (
        valid_body(),
        vec(any::<usize>(), 0..4),
        any::<u8>(),
        json_value(),
        key(),
    )
        .prop_map(|(mut body, path, action, replacement, key)| {
            mutate(&mut body, &path, action, replacement, key);
            body
        })
}

/// Whether the object or array that holds the place `pointer` names exists in `body`: a
/// problem names an existing value or a missing property of an existing object.
fn parent_exists(body: &Value, pointer: &str) -> bool {
    if pointer.is_empty() {
        return true;
    }
    let Some(cut) = pointer.rfind('/') else {
        return false;
    };
    match body.pointer(&pointer[..cut]) {
        Some(parent) => parent.is_object() || parent.is_array(),
        None => false,
    }
}

/// Runs shape detection and both validation steps on `body` as a `kind` source would, and
/// checks that every problem names a place in `body`.
fn detect_and_validate(body: &Value, kind: ContainerKind) -> Result<(), TestCaseError> {
    let catalog = Catalog::default();
    let mut all = Vec::new();
    match shape::detect(body.clone(), None, kind) {
        Err(problems) => {
            prop_assert!(!problems.is_empty(), "a refused body names a problem");
            all.extend(problems);
        }
        Ok(shape) => {
            let items = match shape {
                Shape::Single(item) => vec![*item],
                Shape::Batch(items) => {
                    prop_assert!((1..=shape::MAX_BATCH).contains(&items.len()));
                    items
                }
            };
            for item in items {
                let mut problems = item.problems;
                if let Some(draft) = item.draft {
                    let lead = validate::complete(draft, &catalog, &mut problems);
                    if problems.is_empty() {
                        let _ = leadrelay::ingest::quality::assess(&lead.fields);
                    }
                }
                all.extend(problems);
            }
        }
    }
    for problem in &all {
        prop_assert!(
            parent_exists(body, &problem.path),
            "problem {problem:?} names no place in {body}"
        );
        prop_assert!(!problem.message.is_empty());
    }
    Ok(())
}

/// Runs [`detect_and_validate`] on bodies from `bodies`, each as posted to a lead table or
/// to a channel.
fn detect_and_validate_any(bodies: impl Strategy<Value = Value>) {
    runner(512)
        .run(&(bodies, any::<bool>()), |(body, table)| {
            let kind = if table {
                ContainerKind::Table
            } else {
                ContainerKind::Channel
            };
            detect_and_validate(&body, kind)
        })
        .unwrap();
}

#[test]
fn random_json_never_panics_shape_detection_or_validation() {
    detect_and_validate_any(json_value());
}

#[test]
fn mutated_valid_bodies_never_panic_shape_detection_or_validation() {
    detect_and_validate_any(mutated_body());
}

/// A mapping rule built from the mapping language's own parts, with odd values mixed in.
fn mapping_rule() -> impl Strategy<Value = Value> {
    let pointer = prop_oneof![
        proptest::sample::select(
            &[
                "",
                "/",
                "/name",
                "/a/b",
                "/0",
                "/~1",
                "/~0x",
                "/~2",
                "x",
                "/contacts/0/mail"
            ][..]
        )
        .prop_map(str::to_string),
        "(/[a-z0-9~]{0,4}){0,3}",
    ];
    let template = prop_oneof![
        Just("{/first} {/last}".to_string()),
        Just("{".to_string()),
        Just("}{".to_string()),
        Just("{{/a}}".to_string()),
        "[a-z{}/ ]{0,12}",
    ];
    let source = prop_oneof![
        pointer.prop_map(|p| ("from", Value::String(p))),
        json_value().prop_map(|v| ("const", v)),
        template.prop_map(|t| ("template", Value::String(t))),
    ];
    let transforms = vec(
        prop_oneof![
            proptest::sample::select(TRANSFORMS).prop_map(|t| Value::String(t.to_string())),
            json_value(),
        ],
        0..4,
    );
    (
        source,
        proptest::option::of(json_value()),
        proptest::option::of(btree_map(text(), text(), 0..4)),
        proptest::option::of(text()),
        proptest::option::of(prop_oneof![
            any::<i64>().prop_map(Value::from),
            json_value()
        ]),
        proptest::option::of(transforms),
        proptest::option::of(key()),
    )
        .prop_map(|(source, default, map, split, part, transforms, extra)| {
            let mut rule = Map::new();
            rule.insert(source.0.to_string(), source.1);
            if let Some(default) = default {
                rule.insert("default".into(), default);
            }
            if let Some(map) = map {
                rule.insert(
                    "map".into(),
                    Value::Object(
                        map.into_iter()
                            .map(|(k, v)| (k, Value::String(v)))
                            .collect(),
                    ),
                );
            }
            if let Some(split) = split {
                rule.insert("split".into(), Value::String(split));
            }
            if let Some(part) = part {
                rule.insert("part".into(), part);
            }
            if let Some(transforms) = transforms {
                rule.insert("transform".into(), Value::Array(transforms));
            }
            if let Some(extra) = extra {
                rule.insert(extra, Value::Bool(true));
            }
            Value::Object(rule)
        })
}

fn mapping_target() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(text_targets().collect::<Vec<_>>()).prop_map(str::to_string),
        proptest::sample::select(BOOLEAN_TARGETS).prop_map(str::to_string),
        "[a-z]{0,5}".prop_map(|n| format!("fieldValues.{n}")),
        "[a-z]{0,5}".prop_map(|n| format!("capture.metadata.{n}")),
        "[a-zA-Z_.]{0,10}",
    ]
}

fn mapping_document() -> impl Strategy<Value = Value> {
    (
        btree_map(mapping_target(), mapping_rule(), 0..8),
        proptest::option::of(prop_oneof![
            Just(Value::String("/contacts".into())),
            Just(Value::String("".into())),
            json_value(),
        ]),
    )
        .prop_map(|(fields, items)| {
            let mut document = Map::new();
            document.insert("fields".into(), Value::Object(fields.into_iter().collect()));
            if let Some(items) = items {
                document.insert("items".into(), items);
            }
            Value::Object(document)
        })
}

/// A partner body for the mapping: random, or contacts with the names the rules use.
fn partner_body() -> impl Strategy<Value = Value> {
    let contact = btree_map(
        prop_oneof![
            proptest::sample::select(&["name", "first", "last", "mail", "a", "0", "/", "~"][..])
                .prop_map(str::to_string),
            key(),
        ],
        json_value(),
        0..6,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()))
    .boxed();
    prop_oneof![
        json_value(),
        vec(contact.clone(), 0..4).prop_map(|contacts| json!({"contacts": contacts})),
        contact,
    ]
}

/// Every problem of a mapping answer names a place in the document or the body.
fn mapping_never_panics(document: &Value, body: &Value) -> Result<(), TestCaseError> {
    match MappingDocument::parse(document) {
        Err(problems) => prop_assert!(!problems.is_empty(), "a refused document names a problem"),
        Ok(parsed) => match engine::transform(&parsed, body) {
            Err(problems) => prop_assert!(!problems.is_empty()),
            Ok(native) => {
                prop_assert!(
                    native.is_object(),
                    "a mapping gives a native body: {native}"
                );
                // The native body goes on to shape detection and validation, as on ingest.
                detect_and_validate(&native, ContainerKind::Channel)?;
            }
        },
    }
    Ok(())
}

#[test]
fn random_mapping_documents_and_bodies_never_panic_the_engine() {
    runner(512)
        .run(&(mapping_document(), partner_body()), |(document, body)| {
            mapping_never_panics(&document, &body)
        })
        .unwrap();
}

#[test]
fn random_json_as_a_mapping_document_is_refused_or_parsed() {
    runner(256)
        .run(&(json_value(), json_value()), |(document, body)| {
            mapping_never_panics(&document, &body)
        })
        .unwrap();
}

const BUYER_SECRET: &str = "prop-buyer-secret-0123456789abcdef";
const CHANNEL_PATH: &str = "/api/webhooks/channels/web/sources/prop/leads";
const TABLE_PATH: &str = "/api/webhooks/lead-tables/list/sources/tprop/leads";

/// A server with a channel and a table source (no secrets), product `solar` with a field
/// `roof`, and buyer `b` with a lifecycle secret.
fn property_server() -> TestServer {
    let server = TestServer::start();
    let db = &server.db.path;
    basic_setup(db);
    lr(
        &server,
        "product create --workspace ws --slug heat --name Heat --id heat --field \
         'size:required=small|large'",
    )
    .json();
    source(db, "web", "prop", "--no-secret");
    table_source(db, "list", "tprop", "--no-secret");
    let secret = format!("--secret {BUYER_SECRET}");
    buyer(db, "b", "http://127.0.0.1:9/unused", None, secret);
    server
}

/// Posts `body` (any bytes) and checks the answer: 2xx, or 4xx with an error code and, for
/// a validation failure, problems that name places in the body.
fn post_and_check(
    server: &TestServer,
    path: &str,
    body: Vec<u8>,
    secret: Option<&str>,
) -> Result<crate::util::Reply, TestCaseError> {
    post_and_check_pointers(server, path, body, secret, "validation_failed")
}

/// [`post_and_check`], where the details of errors with `pointing_code` must point into
/// the body sent (on a mapped source, `mapping_error` does; validation problems point into
/// the native body the mapping made).
fn post_and_check_pointers(
    server: &TestServer,
    path: &str,
    body: Vec<u8>,
    secret: Option<&str>,
    pointing_code: &str,
) -> Result<crate::util::Reply, TestCaseError> {
    let mut request = server
        .post(path)
        .header("Content-Type", "application/json")
        .body(body.clone());
    if let Some(secret) = secret {
        request = request.secret(secret);
    }
    let reply = request.send();
    prop_assert!(
        (200..300).contains(&reply.status) || (400..500).contains(&reply.status),
        "{path}: {} {}",
        reply.status,
        reply.text
    );
    if reply.status >= 400 {
        let code = &reply.json["error"]["code"];
        prop_assert!(code.is_string(), "a 4xx names its error: {}", reply.text);
        if code == pointing_code {
            let sent: Value = serde_json::from_slice(&body).expect("validated bodies are JSON");
            for detail in reply.json["error"]["details"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let pointer = detail["path"].as_str().unwrap_or("?");
                prop_assert!(
                    parent_exists(&sent, pointer),
                    "{path}: problem {detail} names no place in {sent}"
                );
            }
        }
    }
    Ok(reply)
}

#[test]
fn random_and_mutated_bodies_over_http_get_2xx_or_4xx() {
    let server = property_server();
    let bodies = prop_oneof![json_value(), mutated_body()];
    runner(128)
        .run(&(bodies, any::<bool>()), |(body, table)| {
            let path = if table { TABLE_PATH } else { CHANNEL_PATH };
            let bytes = serde_json::to_vec(&body).expect("a Value serialises");
            let reply = post_and_check(&server, path, bytes, None)?;
            if reply.status == 201 {
                // Created leads are readable (the answer was not a lie).
                let item = &reply.json["item"];
                let lead_id = if item.is_object() {
                    item["leadId"].clone()
                } else {
                    reply.json["items"]
                        .as_array()
                        .and_then(|items| items.iter().find(|i| i["status"] == "accepted"))
                        .map(|i| i["leadId"].clone())
                        .unwrap_or(Value::Null)
                };
                let lead_id = lead_id.as_str().expect("a created lead has an id");
                let shown = lr(&server, format!("lead show {lead_id}")).json();
                prop_assert_eq!(shown["id"].as_str(), Some(lead_id));
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn byte_level_mutations_over_http_get_2xx_or_4xx() {
    let server = property_server();
    let strategy = (
        valid_body(),
        vec((any::<prop::sample::Index>(), 0..4u8, any::<u8>()), 1..6),
    );
    runner(128)
        .run(&strategy, |(body, edits)| {
            let mut bytes = serde_json::to_vec(&body).expect("a Value serialises");
            for (at, action, byte) in edits {
                if bytes.is_empty() {
                    bytes.push(byte);
                    continue;
                }
                let at = at.index(bytes.len());
                match action {
                    0 => bytes[at] = byte,
                    1 => {
                        bytes.remove(at);
                    }
                    2 => bytes.insert(at, byte),
                    _ => bytes.truncate(at),
                }
            }
            post_and_check(&server, CHANNEL_PATH, bytes, None)?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn random_lifecycle_calls_over_http_get_2xx_or_4xx() {
    let server = property_server();
    let lead = server.post_json(
        CHANNEL_PATH,
        &json!({"firstName": "Ann", "lastName": "Lee", "email": "a@example.com", "productSlug": "solar"}),
    );
    assert_eq!(lead.status, 201, "{}", lead.text);
    let request_id = lead.json["item"]["requestIds"][0]
        .as_str()
        .unwrap()
        .to_string();
    let delivered = lr(
        &server,
        format!("deliver --request {request_id} --buyer b --price 20"),
    )
    .json();
    let transaction_id = delivered["transactionId"].as_str().unwrap().to_string();

    let field = prop_oneof![
        Just(Value::String(transaction_id.clone())),
        proptest::sample::select(&["acknowledged", "rejected", "paid", ""][..])
            .prop_map(|s| Value::String(s.into())),
        json_value(),
    ];
    let call = (
        btree_map(
            proptest::sample::select(
                &[
                    "transactionId",
                    "externalId",
                    "partnerExternalId",
                    "buyerAccountId",
                    "status",
                    "reason",
                    "buyerPrice",
                    "leadId",
                ][..],
            )
            .prop_map(str::to_string),
            field,
            0..6,
        ),
        proptest::sample::select(
            &[
                "/api/webhooks/partner-confirmation",
                "/api/webhooks/partner-payout-pending",
                "/api/webhooks/partner-payout",
                "/api/webhooks/partner-cancellation",
            ][..],
        ),
    );
    runner(128)
        .run(&call, |(fields, path)| {
            let body = Value::Object(fields.into_iter().collect());
            let bytes = serde_json::to_vec(&body).expect("a Value serialises");
            post_and_check(&server, path, bytes, Some(BUYER_SECRET))?;
            Ok(())
        })
        .unwrap();
    let check = lr(&server, "check").output();
    assert!(check.status.success(), "leadrelay check: {check:?}");
}

#[test]
fn random_partner_bodies_over_http_through_a_published_mapping_get_2xx_or_4xx() {
    let server = property_server();
    lr(
        &server,
        "source create --channel web --name mapped --id mapped --no-secret",
    )
    .json();
    let document = json!({"items": "/contacts", "fields": {
        "externalId": {"from": "/ref"},
        "firstName": {"from": "/name", "split": " ", "part": 0},
        "lastName": {"from": "/name", "split": " ", "part": -1},
        "email": {"from": "/mail", "transform": ["trim", "lowercase"]},
        "consentStatus": {"from": "/optIn", "map": {"true": "granted", "false": "denied"}},
        "routingReady": {"from": "/ready"},
        "productSlug": {"const": "solar"},
        "fieldValues.roof": {"from": "/roof", "default": "unknown"}}});
    let file = server.db.dir.path().join("mapping.json");
    std::fs::write(&file, document.to_string()).expect("the mapping file is written");
    let file = file.to_str().expect("a UTF-8 temp path");
    lr(&server, format!("mapping set mapped --file {file}")).json();
    lr(&server, "mapping publish mapped").json();

    let contact = btree_map(
        prop_oneof![
            proptest::sample::select(&["ref", "name", "mail", "optIn", "ready", "roof"][..])
                .prop_map(str::to_string),
            key(),
        ],
        prop_oneof![text().prop_map(Value::String), json_value()],
        0..7,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()));
    let body = prop_oneof![
        vec(contact, 0..5).prop_map(|contacts| json!({"contacts": contacts})),
        json_value(),
    ];
    let path = "/api/webhooks/channels/web/sources/mapped/leads";
    runner(128)
        .run(&body, |body| {
            let bytes = serde_json::to_vec(&body).expect("a Value serialises");
            let reply = post_and_check_pointers(&server, path, bytes, None, "mapping_error")?;
            if reply.status >= 400 {
                let code = reply.json["error"]["code"].as_str().unwrap_or("");
                prop_assert!(
                    ["mapping_error", "validation_failed"].contains(&code),
                    "{}",
                    reply.text
                );
            }
            Ok(())
        })
        .unwrap();
}
