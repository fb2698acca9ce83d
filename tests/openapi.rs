//! The OpenAPI document (`openapi.json`): it describes exactly the routes the server has,
//! every status SPEC.md names, and it is served by the running server.

use std::collections::BTreeSet;

use crate::util::{
    TestServer, WAIT, basic_setup, buyer, deliver, lead_request, lr, setup, simple_lead, source,
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
        "source create --channel web --name Web --id s --no-secret --result-detail full",
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

#[test]
fn return_answers_and_the_return_decided_event_have_the_documented_fields() {
    use crate::lifecycle::{CANCELLATION, Fixture, PAYOUT, secret_of};
    use serde_json::json;

    let doc = document();
    let f = Fixture::new();
    f.buyer("m", &["--return-review", "manual"]);
    f.buyer("capped", &["--return-cap", "0"]);
    let (txn, other) = (f.delivered("m"), f.delivered("m"));
    let secret = secret_of("m");
    let pending = f.call(
        CANCELLATION,
        &secret,
        &json!({"transactionId": txn, "reason": "fake", "reasonCode": "fake"}),
    );
    assert_eq!(pending.status, 200, "{}", pending.text);
    assert_documented(&doc, "TransactionMoveResponse", &pending.json);
    assert_documented(&doc, "Transaction", &pending.json["item"]);

    let capped = f.delivered("capped");
    for refused in [
        f.call(PAYOUT, &secret, &json!({"transactionId": txn})),
        f.call(
            CANCELLATION,
            &secret,
            &json!({"transactionId": other, "reason": "x", "reasonCode": "bogus"}),
        ),
        f.call(
            CANCELLATION,
            &secret_of("capped"),
            &json!({"transactionId": capped, "reason": "x"}),
        ),
    ] {
        assert_eq!(refused.status, 400, "{}", refused.text);
        assert_documented(&doc, "PartnerResult", &refused.json);
        assert_documented(&doc, "ErrorObject", &refused.json["error"]);
    }

    lr(
        &f.server,
        format!("transaction return deny {txn} --note 'a real person'"),
    )
    .json();
    let event = f
        .receiver
        .wait_for_on("/m", 3, WAIT)
        .into_iter()
        .map(|r| r.json())
        .find(|e| e["event"] == "transaction.return_decided")
        .expect("the decision was sent");
    assert_documented(&doc, "ReturnDecidedEvent", &event);
}

/// Every answer the server gives that a test can provoke, on every endpoint, checked
/// against the schema openapi.json documents for its status; and the request bodies the
/// service takes are valid for the document while the ones it refuses for their shape are
/// not.
#[test]
fn real_answers_match_the_documented_schemas() {
    use crate::lifecycle::{
        CANCELLATION, CONFIRMATION, Fixture, PAYOUT, PAYOUT_PENDING, SUPPLIER_CONFIRMATION,
        SUPPLIER_KEY,
    };
    use crate::util::contract::Contract;
    use serde_json::json;

    let contract = Contract::new();
    let f = Fixture::new();
    let server = &f.server;
    let db = &server.db.path;

    // Health, the document, metrics; HEAD on each answers GET's headers without a body.
    for path in ["/api/health", "/api/openapi.json", "/metrics"] {
        let get = server.get(path);
        assert_eq!(get.status, 200, "{path}: {}", get.text);
        contract.check("get", path, &get);
        let head = server.request("HEAD", path).send();
        assert_eq!(head.status, 200, "HEAD {path}");
        assert_eq!(head.text, "", "HEAD {path} has no body");
        assert_eq!(head.header("content-type"), get.header("content-type"));
        if path != "/metrics" {
            // The metrics change between two scrapes; the others do not.
            assert_eq!(
                head.header("content-length"),
                Some(get.text.len().to_string().as_str()),
                "HEAD {path}"
            );
        }
    }

    // Channel ingest.
    let channel = "/api/webhooks/channels/{channelId}/sources/{sourceId}/leads";
    let plain = "/api/webhooks/channels/web/sources/plain/leads";
    let lead = |n: u32| json!({"externalId": format!("oa{n}"), "firstName": "Ada", "lastName": "Byron", "productSlug": "solar"});
    // (body, status, whether every lead in it is valid)
    let accepted: Vec<(Value, u16, bool)> = vec![
        (lead(1), 201, true),
        (lead(1), 200, true),
        (
            json!({"person": {"firstName": "Ada", "lastName": "Byron"}, "externalId": "oa2",
                   "interests": [{"productId": "solar", "fieldValues": {"roof": "south"}}]}),
            201,
            true,
        ),
        // A batch is taken with a bad item, which is rejected on its own: the document
        // takes any item too, as the service judges each in its own result.
        (json!({"leads": [lead(3), {"firstName": ""}]}), 201, true),
        (json!({"leads": [lead(3)]}), 200, true),
    ];
    for (body, status, valid) in &accepted {
        let reply = server.post_json(plain, body);
        assert_eq!(reply.status, *status, "{body}: {}", reply.text);
        contract.check("post", channel, &reply);
        assert_eq!(
            contract.request_valid("post", channel, body),
            *valid,
            "openapi.json and the service disagree on {body}"
        );
    }
    // Bodies refused for their shape are invalid for the document too: no any-object
    // body, no empty product name, nothing beside `leads`, an interest names its product.
    let refused = [
        json!({}),
        json!({"lastName": "Byron"}),
        json!({"firstName": "", "lastName": "Byron"}),
        json!({"firstName": "Ada", "lastName": "Byron", "productSlug": ""}),
        json!({"firstName": "Ada", "lastName": "Byron", "fieldValues": {"roof": "south"}}),
        json!({"firstName": "Ada", "lastName": "Byron", "requests": [{"routingReady": true}]}),
        json!({"leads": [lead(4)], "note": "x"}),
        json!({"leads": []}),
        json!({"firstName": "Ada", "lastName": "Byron", "leads": 1}),
    ];
    for body in &refused {
        let reply = server.post_json(plain, body);
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.json["error"]["code"], "validation_failed");
        contract.check("post", channel, &reply);
        assert!(
            !contract.request_valid("post", channel, body),
            "the service refused {body}, which openapi.json calls valid"
        );
    }
    assert!(contract.schema_valid("PartnerNativeBody", &json!({"anything": [1]})));
    source(
        db,
        "web",
        "locked",
        "--secret locked-source-secret-0123456789",
    );
    let locked = "/api/webhooks/channels/web/sources/locked/leads";
    for reply in [
        server.post_json(locked, &lead(5)),
        server
            .request("POST", locked)
            .secret("wrong-secret-0123456789")
            .json(&lead(5))
            .send(),
        server.post_json("/api/webhooks/channels/web/sources/nothing/leads", &lead(5)),
        server.request("POST", plain).body("{not json").send(),
        server
            .request("POST", plain)
            .header("Content-Type", "text/plain")
            .body("{}")
            .send(),
        server
            .request("POST", plain)
            .header("Content-Encoding", "br")
            .json(&lead(5))
            .send(),
        server
            .request("POST", plain)
            .header("Content-Encoding", "gzip")
            .body(crate::util::http::gzip_bomb(2 * 1024 * 1024))
            .send(),
    ] {
        contract.check("post", channel, &reply);
    }

    // Lead-table ingest.
    let table = "/api/webhooks/lead-tables/{tableId}/sources/{sourceId}/leads";
    lr(
        db,
        "source create --table list --name T --id tsrc --no-secret",
    )
    .json();
    let table_path = "/api/webhooks/lead-tables/list/sources/tsrc/leads";
    let reply = server.post_json(table_path, &lead(6));
    assert_eq!(reply.status, 201, "{}", reply.text);
    contract.check("post", table, &reply);
    let wrapper = json!({"person": {"firstName": "Ada", "lastName": "Byron"}});
    let reply = server.post_json(table_path, &wrapper);
    assert_eq!(reply.status, 400, "{}", reply.text);
    contract.check("post", table, &reply);
    assert!(!contract.request_valid("post", table, &wrapper));

    // The buyer calls.
    let secret = f.buyer("b", &[]);
    let transaction = f.delivered("b");
    let cases: Vec<(&str, &str, Value, u16)> = vec![
        (
            CONFIRMATION,
            &secret,
            json!({"transactionId": transaction, "status": "acknowledged", "buyerPrice": 30}),
            200,
        ),
        (
            CONFIRMATION,
            &secret,
            json!({"transactionId": transaction, "status": "acknowledged"}),
            200,
        ),
        (
            CONFIRMATION,
            &secret,
            json!({"transactionId": transaction, "status": "rejected"}),
            400,
        ),
        (
            CONFIRMATION,
            &secret,
            json!({"transactionId": "", "status": "acknowledged"}),
            400,
        ),
        (
            CONFIRMATION,
            &secret,
            json!({"transactionId": "txn_nothing", "status": "acknowledged"}),
            404,
        ),
        (
            CONFIRMATION,
            "wrong-secret-0123456789",
            json!({"transactionId": transaction, "status": "acknowledged"}),
            401,
        ),
        (
            PAYOUT_PENDING,
            &secret,
            json!({"transactionId": transaction}),
            200,
        ),
        (
            PAYOUT_PENDING,
            &secret,
            json!({"transactionId": transaction, "reason": ""}),
            400,
        ),
        (
            PAYOUT,
            &secret,
            json!({"transactionId": transaction, "reason": "settled"}),
            200,
        ),
        (
            CANCELLATION,
            &secret,
            json!({"transactionId": transaction, "reason": ""}),
            400,
        ),
        (
            CANCELLATION,
            &secret,
            json!({"transactionId": transaction, "reason": "late"}),
            400,
        ),
    ];
    for (path, secret, body, status) in &cases {
        let reply = f.call(path, secret, body);
        assert_eq!(reply.status, *status, "{path} {body}: {}", reply.text);
        contract.check("post", path, &reply);
        if *status == 200 {
            assert!(contract.request_valid("post", path, body), "{path} {body}");
        }
        if body.as_object().unwrap().values().any(|v| v == "") {
            assert!(!contract.request_valid("post", path, body), "{path} {body}");
        }
    }
    let no_secret = f.buyer("n", &["--no-secret"]);
    let _ = no_secret;
    let unowned = f.delivered("n");
    let reply = f.call(
        CONFIRMATION,
        &secret,
        &json!({"transactionId": unowned, "status": "acknowledged"}),
    );
    contract.check("post", CONFIRMATION, &reply);
    let cancelled = f.delivered("b");
    let reply = f.call(
        CANCELLATION,
        &secret,
        &json!({"transactionId": cancelled, "reason": "customer unreachable"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    contract.check("post", CANCELLATION, &reply);

    // The supplier's answer to the clawback that cancellation opened.
    let lead_id = lr(db, format!("transaction show {cancelled}")).json()["leadId"]
        .as_str()
        .unwrap()
        .to_string();
    for (key, body, status) in [
        (
            SUPPLIER_KEY,
            json!({"leadId": lead_id, "status": "acknowledged", "reason": "checked"}),
            200,
        ),
        (
            SUPPLIER_KEY,
            json!({"leadId": lead_id, "status": "acknowledged"}),
            200,
        ),
        (
            SUPPLIER_KEY,
            json!({"leadId": "", "status": "acknowledged"}),
            400,
        ),
        (
            "wrong-key-0123456789",
            json!({"leadId": lead_id, "status": "rejected"}),
            401,
        ),
    ] {
        let reply = server
            .request("POST", SUPPLIER_CONFIRMATION)
            .secret(key)
            .json(&body)
            .send();
        assert_eq!(reply.status, status, "{body}: {}", reply.text);
        contract.check("post", SUPPLIER_CONFIRMATION, &reply);
        assert_eq!(
            contract.request_valid("post", SUPPLIER_CONFIRMATION, &body),
            status != 400,
            "{body}"
        );
    }
}

/// The rate limit's 429 and the metrics switch's 404 have their documented bodies.
#[test]
fn refusals_of_the_server_itself_match_the_documented_schemas() {
    use crate::util::TempDb;
    use crate::util::contract::Contract;

    let contract = Contract::new();
    let mut options = leadrelay::service::ServiceOptions::default();
    options.server.rate_limit = leadrelay::ratelimit::RateLimit {
        per_second: 1,
        burst: 1,
    };
    options.server.metrics_endpoint = false;
    let server = TestServer::start_with(TempDb::new(), options);
    let first = server.get("/metrics");
    assert_eq!(first.status, 404);
    contract.check("get", "/metrics", &first);
    let limited = server.get("/api/health");
    assert_eq!(limited.status, 429, "{}", limited.text);
    contract.check("get", "/api/health", &limited);
}

/// schemathesis, a third-party client that knows the service only from the document, runs
/// every check (its `positive_data_acceptance` with the refusals no schema can state
/// allowed, see `tests/schemathesis/hooks.py`) and every phase (coverage, fuzzing,
/// stateful) against the real server on a file with a source of each kind, a product, a
/// buyer and a supplier: the document and the service must agree on every case, and the
/// run fails on any finding. The number of cases is capped in `tests/schemathesis/
/// config.toml` and the seed is fixed, so the run is the same each time and stays short.
#[test]
fn schemathesis_finds_nothing() {
    let mut options = crate::util::fast_options();
    options.server.rate_limit = leadrelay::ratelimit::RateLimit {
        per_second: 0,
        burst: 0,
    };
    let server = TestServer::start_with(crate::util::TempDb::new(), options);
    let receiver = crate::util::receiver::Receiver::start();
    basic_setup(&server);
    source(&server, "web", "src", "--no-secret");
    crate::util::table_source(&server, "list", "imp", "--no-secret");
    crate::util::supplier(&server, "sup", "supplier-key-of-sup-0123456789");
    buyer(
        &server,
        "b",
        &receiver.url("/b"),
        Some("25"),
        ["--secret", "buyer-secret-of-b-0123456789"],
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis");
    // Its example database and any report go to a directory of the test's own.
    let work = tempfile::tempdir().expect("a temp dir can be made");
    let ran = std::process::Command::new("schemathesis")
        .arg("--config-file")
        .arg(dir.join("config.toml"))
        .arg("run")
        .arg(server.url("/api/openapi.json"))
        .args(["--url", &server.url("")])
        .args([
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance",
        ])
        .args(["--seed", "1", "--no-color"])
        .env("PYTHONPATH", &dir)
        .env("SCHEMATHESIS_HOOKS", "hooks")
        .current_dir(work.path())
        .output()
        .expect(
            "schemathesis runs (.ci/run installs it: python3 -m pip install 'schemathesis==4.*')",
        );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(
        ran.status.success(),
        "schemathesis found something:\n{said}"
    );
    assert!(said.contains(" passed"), "{said}");
}
