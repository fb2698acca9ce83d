//! `leadrelay deliver`: the rules (exclusive, multi, prices, balances, refusals that write
//! nothing), the transaction it creates, and the `lead.delivered` event a real local
//! receiver gets: exact body, Standard Webhooks headers, a signature checked independently.

use std::path::Path;

use serde_json::{Value, json};

use crate::util::receiver::{Answer, Receiver};
use crate::util::{
    SIGNING_SECRET, TempDb, TestServer, WAIT, basic_setup, buyer, deliver, deliver_command,
    fast_options, keys, lead_request, lead_request_in, lr, setup, simple_lead,
};

/// Runs `leadrelay deliver` expecting a refusal; returns its stderr.
fn refused(db: &Path, request: &str, buyer: &str, price: Option<&str>) -> String {
    deliver_command(db, request, buyer, price).fails(1).stderr
}

/// Rows that a delivery writes, to prove a refusal wrote none.
fn footprint(db: &Path) -> (i64, i64, i64, i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    (
        count("SELECT count(*) FROM transactions"),
        count("SELECT count(*) FROM outbox_events"),
        count("SELECT count(*) FROM transaction_history"),
        count("SELECT coalesce(sum(balance_cents), 0) FROM buyers"),
    )
}

#[test]
fn a_delivery_creates_the_transaction_and_the_buyer_gets_the_signed_event() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    receiver.answer("/b1", Answer::ok().json(&json!({"externalId": "SUN-77"})));
    let db = &server.db.path;
    setup(db);
    buyer(db, "b1", &receiver.url("/b1"), Some("25"), []);
    let sent = json!({
            "externalId": "crm-1",
            "firstName": "Ada",
            "lastName": "Lovelace",
            "email": "ada@example.org",
            "phone": "+49 170 1234567",
            "postalCode": "80331",
            "city": "München",
            "country": "DE",
            "consentStatus": "granted",
            "legalBasis": "consent",
            "consentCapturedAt": "2026-01-02T03:04:05Z",
            "capturedByName": "Field Team",
            "capturedAt": "2026-01-02T03:00:00Z",
            "captureMethod": "door",
            "capture": {"metadata": {"campaign": "spring"}},
            "favouriteColour": "green",
            "productSlug": "solar",
            "fieldValues": {"roof": "tile"}
    });
    let (lead_id, request_id) = lead_request(&server, &sent);

    let delivered = deliver(db, &request_id, "b1", None);
    let transaction_id = delivered["transactionId"].as_str().unwrap().to_string();
    let event_id = delivered["eventId"].as_str().unwrap().to_string();
    assert!(transaction_id.starts_with("txn_"), "{delivered}");
    assert!(event_id.starts_with("evt_"), "{delivered}");
    assert_eq!(delivered["buyerPrice"], json!(25.0));

    let request = receiver.wait_for_on("/b1", 1, WAIT).remove(0);
    assert_eq!(request.method, "POST");
    assert_eq!(request.header_all("content-type"), ["application/json"]);
    assert_eq!(
        request.header("user-agent"),
        Some(format!("leadrelay/{}", env!("CARGO_PKG_VERSION")).as_str())
    );
    assert_eq!(request.header("webhook-id"), Some(event_id.as_str()));
    let timestamp = request.header("webhook-timestamp").unwrap();
    let age = leadrelay::clock::now_ms() / 1000 - timestamp.parse::<i64>().unwrap();
    assert!(
        (0..60).contains(&age),
        "timestamp {timestamp} is unix seconds of now"
    );
    let signature = request.header("webhook-signature").unwrap();
    assert!(signature.starts_with("v1,"), "{signature}");
    assert!(
        request.is_signed_with(SIGNING_SECRET),
        "the signature verifies independently"
    );
    assert!(
        !request.is_signed_with("whsec_c2VjcmV0LW9mLWFub3RoZXItYnV5ZXItMTIzNDU2"),
        "and not with another secret"
    );

    let body = request.json();
    let keys = keys(&body);
    assert_eq!(
        keys,
        [
            "event",
            "transactionId",
            "deliveryChannel",
            "leadRequestId",
            "leadId",
            "deliveryMode",
            "sentAt",
            "buyer",
            "product",
            "pricing",
            "lead",
            "fieldValues"
        ]
    );
    assert_eq!(body["event"], "lead.delivered");
    assert_eq!(body["transactionId"], transaction_id.as_str());
    assert_eq!(body["deliveryChannel"], "webhook");
    assert_eq!(body["leadRequestId"], request_id.as_str());
    assert_eq!(body["leadId"], lead_id.as_str());
    assert_eq!(body["deliveryMode"], "exclusive");
    let sent_at = body["sentAt"].as_str().unwrap();
    assert!(
        leadrelay::clock::parse_iso(sent_at).is_some(),
        "sentAt is ISO 8601: {sent_at}"
    );
    assert_eq!(body["buyer"], json!({"id": "b1", "name": "b1"}));
    assert_eq!(
        body["product"],
        json!({"id": "solar", "name": "Solar", "slug": "solar"})
    );
    assert_eq!(
        body["pricing"],
        json!({"buyerPrice": 25.0, "supplierCost": 4.0, "marginAmount": 21.0})
    );
    assert!(body["pricing"]["buyerPrice"].is_number());
    // The lead as sent: person, consent and capture fields, capture metadata and the
    // additional property; the interest's fields are the event's own.
    let mut expected_lead = sent.clone();
    for interest_field in ["productSlug", "fieldValues"] {
        expected_lead
            .as_object_mut()
            .unwrap()
            .remove(interest_field);
    }
    assert_eq!(body["lead"], expected_lead);
    assert_eq!(body["fieldValues"], json!({"roof": "tile"}));

    // The 2xx body's externalId becomes the transaction's partnerExternalId.
    crate::util::wait_until(WAIT, "the transaction to show the event sent", || {
        lr(&server, format!("transaction show {transaction_id}")).json()["deliveryStatus"] == "sent"
    });
    let transaction = lr(&server, format!("transaction show {transaction_id}")).json();
    assert_eq!(transaction["transactionId"], transaction_id.as_str());
    assert_eq!(transaction["leadRequestId"], request_id.as_str());
    assert_eq!(transaction["leadId"], lead_id.as_str());
    assert_eq!(transaction["buyerAccountId"], "b1");
    assert_eq!(transaction["productId"], "solar");
    assert_eq!(transaction["deliveryMode"], "exclusive");
    assert_eq!(transaction["buyerPrice"], json!(25.0));
    assert_eq!(transaction["supplierCost"], json!(4.0));
    assert_eq!(transaction["marginAmount"], json!(21.0));
    assert_eq!(transaction["status"], "delivered");
    assert_eq!(transaction["partnerExternalId"], "SUN-77");
    assert_eq!(transaction["history"][0]["from"], Value::Null);
    assert_eq!(transaction["history"][0]["to"], "delivered");
    assert_eq!(transaction["history"][0]["actor"], "operator");
    assert_eq!(transaction["events"][0]["id"], event_id.as_str());
    assert_eq!(transaction["events"][0]["status"], "delivered");

    let listed = lr(&server, "transaction list --buyer b1").json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let conn = rusqlite::Connection::open(db).unwrap();
    let (status, served): (String, Option<i64>) = conn
        .query_row(
            "SELECT r.status, b.last_served_at FROM lead_requests r, buyers b
             WHERE r.id = ?1 AND b.id = 'b1'",
            [request_id.parse::<leadrelay::ids::LeadRequestId>().unwrap()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "delivered");
    assert!(served.is_some(), "the buyer's last_served_at is set");
}

#[test]
fn refusals_are_clear_errors_that_write_nothing() {
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    let url = "http://127.0.0.1:9/unused";
    buyer(db, "subscribed", url, Some("25"), []);
    buyer(db, "unsubscribed", url, None, []);
    buyer(db, "paused", url, Some("25"), []);
    lr(db, "buyer pause paused").json();
    buyer(
        db,
        "prepaid",
        url,
        Some("25"),
        ["--plan", "prepaid", "--credit-limit", "5"],
    );
    lr(db, "buyer fund prepaid --amount 19.99").json();
    lr(db, "workspace create --name Other --id other").json();
    lr(
        db,
        format!(
            "buyer create --workspace other --name Elsewhere --id elsewhere --webhook-url {url}"
        ),
    )
    .json();
    let (_, request) = lead_request(&server, &simple_lead(1));
    let (_, taken) = lead_request(&server, &simple_lead(2));
    deliver(db, &taken, "subscribed", None);

    let cases: &[(&str, &str, Option<&str>, &str)] = &[
        (&request, "paused", None, "buyer 'paused' is paused"),
        (
            &request,
            "unsubscribed",
            None,
            "buyer 'unsubscribed' is not subscribed to product 'solar'; give a price with --price",
        ),
        (
            &request,
            "prepaid",
            None,
            "buyer 'prepaid' has 24.99 available (balance plus credit limit), less than the price 25.00",
        ),
        (&request, "prepaid", Some("30"), "less than the price 30.00"),
        (
            &request,
            "elsewhere",
            Some("1"),
            "buyer 'elsewhere' is not in the lead's workspace 'ws'",
        ),
        (
            "lreq_nothing",
            "subscribed",
            None,
            "unknown lead request 'lreq_nothing'",
        ),
        (&request, "nobody", None, "unknown buyer 'nobody'"),
        (
            &taken,
            "unsubscribed",
            Some("10"),
            "is exclusive and already delivered",
        ),
        (
            &taken,
            "subscribed",
            None,
            "buyer 'subscribed' already had lead request",
        ),
    ];
    for (request, buyer, price, message) in cases {
        let before = footprint(db);
        let stderr = refused(db, request, buyer, *price);
        assert!(
            stderr.contains(message),
            "deliver {request} to {buyer}: expected '{message}' in: {stderr}"
        );
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert_eq!(footprint(db), before, "refusal {message} wrote nothing");
    }
    let conn = rusqlite::Connection::open(db).unwrap();
    let status: String = conn
        .query_row(
            "SELECT status FROM lead_requests WHERE id = ?1",
            [request.parse::<leadrelay::ids::LeadRequestId>().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(status, "open", "a refused request stays open");

    // A price makes an unsubscribed buyer deliverable; credit covers a prepaid shortfall.
    let by_price = deliver(db, &request, "unsubscribed", Some("12.50"));
    assert_eq!(by_price["buyerPrice"], json!(12.5));
    let (_, another) = lead_request(&server, &simple_lead(3));
    deliver(db, &another, "prepaid", Some("24.99"));
    let balance: i64 = conn
        .query_row(
            "SELECT balance_cents FROM buyers WHERE id = 'prepaid'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        balance, -500,
        "19.99 funded, 24.99 charged, 5.00 of credit used"
    );
    let charged: i64 = conn
        .query_row(
            "SELECT charged_cents FROM transactions WHERE buyer_id = 'prepaid'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(charged, 2499, "the charge is recorded for a refund");
}

#[test]
fn multi_mode_goes_to_several_buyers_and_only_the_first_carries_the_supplier_cost() {
    let server = TestServer::start();
    let db = &server.db.path;
    basic_setup(db);
    lr(
        db,
        "channel create --workspace ws --name Multi --id multi --delivery-mode multi --max-buyers \
         2",
    )
    .json();
    // The source has no cost of its own: the product's default applies.
    lr(
        db,
        "product create --workspace ws --slug heat --name 'Heat pumps' --id heat --supplier-cost 6",
    )
    .json();
    lr(
        db,
        "source create --channel multi --name M --id src --no-secret",
    )
    .json();
    for id in ["m1", "m2", "m3"] {
        buyer(db, id, "http://127.0.0.1:9/unused", None, []);
        lr(
            db,
            format!("buyer subscribe {id} --product heat --price 30"),
        )
        .json();
    }
    let mut lead = simple_lead(1);
    lead["productSlug"] = json!("heat");
    let (_, request) = lead_request_in(&server, "multi", "src", &lead);

    let first = deliver(db, &request, "m1", None);
    let second = deliver(db, &request, "m2", None);
    assert_eq!(first["deliveryMode"], "multi");
    assert_eq!(
        (first["supplierCost"].clone(), first["marginAmount"].clone()),
        (json!(6.0), json!(24.0))
    );
    assert_eq!(
        (
            second["supplierCost"].clone(),
            second["marginAmount"].clone()
        ),
        (json!(0.0), json!(30.0))
    );
    let stderr = refused(db, &request, "m3", None);
    assert!(
        stderr.contains("already went to its maximum of 2 buyers"),
        "{stderr}"
    );
    let stderr = refused(db, &request, "m1", None);
    assert!(
        stderr.contains("buyer 'm1' already had lead request"),
        "{stderr}"
    );
}
