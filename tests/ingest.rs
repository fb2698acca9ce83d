//! Lead ingest over HTTP (SPEC.md 2, 4.2, 4.3, 8; DESIGN.md section 2): the native shapes,
//! the answers, batches and what is stored. Validation, duplicates and access have their
//! own modules (`ingest_validation`, `ingest_dedupe`, `ingest_access`); this one also holds
//! the helpers they share.

use crate::util::{Reply, TestServer, basic_setup, keys, lr, source, table_source};
use serde_json::{Value, json};

pub const CHANNEL_PATH: &str = "/api/webhooks/channels/web/sources/landing/leads";
pub const TABLE_PATH: &str = "/api/webhooks/lead-tables/list/sources/import/leads";

/// A server with `basic_setup` (workspace `ws`, channel `web`, table `list`, product
/// `solar` without fields), a product `heat` (id `heat-pump`) with a required field `size`
/// (small or large) and an optional `notes`, a channel source `landing` and a table source
/// `import`, both without a secret and with the default duplicate rule.
pub fn server() -> TestServer {
    let server = TestServer::start();
    basic_setup(&server);
    lr(
        &server,
        "product create --workspace ws --slug heat --name 'Heat pump' --id heat-pump --field \
         'size:required=small|large' --field notes",
    )
    .json();
    source(
        &server,
        "web",
        "landing",
        "--no-secret --result-detail full",
    );
    table_source(
        &server,
        "list",
        "import",
        "--no-secret --result-detail full",
    );
    server
}

/// A valid lead with quality `ok`, no interest, and the external id `jane-1`.
pub fn jane() -> Value {
    json!({
        "externalId": "jane-1",
        "firstName": "Jane",
        "lastName": "Doe",
        "email": "jane@example.com",
        "phone": "+49 30 1234567",
        "postalCode": "10115",
        "country": "DE",
        "consentStatus": "granted",
    })
}

/// A valid lead numbered `n`: its own external id, email and phone.
pub fn person(n: usize) -> Value {
    json!({
        "externalId": format!("p-{n}"),
        "firstName": "Max",
        "lastName": format!("Person{n}"),
        "email": format!("max{n}@example.com"),
        "phone": format!("+49 40 {:07}", n),
    })
}

/// `lead` with `fields` set (merged into the object).
pub fn with(mut lead: Value, fields: Value) -> Value {
    for (key, value) in fields.as_object().expect("fields are an object") {
        lead[key] = value.clone();
    }
    lead
}

/// The stored lead as `leadrelay lead show` prints it.
pub fn shown(server: &TestServer, reply: &Reply) -> Value {
    let lead_id = reply.json["item"]["leadId"]
        .as_str()
        .unwrap_or_else(|| panic!("no leadId in {}", reply.text));
    lr(server, format!("lead show {lead_id}")).json()
}

/// How many leads the source has stored.
pub fn lead_count(server: &TestServer, source: &str) -> usize {
    lr(server, format!("lead list --source {source} --limit 10000"))
        .json()
        .as_array()
        .expect("lead list prints an array")
        .len()
}

/// The (product slug, routingReady, triggerAutoDelivery, fieldValues) of a shown lead's
/// requests, in order.
fn requests_of(shown: &Value) -> Vec<(String, Value, Value, Value)> {
    shown["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["productSlug"].as_str().unwrap().to_string(),
                r["routingReady"].clone(),
                r["triggerAutoDelivery"].clone(),
                r["fieldValues"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_single_lead_is_stored_with_its_request_and_answered_201() {
    let server = server();
    let lead = with(
        jane(),
        json!({
            "productSlug": "heat",
            "fieldValues": {"size": "small", "colour": "red"},
            "routingReady": true,
            "utmSource": "newsletter",
            "street": "Hauptstr.", "houseNumber": "1", "city": "Berlin",
            "legalBasis": "consent", "consentCapturedAt": "2026-01-02T10:00:00Z",
            "consentTextVersion": "v3",
            "capturedByExternalId": "agent-7", "capturedByName": "Ann",
            "capturedByTeam": "North", "capturedAt": "2026-01-02T10:00:00Z",
            "captureMethod": "phone",
        }),
    );
    let reply = server.post_json(CHANNEL_PATH, &lead);
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let item = &reply.json["item"];
    let keys = keys(item);
    assert_eq!(
        keys,
        [
            "status",
            "leadId",
            "channelId",
            "sourceId",
            "externalId",
            "idempotentReplay",
            "requestIds",
            "ingest"
        ]
    );
    assert_eq!(item["status"], "accepted");
    assert_eq!(item["channelId"], "web");
    assert_eq!(item["sourceId"], "landing");
    assert_eq!(item["externalId"], "jane-1");
    assert_eq!(item["idempotentReplay"], false);
    assert_eq!(
        item["ingest"],
        json!({"qualityStatus": "ok", "qualityReasons": [], "duplicateStatus": "unique"})
    );
    let lead_id = item["leadId"].as_str().unwrap();
    assert!(lead_id.starts_with("lead_"), "{lead_id}");
    let request_ids = item["requestIds"].as_array().unwrap();
    assert_eq!(request_ids.len(), 1);
    assert!(request_ids[0].as_str().unwrap().starts_with("lreq_"));

    // What was stored, read back by another process through the CLI.
    let shown = shown(&server, &reply);
    assert_eq!(shown["id"], lead_id);
    assert_eq!(shown["sourceId"], "landing");
    assert_eq!(shown["channelId"], "web");
    assert_eq!(shown["workspaceId"], "ws");
    assert_eq!(shown["externalId"], "jane-1");
    assert_eq!(
        shown["person"],
        json!({
            "firstName": "Jane", "lastName": "Doe", "email": "jane@example.com",
            "phone": "+49 30 1234567", "street": "Hauptstr.", "houseNumber": "1",
            "postalCode": "10115", "city": "Berlin", "country": "DE",
        })
    );
    assert_eq!(
        shown["consent"],
        json!({
            "status": "granted", "legalBasis": "consent",
            "capturedAt": "2026-01-02T10:00:00Z", "textVersion": "v3",
        })
    );
    assert_eq!(
        shown["capture"],
        json!({
            "capturedByExternalId": "agent-7", "capturedByName": "Ann",
            "capturedByTeam": "North", "capturedAt": "2026-01-02T10:00:00Z",
            "captureMethod": "phone", "metadata": null,
        })
    );
    assert_eq!(
        shown["additionalProperties"],
        json!({"utmSource": "newsletter"})
    );
    assert_eq!(shown["qualityStatus"], "ok");
    assert_eq!(shown["qualityReasons"], json!([]));
    assert_eq!(shown["duplicateStatus"], "unique");
    assert_eq!(shown["duplicateMatch"], Value::Null);
    assert_eq!(shown["status"], "active");
    let requests = shown["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["id"], request_ids[0]);
    assert_eq!(requests[0]["productId"], "heat-pump");
    assert_eq!(requests[0]["productSlug"], "heat");
    assert_eq!(requests[0]["productName"], "Heat pump");
    assert_eq!(requests[0]["routingReady"], true);
    assert_eq!(requests[0]["triggerAutoDelivery"], false);
    // Answers the product does not define are kept.
    assert_eq!(
        requests[0]["fieldValues"],
        json!({"size": "small", "colour": "red"})
    );
    assert_eq!(requests[0]["status"], "open");

    // The raw body is kept as received.
    let with_body = lr(&server, format!("lead show {lead_id} --body")).json();
    assert_eq!(with_body["body"], lead);
}

#[test]
fn a_lead_without_interest_is_valid() {
    let server = server();
    let reply = server.post_json(CHANNEL_PATH, &jane());
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["item"]["requestIds"], json!([]));
    assert_eq!(shown(&server, &reply)["requests"], json!([]));
}

#[test]
fn interests_come_from_shortcuts_request_and_requests() {
    let server = server();
    // productId as the shortcut, with every shortcut field.
    let reply = server.post_json(
        CHANNEL_PATH,
        &with(
            jane(),
            json!({
                "productId": "heat-pump", "routingReady": false, "triggerAutoDelivery": true,
                "fieldValues": {"size": "large"},
                "request": {"productSlug": "solar", "routingReady": true},
                "requests": [
                    {"productId": "solar", "productSlug": "solar", "routingReady": true},
                ],
            }),
        ),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    // The same product with the same answers twice counts once.
    assert_eq!(
        reply.json["item"]["requestIds"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        requests_of(&shown(&server, &reply)),
        vec![
            (
                "heat".into(),
                json!(false),
                json!(true),
                json!({"size": "large"})
            ),
            ("solar".into(), json!(true), json!(false), json!({})),
        ]
    );

    // Only `requests`, with a productSlug each.
    let reply = server.post_json(
        CHANNEL_PATH,
        &with(
            person(1),
            json!({"requests": [
                {"productSlug": "heat", "fieldValues": {"size": "small", "notes": "asap"},
                 "triggerAutoDelivery": true},
                {"productSlug": "solar"},
            ]}),
        ),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(
        requests_of(&shown(&server, &reply)),
        vec![
            (
                "heat".into(),
                Value::Null,
                json!(true),
                json!({"size": "small", "notes": "asap"})
            ),
            ("solar".into(), Value::Null, json!(false), json!({})),
        ]
    );
}

#[test]
fn the_person_wrapper_takes_interests_from_every_place() {
    let server = server();
    for (slug, id) in [
        ("roof", "p-roof"),
        ("window", "p-window"),
        ("door", "p-door"),
        ("garden", "p-garden"),
    ] {
        lr(
            &server,
            format!("product create --workspace ws --slug {slug} --name {slug} --id {id}"),
        )
        .json();
    }
    let body = json!({
        "person": with(person(1), json!({
            "externalId": null,
            "productSlug": "solar",
            "request": {"productSlug": "heat", "fieldValues": {"size": "small"},
                        "triggerAutoDelivery": false},
            "requests": [{"productId": "p-roof"}],
            "utmCampaign": "spring",
        })),
        "externalId": "wrapper-1",
        "interests": [{"productSlug": "window", "routingReady": true}],
        "request": {"productSlug": "door"},
        "requests": [{"productSlug": "garden", "triggerAutoDelivery": false}],
        "triggerAutoDelivery": true,
    });
    let reply = server.post_json(CHANNEL_PATH, &body);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let item = &reply.json["item"];
    assert_eq!(item["status"], "accepted");
    // The wrapper's externalId is used when the person has none.
    assert_eq!(item["externalId"], "wrapper-1");
    assert_eq!(item["requestIds"].as_array().unwrap().len(), 6);
    let shown = shown(&server, &reply);
    assert_eq!(shown["externalId"], "wrapper-1");
    assert_eq!(
        shown["additionalProperties"],
        json!({"utmCampaign": "spring"})
    );
    // The person's shortcut, request and requests, then the wrapper's interests, request
    // and requests; the wrapper's triggerAutoDelivery applies where an interest has none.
    assert_eq!(
        requests_of(&shown),
        vec![
            ("solar".into(), Value::Null, json!(true), json!({})),
            (
                "heat".into(),
                Value::Null,
                json!(false),
                json!({"size": "small"})
            ),
            ("roof".into(), Value::Null, json!(true), json!({})),
            ("window".into(), json!(true), json!(true), json!({})),
            ("door".into(), Value::Null, json!(true), json!({})),
            ("garden".into(), Value::Null, json!(false), json!({})),
        ]
    );

    // The person's own externalId wins when the wrapper has none or the same one.
    let reply = server.post_json(
        CHANNEL_PATH,
        &json!({"person": person(2), "externalId": "p-2"}),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["item"]["externalId"], "p-2");
}

#[test]
fn the_table_endpoint_takes_leads_and_batches_but_not_the_wrapper() {
    let server = server();
    let reply = server.post_json(TABLE_PATH, &with(jane(), json!({"productSlug": "solar"})));
    assert_eq!(reply.status, 201, "{}", reply.text);
    let item = &reply.json["item"];
    assert_eq!(item["tableId"], "list");
    assert!(item.get("channelId").is_none());
    assert_eq!(item["sourceId"], "import");
    assert_eq!(shown(&server, &reply)["tableId"], "list");

    let reply = server.post_json(TABLE_PATH, &json!({"leads": [person(1), person(2)]}));
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["summary"]["accepted"], 2);
    assert_eq!(reply.json["items"][1]["tableId"], "list");

    let reply = server.post_json(TABLE_PATH, &json!({"person": person(3)}));
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "validation_failed");
    assert_eq!(reply.json["error"]["details"][0]["path"], "/person");
    assert_eq!(reply.json["error"]["details"][0]["code"], "not_allowed");
    assert_eq!(lead_count(&server, "import"), 3);
}

#[test]
fn a_batch_stores_good_items_and_rejects_bad_ones_with_their_errors() {
    let server = server();
    let body = json!({"leads": [
        person(0),
        with(person(1), json!({"firstName": ""})),
        with(person(2), json!({"productSlug": "heat", "fieldValues": {"size": "small"}})),
        42,
        with(person(4), json!({"lastName": null, "productSlug": "nope"})),
    ]});
    let reply = server.post_json(CHANNEL_PATH, &body);
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(
        reply.json["summary"],
        json!({"received": 5, "accepted": 2, "duplicate": 0, "idempotentReplay": 0,
               "rejected": 3})
    );
    let items = reply.json["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    for (index, item) in items.iter().enumerate() {
        assert_eq!(item["index"], index);
        assert_eq!(item.as_object().unwrap().keys().next().unwrap(), "index");
        assert_eq!(item["channelId"], "web");
        assert_eq!(item["sourceId"], "landing");
    }
    for good in [0, 2] {
        assert_eq!(items[good]["status"], "accepted");
        assert!(items[good]["leadId"].as_str().unwrap().starts_with("lead_"));
        assert_eq!(items[good]["ingest"]["qualityStatus"], "ok");
        assert!(items[good].get("errors").is_none());
    }
    assert_eq!(items[2]["requestIds"].as_array().unwrap().len(), 1);
    // A batch item's raw body is the item's JSON.
    let stored = lr(
        &server,
        format!("lead show {} --body", items[2]["leadId"].as_str().unwrap()),
    )
    .json();
    assert_eq!(stored["body"], body["leads"][2]);
    let errors = |index: usize| -> Vec<(String, String)> {
        items[index]["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
                (
                    e["path"].as_str().unwrap().to_string(),
                    e["code"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(items[1]["status"], "rejected");
    assert_eq!(items[1]["leadId"], Value::Null);
    assert_eq!(items[1]["externalId"], "p-1");
    assert_eq!(
        errors(1),
        [("/leads/1/firstName".into(), "too_short".into())]
    );
    assert_eq!(errors(3), [("/leads/3".into(), "invalid_type".into())]);
    let mut bad = errors(4);
    bad.sort();
    assert_eq!(
        bad,
        [
            ("/leads/4/lastName".into(), "required".into()),
            ("/leads/4/productSlug".into(), "unknown_product".into()),
        ]
    );
    assert_eq!(lead_count(&server, "landing"), 2);

    // Nothing created: 200.
    let reply = server.post_json(CHANNEL_PATH, &json!({"leads": [{"firstName": "x"}]}));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["summary"]["rejected"], 1);
    assert_eq!(reply.json["summary"]["received"], 1);
}

#[test]
fn batches_hold_1_to_100_leads() {
    let server = server();
    let hundred: Vec<Value> = (0..100).map(person).collect();
    let reply = server.post_json(CHANNEL_PATH, &json!({"leads": hundred}));
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["summary"]["accepted"], 100);
    let ids: std::collections::HashSet<&str> = reply.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["leadId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 100);
    assert_eq!(lead_count(&server, "landing"), 100);

    let one = server.post_json(CHANNEL_PATH, &json!({"leads": [person(100)]}));
    assert_eq!(one.status, 201, "{}", one.text);

    let cases = [
        (json!({"leads": []}), "/leads", "too_few_items"),
        (
            json!({"leads": (200..301).map(person).collect::<Vec<_>>()}),
            "/leads",
            "too_many_items",
        ),
        (json!({"leads": {"a": 1}}), "/leads", "invalid_type"),
        (json!({"leads": null}), "/leads", "invalid_type"),
        (
            json!({"leads": [person(1)], "extra": 1}),
            "/extra",
            "unknown_property",
        ),
        (
            json!({"leads": [person(1)], "person": person(2)}),
            "/person",
            "not_allowed",
        ),
        (json!([person(1)]), "", "invalid_type"),
        (json!("lead"), "", "invalid_type"),
    ];
    for (body, path, code) in cases {
        let reply = server.post_json(CHANNEL_PATH, &body);
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.json["error"]["code"], "validation_failed", "{body}");
        let details = reply.json["error"]["details"].as_array().unwrap();
        assert!(
            details
                .iter()
                .any(|d| d["path"] == path && d["code"] == code),
            "{body}: {}",
            reply.text
        );
    }
    assert_eq!(lead_count(&server, "landing"), 101);
}

#[test]
fn a_lead_is_durable_once_answered() {
    let server = server();
    let reply = server.post_json(CHANNEL_PATH, &jane());
    assert_eq!(reply.status, 201, "{}", reply.text);
    let lead_id = reply.json["item"]["leadId"].as_str().unwrap().to_string();
    // Another connection sees it at once: the answer came after the commit.
    let conn = rusqlite::Connection::open(&server.db.path).unwrap();
    let stored: String = conn
        .query_row(
            "SELECT first_name FROM leads WHERE id = ?1",
            [lead_id.parse::<leadrelay::ids::LeadId>().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, "Jane");
    drop(conn);
    // And it survives a restart.
    let db = server.stop();
    let server = TestServer::start_with(db, Default::default());
    assert_eq!(
        lr(&server, format!("lead show {lead_id}")).json()["person"]["firstName"],
        "Jane"
    );
}

#[test]
fn every_lead_is_counted_in_the_metrics() {
    let server = server();
    server.post_json(CHANNEL_PATH, &jane());
    server.post_json(CHANNEL_PATH, &jane());
    server.post_json(CHANNEL_PATH, &with(jane(), json!({"firstName": ""})));
    let batch =
        json!({"leads": [person(1), with(person(2), json!({"email": "jane@example.com"})), 7]});
    server.post_json(CHANNEL_PATH, &batch);
    let text = server.get("/metrics").text;
    let count = |status: &str| -> String {
        let series = format!("leadrelay_ingest_leads_total{{status=\"{status}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
            .to_string()
    };
    assert_eq!(count("accepted"), "2");
    assert_eq!(count("duplicate"), "1");
    assert_eq!(count("idempotent_replay"), "1");
    assert_eq!(count("rejected"), "2");
}
