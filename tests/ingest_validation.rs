//! Ingest validation (SPEC.md 2.1-2.4, 8; DESIGN.md section 2): every problem of a body is
//! reported at once, each with a JSON pointer and a code, and nothing is stored.

use serde_json::{Value, json};

use crate::ingest::{CHANNEL_PATH, jane, lead_count, person, server, with};
use crate::util::{TestServer, lr};

/// Posts `body` as a single lead and checks that the answer is 400 `validation_failed`
/// listing exactly the `expected` (path, code) pairs, each with a message.
fn check(server: &TestServer, body: &Value, expected: &[(&str, &str)]) {
    let reply = server.post_json(CHANNEL_PATH, body);
    assert_eq!(reply.status, 400, "{body}: {}", reply.text);
    let error = &reply.json["error"];
    assert_eq!(error["code"], "validation_failed", "{}", reply.text);
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    let mut found: Vec<(String, String)> = error["details"]
        .as_array()
        .unwrap_or_else(|| panic!("no details: {}", reply.text))
        .iter()
        .map(|d| {
            assert!(d["message"].as_str().is_some_and(|m| !m.is_empty()), "{d}");
            (
                d["path"].as_str().unwrap().to_string(),
                d["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    found.sort();
    let mut expected: Vec<(String, String)> = expected
        .iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect();
    expected.sort();
    assert_eq!(found, expected, "{body}");
}

const STRING_FIELDS: &[&str] = &[
    "externalId",
    "firstName",
    "lastName",
    "email",
    "phone",
    "street",
    "houseNumber",
    "postalCode",
    "city",
    "country",
    "consentStatus",
    "legalBasis",
    "consentCapturedAt",
    "consentTextVersion",
    "capturedByExternalId",
    "capturedByName",
    "capturedByTeam",
    "capturedAt",
    "captureMethod",
    "productSlug",
    "productId",
];

#[test]
fn the_type_of_every_field_is_checked() {
    let server = server();
    for field in STRING_FIELDS {
        for wrong in [json!(5), json!(true), json!(["a"]), json!({"a": "b"})] {
            let body = with(jane(), json!({ *field: wrong }));
            check(&server, &body, &[(&format!("/{field}"), "invalid_type")]);
        }
    }
    let product = json!({"productSlug": "solar"});
    for (field, wrong) in [
        ("routingReady", json!("yes")),
        ("triggerAutoDelivery", json!(1)),
        ("fieldValues", json!(["a"])),
        ("capture", json!("web")),
        ("request", json!([])),
        ("requests", json!({"productSlug": "solar"})),
    ] {
        let body = with(with(jane(), product.clone()), json!({ field: wrong }));
        check(&server, &body, &[(&format!("/{field}"), "invalid_type")]);
    }
    let cases = [
        (
            json!({"productSlug": "solar", "fieldValues": {"size": 5}}),
            "/fieldValues/size",
        ),
        (json!({"capture": {"metadata": "x"}}), "/capture/metadata"),
        (
            json!({"capture": {"capturedByName": 5}}),
            "/capture/capturedByName",
        ),
        (
            json!({"request": {"productSlug": 5}}),
            "/request/productSlug",
        ),
        (
            json!({"requests": [{"productSlug": "solar", "routingReady": "no"}]}),
            "/requests/0/routingReady",
        ),
        (
            json!({"requests": [{"productSlug": "solar", "fieldValues": {"a": 1}}]}),
            "/requests/0/fieldValues/a",
        ),
        (json!({"requests": ["solar"]}), "/requests/0"),
    ];
    for (fields, path) in cases {
        check(&server, &with(jane(), fields), &[(path, "invalid_type")]);
    }
    // Null is "not given" for optional fields.
    let nulls = json!({"email": null, "street": null, "capture": null, "request": null,
                       "requests": null, "fieldValues": null, "routingReady": null});
    let reply = server.post_json(CHANNEL_PATH, &with(jane(), nulls));
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(lead_count(&server, "landing"), 1);
}

#[test]
fn names_and_external_id_are_checked() {
    let server = server();
    let mut nameless = jane();
    nameless.as_object_mut().unwrap().remove("firstName");
    nameless.as_object_mut().unwrap().remove("lastName");
    check(
        &server,
        &nameless,
        &[("/firstName", "required"), ("/lastName", "required")],
    );
    check(
        &server,
        &with(jane(), json!({"firstName": null, "lastName": ""})),
        &[("/firstName", "required"), ("/lastName", "too_short")],
    );
    check(
        &server,
        &with(jane(), json!({"externalId": ""})),
        &[("/externalId", "too_short")],
    );
    check(
        &server,
        &with(jane(), json!({"externalId": "x".repeat(129)})),
        &[("/externalId", "too_long")],
    );
    // 128 characters is fine, also when they take more than one byte each.
    for id in ["x".repeat(128), "é".repeat(128)] {
        let reply = server.post_json(CHANNEL_PATH, &with(jane(), json!({"externalId": id})));
        assert_eq!(reply.status, 201, "{}", reply.text);
    }
    assert_eq!(lead_count(&server, "landing"), 2);
}

#[test]
fn capture_and_interests_allow_no_unknown_properties() {
    let server = server();
    check(
        &server,
        &with(
            jane(),
            json!({"capture": {"capturedByName": "Ann", "device": "ipad"}}),
        ),
        &[("/capture/device", "unknown_property")],
    );
    check(
        &server,
        &with(
            jane(),
            json!({
                "request": {"productSlug": "solar", "price": 5},
                "requests": [{"productSlug": "solar"}, {"productId": "heat-pump", "a/b": 1,
                              "fieldValues": {"size": "small"}}],
            }),
        ),
        &[
            ("/request/price", "unknown_property"),
            ("/requests/1/a~1b", "unknown_property"),
        ],
    );
    // Unknown properties on the Lead itself are kept (see the `ingest` module).
    let reply = server.post_json(CHANNEL_PATH, &with(jane(), json!({"anything": {"x": [1]}})));
    assert_eq!(reply.status, 201, "{}", reply.text);
}

#[test]
fn products_and_their_fields_are_checked() {
    let server = server();
    check(
        &server,
        &with(jane(), json!({"productSlug": "wind"})),
        &[("/productSlug", "unknown_product")],
    );
    check(
        &server,
        &with(jane(), json!({"request": {"productId": "nope"}})),
        &[("/request/productId", "unknown_product")],
    );
    // A product of another workspace does not exist here.
    lr(&server, "workspace create --name Other --id other").json();
    lr(
        &server,
        "product create --workspace other --slug wind --name Wind --id wind-other",
    )
    .json();
    check(
        &server,
        &with(
            jane(),
            json!({"requests": [{"productId": "wind-other"}, {"productSlug": "wind"}]}),
        ),
        &[
            ("/requests/0/productId", "unknown_product"),
            ("/requests/1/productSlug", "unknown_product"),
        ],
    );
    check(
        &server,
        &with(
            jane(),
            json!({"productSlug": "solar", "productId": "heat-pump",
                             "fieldValues": {"size": "small"}}),
        ),
        &[("/productId", "conflict")],
    );
    check(
        &server,
        &with(jane(), json!({"requests": [{"routingReady": true}]})),
        &[("/requests/0/productSlug", "required")],
    );
    check(
        &server,
        &with(
            jane(),
            json!({"fieldValues": {"size": "small"}, "routingReady": true}),
        ),
        &[("/productSlug", "required")],
    );
    check(
        &server,
        &with(jane(), json!({"productSlug": "heat"})),
        &[("/fieldValues/size", "required")],
    );
    check(
        &server,
        &with(
            jane(),
            json!({"request": {"productSlug": "heat",
                                         "fieldValues": {"size": " ", "notes": "x"}}}),
        ),
        &[("/request/fieldValues/size", "required")],
    );
    check(
        &server,
        &with(
            jane(),
            json!({"requests": [{"productSlug": "heat",
                                           "fieldValues": {"size": "huge"}}]}),
        ),
        &[("/requests/0/fieldValues/size", "invalid_value")],
    );
    check(
        &server,
        &with(
            jane(),
            json!({"productSlug": "heat", "fieldValues": {"size": "small"},
                   "request": {"productId": "heat-pump", "fieldValues": {"size": "large"}}}),
        ),
        &[("/request/productId", "duplicate_product")],
    );
    assert_eq!(lead_count(&server, "landing"), 0);
}

#[test]
fn a_capture_field_given_twice_must_agree() {
    let server = server();
    check(
        &server,
        &with(
            jane(),
            json!({"capturedByName": "Ann", "captureMethod": "web",
                   "capture": {"capturedByName": "Bob", "captureMethod": "web",
                               "metadata": {"form": "b"}}}),
        ),
        &[("/capture/capturedByName", "conflict")],
    );
    // Flat and grouped fields merge.
    let reply = server.post_json(
        CHANNEL_PATH,
        &with(
            jane(),
            json!({"capturedByName": "Ann", "captureMethod": "web",
                   "capture": {"capturedByTeam": "North", "captureMethod": "web",
                               "metadata": {"form": "b", "n": [1, 2]}}}),
        ),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let shown = crate::ingest::shown(&server, &reply);
    assert_eq!(
        shown["capture"],
        json!({"capturedByExternalId": null, "capturedByName": "Ann",
               "capturedByTeam": "North", "capturedAt": null, "captureMethod": "web",
               "metadata": {"form": "b", "n": [1, 2]}})
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let server = server();
    let body = json!({
        "externalId": "",
        "lastName": 7,
        "email": ["a"],
        "capture": {"x": 1, "capturedAt": "t"},
        "capturedAt": "u",
        "productSlug": "wind",
        "requests": [{"productSlug": "heat"}, {"foo": 1}],
        "request": {"productId": "heat-pump", "fieldValues": {"size": "tiny"}},
    });
    check(
        &server,
        &body,
        &[
            ("/externalId", "too_short"),
            ("/firstName", "required"),
            ("/lastName", "invalid_type"),
            ("/email", "invalid_type"),
            ("/capture/x", "unknown_property"),
            ("/capture/capturedAt", "conflict"),
            ("/productSlug", "unknown_product"),
            ("/requests/0/fieldValues/size", "required"),
            // `request` named heat-pump already, with other answers.
            ("/requests/0/productSlug", "duplicate_product"),
            ("/requests/1/foo", "unknown_property"),
            ("/requests/1/productSlug", "required"),
            ("/request/fieldValues/size", "invalid_value"),
        ],
    );
}

#[test]
fn person_wrapper_problems_name_their_place() {
    let server = server();
    check(
        &server,
        &json!({"person": with(person(1), json!({"firstName": 1})), "externalId": "other",
                "interests": [{"productSlug": "nope"}], "request": "solar", "extra": true,
                "triggerAutoDelivery": "yes"}),
        &[
            ("/person/firstName", "invalid_type"),
            ("/externalId", "conflict"),
            ("/interests/0/productSlug", "unknown_product"),
            ("/request", "invalid_type"),
            ("/extra", "unknown_property"),
            ("/triggerAutoDelivery", "invalid_type"),
        ],
    );
    check(
        &server,
        &json!({"person": "Jane"}),
        &[("/person", "invalid_type")],
    );
    check(
        &server,
        &json!({"person": person(1), "externalId": ""}),
        &[("/externalId", "too_short")],
    );
}

#[test]
fn invalid_json_is_400_invalid_json() {
    let server = server();
    for body in ["{", "{\"firstName\": }", "", "nul", "{\"a\":1} x"] {
        let reply = server
            .post(CHANNEL_PATH)
            .header("Content-Type", "application/json")
            .body(body)
            .send();
        assert_eq!(reply.status, 400, "{body:?}: {}", reply.text);
        assert_eq!(reply.json["error"]["code"], "invalid_json", "{body:?}");
        // The position is said once.
        let message = reply.json["error"]["message"].as_str().unwrap();
        assert_eq!(message.matches("line 1").count(), 1, "{message}");
    }
    assert_eq!(lead_count(&server, "landing"), 0);
}

/// A property two edits from a Lead field is still accepted as an additional property
/// (the Lead allows them), but the answer names it in `warnings`: single leads, each
/// batch item, an idempotent replay and a person wrapper; a lead without such a property
/// has no `warnings`.
#[test]
fn a_misspelt_field_is_kept_and_warned_about() {
    let server = server();
    let mut misspelt = json!({"externalId": "typo-1", "firstName": "Jane", "lastName": "Doe",
                              "emial": "jane@example.com", "utmSource": "ad"});
    let reply = server.post_json(CHANNEL_PATH, &misspelt);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let warning = json!([{"path": "/emial", "code": "unknown_property",
                          "message": "not a Lead field; did you mean email?"}]);
    assert_eq!(reply.json["item"]["warnings"], warning, "{}", reply.text);
    let lead = reply.json["item"]["leadId"].as_str().unwrap().to_string();
    let shown = lr(&server, format!("lead show {lead}")).json();
    assert_eq!(shown["additionalProperties"]["emial"], "jane@example.com");
    let replay = server.post_json(CHANNEL_PATH, &misspelt);
    assert_eq!(replay.json["item"]["status"], "idempotent_replay");
    assert_eq!(replay.json["item"]["warnings"], warning, "{}", replay.text);

    misspelt["externalId"] = json!("typo-2");
    let batch = json!({"leads": [jane(), misspelt, with(jane(), json!({"externalId": "j-3",
        "email": "j3@example.com", "fristName": "J", "firstName": "J"}))]});
    let reply = server.post_json(CHANNEL_PATH, &batch);
    assert!(reply.status == 200 || reply.status == 201, "{}", reply.text);
    let items = reply.json["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", reply.text));
    assert!(items[0].get("warnings").is_none(), "{}", reply.text);
    assert_eq!(items[1]["warnings"][0]["path"], "/leads/1/emial");
    assert_eq!(
        items[2]["warnings"][0]["message"],
        "not a Lead field; did you mean firstName?"
    );

    let wrapped = json!({"person": {"firstName": "P", "lastName": "W", "phoen": "1"}});
    let reply = server.post_json(CHANNEL_PATH, &wrapped);
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["item"]["warnings"][0]["path"], "/person/phoen");
}
