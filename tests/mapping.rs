//! Partner-native mappings through the real binary (`mapping set/preview/publish/show`) and
//! through the real server (both ingest endpoints with a published mapping).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::{Reply, TempDb, TestServer, basic_setup, lr, source};

/// A partner like the example of docs/ingest.md: contacts in an array, names in one field.
fn partner_mapping() -> Value {
    json!({"items": "/contacts", "fields": {
        "externalId": {"from": "/id"},
        "firstName": {"from": "/name", "split": " ", "part": 0},
        "lastName": {"from": "/name", "split": " ", "part": -1},
        "email": {"from": "/mail", "transform": ["trim", "lowercase"]},
        "phone": {"from": "/tel", "transform": ["digits"]},
        "consentStatus": {"from": "/optin", "map": {"true": "granted", "false": "denied"}},
        "routingReady": {"from": "/ready", "default": true},
        "productSlug": {"const": "solar"},
        "capture.metadata.campaign": {"from": "/utm/campaign"},
        "fieldValues.roof": {"from": "/details/roof", "default": "unknown"}}})
}

fn write_file(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    path
}

/// The (path, code) pairs of an error body's details.
fn details(error: &Value) -> Vec<(String, String)> {
    path_codes(&error["error"]["details"])
}

/// The (path, code) pairs of a list of problems.
fn path_codes(problems: &Value) -> Vec<(String, String)> {
    problems
        .as_array()
        .unwrap_or_else(|| panic!("not a list of problems: {problems}"))
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().to_string(),
                d["code"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect()
}

/// Stores `document` as the draft of `source` with `mapping set`; returns its JSON.
fn set_draft(db: &Path, source: &str, document: &Value) -> Value {
    let dir = db.parent().expect("the database is in a temp dir");
    let file = write_file(dir, &format!("mapping-{source}.json"), document);
    lr(db, format!("mapping set {source} --file"))
        .arg(file)
        .json()
}

/// A database with the basic setup and a channel source `landing` without a secret.
fn setup_with_source() -> TempDb {
    let db = TempDb::new();
    basic_setup(&db);
    source(&db, "web", "landing", "--no-secret --result-detail full");
    db
}

#[test]
fn a_bad_document_is_refused_with_every_path_and_nothing_is_stored() {
    let db = setup_with_source();
    let bad = json!({"items": "contacts", "extra": 1, "fields": {
        "email": {"from": "/mail", "transform": ["trim", "lower"]},
        "first_name": {"from": "/n"},
        "firstName": {"from": "/name", "part": 0},
        "routingReady": {"const": "maybe"},
        "phone": {"from": "/tel", "const": "1"}}});
    let file = write_file(db.dir.path(), "bad.json", &bad);

    let error = lr(&db, "mapping set landing --file")
        .arg(&file)
        .fails_json(1)
        .json();
    assert_eq!(error["error"]["code"], "invalid_mapping");
    assert_eq!(
        details(&error),
        pairs(&[
            ("/extra", "unknown_key"),
            ("/items", "invalid_pointer"),
            ("/fields/email/transform/1", "unknown_transform"),
            ("/fields/first_name", "unknown_target"),
            ("/fields/firstName/part", "part_without_split"),
            ("/fields/routingReady/const", "invalid_value"),
            ("/fields/phone/const", "conflicting_source"),
        ])
    );

    // As text: one line per problem on stderr, exit 1.
    let text = lr(&db, "mapping set landing --file")
        .arg(&file)
        .fails(1)
        .stderr;
    assert!(text.contains("7 problems"), "{text}");
    assert!(
        text.contains("/fields/email/transform/1: unknown transform 'lower'"),
        "{text}"
    );
    assert!(text.contains("did you mean 'firstName'"), "{text}");

    let shown = lr(&db, "mapping show landing").json();
    assert_eq!(shown["draft"], Value::Null, "nothing was stored");
    assert_eq!(shown["version"], 0);
}

#[test]
fn set_preview_publish_show_round_trip() {
    let db = setup_with_source();
    let dir = db.dir.path();
    let stored = set_draft(&db.path, "landing", &partner_mapping());
    assert_eq!(stored["sourceId"], "landing");
    assert_eq!(stored["draft"]["document"], partner_mapping());
    assert!(
        stored["draft"]["updatedAt"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(stored["published"], Value::Null);
    assert_eq!(stored["version"], 0);
    assert_eq!(stored["unpublishedChanges"], true);

    // Preview runs the draft on a sample and prints the native batch.
    let sample = json!({"contacts": [
        {"id": "c-1", "name": "Ada King Lovelace", "mail": " ADA@Example.ORG ",
         "tel": "+49 170 1234567", "optin": true, "utm": {"campaign": "spring"},
         "details": {"roof": "tile"}},
        {"id": "c-2", "name": "Grace Hopper", "optin": "false", "ready": "no"}]});
    let sample_file = write_file(dir, "sample.json", &sample);
    let preview = lr(&db, "mapping preview landing --file")
        .arg(&sample_file)
        .json();
    assert_eq!(preview["mapping"], "draft");
    assert_eq!(preview["leads"], 2);
    assert_eq!(
        preview["validation"],
        json!({"valid": true, "problems": []})
    );
    assert_eq!(
        preview["native"],
        json!({"leads": [
            {"externalId": "c-1", "firstName": "Ada", "lastName": "Lovelace",
             "email": "ada@example.org", "phone": "491701234567", "consentStatus": "granted",
             "routingReady": true, "productSlug": "solar",
             "capture": {"metadata": {"campaign": "spring"}}, "fieldValues": {"roof": "tile"}},
            {"externalId": "c-2", "firstName": "Grace", "lastName": "Hopper",
             "consentStatus": "denied", "routingReady": false, "productSlug": "solar",
             "fieldValues": {"roof": "unknown"}}]})
    );

    // A sample the draft cannot transform: every problem with its path in the sample.
    let bad_sample = json!({"contacts": [
        {"id": "c-1", "name": "Ada Lovelace", "ready": "maybe"},
        {"id": {"n": 2}, "name": "Grace Hopper", "utm": {"campaign": ["a"]}}]});
    let bad_file = write_file(dir, "bad-sample.json", &bad_sample);
    let error = lr(&db, "mapping preview landing --file")
        .arg(&bad_file)
        .fails_json(1)
        .json();
    assert_eq!(error["error"]["code"], "mapping_error");
    assert_eq!(
        details(&error),
        pairs(&[
            ("/contacts/0/ready", "not_a_boolean"),
            ("/contacts/1/id", "not_a_scalar"),
            ("/contacts/1/utm/campaign", "not_a_scalar"),
        ])
    );
    lr(&db, "mapping preview landing --file")
        .arg(&bad_file)
        .fails(1)
        .stderr_contains("/contacts/0/ready: expected a boolean");

    // Nothing is published yet.
    let preview_published =
        || lr(&db, "mapping preview landing --published --file").arg(&sample_file);
    preview_published()
        .fails(1)
        .stderr_contains("no published mapping");

    let published = lr(&db, "mapping publish landing").json();
    assert_eq!(published["version"], 1);
    assert_eq!(published["changed"], true);
    assert_eq!(published["published"]["version"], 1);
    assert_eq!(published["published"]["document"], partner_mapping());
    assert_eq!(published["unpublishedChanges"], false);

    // Publishing the same draft again changes nothing.
    let again = lr(&db, "mapping publish landing").json();
    assert_eq!(again["version"], 1);
    assert_eq!(again["changed"], false);

    // A new draft does not touch the published version until it is published.
    let mut changed = partner_mapping();
    changed["fields"]["city"] = json!({"const": "Berlin"});
    set_draft(&db.path, "landing", &changed);
    let shown = lr(&db, "mapping show landing").json();
    assert_eq!(shown["draft"]["document"], changed);
    assert_eq!(shown["published"]["document"], partner_mapping());
    assert_eq!(shown["unpublishedChanges"], true);
    let old = preview_published().json();
    assert_eq!(old["mapping"], "published");
    assert_eq!(old["native"]["leads"][0].get("city"), None);
    let new = lr(&db, "mapping preview landing --file")
        .arg(&sample_file)
        .json();
    assert_eq!(new["native"]["leads"][0]["city"], "Berlin");

    let published = lr(&db, "mapping publish landing").json();
    assert_eq!(published["version"], 2);
    assert_eq!(published["published"]["document"], changed);

    // The source shows its mapping state too.
    let source = lr(&db, "source show landing").json();
    assert_eq!(source["mapping"]["version"], 2);
    assert_eq!(source["mapping"]["published"], true);

    // Text output of show lists one rule per line.
    let text = lr(&db, "mapping show landing").ok();
    assert!(text.contains("published: version 2"), "{text}");
    assert!(text.contains("items: /contacts"), "{text}");
    assert!(
        text.contains(r#"city "#) && text.contains(r#"{"const":"Berlin"}"#),
        "{text}"
    );
    assert!(text.contains("same as the published version"), "{text}");
}

#[test]
fn preview_also_runs_native_validation_with_products() {
    let db = setup_with_source();
    let mut document = partner_mapping();
    document["fields"]["productSlug"] = json!({"from": "/product", "default": "solar"});
    set_draft(&db.path, "landing", &document);
    let preview = |sample: &Value| -> Value {
        let file = write_file(db.dir.path(), "sample.json", sample);
        lr(&db, "mapping preview landing --file").arg(file).json()
    };
    let checked = preview(&json!({"contacts": [
        {"id": "ok", "name": "Ada Lovelace"},
        {"id": "x", "mail": "nobody@example.org", "product": "wind"}]}));
    assert_eq!(checked["leads"], 2);
    assert_eq!(checked["validation"]["valid"], false);
    let problems = path_codes(&checked["validation"]["problems"]);
    let paths: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
    assert!(paths.contains(&"/leads/1/firstName"), "{problems:?}");
    assert!(paths.contains(&"/leads/1/lastName"), "{problems:?}");
    assert!(
        paths.iter().any(|p| p.starts_with("/leads/1/productSlug")),
        "{problems:?}"
    );
    assert!(
        !paths.iter().any(|p| p.starts_with("/leads/0")),
        "{problems:?}"
    );

    // An empty partner array maps to an empty batch, which ingest would refuse.
    let empty = preview(&json!({"contacts": []}));
    assert_eq!(empty["validation"]["valid"], false);
    assert_eq!(empty["validation"]["problems"][0]["path"], "/leads");

    // As text, the problems follow the native body.
    let file = write_file(
        db.dir.path(),
        "sample.json",
        &json!({"contacts": [{"id": "y"}]}),
    );
    let text = lr(&db, "mapping preview landing --file").arg(file).ok();
    assert!(text.contains("native validation: 2 problems"), "{text}");
    assert!(text.contains("/leads/0/firstName"), "{text}");
}

#[test]
fn unpublish_returns_the_source_to_native_shapes_and_keeps_the_draft() {
    let db = setup_with_source();
    set_draft(&db.path, "landing", &partner_mapping());
    let nothing = lr(&db, "mapping unpublish landing").json();
    assert_eq!(nothing["changed"], false);
    lr(&db, "mapping publish landing").json();
    let withdrawn = lr(&db, "mapping unpublish landing").json();
    assert_eq!(withdrawn["changed"], true);
    assert_eq!(withdrawn["published"], Value::Null);
    assert_eq!(withdrawn["draft"]["document"], partner_mapping());
    assert_eq!(withdrawn["version"], 1);
    // Publishing again is a new version.
    let republished = lr(&db, "mapping publish landing").json();
    assert_eq!(republished["version"], 2);
}

#[test]
fn mapping_commands_fail_clearly() {
    let db = setup_with_source();
    let dir = db.dir.path();
    let mapping = write_file(dir, "mapping.json", &partner_mapping());
    let not_json = dir.join("not.json");
    std::fs::write(&not_json, "{\"fields\": ").unwrap();
    let missing = dir.join("missing.json");

    let cases = [
        (lr(&db, "mapping publish landing"), "has no draft mapping"),
        (
            lr(&db, "mapping preview landing --file").arg(&mapping),
            "no draft mapping",
        ),
        (
            lr(&db, "mapping set nope --file").arg(&mapping),
            "unknown source 'nope'",
        ),
        (lr(&db, "mapping show nope"), "unknown source 'nope'"),
        (lr(&db, "mapping publish nope"), "unknown source 'nope'"),
        (lr(&db, "mapping unpublish nope"), "unknown source 'nope'"),
        (
            lr(&db, "mapping set landing --file").arg(&not_json),
            "is not valid JSON",
        ),
        (
            lr(&db, "mapping set landing --file").arg(&missing),
            "cannot read",
        ),
    ];
    for (command, message) in cases {
        command.fails(1).stderr_contains(message);
    }
    let shown = lr(&db, "mapping show landing").json();
    assert_eq!(shown["draft"], Value::Null);
    assert_eq!(shown["published"], Value::Null);
}

#[test]
fn documents_and_samples_can_come_from_standard_input() {
    let db = setup_with_source();
    let run = |line: &str, input: &Value| lr(&db, line).stdin(input.to_string()).json();
    let document = json!({"fields": {"email": {"from": "/e"}, "firstName": {"const": "X"}}});
    let stored = run("mapping set landing --file -", &document);
    assert_eq!(stored["draft"]["document"], document);
    let preview = run("mapping preview landing --file -", &json!({"e": "a@b.org"}));
    assert_eq!(
        preview["native"],
        json!({"email": "a@b.org", "firstName": "X"})
    );
    assert_eq!(preview["leads"], 1);
}

// ---- Ingest with a published mapping, over HTTP -----------------------------------------

const CHANNEL_PATH: &str = "/api/webhooks/channels/web/sources/partner/leads";
const TABLE_PATH: &str = "/api/webhooks/lead-tables/list/sources/partner-list/leads";
const SECRET: &str = "partner-secret-0123456789";

/// A server with the basic setup, a channel source `partner` and a lead-table source
/// `partner-list`, both with the secret [`SECRET`].
fn mapped_server() -> TestServer {
    let server = TestServer::start();
    let db = &server.db.path;
    basic_setup(db);
    source(
        db,
        "web",
        "partner",
        format!("--secret {SECRET} --result-detail full"),
    );
    lr(
        db,
        "source create --table list --name Partner --id partner-list --result-detail full --secret",
    )
    .arg(SECRET)
    .json();
    server
}

/// Sets and publishes `document` on `source`; returns the published version.
fn publish(server: &TestServer, source: &str, document: &Value) -> i64 {
    set_draft(&server.db.path, source, document);
    let published = lr(server, format!("mapping publish {source}")).json();
    published["version"].as_i64().unwrap()
}

fn post(server: &TestServer, path: &str, body: &Value) -> Reply {
    server.post(path).secret(SECRET).json(body).send()
}

/// One partner contact, as the partner of [`partner_mapping`] sends it. The phone number
/// follows from the id, so only contacts that share an email are duplicates.
fn contact(id: &str, name: &str, mail: &str) -> Value {
    let tel = format!("+49 170 555 {:04}", id.bytes().map(u32::from).sum::<u32>());
    json!({"id": id, "name": name, "mail": mail, "tel": tel, "optin": true,
           "utm": {"campaign": "spring"}, "details": {"roof": "tile"}})
}

/// [`partner_mapping`] for one contact per body (no `items`).
fn single_mapping() -> Value {
    let mut document = partner_mapping();
    document.as_object_mut().unwrap().remove("items");
    document
}

#[test]
fn a_mapped_single_lead_runs_the_native_pipeline_on_the_channel_endpoint() {
    let server = mapped_server();
    // The partner asks for automated delivery with its own flag.
    let mut document = single_mapping();
    document["fields"]["triggerAutoDelivery"] = json!({"from": "/auto", "default": false});
    assert_eq!(publish(&server, "partner", &document), 1);

    let mut body = contact("p-1", "Ada King Lovelace", " ADA@Example.ORG ");
    body["tel"] = json!("+49 (170) 555-0101");
    body["auto"] = json!("YES");
    let reply = post(&server, CHANNEL_PATH, &body);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let item = &reply.json["item"];
    assert_eq!(item["status"], "accepted");
    assert_eq!(item["externalId"], "p-1");
    assert_eq!(item["sourceId"], "partner");
    assert_eq!(item["ingest"]["duplicateStatus"], "unique");
    let lead_id = item["leadId"].as_str().unwrap();

    let shown = lr(&server, format!("lead show {lead_id}")).json();
    assert_eq!(shown["person"]["firstName"], "Ada");
    assert_eq!(shown["person"]["lastName"], "Lovelace");
    assert_eq!(shown["person"]["email"], "ada@example.org");
    assert_eq!(shown["person"]["phone"], "491705550101");
    assert_eq!(shown["consent"]["status"], "granted");
    assert_eq!(shown["capture"]["metadata"], json!({"campaign": "spring"}));
    let requests = shown["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["productSlug"], "solar");
    assert_eq!(requests[0]["routingReady"], true);
    assert_eq!(requests[0]["triggerAutoDelivery"], true);
    assert_eq!(requests[0]["fieldValues"], json!({"roof": "tile"}));

    // Idempotency works on the mapped external id.
    let again = post(&server, CHANNEL_PATH, &body);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json["item"]["status"], "idempotent_replay");
    assert_eq!(again.json["item"]["leadId"], lead_id);

    // The duplicate rule compares the mapped (normalised) email.
    let duplicate = post(
        &server,
        CHANNEL_PATH,
        &contact("p-2", "Ada Lovelace", "ada@EXAMPLE.org"),
    );
    assert_eq!(duplicate.status, 201, "{}", duplicate.text);
    assert_eq!(duplicate.json["item"]["status"], "duplicate");
    assert_eq!(
        duplicate.json["item"]["ingest"]["duplicateStatus"],
        "review"
    );
    assert_eq!(
        duplicate.json["item"]["ingest"]["duplicateMatch"]["leadId"],
        lead_id
    );
}

#[test]
fn items_turn_a_partner_array_into_a_batch_on_the_table_endpoint() {
    let server = mapped_server();
    publish(&server, "partner-list", &partner_mapping());
    let body = json!({"sent": "2025-05-02", "contacts": [
        contact("t-1", "Ada Lovelace", "ada@example.org"),
        contact("t-2", "Grace Hopper", "grace@example.org"),
        {"id": "t-3", "name": "Cher", "mail": "cher@example.org", "details": {"roof": "flat"}},
    ]});
    let reply = post(&server, TABLE_PATH, &body);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let summary = &reply.json["summary"];
    assert_eq!(summary["received"], 3);
    // "Cher" has one name part: first and last name are both "Cher".
    assert_eq!(summary["accepted"], 3, "{}", reply.text);
    let items = reply.json["items"].as_array().unwrap();
    assert_eq!(items[1]["externalId"], "t-2");
    assert_eq!(items[1]["tableId"], "list");

    // The same batch again: every lead is an idempotent replay, nothing new is stored.
    let again = post(&server, TABLE_PATH, &body);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json["summary"]["idempotentReplay"], 3);
    let listed = lr(&server, "lead list --source partner-list").json();
    assert_eq!(listed.as_array().unwrap().len(), 3);

    // Native validation runs on each mapped lead: an item without a name is rejected on
    // its own (its path is in the native batch), the others go on.
    let mixed = json!({"contacts": [
        contact("t-4", "Alan Turing", "alan@example.org"),
        {"id": "t-5", "mail": "nobody@example.org"},
    ]});
    let reply = post(&server, TABLE_PATH, &mixed);
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["summary"]["accepted"], 1);
    assert_eq!(reply.json["summary"]["rejected"], 1);
    let rejected = &reply.json["items"][1];
    assert_eq!(rejected["status"], "rejected");
    let paths: Vec<&str> = rejected["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors in {rejected}"))
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"/leads/1/firstName"), "{paths:?}");

    // An empty partner array is an empty native batch, which native validation refuses.
    let reply = post(&server, TABLE_PATH, &json!({"contacts": []}));
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "validation_failed");
}

#[test]
fn a_body_the_mapping_cannot_transform_is_a_mapping_error_with_paths() {
    let server = mapped_server();
    publish(&server, "partner-list", &partner_mapping());
    publish(&server, "partner", &single_mapping());

    let bad_batch = json!({"contacts": [
        contact("e-1", "Ada Lovelace", "ada@example.org"),
        {"id": "e-2", "name": ["Grace", "Hopper"], "ready": "maybe"},
        {"id": "e-3", "name": "Alan Turing", "utm": {"campaign": {"x": 1}}},
    ]});
    // (endpoint, body, expected (path, code) of each problem)
    type Case = (&'static str, Value, Vec<(&'static str, &'static str)>);
    let cases: Vec<Case> = vec![
        (
            TABLE_PATH,
            bad_batch,
            vec![
                ("/contacts/1/name", "not_a_scalar"),
                ("/contacts/1/name", "not_a_scalar"),
                ("/contacts/1/ready", "not_a_boolean"),
                ("/contacts/2/utm/campaign", "not_a_scalar"),
            ],
        ),
        (
            TABLE_PATH,
            json!({"leads": [{"firstName": "Native", "lastName": "Shape"}]}),
            vec![("/contacts", "not_an_array")],
        ),
        (
            CHANNEL_PATH,
            json!({"id": "e-4", "name": "Ada Lovelace", "ready": "sometimes"}),
            vec![("/ready", "not_a_boolean")],
        ),
        (CHANNEL_PATH, json!("text"), vec![("", "invalid_type")]),
    ];
    for (path, body, expected) in cases {
        let reply = post(&server, path, &body);
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.json["error"]["code"], "mapping_error", "{body}");
        let message = reply.json["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("published mapping (version 1)"),
            "{message}"
        );
        assert_eq!(details(&reply.json), pairs(&expected), "{body}");
    }
    // An array is a body the mapping can read (a pointer may start with an index); this one
    // gives no names, so native validation refuses the mapped lead.
    let reply = post(&server, CHANNEL_PATH, &json!(["not", "a", "contact"]));
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "validation_failed");

    // Nothing of a refused body is stored.
    for source in ["partner", "partner-list"] {
        let listed = lr(&server, format!("lead list --source {source}")).json();
        assert_eq!(listed, json!([]), "{source}");
    }
}

#[test]
fn the_secret_is_checked_before_the_mapping() {
    let server = mapped_server();
    publish(&server, "partner", &single_mapping());
    let body = json!({"id": "s-1", "name": "Ada Lovelace", "ready": "sometimes"});
    let missing = server.post_json(CHANNEL_PATH, &body);
    assert_eq!(missing.status, 401, "{}", missing.text);
    let wrong = server
        .post(CHANNEL_PATH)
        .bearer("wrong-secret-0123456789")
        .json(&body)
        .send();
    assert_eq!(wrong.status, 401, "{}", wrong.text);
    let bearer = server
        .post(CHANNEL_PATH)
        .bearer(SECRET)
        .json(&contact("s-1", "Ada Lovelace", "ada@example.org"))
        .send();
    assert_eq!(bearer.status, 201, "{}", bearer.text);
}

#[test]
fn without_a_published_mapping_the_native_shapes_are_required() {
    let server = mapped_server();
    let partner_body = contact("n-1", "Ada Lovelace", "ada@example.org");
    let native = json!({"externalId": "n-2", "firstName": "Grace", "lastName": "Hopper",
                        "email": "grace@example.org"});

    // No mapping at all, then a draft only: the partner's JSON is not a native Lead.
    for step in ["none", "draft"] {
        if step == "draft" {
            set_draft(&server.db.path, "partner", &single_mapping());
        }
        let reply = post(&server, CHANNEL_PATH, &partner_body);
        assert_eq!(reply.status, 400, "{step}: {}", reply.text);
        assert_eq!(reply.json["error"]["code"], "validation_failed", "{step}");
    }
    let reply = post(&server, CHANNEL_PATH, &native);
    assert_eq!(reply.status, 201, "{}", reply.text);

    // Published: the partner's JSON is accepted; unpublished: native shapes again.
    lr(&server, "mapping publish partner").json();
    let reply = post(&server, CHANNEL_PATH, &partner_body);
    assert_eq!(reply.status, 201, "{}", reply.text);
    lr(&server, "mapping unpublish partner").json();
    let reply = post(
        &server,
        CHANNEL_PATH,
        &contact("n-3", "Alan Turing", "alan@example.org"),
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "validation_failed");
    let mut native = native;
    native["externalId"] = json!("n-4");
    native["email"] = json!("grace.h@example.org");
    let reply = post(&server, CHANNEL_PATH, &native);
    assert_eq!(reply.status, 201, "{}", reply.text);
}

#[test]
fn a_newly_published_version_applies_from_the_next_request() {
    let server = mapped_server();
    assert_eq!(publish(&server, "partner", &single_mapping()), 1);
    let first = post(
        &server,
        CHANNEL_PATH,
        &contact("v-1", "Ada Lovelace", "ada@example.org"),
    );
    assert_eq!(first.status, 201, "{}", first.text);

    // Version 2 takes the city from the partner's `town`; as a draft it changes nothing.
    let mut version_two = single_mapping();
    version_two["fields"]["city"] = json!({"from": "/town", "transform": ["uppercase"]});
    set_draft(&server.db.path, "partner", &version_two);
    // Posts a contact from Berlin; returns the city of the stored lead.
    let city_of = |id: &str| -> Value {
        let mut body = contact(id, "Grace Hopper", &format!("{id}@example.org"));
        body["town"] = json!("Berlin");
        let reply = post(&server, CHANNEL_PATH, &body);
        assert_eq!(reply.status, 201, "{}", reply.text);
        let lead_id = reply.json["item"]["leadId"].as_str().unwrap();
        lr(&server, format!("lead show {lead_id}")).json()["person"]["city"].clone()
    };
    assert_eq!(city_of("v-2"), Value::Null);
    assert_eq!(lr(&server, "mapping publish partner").json()["version"], 2);
    assert_eq!(city_of("v-3"), "BERLIN");

    // A version-2 problem names version 2.
    let mut bad = contact("v-4", "Edsger Dijkstra", "ed@example.org");
    bad["town"] = json!({"name": "Amsterdam"});
    let reply = post(&server, CHANNEL_PATH, &bad);
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(details(&reply.json), pairs(&[("/town", "not_a_scalar")]));
    assert!(
        reply.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("version 2"),
        "{}",
        reply.text
    );
}

#[test]
fn a_mapped_lead_is_delivered_automatically_like_a_native_one() {
    let server = mapped_server();
    let receiver = crate::util::receiver::Receiver::start();
    lr(
        &server,
        format!(
            "buyer create --workspace ws --name B --id b --webhook-url {}",
            &receiver.url("/hook")
        ),
    )
    .json();
    lr(&server, "buyer subscribe b --product solar --price 20").json();
    let mut document = single_mapping();
    document["fields"]["triggerAutoDelivery"] = json!({"const": true});
    publish(&server, "partner", &document);

    let reply = post(
        &server,
        CHANNEL_PATH,
        &contact("auto-1", "Grace Hopper", "grace@example.org"),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let auto = &reply.json["item"]["autoDelivery"];
    assert_eq!(auto["version"], "1.0", "{}", reply.text);
    assert_eq!(auto["delivered"], 1, "{}", reply.text);
    let transaction = auto["requests"][0]["deliveries"][0]["transactionId"].clone();
    let events = receiver.wait_for_on("/hook", 1, std::time::Duration::from_secs(20));
    let event = events[0].json();
    assert_eq!(event["transactionId"], transaction);
    assert_eq!(event["lead"]["email"], "grace@example.org");
    assert_eq!(event["fieldValues"], json!({"roof": "tile"}));
}
