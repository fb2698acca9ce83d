//! Buyer-native delivery and the waterfall (DESIGN.md section 18), against real local
//! receivers playing the buyers' own APIs: a JSON CRM that accepts (its id becomes the
//! transaction's `partnerExternalId`) and refuses (the sale is rejected by `buyer-api`,
//! refunded, and the lead goes to the next buyer, whose event arrives); a form endpoint
//! (form-encoded fields as mapped) whose 500 is retried, not refused; the waterfall
//! stopping at its bound; the document checked with a path for each problem; a secret
//! header that arrives but is never printed (show, preview, attempt records, the log at
//! trace level).

use std::path::Path;

use serde_json::{Value, json};

use crate::util::process::ServeProcess;
use crate::util::receiver::{Answer, Receiver};
use crate::util::{
    SIGNING_SECRET, TempDb, TestServer, WAIT, basic_setup, buyer, complete_lead, deliver,
    fast_options, lead_request, lr, setup, simple_lead, source, wait_until,
};

const CRM_KEY: &str = "crm-key-9f8e7d6c5b4a";

/// A complete lead (it passes the evaluator) interested in `solar` with automated delivery.
fn auto_lead(n: usize) -> Value {
    let mut lead = complete_lead(
        &format!("lead-{n}"),
        &format!("ann{n}@example.com"),
        &format!("+49 30 {:07}", 1_000_000 + n),
    );
    lead["fieldValues"] = json!({"roof": "tile"});
    lead
}

fn ingest(server: &TestServer, channel: &str, n: usize) -> String {
    let reply = server.post_json(
        &format!("/api/webhooks/channels/{channel}/sources/landing-{channel}/leads"),
        &auto_lead(n),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json["item"]["leadId"].as_str().unwrap().to_string()
}

/// A server whose retries wait an hour (a refusal must not be mistaken for a retry), with a
/// source `landing-web` in channel `web`.
fn auto_server() -> TestServer {
    let mut options = fast_options();
    options.delivery.retry_schedule =
        leadrelay::outbox::RetrySchedule::parse("1h").expect("a valid schedule");
    let server = TestServer::start_with(TempDb::new(), options);
    basic_setup(&server);
    source(&server, "web", "landing-web", "--no-secret");
    server
}

/// The CRM document of docs/delivery.md, posting to `url`.
fn crm_document(url: &str) -> Value {
    let mut document: Value =
        serde_json::from_str(include_str!("../docs/examples/crm-integration.json")).unwrap();
    document["url"] = json!(url);
    document
}

fn set_integration(db: &Path, buyer: &str, document: &Value) -> Value {
    let dir = tempfile_dir(db);
    let file = dir.join(format!("{buyer}-integration.json"));
    std::fs::write(&file, document.to_string()).unwrap();
    lr(db, format!("buyer integration set {buyer} --file"))
        .arg(&file)
        .json()
}

/// A directory beside the database for documents.
fn tempfile_dir(db: &Path) -> std::path::PathBuf {
    db.parent()
        .expect("the database is in a directory")
        .to_path_buf()
}

fn decision(db: &Path, lead_id: &str) -> Value {
    lr(db, format!("lead show {lead_id}")).json()["requests"][0]["decision"].clone()
}

fn transaction(db: &Path, id: &str) -> Value {
    lr(db, format!("transaction show {id}")).json()
}

#[test]
fn a_json_crm_takes_a_lead_with_its_id_and_a_refused_lead_goes_to_the_next_buyer() {
    let server = auto_server();
    let receiver = Receiver::start();
    let db = server.db.path.clone();
    receiver.answer_sequence(
        "/crm",
        vec![
            Answer::ok().json(&json!({"result": "success", "lead_id": "x"})),
            Answer::ok().json(&json!({"result": "failure", "message": "duplicate"})),
        ],
    );
    // `crm` pays more, so auto-delivery picks it first; it is prepaid, to see the refund.
    buyer(
        &db,
        "crm",
        &receiver.url("/unused"),
        Some("30"),
        "--plan prepaid",
    );
    lr(&db, "buyer fund crm --amount 100").json();
    buyer(&db, "next", &receiver.url("/next"), Some("20"), []);
    let shown = set_integration(&db, "crm", &crm_document(&receiver.url("/crm")));
    assert_eq!(shown["kind"], "mapped", "{shown}");
    assert_eq!(shown["missingSecrets"], json!(["crm-key"]));
    lr(&db, "buyer integration secret crm crm-key --value -")
        .stdin(format!("{CRM_KEY}\n"))
        .json();

    // Accepted: the body as mapped, the secret header, signed over what was sent.
    let first = ingest(&server, "web", 1);
    let sold = decision(&db, &first);
    assert_eq!(sold["deliveries"][0]["buyerAccountId"], "crm", "{sold}");
    let first_txn = sold["deliveries"][0]["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    let arrived = receiver.wait_for_on("/crm", 1, WAIT);
    let body = arrived[0].json();
    assert_eq!(
        body,
        json!({"first_name": "Ann", "last_name": "Lee", "email": "ann1@example.com",
               "phone": "49301000001", "zip": "10115", "product": "solar", "price": 30.0,
               "reference": first_txn, "source": "leadrelay"})
    );
    assert_eq!(arrived[0].header("x-api-key"), Some(CRM_KEY));
    assert_eq!(arrived[0].header("content-type"), Some("application/json"));
    assert!(arrived[0].is_signed_with(SIGNING_SECRET));
    wait_until(WAIT, "the CRM's id on the transaction", || {
        transaction(&db, &first_txn)["partnerExternalId"] == "x"
    });
    assert_eq!(transaction(&db, &first_txn)["status"], "delivered");

    // Refused: rejected by buyer-api with the reason, refunded, and sold to `next`.
    let second = ingest(&server, "web", 2);
    let next = receiver.wait_for_on("/next", 1, WAIT);
    assert_eq!(next[0].json()["leadId"], second.as_str());
    assert!(next[0].is_signed_with(SIGNING_SECRET), "generic webhook");
    let traced = decision(&db, &second);
    let refused_txn = traced["waterfall"][0]["transactionId"]
        .as_str()
        .unwrap_or_else(|| panic!("a waterfall step: {traced}"))
        .to_string();
    let refused = transaction(&db, &refused_txn);
    assert_eq!(refused["status"], "rejected", "{refused}");
    let last = refused["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (&last["actor"], &last["reason"]),
        (&json!("buyer-api"), &json!("duplicate"))
    );
    let refund = refused["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["kind"] == "refund")
        .cloned()
        .unwrap_or_else(|| panic!("a refund row: {refused}"));
    assert_eq!(refund["amount"], 30.0);
    let crm = lr(&db, "buyer show crm").json();
    assert_eq!(crm["balance"], 70.0, "one lead paid, one refunded: {crm}");

    // The trace: the refusal, the step to the next buyer.
    assert_eq!(
        traced["deliveries"][0]["buyerAccountId"], "next",
        "{traced}"
    );
    let step = &traced["waterfall"][0];
    assert_eq!(step["refusedBy"], "crm", "{traced}");
    assert_eq!(step["reason"], "duplicate");
    assert_eq!(step["transactionId"], refused_txn.as_str());
    assert_eq!(step["deliveredTo"], json!(["next"]));
    let crm_candidate = traced["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["buyerAccountId"] == "crm")
        .cloned()
        .unwrap();
    assert_eq!(crm_candidate["reason"], "already_delivered");

    // The attempt record: the request with the secret masked, the answer excerpt.
    let event_id = refused["events"][0]["id"].as_str().unwrap().to_string();
    let event = lr(&db, format!("outbox show {event_id}")).json();
    let attempt = &event["attemptLog"][0];
    assert_eq!(attempt["outcome"], "refused", "{event}");
    assert_eq!(
        attempt["request"]["headers"]["X-Api-Key"],
        "[secret crm-key]"
    );
    assert_eq!(attempt["request"]["body"]["email"], "ann2@example.com");
    assert!(
        attempt["responseExcerpt"]
            .as_str()
            .unwrap()
            .contains("duplicate")
    );
    assert_eq!(event["status"], "failed");
    assert!(!event.to_string().contains(CRM_KEY), "{event}");
    // The sale was taken back: the refused event is not sent again, by id or in bulk.
    lr(&db, format!("outbox retry {event_id}"))
        .fails(1)
        .stderr_contains("which is rejected");
    assert_eq!(lr(&db, "outbox retry --buyer crm").json()["retried"], 0);
    assert_eq!(
        lr(&db, format!("outbox show {event_id}")).json()["status"],
        "failed"
    );
    // Nothing was sent again to the CRM.
    assert_eq!(receiver.requests_to("/crm").len(), 2);
}

#[test]
fn a_form_endpoint_gets_its_fields_form_encoded_and_a_500_is_retried_not_refused() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    let db = server.db.path.clone();
    setup(&db);
    receiver.answer_sequence(
        "/form",
        vec![Answer::status(500), Answer::ok().body("thanks")],
    );
    buyer(&db, "north", &receiver.url("/unused"), Some("25"), []);
    let mut document: Value =
        serde_json::from_str(include_str!("../docs/examples/form-integration.json")).unwrap();
    document["url"] = json!(receiver.url("/form"));
    set_integration(&db, "north", &document);
    let mut lead = simple_lead(1);
    lead["fieldValues"] = json!({"roof": "flat"});
    let (_, request) = lead_request(&server, &lead);
    let txn = deliver(&db, &request, "north", None)["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    let arrived = receiver.wait_for_on("/form", 2, WAIT);
    for sent in &arrived {
        assert_eq!(
            sent.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(sent.header("webhook-signature"), None, "sign: false");
    }
    let fields: Vec<(String, String)> = form_urlencoded::parse(arrived[1].text().as_bytes())
        .into_owned()
        .collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let sent_lead = &simple_lead(1);
    assert_eq!(
        field("name"),
        Some(format!(
            "{} {}",
            sent_lead["firstName"].as_str().unwrap(),
            sent_lead["lastName"].as_str().unwrap()
        ))
    );
    assert_eq!(field("roof").as_deref(), Some("flat"));
    assert_eq!(
        fields.iter().map(|(n, _)| n.as_str()).next(),
        Some("name"),
        "fields in document order: {fields:?}"
    );
    wait_until(WAIT, "the retried event to be delivered", || {
        transaction(&db, &txn)["deliveryStatus"] == "sent"
    });
    let shown = transaction(&db, &txn);
    assert_eq!(shown["status"], "delivered", "a 500 is no refusal: {shown}");
    let event_id = shown["events"][0]["id"].as_str().unwrap().to_string();
    let outcomes: Vec<Value> = lr(&db, format!("outbox show {event_id}")).json()["attemptLog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].clone())
        .collect();
    assert_eq!(outcomes, [json!("retry"), json!("delivered")]);
}

#[test]
fn the_waterfall_stops_at_its_bound() {
    let server = auto_server();
    let receiver = Receiver::start();
    let db = server.db.path.clone();
    lr(
        &db,
        "channel create --workspace ws --name Capped --id capped --waterfall-max 1",
    )
    .json();
    source(&db, "capped", "landing-capped", "--no-secret");
    let refusing = json!({"body": {"email": {"from": "/lead/email"}},
                          "rejectReason": "/message"});
    for (id, price) in [("a", "30"), ("b", "25"), ("c", "20")] {
        buyer(&db, id, &receiver.url(&format!("/{id}")), Some(price), []);
        receiver.answer(
            &format!("/{id}"),
            Answer::status(422).json(&json!({"message": "outside area"})),
        );
        set_integration(&db, id, &refusing);
    }
    let lead = ingest(&server, "capped", 1);
    receiver.wait_for_on("/b", 1, WAIT);
    wait_until(WAIT, "the second refusal in the trace", || {
        decision(&db, &lead)["waterfall"].as_array().map(Vec::len) == Some(2)
    });
    let traced = decision(&db, &lead);
    let steps = traced["waterfall"].as_array().unwrap();
    assert_eq!(
        (
            &steps[0]["refusedBy"],
            &steps[0]["rerouted"],
            &steps[0]["deliveredTo"]
        ),
        (&json!("a"), &json!(true), &json!(["b"])),
        "{traced}"
    );
    assert_eq!(
        (
            &steps[1]["refusedBy"],
            &steps[1]["outcome"],
            &steps[1]["reason"]
        ),
        (
            &json!("b"),
            &json!("waterfall_max_reached"),
            &json!("outside area")
        )
    );
    assert!(receiver.requests_to("/c").is_empty(), "c never got it");
    let shown = lr(&db, format!("lead show {lead}")).json();
    assert_eq!(shown["requests"][0]["status"], "open", "{shown}");
    let updated = lr(&db, "channel update capped --waterfall off").json();
    assert_eq!(
        (&updated["waterfall"], &updated["waterfallMax"]),
        (&json!(false), &json!(1))
    );
    assert_eq!(lr(&db, "channel show web").json()["waterfallMax"], 5);
}

#[test]
fn documents_are_checked_with_paths_and_a_secret_header_is_never_printed() {
    let db = TempDb::new();
    let path = &db.path;
    let receiver = Receiver::start();
    setup(path);
    buyer(path, "crm", &receiver.url("/hook"), Some("25"), []);
    let dir = tempfile_dir(path);
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        json!({"format": "xml", "headers": {"X-Key": {"secret": "a b"}},
               "body": {"phone": {"from": "lead/phone"}}, "accept": {"status": [500]}})
        .to_string(),
    )
    .unwrap();
    lr(path, "buyer integration set crm --file")
        .arg(&bad)
        .fails(1)
        .stderr_contains("/format")
        .stderr_contains("/headers/X-Key/secret")
        .stderr_contains("/body/phone/from")
        .stderr_contains("/accept/status/0");
    let failed = lr(path, "buyer integration set crm --file")
        .arg(&bad)
        .fails_json(1)
        .json();
    assert_eq!(failed["error"]["code"], "invalid_integration");
    assert_eq!(failed["error"]["details"].as_array().unwrap().len(), 4);
    lr(path, "buyer integration set nobody --file")
        .arg(&bad)
        .fails(1);
    assert_eq!(
        lr(path, "buyer integration show crm").json()["kind"],
        "generic",
        "a refused document changes nothing"
    );

    set_integration(path, "crm", &crm_document(&receiver.url("/crm")));
    lr(path, "buyer integration secret crm crm-key --value -")
        .stdin(CRM_KEY)
        .json();
    lr(path, "buyer integration secret crm 'bad name' --value x")
        .fails(1)
        .stderr_contains("not a secret name");
    let server = ServeProcess::start_with(
        lr(path, "serve --listen 127.0.0.1:0 --retry-schedule 200ms").env("RUST_LOG", "trace"),
    );
    receiver.answer(
        "/crm",
        Answer::ok().json(&json!({"result": "success", "lead_id": "c-1"})),
    );
    let reply = server
        .post("/api/webhooks/channels/web/sources/src/leads")
        .json(&simple_lead(1))
        .send();
    assert_eq!(reply.status, 201, "{}", reply.text);
    let lead = reply.json["item"]["leadId"].as_str().unwrap().to_string();
    let request = reply.json["item"]["requestIds"][0]
        .as_str()
        .unwrap()
        .to_string();
    let preview = lr(path, format!("buyer integration preview crm --lead {lead}")).ok();
    assert!(preview.contains("X-Api-Key: [secret crm-key]"), "{preview}");
    assert!(
        preview.starts_with(&format!("POST {}", receiver.url("/crm"))),
        "{preview}"
    );
    let previewed = lr(path, format!("buyer integration preview crm --lead {lead}")).json();
    assert_eq!(previewed["body"]["reference"], "txn_preview");
    assert_eq!(previewed["body"]["price"], 25.0);
    // The keys, in their order, as `--json` has printed them.
    assert_eq!(
        crate::util::json::keys(&previewed),
        [
            "buyerId",
            "kind",
            "method",
            "url",
            "headers",
            "body",
            "missingSecrets"
        ]
    );
    assert_eq!(previewed["kind"], "mapped");
    assert_eq!(previewed["missingSecrets"], serde_json::json!([]));
    deliver(path, &request, "crm", None);
    let arrived = receiver.wait_for_on("/crm", 1, WAIT);
    assert_eq!(arrived[0].header("x-api-key"), Some(CRM_KEY));
    wait_until(WAIT, "the delivery recorded", || {
        lr(path, "outbox list --status delivered")
            .json()
            .as_array()
            .map(Vec::len)
            == Some(1)
    });
    let mut printed = vec![
        preview,
        previewed.to_string(),
        lr(path, "buyer integration show crm").ok(),
        lr(path, "buyer integration show crm").json().to_string(),
        lr(path, "outbox list").json().to_string(),
    ];
    let events = lr(path, "outbox list").json();
    for event in events.as_array().unwrap() {
        printed.push(
            lr(
                path,
                format!("outbox show {}", event["id"].as_str().unwrap()),
            )
            .ok(),
        );
    }
    let log = server.stop();
    printed.push(log);
    for text in &printed {
        assert!(!text.contains(CRM_KEY), "the secret was printed: {text}");
    }
    let reset = lr(path, "buyer integration reset crm").json();
    assert_eq!(reset["kind"], "generic");
    assert_eq!(reset["secrets"], json!([]));
}
