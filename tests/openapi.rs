//! The OpenAPI document (`openapi.json`): it describes exactly the routes the server has,
//! every status SPEC.md names, and it is served by the running server.

use std::collections::BTreeSet;

use crate::util::{
    TestServer, WAIT, basic_setup, buyer, deliver, lead_request, lr, setup, simple_lead,
};
use serde_json::Value;

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn document() -> Value {
    serde_json::from_str(leadrelay::openapi::DOCUMENT).expect("openapi.json is valid JSON")
}

/// Every (METHOD, path) the document describes.
fn documented_operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut operations = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths is an object") {
        for method in METHODS {
            if item.get(*method).is_some() {
                operations.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    operations
}

/// Follows a local `$ref` (`#/components/...`), or panics naming the broken reference.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("non-local reference {reference}"));
            doc.pointer(pointer)
                .unwrap_or_else(|| panic!("reference {reference} resolves to nothing"))
        }
        None => value,
    }
}

fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    let operation = &doc["paths"][path][method];
    assert!(operation.is_object(), "{method} {path} is not documented");
    operation
}

#[test]
fn the_document_and_the_router_have_the_same_operations() {
    let doc = document();
    let documented = documented_operations(&doc);
    let routed: BTreeSet<(String, String)> = leadrelay::http::router::ROUTES
        .iter()
        .map(|route| (route.method.to_string(), route.pattern.to_string()))
        .collect();
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty(),
        "routes missing from openapi.json: {undocumented:?}"
    );
    assert!(
        unrouted.is_empty(),
        "operations in openapi.json the router does not know: {unrouted:?}"
    );
}

#[test]
fn every_status_the_spec_names_is_documented() {
    let doc = document();
    let spec: &[(&str, &str, &[u16])] = &[
        ("get", "/api/health", &[200, 429, 503]),
        (
            "post",
            "/api/webhooks/channels/{channelId}/sources/{sourceId}/leads",
            &[200, 201, 400, 401],
        ),
        (
            "post",
            "/api/webhooks/lead-tables/{tableId}/sources/{sourceId}/leads",
            &[201, 400, 401],
        ),
        (
            "post",
            "/api/webhooks/partner-confirmation",
            &[200, 400, 401, 403, 404, 409],
        ),
        (
            "post",
            "/api/webhooks/partner-payout-pending",
            &[200, 400, 401],
        ),
        ("post", "/api/webhooks/partner-payout", &[200, 400, 401]),
        (
            "post",
            "/api/webhooks/partner-cancellation",
            &[200, 400, 401],
        ),
        (
            "post",
            "/api/webhooks/supplier-cancellation-confirmation",
            &[200, 400, 401],
        ),
        ("get", "/metrics", &[200, 404]),
        ("get", "/api/openapi.json", &[200]),
    ];
    for (method, path, statuses) in spec {
        let responses = &operation(&doc, method, path)["responses"];
        for status in *statuses {
            assert!(
                responses.get(status.to_string()).is_some(),
                "{method} {path} does not document {status}"
            );
        }
        // The rate limit applies to every endpoint.
        assert!(
            responses.get("429").is_some(),
            "{method} {path} does not document 429"
        );
    }
}

#[test]
fn every_reference_resolves_and_operations_are_well_formed() {
    let doc = document();
    fn walk(doc: &Value, value: &Value, count: &mut usize) {
        match value {
            Value::Object(map) => {
                if map.contains_key("$ref") {
                    resolve(doc, value);
                    *count += 1;
                }
                map.values().for_each(|v| walk(doc, v, count));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(doc, v, count)),
            _ => {}
        }
    }
    let mut references = 0;
    walk(&doc, &doc, &mut references);
    assert!(references > 50, "only {references} references");

    let mut operation_ids = BTreeSet::new();
    for (method, path) in documented_operations(&doc) {
        let method = method.to_lowercase();
        let op = operation(&doc, &method, &path);
        let id = op["operationId"]
            .as_str()
            .expect("every operation has an id");
        assert!(
            operation_ids.insert(id.to_string()),
            "duplicate operationId {id}"
        );
        assert!(op["responses"].as_object().is_some_and(|r| !r.is_empty()));

        // Path parameters: declared exactly as the template names them, and required.
        let template: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect();
        let declared: BTreeSet<&str> = op["parameters"]
            .as_array()
            .map(|params| {
                params
                    .iter()
                    .map(|p| resolve(&doc, p))
                    .filter(|p| p["in"] == "path")
                    .inspect(|p| assert_eq!(p["required"], true, "{path}"))
                    .map(|p| p["name"].as_str().expect("parameters have names"))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(template, declared, "{method} {path}");
    }
}

#[test]
fn authentication_follows_the_spec() {
    let doc = document();
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["webhookSecret"]["type"], "apiKey");
    assert_eq!(schemes["webhookSecret"]["in"], "header");
    assert_eq!(schemes["webhookSecret"]["name"], "X-Service-Webhook-Secret");
    assert_eq!(schemes["bearerSecret"]["type"], "http");
    assert_eq!(schemes["bearerSecret"]["scheme"], "bearer");
    let optional_secret = serde_json::json!([{"webhookSecret": []}, {"bearerSecret": []}, {}]);
    let required_secret = serde_json::json!([{"webhookSecret": []}, {"bearerSecret": []}]);
    let public = serde_json::json!([]);
    for (method, path) in documented_operations(&doc) {
        let security = &operation(&doc, &method.to_lowercase(), &path)["security"];
        // A ping takes the source's auth, as ingest does.
        let expected = if path.ends_with("/leads") || path.starts_with("/api/ping/") {
            &optional_secret
        } else if path.starts_with("/api/webhooks/") {
            &required_secret
        } else {
            &public
        };
        assert_eq!(security, expected, "{method} {path}");
    }
}

#[test]
fn the_running_server_serves_the_document() {
    let server = TestServer::start();
    let reply = server.get("/api/openapi.json");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json, document());
    assert_eq!(reply.json["openapi"], "3.1.0");
    assert_eq!(reply.json["info"]["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn health_bodies_have_the_documented_fields() {
    let doc = document();
    let server = TestServer::start();
    let reply = server.get("/api/health");
    let schema = &doc["components"]["schemas"]["Health"];
    let documented: BTreeSet<&String> = schema["properties"].as_object().unwrap().keys().collect();
    let answered: BTreeSet<&String> = reply.json.as_object().unwrap().keys().collect();
    assert_eq!(documented, answered);
    let outbox = &schema["properties"]["outbox"]["properties"];
    let documented: BTreeSet<&String> = outbox.as_object().unwrap().keys().collect();
    let answered: BTreeSet<&String> = reply.json["outbox"].as_object().unwrap().keys().collect();
    assert_eq!(documented, answered);

    // A routing error has the documented error object.
    let error = server.get("/api/nothing").json;
    let required = doc["components"]["schemas"]["ErrorObject"]["required"]
        .as_array()
        .unwrap();
    for field in required {
        assert!(
            error["error"].get(field.as_str().unwrap()).is_some(),
            "{field}"
        );
    }
}

/// Checks one object of a real answer against a documented object schema (one level): every
/// required property is there and every property it has is documented.
fn assert_documented(doc: &Value, schema: &str, value: &Value) {
    let schema_value = &doc["components"]["schemas"][schema];
    let properties = schema_value["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{schema} has no properties"));
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("{schema}: not an object: {value}"));
    for required in schema_value["required"].as_array().into_iter().flatten() {
        let name = required.as_str().unwrap();
        assert!(
            object.contains_key(name),
            "{schema}: {name} missing in {value}"
        );
    }
    for key in object.keys() {
        assert!(
            properties.contains_key(key),
            "{schema}: {key} is not documented"
        );
    }
}

#[test]
fn ingest_answers_have_the_documented_fields() {
    let doc = document();
    let server = TestServer::start();
    basic_setup(&server);
    lr(
        &server,
        "source create --channel web --name Web --id s --no-secret",
    )
    .json();
    let path = "/api/webhooks/channels/web/sources/s/leads";
    let single = server.post_json(
        path,
        &serde_json::json!({"externalId": "a", "firstName": "A", "lastName": "B",
                            "email": "a@example.com", "productSlug": "solar"}),
    );
    assert_eq!(single.status, 201, "{}", single.text);
    assert_documented(&doc, "IngestSingleResponse", &single.json);
    assert_documented(&doc, "IngestResultItem", &single.json["item"]);
    assert_documented(&doc, "IngestFacts", &single.json["item"]["ingest"]);

    let batch = server.post_json(
        path,
        &serde_json::json!({"leads": [
            {"externalId": "b", "firstName": "A", "lastName": "B", "email": "a@example.com"},
            {"firstName": ""}
        ]}),
    );
    assert_eq!(batch.status, 201, "{}", batch.text);
    assert_documented(&doc, "BatchResponse", &batch.json);
    assert_documented(&doc, "BatchSummary", &batch.json["summary"]);
    let documented_item = doc["components"]["schemas"]["IngestResultItem"]["properties"]
        .as_object()
        .unwrap();
    for item in batch.json["items"].as_array().unwrap() {
        for key in item.as_object().unwrap().keys() {
            assert!(key == "index" || documented_item.contains_key(key), "{key}");
        }
    }
    assert_documented(
        &doc,
        "DuplicateMatch",
        &batch.json["items"][0]["ingest"]["duplicateMatch"],
    );
    assert_documented(
        &doc,
        "ValidationDetail",
        &batch.json["items"][1]["errors"][0],
    );
}

#[test]
fn the_delivered_event_has_the_documented_fields() {
    use crate::util::receiver::Receiver;

    let doc = document();
    let server = TestServer::start();
    let receiver = Receiver::start();
    setup(&server);
    buyer(&server.db.path, "b", &receiver.url("/hook"), Some("25"), []);
    let (_, request) = lead_request(&server, &simple_lead(1));
    deliver(&server.db.path, &request, "b", None);
    let event = receiver.wait_for_on("/hook", 1, WAIT)[0].json();
    assert_documented(&doc, "LeadDeliveredEvent", &event);
    for (part, schema) in [
        ("buyer", "buyer"),
        ("product", "product"),
        ("pricing", "pricing"),
    ] {
        let documented = &doc["components"]["schemas"]["LeadDeliveredEvent"]["properties"][schema];
        let keys: BTreeSet<&String> = documented["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        let sent: BTreeSet<&String> = event[part].as_object().unwrap().keys().collect();
        assert_eq!(keys, sent, "{part}");
    }
}

#[test]
fn lifecycle_answers_have_the_documented_fields() {
    let doc = document();
    let server = TestServer::start();
    let db = &server.db.path;
    let secret = "buyer-secret-for-the-openapi-test-0123456789";
    setup(db);
    buyer(
        db,
        "b",
        "http://127.0.0.1:9/hook",
        Some("25"),
        ["--secret", secret],
    );
    let (_, request) = lead_request(&server, &simple_lead(1));
    let transaction = deliver(db, &request, "b", None)["transactionId"].clone();

    let confirmed = server
        .post("/api/webhooks/partner-confirmation")
        .secret(secret)
        .json(&serde_json::json!({"transactionId": transaction, "status": "acknowledged"}))
        .send();
    assert_eq!(confirmed.status, 200, "{}", confirmed.text);
    assert_documented(&doc, "PartnerConfirmationResponse", &confirmed.json);
    assert_documented(&doc, "Transaction", &confirmed.json["item"]);

    let pending = server
        .post("/api/webhooks/partner-payout-pending")
        .bearer(secret)
        .json(&serde_json::json!({"transactionId": transaction}))
        .send();
    assert_eq!(pending.status, 200, "{}", pending.text);
    assert_documented(&doc, "TransactionMoveResponse", &pending.json);

    let refused = server
        .post("/api/webhooks/partner-confirmation")
        .secret(secret)
        .json(&serde_json::json!({"transactionId": transaction, "status": "rejected"}))
        .send();
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_documented(&doc, "PartnerResult", &refused.json);
    assert_eq!(refused.json["accepted"], false);
    assert_documented(&doc, "ErrorObject", &refused.json["error"]);
}
