//! Day-two configuration (DESIGN.md section 10) through the real binary and the running
//! server: list, show and update of every noun without a secret in sight; delete, archive
//! and refusal; subscriptions and their terms; rotation with an overlap; the database that
//! must exist; errors under `--json`; strict enums and amounts.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::receiver::{Answer, Receiver};
use crate::util::{
    SIGNING_SECRET, TempDb, TestServer, basic_setup, deliver, fast_options, lead_request, lr,
    simple_lead, source, wait_until,
};

const WAIT: Duration = Duration::from_secs(15);
const CONFIRMATION: &str = "/api/webhooks/partner-confirmation";
const SUPPLIER_CONFIRMATION: &str = "/api/webhooks/supplier-cancellation-confirmation";
const INGEST: &str = "/api/webhooks/channels/web/sources/src/leads";

/// Every string anywhere in `value`, and every key.
fn texts(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().flat_map(texts).collect(),
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(texts(v)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Fails when `shown` holds any of `secrets`, its hash, or a key that names a secret.
fn assert_no_secret(what: &str, shown: &Value, secrets: &[String]) {
    for text in texts(shown) {
        for secret in secrets {
            assert!(
                !text.contains(secret.as_str()) && text != leadrelay::secrets::hash(secret),
                "{what} shows a secret or its hash: {shown}"
            );
        }
        assert!(
            !["secret", "signingSecret", "key", "secretHash", "keyHash"].contains(&text.as_str()),
            "{what} has a secret's key: {shown}"
        );
    }
}

#[test]
fn every_noun_is_listed_shown_and_updated_without_a_secret() {
    let db = TempDb::new();
    basic_setup(&db);
    let supplier = lr(&db, "supplier create --workspace ws --name Sup --id sup").json();
    let source = source(&db, "web", "src", "--supplier sup");
    let buyer = lr(
        &db,
        "buyer create --workspace ws --name B --id b --webhook-url http://127.0.0.1:9/a",
    )
    .json();
    let secrets: Vec<String> = [
        &supplier["key"],
        &source["secret"],
        &buyer["secret"],
        &buyer["signingSecret"],
    ]
    .iter()
    .map(|s| s.as_str().expect("a printed secret").to_string())
    .collect();

    for (noun, id) in [
        ("workspace", "ws"),
        ("channel", "web"),
        ("table", "list"),
        ("source", "src"),
        ("product", "solar"),
        ("buyer", "b"),
        ("supplier", "sup"),
    ] {
        let shown = lr(&db, format!("{noun} show {id}")).json();
        assert_eq!(shown["id"], id, "{noun} show");
        assert_no_secret(&format!("{noun} show"), &shown, &secrets);
        let listed = lr(&db, format!("{noun} list")).json();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{noun} list: {listed}");
        assert_eq!(listed[0], shown, "{noun} list shows what show shows");
        assert_no_secret(&format!("{noun} list"), &listed, &secrets);
        let text = lr(&db, format!("{noun} show {id}")).ok();
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "{noun} show as text: {text}"
            );
        }
    }

    // Each update changes what it is given, keeps the rest, and prints the record after.
    let ws = lr(&db, "workspace update ws --timezone Europe/Berlin").json();
    assert_eq!(
        (&ws["timezone"], &ws["name"]),
        (&json!("Europe/Berlin"), &json!("Acme"))
    );
    let web = lr(
        &db,
        "channel update web --auto-delivery off --delivery-mode multi --max-buyers 4",
    )
    .json();
    assert_eq!(web["autoDelivery"], false);
    assert_eq!(web["deliveryMode"], "multi");
    assert_eq!(web["maxBuyers"], 4);
    assert_eq!(web["scoreThreshold"], 50, "kept");
    let list = lr(&db, "table update list --score-threshold 70 --name Imports").json();
    assert_eq!(
        (&list["scoreThreshold"], &list["name"]),
        (&json!(70), &json!("Imports"))
    );
    assert_eq!(list["autoDelivery"], false, "kept");
    let src = lr(
        &db,
        "source update src --supplier-cost 5.25 --dedupe-fields email --dedupe-action reject",
    )
    .json();
    assert_eq!(src["supplierCost"], 5.25);
    assert_eq!(src["dedupe"]["fields"], json!(["email"]));
    assert_eq!(src["dedupe"]["action"], "reject");
    assert_eq!(src["supplierId"], "sup", "kept");
    assert_eq!(src["hasSecret"], true, "kept");
    let src = lr(
        &db,
        "source update src --supplier none --supplier-cost none",
    )
    .json();
    assert_eq!(
        (&src["supplierId"], &src["supplierCost"]),
        (&Value::Null, &Value::Null)
    );
    let solar = lr(
        &db,
        "product update solar --field 'roof:required=tile|flat' --field size --supplier-cost 3",
    )
    .json();
    assert_eq!(solar["fields"][0]["allowedValues"], json!(["tile", "flat"]));
    assert_eq!(solar["fields"][1]["name"], "size");
    assert_eq!(solar["supplierCost"], 3.0);
    assert_eq!(solar["slug"], "solar", "kept");
    let b = lr(
        &db,
        "buyer update b --webhook-url http://127.0.0.1:9/b --capabilities confirm \
         --cancellation-window 24h --plan prepaid --credit-limit 50 --auto-payout-pending",
    )
    .json();
    assert_eq!(b["webhookUrl"], "http://127.0.0.1:9/b");
    assert_eq!(b["capabilities"], json!(["confirm"]));
    assert_eq!(b["cancellationWindow"], "1d");
    assert_eq!(b["cancellationWindowSeconds"], 86_400);
    assert_eq!(
        (&b["plan"], &b["creditLimit"]),
        (&json!("prepaid"), &json!(50.0))
    );
    assert_eq!(b["autoPayoutPending"], true);
    assert_eq!(b["name"], "B", "kept");
    let b = lr(&db, "buyer update b --auto-payout-pending off").json();
    assert_eq!(b["autoPayoutPending"], false);
    assert_eq!(b["creditLimit"], 50.0, "kept");
    let sup = lr(&db, "supplier update sup --name 'Sup GmbH'").json();
    assert_eq!(sup["name"], "Sup GmbH");

    // Bad values are refused and change nothing.
    lr(&db, "workspace update ws --timezone Mars/Base").fails(2);
    lr(&db, "buyer update b --webhook-url ftp://x")
        .fails(1)
        .stderr_contains("invalid webhook URL");
    lr(&db, "source update src --supplier nope")
        .fails(1)
        .stderr_contains("unknown supplier 'nope'");
    lr(&db, "channel update nope --name X")
        .fails(1)
        .stderr_contains("unknown channel 'nope'");
    lr(&db, "table update web --name X")
        .fails(1)
        .stderr_contains("unknown table 'web'");
    assert_eq!(
        lr(&db, "buyer show b").json()["webhookUrl"],
        "http://127.0.0.1:9/b"
    );
}

#[test]
fn delete_removes_the_unused_refuses_what_others_depend_on_and_archives_history() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    basic_setup(&server);
    lr(
        &server,
        "supplier create --workspace ws --name Sup --id sup --key sup-key-0123456789abc",
    )
    .json();
    source(&server, "web", "src", "--no-secret --supplier sup");
    crate::util::buyer(
        &server,
        "b",
        &receiver.url("/b"),
        Some("20"),
        "--secret b-secret-0123456789",
    );

    // Live dependents are named, and nothing changes.
    lr(&server, "workspace delete ws")
        .fails(1)
        .stderr_contains("cannot delete workspace 'ws': channel web, table list, product solar, buyer b, supplier sup");
    lr(&server, "product delete solar")
        .fails(1)
        .stderr_contains("buyers b are subscribed to it");
    lr(&server, "buyer delete b")
        .fails(1)
        .stderr_contains("it is subscribed to solar");
    lr(&server, "supplier delete sup")
        .fails(1)
        .stderr_contains("sources src buy from it");
    lr(&server, "channel delete web")
        .fails(1)
        .stderr_contains("its sources src still belong to it");
    let failure = lr(&server, "--json channel delete web").fails(1);
    let error: Value = serde_json::from_str(failure.stderr.trim()).unwrap();
    assert_eq!(error["error"]["code"], "has_dependents");

    // Nothing references it: deleted, and its id is free again.
    let deleted = lr(&server, "table delete list").json();
    assert_eq!(deleted["outcome"], "deleted");
    lr(&server, "table show list")
        .fails(1)
        .stderr_contains("unknown table 'list'");
    lr(
        &server,
        "table create --workspace ws --name Again --id list",
    )
    .json();

    // History: a lead of `src`, delivered to `b`.
    let (lead, request) = lead_request(&server, &simple_lead(1));
    let delivered = deliver(&server, &request, "b", None);
    let transaction = delivered["transactionId"].as_str().unwrap().to_string();
    receiver.wait_for_on("/b", 1, WAIT);

    // The source has leads: archived. Its path answers 404, it is gone from the list but
    // not from `--all`, it cannot change, its id stays taken, its lead stays readable.
    let archived = lr(&server, "source delete src").json();
    assert_eq!(archived["outcome"], "archived");
    assert_eq!(server.post_json(INGEST, &simple_lead(2)).status, 404);
    assert!(
        lr(&server, "source list")
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    let all = lr(&server, "source list --all").json();
    assert_eq!(all[0]["id"], "src");
    assert!(all[0]["archivedAt"].is_string(), "{all}");
    lr(&server, "source enable src")
        .fails(1)
        .stderr_contains("source 'src' is archived");
    lr(&server, "source update src --name X")
        .fails(1)
        .stderr_contains("archived");
    lr(&server, "source create --channel web --name Again --id src")
        .fails(1)
        .stderr_contains("exists already");
    let old = lr(&server, format!("lead show {lead}")).json();
    assert_eq!(old["sourceId"], "src");
    assert_eq!(
        lr(&server, "source delete src").json()["outcome"],
        "archived",
        "again: no-op"
    );

    // The channel holds only an archived source, with leads: archived too.
    assert_eq!(
        lr(&server, "channel delete web").json()["outcome"],
        "archived"
    );
    lr(&server, "source create --channel web --name New")
        .fails(1)
        .stderr_contains("channel 'web' is archived");

    // The supplier now serves no live source; it has ledger history (the lead's cost).
    assert_eq!(
        lr(&server, "supplier delete sup").json()["outcome"],
        "archived"
    );
    let answered = server
        .request("POST", SUPPLIER_CONFIRMATION)
        .secret("sup-key-0123456789abc")
        .json(&json!({"leadId": lead, "status": "acknowledged"}))
        .send();
    assert_eq!(
        answered.status, 401,
        "an archived supplier's key: {}",
        answered.text
    );

    // Unsubscribed, the buyer has history (a transaction): archived. Its lifecycle calls
    // find nothing, and it takes no delivery; the transaction stays readable.
    lr(&server, "buyer unsubscribe b --product solar").json();
    assert!(
        lr(&server, "buyer terms b")
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(lr(&server, "buyer delete b").json()["outcome"], "archived");
    let call = server
        .request("POST", CONFIRMATION)
        .secret("b-secret-0123456789")
        .json(&json!({"transactionId": transaction, "status": "acknowledged"}))
        .send();
    assert_eq!(call.status, 404, "{}", call.text);
    assert_eq!(call.json["code"], "transaction_not_found");
    assert_eq!(
        lr(&server, format!("transaction show {transaction}")).json()["buyerAccountId"],
        "b"
    );
    assert_eq!(lr(&server, "buyer list --all").json()[0]["id"], "b");
    assert!(
        lr(&server, "buyer list")
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );

    // The product has lead requests: archived, and ingest no longer knows it.
    assert_eq!(
        lr(&server, "product delete solar").json()["outcome"],
        "archived"
    );
    lr(
        &server,
        "source create --table list --name Fresh --id fresh --no-secret",
    )
    .json();
    let refused = server.post_json(
        "/api/webhooks/lead-tables/list/sources/fresh/leads",
        &simple_lead(3),
    );
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("unknown_product"), "{}", refused.text);
    lr(&server, "source delete fresh").json();
    lr(&server, "table delete list").json();

    // Everything in it retired, the workspace with history is archived.
    assert_eq!(
        lr(&server, "workspace delete ws").json()["outcome"],
        "archived"
    );
    assert!(
        lr(&server, "workspace list")
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(lr(&server, "workspace list --all").json()[0]["id"], "ws");
    lr(&server, "channel create --workspace ws --name X")
        .fails(1)
        .stderr_contains("workspace 'ws' is archived");
}

#[test]
fn the_running_server_sees_a_change_on_its_next_request() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    receiver.answer("/old", Answer::ok());
    receiver.answer("/new", Answer::ok());
    basic_setup(&server);
    source(
        &server,
        "web",
        "src",
        "--no-secret --dedupe-fields none --result-detail full",
    );
    crate::util::buyer(&server, "b", &receiver.url("/old"), Some("20"), []);
    let auto = |n: usize| {
        let mut lead = simple_lead(n);
        lead["triggerAutoDelivery"] = json!(true);
        lead["phone"] = json!("+49 30 1234567");
        lead["consentStatus"] = json!("granted");
        let reply = server.post_json(INGEST, &lead);
        assert_eq!(reply.status, 201, "{}", reply.text);
        let delivery = &reply.json["item"]["autoDelivery"]["requests"][0]["deliveries"][0];
        assert_eq!(delivery["buyerAccountId"], "b", "{}", reply.text);
        delivery["buyerPrice"].as_f64().unwrap()
    };
    lr(&server, "channel update web --score-threshold 0").json();

    assert_eq!(auto(1), 20.0);
    receiver.wait_for_on("/old", 1, WAIT);
    // A new price is the next lead's price; a new URL gets the next event.
    lr(&server, "buyer terms set b --product solar --price 27.50").json();
    lr(&server, "buyer update b --webhook-url")
        .arg(receiver.url("/new"))
        .json();
    assert_eq!(auto(2), 27.5);
    receiver.wait_for_on("/new", 1, WAIT);
    assert_eq!(receiver.requests_to("/old").len(), 1);

    // A disabled source answers 404; enabled again, 201.
    lr(&server, "source disable src").json();
    assert_eq!(server.post_json(INGEST, &simple_lead(3)).status, 404);
    lr(&server, "source enable src").json();
    assert_eq!(server.post_json(INGEST, &simple_lead(4)).status, 201);

    // A paused buyer (also called disabled) gets nothing; resumed (enabled), it does.
    assert_eq!(lr(&server, "buyer disable b").json()["status"], "paused");
    assert_eq!(lr(&server, "buyer enable b").json()["status"], "active");
}

#[test]
fn the_running_server_takes_the_next_lead_on_the_products_as_changed() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    basic_setup(&server);
    source(&server, "web", "src", "--no-secret --dedupe-fields none");
    let post = |lead: Value| server.post_json(INGEST, &lead);
    let with_roof = |n: usize, roof: &str| {
        let mut lead = simple_lead(n);
        lead["fieldValues"] = json!({"roof": roof});
        lead
    };
    // The first lead leaves the source and the workspace's products kept by the server.
    assert_eq!(post(with_roof(1, "flat")).status, 201);

    // A field made required and its values narrowed: the next lead is judged by them.
    lr(&server, "product update solar --field 'roof:required=tile'").json();
    let refused = post(simple_lead(2));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("fieldValues"), "{}", refused.text);
    let refused = post(with_roof(3, "flat"));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(post(with_roof(4, "tile")).status, 201);

    // A product created now takes leads at once.
    lr(
        &server,
        "product create --workspace ws --slug heat --name Heat --id heat",
    )
    .json();
    let mut heat = simple_lead(5);
    heat["productSlug"] = json!("heat");
    let taken = post(heat.clone());
    assert_eq!(taken.status, 201, "{}", taken.text);

    // An archived one takes none: it has leads, so deleting it archives it.
    assert_eq!(
        lr(&server, "product delete heat").json()["outcome"],
        "archived"
    );
    heat["email"] = json!("ada6@example.org");
    let refused = post(heat);
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("unknown_product"), "{}", refused.text);
}

#[test]
fn subscriptions_are_created_once_changed_in_part_and_ended() {
    let db = TempDb::new();
    basic_setup(&db);
    lr(&db, "product update solar --field 'roof=tile|flat'").json();
    lr(
        &db,
        "buyer create --workspace ws --name B --id b --webhook-url http://127.0.0.1:9/b",
    )
    .json();
    let created = lr(
        &db,
        "buyer subscribe b --product solar --price 20 --daily-cap 5 --monthly-cap 50 \
         --priority 2 --filter country=DE --filter 'fieldValues.roof=tile|flat' \
         --schedule 'mon-fri 08:00-18:00'",
    )
    .json();
    assert_eq!(
        created,
        json!({"buyerId": "b", "productId": "solar", "productSlug": "solar", "pricing": "fixed",
               "price": 20.0, "bid": null, "dailyCap": 5, "monthlyCap": 50, "priority": 2,
               "filters": ["country=DE", "fieldValues.roof=tile|flat"],
               "schedules": ["mon-fri 08:00-18:00"], "requireCheck": null, "usedToday": 0,
               "usedThisMonth": 0})
    );
    // Subscribing again is refused and keeps every term.
    lr(&db, "buyer subscribe b --product solar --price 33")
        .fails(1)
        .stderr_contains("buyer 'b' is subscribed to 'solar' already");
    assert_eq!(lr(&db, "buyer terms b").json(), json!([created]));

    // Only what is given changes.
    let priced = lr(&db, "buyer terms set b --product solar --price 33").json();
    assert_eq!(priced["price"], 33.0);
    let mut expected = created.clone();
    expected["price"] = json!(33.0);
    assert_eq!(priced, expected);
    let changed = lr(
        &db,
        "buyer terms set b --product solar --daily-cap none --clear-filters --schedule sat",
    )
    .json();
    assert_eq!(changed["dailyCap"], Value::Null);
    assert_eq!(changed["monthlyCap"], 50);
    assert_eq!(changed["filters"], json!([]));
    assert_eq!(changed["schedules"], json!(["sat"]));
    assert_eq!(changed["priority"], 2);
    let cleared = lr(
        &db,
        "buyer terms set b --product solar --clear-schedule --filter 'postalCode=80*'",
    )
    .json();
    assert_eq!(cleared["schedules"], json!([]));
    assert_eq!(cleared["filters"], json!(["postalCode=80*"]));

    // Filters name fields a lead can have.
    for (line, message) in [
        (
            "buyer terms set b --product solar --filter countyr=DE",
            "unknown filter field 'countyr'",
        ),
        (
            "buyer terms set b --product solar --filter fieldValues.size=big",
            "fieldValues.roof",
        ),
        (
            "buyer subscribe b --product solar --price 1 --filter utm=x",
            "postalCode",
        ),
    ] {
        lr(&db, line).fails(1).stderr_contains(message);
    }
    lr(
        &db,
        "buyer terms set b --product solar --filter fieldValues.roof=tile",
    )
    .json();
    lr(&db, "product update solar --field size")
        .fails(1)
        .stderr_contains("field 'roof' is used by buyer 'b'");

    // Terms set and unsubscribe need a subscription; unsubscribe ends it.
    lr(
        &db,
        "product create --workspace ws --slug heat --name Heat --id heat",
    )
    .json();
    lr(&db, "buyer terms set b --product heat --price 1")
        .fails(1)
        .stderr_contains("buyer 'b' is not subscribed to 'heat'");
    lr(&db, "buyer unsubscribe b --product heat").fails(1);
    lr(&db, "buyer unsubscribe b --product solar").json();
    assert_eq!(lr(&db, "buyer terms b").json(), json!([]));
    lr(&db, "buyer subscribe b --product solar --price 20").json();
}

#[test]
fn terms_show_the_cap_use_of_today_and_this_month() {
    let server = TestServer::start();
    let receiver = Receiver::start();
    basic_setup(&server);
    source(&server, "web", "src", "--no-secret --dedupe-fields none");
    crate::util::buyer(&server, "b", &receiver.url("/b"), None, []);
    lr(
        &server,
        "buyer subscribe b --product solar --price 20 --daily-cap 5",
    )
    .json();
    for n in 0..2 {
        let (_, request) = lead_request(&server, &simple_lead(n));
        deliver(&server, &request, "b", None);
    }
    let terms = lr(&server, "buyer terms b").json();
    assert_eq!(
        (&terms[0]["usedToday"], &terms[0]["usedThisMonth"]),
        (&json!(2), &json!(2))
    );
    assert_eq!(
        lr(&server, "buyer terms b --get 0.usedToday").ok().trim(),
        "2",
        "--get prints one value"
    );
}

/// Whether `presented` is accepted by each of the four endpoints that check a secret.
struct Calls<'a> {
    server: &'a TestServer,
    transaction: String,
    lead: String,
}

impl Calls<'_> {
    fn ingest(&self, secret: &str, n: usize) -> u16 {
        self.server
            .request("POST", "/api/webhooks/channels/web/sources/sec/leads")
            .secret(secret)
            .json(&simple_lead(100 + n))
            .send()
            .status
    }

    fn lifecycle(&self, secret: &str) -> u16 {
        self.server
            .request("POST", CONFIRMATION)
            .secret(secret)
            .json(&json!({"transactionId": self.transaction, "status": "acknowledged"}))
            .send()
            .status
    }

    fn supplier(&self, key: &str) -> u16 {
        self.server
            .request("POST", SUPPLIER_CONFIRMATION)
            .secret(key)
            .json(&json!({"leadId": self.lead, "status": "acknowledged"}))
            .send()
            .status
    }
}

#[test]
fn rotation_keeps_the_old_secret_for_the_overlap_and_not_after() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    basic_setup(&server);
    lr(
        &server,
        "supplier create --workspace ws --name Sup --id sup --key old-supplier-key-0123456789",
    )
    .json();
    source(&server, "web", "src", "--no-secret --supplier sup");
    source(
        &server,
        "web",
        "sec",
        "--secret old-source-secret-0123456789 --dedupe-fields none",
    );
    crate::util::buyer(
        &server,
        "b",
        &receiver.url("/b"),
        Some("20"),
        "--secret old-buyer-secret-0123456789",
    );
    let (lead, request) = lead_request(&server, &simple_lead(1));
    let transaction = deliver(&server, &request, "b", None)["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    let calls = Calls {
        server: &server,
        transaction,
        lead,
    };
    let (old_source, old_buyer, old_key) = (
        "old-source-secret-0123456789",
        "old-buyer-secret-0123456789",
        "old-supplier-key-0123456789",
    );
    assert_eq!(calls.ingest(old_source, 0), 201);
    assert_eq!(calls.lifecycle(old_buyer), 200);
    assert_ne!(calls.supplier(old_key), 401);

    // Rotated with an overlap longer than any run of this test (a loaded machine has taken
    // 45 s for one CLI call): old and new are both accepted.
    let rotate = |overlap: &str| {
        (
            lr(
                &server,
                format!("source rotate-secret sec --overlap {overlap}"),
            )
            .json(),
            lr(
                &server,
                format!("buyer rotate-secret b --overlap {overlap}"),
            )
            .json(),
            lr(
                &server,
                format!("supplier rotate-key sup --overlap {overlap}"),
            )
            .json(),
        )
    };
    let (source, buyer, supplier) = rotate("1h");
    let (new_source, new_buyer, new_key) = (
        source["secret"].as_str().unwrap(),
        buyer["secret"].as_str().unwrap(),
        supplier["key"].as_str().unwrap(),
    );
    for rotated in [&source, &buyer, &supplier] {
        let until = rotated["oldValidUntil"].as_str().expect("oldValidUntil");
        let now = leadrelay::clock::iso(leadrelay::clock::now_ms());
        assert!(until > now.as_str(), "the overlap lies ahead: {rotated}");
    }
    assert_eq!(source["previousSecretValidUntil"], source["oldValidUntil"]);
    assert_eq!(
        calls.ingest(old_source, 1),
        201,
        "old source secret in the overlap"
    );
    assert_eq!(calls.ingest(new_source, 2), 201);
    assert_eq!(
        calls.lifecycle(old_buyer),
        200,
        "old buyer secret in the overlap"
    );
    assert_eq!(calls.lifecycle(new_buyer), 200);
    assert_ne!(
        calls.supplier(old_key),
        401,
        "old supplier key in the overlap"
    );
    assert_ne!(calls.supplier(new_key), 401);

    // Rotated again with a short overlap: the secret it replaces is accepted until the
    // overlap ends, then only the newest (whenever the calls below run, so no machine is
    // too slow for it). One previous secret is kept: the first one is refused at once.
    let (source, buyer, supplier) = rotate("500ms");
    let (newest_source, newest_buyer, newest_key) = (
        source["secret"].as_str().unwrap(),
        buyer["secret"].as_str().unwrap(),
        supplier["key"].as_str().unwrap(),
    );
    for rotated in [&source, &buyer, &supplier] {
        assert!(rotated["oldValidUntil"].is_string(), "{rotated}");
    }
    assert_eq!(calls.ingest(old_source, 3), 401);
    assert_eq!(calls.lifecycle(old_buyer), 401);
    assert_eq!(calls.supplier(old_key), 401);
    wait_until(WAIT, "the overlap to end", || {
        calls.ingest(new_source, 4) == 401
            && calls.lifecycle(new_buyer) == 401
            && calls.supplier(new_key) == 401
    });
    assert_eq!(calls.ingest(newest_source, 5), 201);
    assert_eq!(calls.lifecycle(newest_buyer), 200);
    assert_ne!(calls.supplier(newest_key), 401);
    assert_eq!(
        lr(&server, "source show sec").json()["previousSecretValidUntil"],
        Value::Null
    );

    // Without an overlap the old one is refused at once.
    let cut = lr(
        &server,
        "source rotate-secret sec --secret cut-source-secret-0123456789",
    )
    .json();
    assert!(cut["oldValidUntil"].is_string());
    assert_eq!(calls.ingest(newest_source, 6), 401);
    assert_eq!(calls.ingest("cut-source-secret-0123456789", 7), 201);
    let cut = lr(
        &server,
        "buyer rotate-secret b --secret cut-buyer-secret-0123456789",
    )
    .json();
    assert_eq!(cut["secret"], "cut-buyer-secret-0123456789");
    assert_eq!(calls.lifecycle(newest_buyer), 401);
    lr(
        &server,
        "supplier rotate-key sup --key cut-supplier-key-0123456789",
    )
    .json();
    assert_eq!(calls.supplier(newest_key), 401);
    assert_ne!(calls.supplier("cut-supplier-key-0123456789"), 401);
}

#[test]
fn a_rotated_signing_secret_signs_with_both_during_the_overlap() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    basic_setup(&server);
    source(&server, "web", "src", "--no-secret --dedupe-fields none");
    crate::util::buyer(&server, "b", &receiver.url("/b"), Some("20"), []);
    let next = "whsec_dGhlIG5ldyBzaWduaW5nIHNlY3JldCBvZiBidXllciBi";
    let rotated = lr(
        &server,
        "buyer rotate-signing-secret b --overlap 1h --secret",
    )
    .arg(next)
    .json();
    assert_eq!(rotated["signingSecret"], next);
    assert!(rotated["oldValidUntil"].is_string());
    assert!(rotated["previousSigningSecretValidUntil"].is_string());

    let (_, request) = lead_request(&server, &simple_lead(1));
    deliver(&server, &request, "b", None);
    let first = receiver.wait_for_on("/b", 1, WAIT).remove(0);
    let header = first.header("webhook-signature").unwrap().to_string();
    assert_eq!(header.split(' ').count(), 2, "two signatures: {header}");
    assert!(first.is_signed_with(next), "the new secret verifies");
    assert!(
        first.is_signed_with(SIGNING_SECRET),
        "the old secret verifies"
    );

    // Rotated again with a short overlap (the first one's is longer than any run of this
    // test, so the events above were sent inside it however slow the machine): once it
    // ends, events carry the newest secret's signature only.
    let newest = "whsec_dGhlIG5ld2VzdCBzaWduaW5nIHNlY3JldCBvZiBidXllciBi";
    lr(
        &server,
        "buyer rotate-signing-secret b --overlap 500ms --secret",
    )
    .arg(newest)
    .json();
    wait_until(WAIT, "the overlap to end", || {
        lr(&server, "buyer show b").json()["previousSigningSecretValidUntil"].is_null()
    });
    let (_, request) = lead_request(&server, &simple_lead(2));
    deliver(&server, &request, "b", None);
    let second = receiver.wait_for_on("/b", 2, WAIT).remove(1);
    assert_eq!(
        second
            .header("webhook-signature")
            .unwrap()
            .split(' ')
            .count(),
        1
    );
    assert!(second.is_signed_with(newest));
    assert!(!second.is_signed_with(next));
    assert!(!second.is_signed_with(SIGNING_SECRET));
}

#[test]
fn only_init_serve_and_demo_create_a_missing_database() {
    let db = TempDb::new();
    let message = format!(
        "no database at {}: pass --db or set LEADRELAY_DB (leadrelay init creates one)",
        db.path.display()
    );
    for line in [
        "workspace list",
        "workspace create --name A",
        "source show x",
        "buyer terms b",
        "lead list",
        "transaction list",
        "outbox list",
        "ledger list",
        "evaluator show --workspace ws",
        "mapping show x",
        "deliver --request r --buyer b",
        "check",
        "backup --out copy.db",
    ] {
        let failure = lr(&db, line).fails(1);
        assert_eq!(failure.stderr.trim(), format!("error: {message}"), "{line}");
        let failure = lr(&db, format!("--json {line}")).fails(1);
        let error: Value = serde_json::from_str(failure.stderr.trim()).unwrap();
        assert_eq!(
            error,
            json!({"error": {"code": "no_database", "message": message}}),
            "{line}"
        );
        assert!(
            crate::util::file_names(db.dir.path()).is_empty(),
            "{line} made a file"
        );
    }
    lr(&db, "init").json();
    assert!(db.path.exists());
    let other = TempDb::new();
    lr(&other, "demo").json();
    assert!(other.path.exists());
}

#[test]
fn errors_under_json_are_one_object_on_stderr_with_the_same_exit_codes() {
    let db = TempDb::new();
    basic_setup(&db);
    let error = |failure: &crate::util::cli::Failure| -> Value {
        assert!(
            failure.stdout.is_empty(),
            "nothing on stdout: {}",
            failure.stdout
        );
        serde_json::from_str(failure.stderr.trim())
            .unwrap_or_else(|e| panic!("stderr is not one JSON object ({e}): {}", failure.stderr))
    };
    for (line, exit, code) in [
        ("--json source show nope", 1, "not_found"),
        (
            "--json workspace create --name X --id ws",
            1,
            "already_exists",
        ),
        ("--json workspace create", 2, "usage"),
        ("--json channel update web --auto-delivery yes", 2, "usage"),
        ("--json nonsense", 2, "usage"),
        ("--json buyer fund b --amount -5", 2, "usage"),
        (
            "--json transaction list --status payout-pending",
            2,
            "usage",
        ),
    ] {
        let shown = error(&lr(&db, line).fails(exit));
        assert_eq!(shown["error"]["code"], code, "{line}: {shown}");
        assert!(
            shown["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    // The text form of the same errors.
    lr(&db, "source show nope")
        .fails(1)
        .stderr_contains("error: unknown source 'nope'");
    lr(&db, "channel update web --auto-delivery yes")
        .fails(2)
        .stderr_contains("expected on or off, not 'yes'");
    // Negative amounts: only an adjustment takes one, and its error says how to write it;
    // anywhere else the error points to the command that debits instead of advising a
    // spelling that is refused next.
    for flag in ["--price", "--credit-limit", "--supplier-cost", "--amount"] {
        lr(&db, format!("buyer fund b {flag} -5"))
            .fails(2)
            .stderr_contains(&format!("{flag} must not be negative"))
            .stderr_contains("leadrelay buyer adjust BUYER --amount=-5 --reason R");
    }
    lr(&db, "buyer adjust b --amount -5 --reason typo")
        .fails(2)
        .stderr_contains("write negative amounts as --amount=-5");
    for line in [
        "source update src --supplier-cost=-5",
        "buyer subscribe b --product solar --price=-3",
    ] {
        let written = lr(&db, line).output();
        assert!(!written.status.success());
        let said = String::from_utf8_lossy(&written.stderr);
        assert!(!said.contains("write negative amounts"), "{said}");
        assert!(said.contains("leadrelay buyer adjust"), "{line}: {said}");
    }
    // `--status` takes the spelling every output prints.
    lr(&db, "transaction list --status payout_pending").json();
    // --help is not an error.
    let help = lr(&db, "buyer terms --help").ok();
    assert!(help.contains("Example:"), "{help}");
}
