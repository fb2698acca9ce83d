//! Table-driven tests of the mapping language: checking documents (problem paths into the
//! document) and applying them (native output, problem paths into the body).

use serde_json::{Value, json};

use super::{MAX_PROBLEMS, MappingDocument, transform};

/// The (path, code) pairs of a document's problems; empty when it is valid.
fn document_problems(document: &Value) -> Vec<(String, &'static str)> {
    match MappingDocument::parse(document) {
        Ok(_) => Vec::new(),
        Err(problems) => problems
            .list
            .into_iter()
            .map(|p| (p.path, p.code))
            .collect(),
    }
}

/// Applies `document` (which must be valid) to `body`: the native body, or the (path,
/// code) pairs of the problems.
fn apply(document: &Value, body: &Value) -> Result<Value, Vec<(String, &'static str)>> {
    let parsed = MappingDocument::parse(document)
        .unwrap_or_else(|p| panic!("test document {document} is invalid: {:?}", p.list));
    transform(&parsed, body).map_err(|problems| {
        problems
            .list
            .into_iter()
            .map(|p| (p.path, p.code))
            .collect()
    })
}

fn fields(fields: Value) -> Value {
    json!({ "fields": fields })
}

#[test]
fn valid_documents_pass_the_check() {
    let cases = [
        // The example of DESIGN.md section 9.
        json!({"items": "/contacts", "fields": {
            "externalId": {"from": "/id"},
            "firstName": {"from": "/name", "split": " ", "part": 0},
            "email": {"from": "/mail", "transform": ["trim", "lowercase"]},
            "phone": {"from": "/tel", "transform": ["digits"]},
            "consentStatus": {"from": "/optin", "map": {"true": "granted", "false": "denied"}},
            "productSlug": {"const": "solar"},
            "fieldValues.roof": {"from": "/details/roof", "default": "unknown"}}}),
        fields(json!({"lastName": {"template": "{/a} {{x}} {/b~1c}"}})),
        fields(json!({"routingReady": {"const": "yes"}})),
        fields(
            json!({"triggerAutoDelivery": {"from": "/auto", "map": {"J": true, "N": 0}, "default": false}}),
        ),
        fields(json!({"capture.metadata.campaign": {"from": ""}})),
        fields(json!({"fieldValues.a/b~c": {"const": 12}})),
        fields(json!({"city": {"from": "/c", "map": {"n/a": null}}})),
        json!({"items": "", "fields": {"email": {"from": ""}}}),
    ];
    for document in cases {
        assert_eq!(document_problems(&document), vec![], "{document}");
    }
}

#[test]
fn every_problem_of_a_document_has_its_path() {
    let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (json!([]), vec![("", "invalid_type")]),
        (json!({}), vec![("/fields", "required")]),
        (json!({"fields": {}}), vec![("/fields", "empty")]),
        (json!({"fields": []}), vec![("/fields", "invalid_type")]),
        (
            json!({"item": "/x", "fields": {"email": {"from": "/e"}}}),
            vec![("/item", "unknown_key")],
        ),
        (
            json!({"items": "contacts", "fields": {"email": {"from": "/e"}}}),
            vec![("/items", "invalid_pointer")],
        ),
        (
            json!({"items": 3, "fields": {"email": {"from": "/e"}}}),
            vec![("/items", "invalid_type")],
        ),
        (
            fields(json!({"mail": {"from": "/e"}})),
            vec![("/fields/mail", "unknown_target")],
        ),
        (
            fields(json!({"fieldValues.": {"from": "/e"}})),
            vec![("/fields/fieldValues.", "unknown_target")],
        ),
        (
            fields(
                json!({"capture.metadata.": {"from": "/e"}, "capture.capturedAt": {"from": "/t"}}),
            ),
            vec![
                ("/fields/capture.metadata.", "unknown_target"),
                ("/fields/capture.capturedAt", "unknown_target"),
            ],
        ),
        (
            fields(json!({"a/b": {"from": "/e"}})),
            vec![("/fields/a~1b", "unknown_target")],
        ),
        (
            fields(json!({"email": "/e"})),
            vec![("/fields/email", "invalid_type")],
        ),
        (
            fields(json!({"email": {}})),
            vec![("/fields/email", "missing_source")],
        ),
        (
            fields(json!({"email": {"from": "/e", "const": "x", "template": "{/a}"}})),
            vec![
                ("/fields/email/const", "conflicting_source"),
                ("/fields/email/template", "conflicting_source"),
            ],
        ),
        (
            fields(json!({"email": {"from": "e"}})),
            vec![("/fields/email/from", "invalid_pointer")],
        ),
        (
            fields(json!({"email": {"from": "/a~2"}})),
            vec![("/fields/email/from", "invalid_pointer")],
        ),
        (
            fields(json!({"email": {"from": 1}})),
            vec![("/fields/email/from", "invalid_type")],
        ),
        (
            fields(json!({"email": {"from": "/e", "transform": ["trim", "lower", 3]}})),
            vec![
                ("/fields/email/transform/1", "unknown_transform"),
                ("/fields/email/transform/2", "unknown_transform"),
            ],
        ),
        (
            fields(json!({"email": {"from": "/e", "transform": "trim"}})),
            vec![("/fields/email/transform", "invalid_type")],
        ),
        (
            fields(json!({"firstName": {"from": "/n", "part": 0}})),
            vec![("/fields/firstName/part", "part_without_split")],
        ),
        (
            fields(json!({"firstName": {"from": "/n", "split": " "}})),
            vec![("/fields/firstName/split", "split_without_part")],
        ),
        (
            fields(json!({"firstName": {"from": "/n", "split": "", "part": 0}})),
            vec![("/fields/firstName/split", "invalid_type")],
        ),
        (
            fields(json!({"firstName": {"from": "/n", "split": " ", "part": "1"}})),
            vec![("/fields/firstName/part", "invalid_type")],
        ),
        (
            fields(json!({"firstName": {"from": "/n", "split": " ", "part": 1.5}})),
            vec![("/fields/firstName/part", "invalid_type")],
        ),
        (
            fields(json!({"firstName": {"from": "/n", "frm": "/x"}})),
            vec![("/fields/firstName/frm", "unknown_key")],
        ),
        (
            fields(json!({"firstName": {"const": "A", "transform": ["trim"]}})),
            vec![("/fields/firstName/transform", "not_applicable")],
        ),
        (
            fields(json!({"firstName": {"const": null}})),
            vec![("/fields/firstName/const", "invalid_value")],
        ),
        (
            fields(json!({"firstName": {"const": ""}})),
            vec![("/fields/firstName/const", "invalid_value")],
        ),
        (
            fields(json!({"firstName": {"const": {"a": 1}}})),
            vec![("/fields/firstName/const", "invalid_value")],
        ),
        (
            fields(json!({"routingReady": {"const": "maybe"}})),
            vec![("/fields/routingReady/const", "invalid_value")],
        ),
        (
            fields(json!({"routingReady": {"from": "/r", "default": 2}})),
            vec![("/fields/routingReady/default", "invalid_value")],
        ),
        (
            fields(json!({"city": {"from": "/c", "default": null}})),
            vec![("/fields/city/default", "invalid_value")],
        ),
        (
            fields(json!({"triggerAutoDelivery": {"from": "/t", "map": {"J": "ja", "N": false}}})),
            vec![("/fields/triggerAutoDelivery/map/J", "invalid_value")],
        ),
        (
            fields(json!({"city": {"from": "/c", "map": ["a"]}})),
            vec![("/fields/city/map", "invalid_type")],
        ),
        (
            fields(json!({"city": {"from": "/c", "map": {"a/b": ["x"]}}})),
            vec![("/fields/city/map/a~1b", "invalid_value")],
        ),
        (
            fields(json!({"city": {"template": "no placeholder"}})),
            vec![("/fields/city/template", "invalid_template")],
        ),
        (
            fields(json!({"city": {"template": "{/a"}})),
            vec![("/fields/city/template", "invalid_template")],
        ),
        (
            fields(json!({"city": {"template": "{a}"}})),
            vec![("/fields/city/template", "invalid_template")],
        ),
        (
            fields(json!({"city": {"template": "{/a} }"}})),
            vec![("/fields/city/template", "invalid_template")],
        ),
        (
            fields(json!({"city": {"template": 5}})),
            vec![("/fields/city/template", "invalid_type")],
        ),
        // Several problems in one document are all reported, in document order.
        (
            json!({"items": "x", "fields": {
                "email": {"from": "/e", "transform": ["lower"]},
                "nope": {"const": "a"},
                "phone": {"from": "/p", "part": 1}}}),
            vec![
                ("/items", "invalid_pointer"),
                ("/fields/email/transform/0", "unknown_transform"),
                ("/fields/nope", "unknown_target"),
                ("/fields/phone/part", "part_without_split"),
            ],
        ),
    ];
    for (document, expected) in cases {
        let expected: Vec<(String, &str)> = expected
            .into_iter()
            .map(|(path, code)| (path.to_string(), code))
            .collect();
        assert_eq!(document_problems(&document), expected, "{document}");
    }
}

#[test]
fn unknown_targets_get_a_suggestion() {
    let problems = MappingDocument::parse(&fields(json!({"first_name": {"from": "/f"}})))
        .unwrap_err()
        .list;
    assert!(
        problems[0].message.contains("did you mean 'firstName'"),
        "{}",
        problems[0].message
    );
}

#[test]
fn single_lead_rules() {
    let body = json!({
        "id": 42,
        "name": "  Ada   King Lovelace ",
        "first": "Ada", "last": "Lovelace",
        "mail": "  ADA@Example.COM ",
        "tel": "+49 (170) 123-4567",
        "optin": true,
        "ready": "Yes",
        "score": 1.5,
        "empty": "",
        "none": null,
        "nested": {"a/b": {"c~d": "deep"}},
        "list": ["zero", "one"],
        "addr": "Main Street 12",
        "email2": "ada@lovelace.org",
    });
    let cases: Vec<(Value, Value)> = vec![
        (
            json!({"externalId": {"from": "/id"}}),
            json!({"externalId": "42"}),
        ),
        (json!({"city": {"from": "/score"}}), json!({"city": "1.5"})),
        (
            json!({"consentStatus": {"from": "/optin"}}),
            json!({"consentStatus": "true"}),
        ),
        (json!({"city": {"from": "/missing"}}), json!({})),
        (json!({"city": {"from": "/none"}}), json!({})),
        (json!({"city": {"from": "/empty"}}), json!({})),
        (
            json!({"city": {"from": "/missing", "default": "Berlin"}}),
            json!({"city": "Berlin"}),
        ),
        (
            json!({"city": {"from": "/empty", "default": "Berlin"}}),
            json!({"city": "Berlin"}),
        ),
        (
            json!({"city": {"from": "/id", "default": "Berlin"}}),
            json!({"city": "42"}),
        ),
        (
            json!({"city": {"from": "/nested/a~1b/c~0d"}}),
            json!({"city": "deep"}),
        ),
        (json!({"city": {"from": "/list/1"}}), json!({"city": "one"})),
        (
            json!({"productSlug": {"const": "solar"}}),
            json!({"productSlug": "solar"}),
        ),
        (
            json!({"productId": {"const": 7}}),
            json!({"productId": "7"}),
        ),
        (
            json!({"routingReady": {"const": "no"}}),
            json!({"routingReady": false}),
        ),
        (
            json!({"triggerAutoDelivery": {"const": 1}}),
            json!({"triggerAutoDelivery": true}),
        ),
        // Templates: missing placeholders are empty, all missing is absent.
        (
            json!({"lastName": {"template": "{/first} {/last}"}}),
            json!({"lastName": "Ada Lovelace"}),
        ),
        (
            json!({"lastName": {"template": "{/first} {/nope}", "transform": ["trim"]}}),
            json!({"lastName": "Ada"}),
        ),
        (
            json!({"lastName": {"template": "{/nope} {/none}"}}),
            json!({}),
        ),
        (
            json!({"lastName": {"template": "{/nope} {/none}", "default": "Unknown"}}),
            json!({"lastName": "Unknown"}),
        ),
        (
            json!({"lastName": {"template": "{{{/id}}}"}}),
            json!({"lastName": "{42}"}),
        ),
        // Split and part: runs of white space, from the end, out of range.
        (
            json!({"firstName": {"from": "/name", "split": " ", "part": 0}}),
            json!({"firstName": "Ada"}),
        ),
        (
            json!({"lastName": {"from": "/name", "split": " ", "part": -1}}),
            json!({"lastName": "Lovelace"}),
        ),
        (
            json!({"lastName": {"from": "/name", "split": " ", "part": 1}}),
            json!({"lastName": "King"}),
        ),
        (
            json!({"lastName": {"from": "/name", "split": " ", "part": 3}}),
            json!({}),
        ),
        (
            json!({"lastName": {"from": "/name", "split": " ", "part": -4, "default": "X"}}),
            json!({"lastName": "X"}),
        ),
        (
            json!({"city": {"from": "/email2", "split": "@", "part": 1}}),
            json!({"city": "lovelace.org"}),
        ),
        (
            json!({"houseNumber": {"from": "/addr", "split": " ", "part": -1}}),
            json!({"houseNumber": "12"}),
        ),
        // Transforms run in order.
        (
            json!({"email": {"from": "/mail", "transform": ["trim", "lowercase"]}}),
            json!({"email": "ada@example.com"}),
        ),
        (
            json!({"email": {"from": "/mail", "transform": ["uppercase", "trim"]}}),
            json!({"email": "ADA@EXAMPLE.COM"}),
        ),
        (
            json!({"phone": {"from": "/tel", "transform": ["digits"]}}),
            json!({"phone": "491701234567"}),
        ),
        (
            json!({"phone": {"from": "/first", "transform": ["digits"], "default": "none"}}),
            json!({"phone": "none"}),
        ),
        // Map: after the transforms; unmapped values pass unchanged; null drops.
        (
            json!({"consentStatus": {"from": "/optin", "map": {"true": "granted"}}}),
            json!({"consentStatus": "granted"}),
        ),
        (
            json!({"consentStatus": {"from": "/first", "map": {"true": "granted"}}}),
            json!({"consentStatus": "Ada"}),
        ),
        (
            json!({"consentStatus": {"from": "/first", "transform": ["lowercase"], "map": {"ada": "granted"}}}),
            json!({"consentStatus": "granted"}),
        ),
        (
            json!({"consentStatus": {"from": "/first", "map": {"Ada": null}}}),
            json!({}),
        ),
        (
            json!({"consentStatus": {"from": "/first", "map": {"Ada": null}, "default": "unknown"}}),
            json!({"consentStatus": "unknown"}),
        ),
        (
            json!({"consentStatus": {"from": "/empty", "map": {"": "unknown"}}}),
            json!({"consentStatus": "unknown"}),
        ),
        // Booleans.
        (
            json!({"routingReady": {"from": "/ready"}}),
            json!({"routingReady": true}),
        ),
        (
            json!({"routingReady": {"from": "/optin"}}),
            json!({"routingReady": true}),
        ),
        (
            json!({"routingReady": {"from": "/first", "map": {"Ada": false}}}),
            json!({"routingReady": false}),
        ),
        (
            json!({"routingReady": {"from": "/missing", "default": "yes"}}),
            json!({"routingReady": true}),
        ),
        // Nested targets.
        (
            json!({"capture.metadata.campaign": {"const": "spring"}, "capture.metadata.ref": {"from": "/id"}}),
            json!({"capture": {"metadata": {"campaign": "spring", "ref": "42"}}}),
        ),
        (
            json!({"fieldValues.roof": {"const": "tile"}, "email": {"from": "/email2"}, "fieldValues.size": {"from": "/score"}}),
            json!({"fieldValues": {"roof": "tile", "size": "1.5"}, "email": "ada@lovelace.org"}),
        ),
    ];
    for (rules, expected) in cases {
        let document = fields(rules.clone());
        assert_eq!(apply(&document, &body), Ok(expected), "{rules}");
    }
}

#[test]
fn values_that_do_not_fit_are_problems_at_their_path() {
    let body = json!({"r": "maybe", "o": {"x": 1}, "a": [1], "n": 2, "first": "A"});
    let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (
            json!({"routingReady": {"from": "/r"}}),
            vec![("/r", "not_a_boolean")],
        ),
        (
            json!({"routingReady": {"from": "/n"}}),
            vec![("/n", "not_a_boolean")],
        ),
        (
            json!({"routingReady": {"template": "{/first}"}}),
            vec![("", "not_a_boolean")],
        ),
        (
            json!({"city": {"from": "/o"}}),
            vec![("/o", "not_a_scalar")],
        ),
        (
            json!({"city": {"from": "/a"}}),
            vec![("/a", "not_a_scalar")],
        ),
        (
            json!({"city": {"template": "{/first} {/o}"}}),
            vec![("/o", "not_a_scalar")],
        ),
        (
            json!({"city": {"from": "/o"}, "routingReady": {"from": "/r"}, "email": {"from": "/first"}}),
            vec![("/o", "not_a_scalar"), ("/r", "not_a_boolean")],
        ),
    ];
    for (rules, expected) in cases {
        let expected: Vec<(String, &str)> = expected
            .into_iter()
            .map(|(p, c)| (p.to_string(), c))
            .collect();
        assert_eq!(
            apply(&fields(rules.clone()), &body),
            Err(expected),
            "{rules}"
        );
    }
}

#[test]
fn a_body_that_is_not_a_container_is_refused() {
    let document = fields(json!({"email": {"from": ""}}));
    for body in [json!("ada@example.com"), json!(3), json!(null), json!(true)] {
        assert_eq!(
            apply(&document, &body),
            Err(vec![("".to_string(), "invalid_type")]),
            "{body}"
        );
    }
}

#[test]
fn items_turn_an_array_into_a_batch_with_relative_pointers() {
    let document = json!({"items": "/data/contacts", "fields": {
        "externalId": {"from": "/id"},
        "firstName": {"from": "/name", "split": " ", "part": 0},
        "lastName": {"from": "/name", "split": " ", "part": -1},
        "consentStatus": {"from": "/optin", "map": {"true": "granted", "false": "denied"}},
        "routingReady": {"from": "/ready", "default": true},
        "productSlug": {"const": "solar"},
        "fieldValues.roof": {"template": "{/roof/kind}-{/roof/size}"}}});
    let body = json!({"data": {"contacts": [
        {"id": "a1", "name": "Ada Lovelace", "optin": true, "roof": {"kind": "tile", "size": 40}},
        {"id": "a2", "name": "Grace Hopper", "optin": false, "ready": "no"},
    ]}});
    assert_eq!(
        apply(&document, &body),
        Ok(json!({"leads": [
            {"externalId": "a1", "firstName": "Ada", "lastName": "Lovelace",
             "consentStatus": "granted", "routingReady": true, "productSlug": "solar",
             "fieldValues": {"roof": "tile-40"}},
            {"externalId": "a2", "firstName": "Grace", "lastName": "Hopper",
             "consentStatus": "denied", "routingReady": false, "productSlug": "solar"},
        ]}))
    );

    // Problems carry the index of their item.
    let bad = json!({"data": {"contacts": [
        {"name": "A B", "ready": "yes"},
        {"name": {"first": "C"}, "ready": "perhaps"},
        {"name": "D E", "roof": {"kind": ["x"]}},
    ]}});
    assert_eq!(
        apply(&document, &bad),
        Err(vec![
            ("/data/contacts/1/name".to_string(), "not_a_scalar"),
            ("/data/contacts/1/name".to_string(), "not_a_scalar"),
            ("/data/contacts/1/ready".to_string(), "not_a_boolean"),
            ("/data/contacts/2/roof/kind".to_string(), "not_a_scalar"),
        ])
    );

    // An empty array is a batch of none (native validation refuses it); a missing or
    // non-array value at `items` is a mapping problem.
    assert_eq!(
        apply(&document, &json!({"data": {"contacts": []}})),
        Ok(json!({"leads": []}))
    );
    for body in [
        json!({"data": {}}),
        json!({"data": {"contacts": {"id": 1}}}),
        json!([]),
    ] {
        assert_eq!(
            apply(&document, &body),
            Err(vec![("/data/contacts".to_string(), "not_an_array")]),
            "{body}"
        );
    }
}

#[test]
fn items_of_scalars_map_with_the_empty_pointer() {
    let document = json!({"items": "", "fields": {
        "email": {"from": "", "transform": ["lowercase"]},
        "firstName": {"const": "Unknown"}}});
    assert_eq!(
        apply(&document, &json!(["A@X.ORG", "b@y.org"])),
        Ok(json!({"leads": [
            {"email": "a@x.org", "firstName": "Unknown"},
            {"email": "b@y.org", "firstName": "Unknown"}]}))
    );
    // The path of a problem in the root array starts with the index.
    let bad = json!({"items": "", "fields": {"routingReady": {"from": ""}}});
    assert_eq!(
        apply(&bad, &json!(["yes", "maybe"])),
        Err(vec![("/1".to_string(), "not_a_boolean")])
    );
}

#[test]
fn problems_are_capped() {
    let document = json!({"items": "/c", "fields": {"routingReady": {"from": "/r"}}});
    let body = json!({"c": (0..250).map(|_| json!({"r": "?"})).collect::<Vec<_>>()});
    let parsed = MappingDocument::parse(&document).unwrap();
    let problems = transform(&parsed, &body).unwrap_err();
    assert_eq!(problems.list.len(), MAX_PROBLEMS);
    assert_eq!(problems.total(), 250);
    assert_eq!(problems.list[99].path, "/c/99/r");
}

#[test]
fn stored_documents_parse_and_broken_ones_say_why() {
    let good = r#"{"fields": {"email": {"from": "/e"}}}"#;
    assert!(MappingDocument::from_stored(good).is_ok());
    let why = MappingDocument::from_stored(r#"{"fields": {"mail": {"from": "/e"}}}"#).unwrap_err();
    assert!(why.starts_with("/fields/mail: unknown target"), "{why}");
    assert!(
        MappingDocument::from_stored("{")
            .unwrap_err()
            .contains("not valid JSON")
    );
}
