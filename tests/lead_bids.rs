//! Bids for ordinary auto-delivered leads (DESIGN.md section 14, "a ping or an
//! auto-delivery"): leads posted over HTTP to the real server with `triggerAutoDelivery`,
//! bid-priced buyers answering from a real local receiver, the operator's view with
//! `leadrelay lead show` and `transaction list`.

use serde_json::{Value, json};

use crate::util::receiver::{Answer, Receiver};
use crate::util::{
    SIGNING_SECRET, TestServer, WAIT, bidder, buyer, complete_lead, lr, setup, wait_until,
};

const LEADS: &str = "/api/webhooks/channels/web/sources/src/leads";

/// `setup` (workspace `ws`, product `solar`, channel `web` with source `src`) and buyer
/// `sunco` at a fixed price of 20.
fn market(server: &TestServer, receiver: &Receiver) {
    setup(&server.db);
    buyer(&server.db, "sunco", &receiver.url("/sunco"), Some("20"), "");
}

fn bid(price: Value, bid_id: &str) -> Answer {
    Answer::ok().json(&json!({"bid": price, "bidId": bid_id}))
}

/// Bid-priced buyer `keen` (10 to 40), bidding `price` as bid `keen-7`.
fn keen_bids(server: &TestServer, receiver: &Receiver, price: f64) {
    bidder(
        &server.db,
        receiver,
        "keen",
        "--min-price 10 --max-price 40",
    );
    receiver.answer("/bid/keen", bid(json!(price), "keen-7"));
}

/// Posts one lead; returns its answer's item.
fn post(server: &TestServer, body: &Value) -> Value {
    let reply = server.post_json(LEADS, body);
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.json["item"].clone()
}

/// `lead show` of the lead of `item` (the operator's view, with the decision and bids).
fn show(server: &TestServer, item: &Value) -> Value {
    let id = item["leadId"]
        .as_str()
        .unwrap_or_else(|| panic!("no lead: {item}"));
    lr(&server.db, format!("lead show {id}")).json()
}

/// Who got the lead `shown`, at what price.
fn delivered(shown: &Value) -> (String, Value) {
    let decision = &shown["requests"][0]["decision"];
    assert_eq!(decision["reason"], "delivered", "{shown}");
    let delivery = &decision["deliveries"][0];
    (
        delivery["buyerAccountId"].as_str().unwrap().to_string(),
        delivery["buyerPrice"].clone(),
    )
}

/// The reason the decision of the lead `shown` gives for `buyer`.
fn reason(shown: &Value, buyer: &str) -> Value {
    shown["requests"][0]["decision"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["buyerAccountId"] == buyer)
        .map(|c| c["reason"].clone())
        .unwrap_or_else(|| panic!("no candidate {buyer}: {shown}"))
}

/// The bids the lead `shown` lists.
fn bids_of(shown: &Value) -> Vec<Value> {
    shown["bids"].as_array().cloned().unwrap_or_default()
}

fn of<'a>(bids: &'a [Value], buyer: &str) -> &'a Value {
    bids.iter()
        .find(|b| b["buyerAccountId"] == buyer)
        .unwrap_or_else(|| panic!("no bid of {buyer}: {bids:?}"))
}

#[test]
fn a_bid_priced_subscription_made_while_serving_is_asked_from_the_next_lead_on() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver);
    // The first lead leaves the source and its products kept by the server, from a time
    // when nobody bid on `solar`.
    let first = post(
        &server,
        &complete_lead("lead-1", "ann@example.org", "+49 30 123456"),
    );
    assert_eq!(delivered(&show(&server, &first)).0, "sunco");

    keen_bids(&server, &receiver, 27.50);
    let second = post(
        &server,
        &complete_lead("lead-2", "bea@example.org", "+49 30 654321"),
    );
    assert_eq!(receiver.requests_to("/bid/keen").len(), 1);
    assert_eq!(
        delivered(&show(&server, &second)),
        ("keen".into(), json!(27.5))
    );
}

#[test]
fn a_bid_above_the_fixed_price_wins_and_the_delivered_event_names_it() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver);
    keen_bids(&server, &receiver, 27.50);

    let item = post(
        &server,
        &complete_lead("lead-1", "ann@example.org", "+49 30 123456"),
    );
    let shown = show(&server, &item);
    assert_eq!(delivered(&shown), ("keen".into(), json!(27.5)));

    // The bid request is signed and has no personal data: exactly the fields of a ping.
    let asked = receiver.requests_to("/bid/keen");
    assert_eq!(asked.len(), 1);
    assert!(asked[0].is_signed_with(SIGNING_SECRET));
    let request = asked[0].json();
    let mut keys: Vec<&str> = request
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "bidRequestId",
            "city",
            "country",
            "deliveryMode",
            "expiresAt",
            "fieldValues",
            "postalCode",
            "product",
            "type"
        ],
        "{request}"
    );
    assert_eq!(request["type"], "lead.bid_request");
    assert_eq!(request["product"], json!({"id": "solar", "slug": "solar"}));
    assert_eq!(request["postalCode"], "10115");
    let text = asked[0].text();
    for personal in ["ann@example.org", "Ann", "Lee", "123456", "Hauptstr"] {
        assert!(!text.contains(personal), "{personal} in {text}");
    }

    let event = receiver.wait_for_on("/keen", 1, WAIT)[0].json();
    assert_eq!(event["pricing"]["buyerPrice"], json!(27.5), "{event}");
    assert_eq!(
        event["bid"],
        json!({"bidRequestId": request["bidRequestId"], "bidId": "keen-7"})
    );
    let transactions = lr(&server.db, "transaction list").json();
    assert_eq!(transactions[0]["bid"]["bidId"], "keen-7", "{transactions}");

    let bids = bids_of(&shown);
    assert_eq!(bids.len(), 1, "{shown}");
    let keen = of(&bids, "keen");
    assert_eq!(keen["outcome"], "bid");
    assert_eq!(keen["bid"], json!(27.5));
    assert_eq!(keen["won"], true);
    assert_eq!(keen["bidRequestId"], request["bidRequestId"]);
    assert_eq!(keen["leadRequestId"], shown["requests"][0]["id"]);
    assert!(keen["latencyMs"].as_i64().unwrap() >= 0);
    assert!(receiver.requests_to("/sunco").is_empty());
}

#[test]
fn bids_out_of_range_late_or_malformed_are_no_bid_and_the_fixed_price_wins() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver);
    bidder(&server.db, &receiver, "cheap", "--min-price 30");
    bidder(&server.db, &receiver, "greedy", "--max-price 40");
    bidder(&server.db, &receiver, "late", "--bid-timeout 100ms");
    bidder(&server.db, &receiver, "odd", "");
    bidder(&server.db, &receiver, "shy", "");
    receiver.answer("/bid/cheap", bid(json!(25), "cheap-1"));
    receiver.answer("/bid/greedy", bid(json!(45), "greedy-1"));
    receiver.answer(
        "/bid/late",
        bid(json!(99), "late-1").delay(std::time::Duration::from_millis(600)),
    );
    receiver.answer("/bid/odd", Answer::ok().body("twenty-seven"));
    receiver.answer("/bid/shy", Answer::ok().json(&json!({"bid": null})));

    let item = post(
        &server,
        &complete_lead("lead-1", "ann@example.org", "+49 30 123456"),
    );
    let shown = show(&server, &item);
    assert_eq!(delivered(&shown), ("sunco".into(), json!(20.0)));

    let bids = bids_of(&shown);
    assert_eq!(bids.len(), 5, "{shown}");
    assert_eq!(of(&bids, "cheap")["outcome"], "below_min");
    assert_eq!(of(&bids, "greedy")["outcome"], "above_max");
    assert_eq!(of(&bids, "late")["outcome"], "timeout");
    // Its wait, from when it was sent: the timeout counts from the request's arrival.
    assert!(of(&bids, "late")["latencyMs"].as_i64().unwrap() >= 0);
    assert_eq!(of(&bids, "odd")["outcome"], "error");
    assert_eq!(of(&bids, "shy")["outcome"], "pass");
    assert!(bids.iter().all(|b| b["won"] == false), "{bids:?}");
    for bidder in ["cheap", "greedy", "late", "odd", "shy"] {
        assert_eq!(reason(&shown, bidder), "no_bid", "{bidder}");
    }
}

#[test]
fn a_batch_is_bid_on_at_once_and_a_bidder_capped_by_an_earlier_lead_is_skipped() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver);
    // Two leads a day: the batch's three are all asked before the job, and the job finds
    // the cap reached for the third.
    bidder(&server.db, &receiver, "keen", "--daily-cap 2");
    receiver.answer("/bid/keen", bid(json!(27.50), "keen"));

    let leads: Vec<Value> = (1..=3)
        .map(|n| {
            complete_lead(
                &format!("lead-{n}"),
                &format!("ann{n}@example.org"),
                &format!("+49 30 12345{n}"),
            )
        })
        .collect();
    let reply = server.post_json(LEADS, &json!({"leads": leads}));
    assert_eq!(reply.status, 201, "{}", reply.text);
    let items = reply.json["items"].as_array().unwrap().clone();
    assert_eq!(receiver.requests_to("/bid/keen").len(), 3);
    let shown: Vec<Value> = items.iter().map(|item| show(&server, item)).collect();
    let winners: Vec<(String, Value)> = shown.iter().map(delivered).collect();
    assert_eq!(
        winners,
        [
            ("keen".into(), json!(27.5)),
            ("keen".into(), json!(27.5)),
            ("sunco".into(), json!(20.0)),
        ]
    );
    let third = bids_of(&shown[2]);
    assert_eq!(of(&third, "keen")["outcome"], "bid");
    assert_eq!(of(&third, "keen")["won"], false);
    assert_eq!(reason(&shown[2], "keen"), "daily_cap_reached");
    for lead in &shown[..2] {
        assert_eq!(of(&bids_of(lead), "keen")["won"], true);
    }
    receiver.wait_for_on("/keen", 2, WAIT);
    receiver.wait_for_on("/sunco", 1, WAIT);
}

#[test]
fn a_bidder_paused_while_its_bid_is_out_is_skipped_for_the_next_candidate() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver);
    bidder(&server.db, &receiver, "keen", "--bid-timeout 5s");
    // The bid comes only after the operator paused keen.
    receiver.answer(
        "/bid/keen",
        bid(json!(27.50), "keen-1").delay(std::time::Duration::from_millis(800)),
    );
    let posting = std::thread::scope(|scope| {
        let posting = scope.spawn(|| {
            post(
                &server,
                &complete_lead("lead-1", "ann@example.org", "+49 30 123456"),
            )
        });
        wait_until(WAIT, "the bid request", || {
            !receiver.requests_to("/bid/keen").is_empty()
        });
        lr(&server.db, "buyer pause keen").json();
        posting.join().unwrap()
    });
    let shown = show(&server, &posting);
    assert_eq!(delivered(&shown), ("sunco".into(), json!(20.0)));
    assert_eq!(reason(&shown, "keen"), "buyer_paused");
    let bids = bids_of(&shown);
    assert_eq!(of(&bids, "keen")["outcome"], "bid");
    assert_eq!(of(&bids, "keen")["won"], false);
}

#[test]
fn a_source_disabled_while_the_server_keeps_it_asks_no_bidder() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver);
    bidder(&server.db, &receiver, "keen", "");
    receiver.answer("/bid/keen", bid(json!(27.50), "keen-1"));
    let first = post(
        &server,
        &complete_lead("lead-1", "ann@example.org", "+49 30 123456"),
    );
    assert_eq!(delivered(&show(&server, &first)).0, "keen");
    // The server keeps `src` now and the CLI disables it: the request on the stale copy
    // must be refused before any buyer is asked for a bid.
    lr(&server.db, "source disable src").json();
    let reply = server.post_json(
        LEADS,
        &complete_lead("lead-2", "bo@example.org", "+49 30 654321"),
    );
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_eq!(receiver.requests_to("/bid/keen").len(), 1);
}

#[test]
fn a_lead_without_auto_delivery_asks_no_bid() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver);
    bidder(&server.db, &receiver, "keen", "");
    receiver.answer("/bid/keen", bid(json!(27.50), "keen-1"));
    let mut lead = complete_lead("lead-1", "ann@example.org", "+49 30 123456");
    lead["triggerAutoDelivery"] = json!(false);
    let item = post(&server, &lead);
    assert!(item["autoDelivery"].is_null(), "{item}");
    // A replay of a lead that was bid on asks nobody again either.
    let first = post(
        &server,
        &complete_lead("lead-2", "bo@example.org", "+49 30 654321"),
    );
    assert_eq!(delivered(&show(&server, &first)).0, "keen");
    let replay = server.post_json(
        LEADS,
        &complete_lead("lead-2", "bo@example.org", "+49 30 654321"),
    );
    assert_eq!(replay.status, 200, "{}", replay.text);
    assert_eq!(receiver.requests_to("/bid/keen").len(), 1);
}

#[test]
fn a_lead_refused_as_a_duplicate_or_invalid_asks_no_bid() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver);
    lr(
        &server.db,
        "source create --channel web --name Strict --id strict --no-secret \
         --dedupe-action reject --dedupe-fields email,phone",
    )
    .json();
    bidder(&server.db, &receiver, "keen", "");
    receiver.answer("/bid/keen", bid(json!(27.50), "keen-1"));
    let asked = || receiver.requests_to("/bid/keen").len();

    let first = post(
        &server,
        &complete_lead("lead-1", "ann@example.org", "+49 30 123456"),
    );
    assert_eq!(delivered(&show(&server, &first)).0, "keen");
    assert_eq!(asked(), 1);

    // Kept for review under the default rule: stored, not auto-delivered, no bid asked.
    let kept = post(
        &server,
        &complete_lead("lead-2", "ann@example.org", "+49 30 999999"),
    );
    assert_eq!(kept["status"], "duplicate", "{kept}");
    let shown = show(&server, &kept);
    assert_eq!(
        shown["requests"][0]["decision"]["reason"], "duplicate_review",
        "{shown}"
    );
    assert!(bids_of(&shown).is_empty(), "{shown}");
    assert_eq!(asked(), 1, "a duplicate kept for review was bid on");

    // Rejected by a source whose rule rejects duplicates.
    let rejected = server.post_json(
        "/api/webhooks/channels/web/sources/strict/leads",
        &complete_lead("s-1", "bo@example.org", "+49 30 123456"),
    );
    assert_eq!(rejected.status, 200, "{}", rejected.text);
    assert_eq!(rejected.json["item"]["status"], "rejected");
    assert_eq!(asked(), 1, "a rejected duplicate was bid on");

    // Invalid: refused by validation, and stored with quality invalid.
    let mut refused = complete_lead("lead-3", "cy@example.org", "+49 30 333333");
    refused.as_object_mut().unwrap().remove("lastName");
    refused.as_object_mut().unwrap().remove("firstName");
    let reply = server.post_json(LEADS, &refused);
    assert_eq!(reply.status, 400, "{}", reply.text);
    let mut poor = complete_lead("lead-4", "not-an-address", "+49 30 444444");
    poor.as_object_mut().unwrap().remove("phone");
    let poor = post(&server, &poor);
    assert_eq!(
        show(&server, &poor)["requests"][0]["decision"]["reason"],
        "quality_invalid"
    );
    assert_eq!(asked(), 1, "an invalid lead was bid on");

    // In one batch, the second lead duplicates the first (not yet stored when the bids
    // are asked): only the first is bid on.
    let batch = json!({"leads": [
        complete_lead("lead-5", "di@example.org", "+49 30 555555"),
        complete_lead("lead-6", "di@example.org", "+49 30 666666"),
    ]});
    let reply = server.post_json(LEADS, &batch);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let items = reply.json["items"].as_array().unwrap().clone();
    assert_eq!(items[0]["status"], "accepted", "{items:?}");
    assert_eq!(items[1]["status"], "duplicate", "{items:?}");
    assert_eq!(asked(), 2, "the batch's duplicate was bid on");
    assert_eq!(delivered(&show(&server, &items[0])).0, "keen");
}
