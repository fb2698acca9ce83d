//! Ping/post (DESIGN.md section 14) over the real interfaces: pings and posts over HTTP to
//! the real server, buyers behind a real local webhook receiver, the operator's view with
//! `leadrelay ping list|show` and `lead show`.

use serde_json::{Value, json};

use crate::util::receiver::{Answer, Receiver};
use crate::util::{
    SIGNING_SECRET, TestServer, WAIT, bidder, buyer, channel, lr, source, wait_until,
};

const PING: &str = "/api/ping/channels/web/sources/src";
const POST: &str = "/api/webhooks/channels/web/sources/src/leads";

/// The hash a partner sends: hex SHA-256 of the value normalised as duplicates are.
fn sha(value: &str) -> String {
    leadrelay::secrets::hash(value)
}

/// A ping for `solar` promising `email`.
fn ping_body(email: &str) -> Value {
    json!({
        "productSlug": "solar",
        "postalCode": "10115",
        "country": "DE",
        "emailSha256": sha(email),
        "phoneSha256": sha("4930123456"),
        "utmSource": "search",
    })
}

/// The post of `ping_id`: the full lead with `email`.
fn post_body(ping_id: &str, external_id: &str, email: &str) -> Value {
    json!({
        "pingId": ping_id,
        "externalId": external_id,
        "firstName": "Ann",
        "lastName": "Lee",
        "email": email,
        "phone": "+49 30 123456",
        "postalCode": "10115",
        "country": "DE",
        "productSlug": "solar",
    })
}

/// Workspace, channel `web` (with `channel_flags`), source `src` (supplier cost 4, with
/// `source_flags`), one buyer `sunco` at `price` with `buyer_flags` and `terms`.
fn market(server: &TestServer, receiver: &Receiver, price: &str, terms: &str, buyer_flags: &str) {
    let db = &server.db;
    lr(db, "workspace create --name Acme --id ws").json();
    lr(
        db,
        "product create --workspace ws --slug solar --name Solar --id solar",
    )
    .json();
    channel(db, "web", "");
    source(db, "web", "src", "--no-secret --supplier-cost 4");
    buyer(db, "sunco", &receiver.url("/sunco"), None, buyer_flags);
    lr(
        db,
        format!("buyer subscribe sunco --product solar --price {price} {terms}"),
    )
    .json();
}

fn ping(server: &TestServer, body: &Value) -> Value {
    let reply = server.post_json(PING, body);
    assert_eq!(reply.status, 200, "ping: {}", reply.text);
    reply.json
}

#[test]
fn an_accepted_ping_shows_no_buyer_and_its_reservation_holds_a_cap_of_one() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "--daily-cap 1", "");

    let first = ping(&server, &ping_body("ann@example.org"));
    assert_eq!(first["status"], "accepted", "{first}");
    assert_eq!(first["payout"], json!(4.0), "the source's supplier cost");
    assert!(first["pingId"].as_str().unwrap().starts_with("png_"));
    assert!(first["expiresAt"].is_string());
    let mut keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        ["expiresAt", "payout", "pingId", "status"],
        "no buyer, price or candidate"
    );

    let second = ping(&server, &ping_body("bob@example.org"));
    assert_eq!(second["status"], "rejected", "{second}");
    assert_eq!(second["reason"], "no_eligible_buyer");
    // The id is random and may hold "30" by chance: what else the answer says.
    let mut shown = second.clone();
    shown.as_object_mut().unwrap().remove("pingId");
    let text = shown.to_string();
    assert!(!text.contains("sunco") && !text.contains("30"), "{text}");

    // The held place counts in the operator's view of the caps too.
    let terms = lr(&server.db, "buyer terms sunco").json();
    assert_eq!(terms[0]["usedToday"], 1, "{terms}");
    let shown = lr(
        &server.db,
        format!("ping show {}", second["pingId"].as_str().unwrap()),
    )
    .json();
    assert_eq!(
        shown["decision"]["candidates"][0]["reason"], "daily_cap_reached",
        "{shown}"
    );
    // Stored compressed, as a lead request's trace is (`ping show` gave it back as JSON).
    let conn = rusqlite::Connection::open_with_flags(
        &server.db.path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let (kind, stored): (String, i64) = conn
        .query_row(
            "SELECT typeof(decision), length(decision) FROM pings WHERE id = ?1",
            [second["pingId"].as_str().unwrap()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    let text = shown["decision"].to_string().len() as i64;
    assert_eq!(kind, "blob");
    assert!(stored * 2 < text, "{stored} bytes stored for {text}");
    let listed = lr(&server.db, "ping list --status rejected").json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
}

#[test]
fn an_expired_reservation_frees_its_cap() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "--daily-cap 1", "");
    lr(&server.db, "channel update web --ping-ttl 300ms").json();

    let first = ping(&server, &ping_body("ann@example.org"));
    assert_eq!(first["status"], "accepted", "{first}");
    let first_id = first["pingId"].as_str().unwrap().to_string();
    // Lapsed, the reservation holds nothing: a later ping takes the place again.
    wait_until(WAIT, "the reservation to lapse", || {
        ping(&server, &ping_body("bob@example.org"))["status"] == "accepted"
    });
    let shown = lr(&server.db, format!("ping show {first_id}")).json();
    assert_eq!(shown["status"], "expired", "{shown}");
    // Its post comes too late.
    let late = server.post_json(POST, &post_body(&first_id, "late-1", "ann@example.org"));
    assert_eq!(late.status, 400, "{}", late.text);
    assert_eq!(late.json["error"]["code"], "ping_expired");
}

#[test]
fn the_post_is_delivered_to_the_reserved_buyer_at_the_reserved_price_once() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "", "");

    let pinged = ping(&server, &ping_body("ann@example.org"));
    let ping_id = pinged["pingId"].as_str().unwrap();
    // The price changes after the ping: the post is sold as the ping promised.
    lr(
        &server.db,
        "buyer terms set sunco --product solar --price 45",
    )
    .json();

    let mut body = post_body(ping_id, "lead-1", " Ann@Example.org ");
    // The partner did not ask for automated delivery: the post is delivered anyway.
    body["triggerAutoDelivery"] = json!(false);
    let posted = server.post_json(POST, &body);
    assert_eq!(posted.status, 201, "{}", posted.text);
    let auto = &posted.json["item"]["autoDelivery"];
    assert_eq!(auto["delivered"], 1, "{auto}");
    assert_eq!(auto["requests"][0]["outcome"], "delivered");

    let events = receiver.wait_for_on("/sunco", 1, WAIT);
    let event = events[0].json();
    assert_eq!(event["pricing"]["buyerPrice"], json!(30.0), "{event}");
    assert_eq!(event["pricing"]["supplierCost"], json!(4.0));
    assert_eq!(event["lead"]["email"], " Ann@Example.org ");

    let shown = lr(&server.db, format!("ping show {ping_id}")).json();
    assert_eq!(shown["status"], "posted");
    assert_eq!(shown["leadId"], posted.json["item"]["leadId"]);
    let lead = lr(
        &server.db,
        format!(
            "lead show {}",
            posted.json["item"]["leadId"].as_str().unwrap()
        ),
    )
    .json();
    assert_eq!(lead["requests"][0]["decision"]["pingId"], ping_id, "{lead}");

    // Used: a second post of the same ping is refused and stores nothing.
    let again = server.post_json(POST, &post_body(ping_id, "lead-2", "ann@example.org"));
    assert_eq!(again.status, 400, "{}", again.text);
    assert_eq!(again.json["error"]["code"], "ping_used");
    assert_eq!(again.json["error"]["details"][0]["path"], "/pingId");
    // A replay of the first post answers as the first did.
    let replay = server.post_json(POST, &body);
    assert_eq!(replay.status, 200, "{}", replay.text);
    assert_eq!(replay.json["item"]["status"], "idempotent_replay");
    let leads = lr(&server.db, "lead list").json();
    assert_eq!(leads.as_array().unwrap().len(), 1);
}

#[test]
fn of_concurrent_posts_of_one_ping_exactly_one_succeeds() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "", "");
    let pinged = ping(&server, &ping_body("ann@example.org"));
    let ping_id = pinged["pingId"].as_str().unwrap().to_string();

    let statuses: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let posts: Vec<_> = (0..8)
            .map(|n| {
                let (server, ping_id) = (&server, &ping_id);
                scope.spawn(move || {
                    let reply = server.post_json(
                        POST,
                        &post_body(ping_id, &format!("race-{n}"), "ann@example.org"),
                    );
                    (reply.status, reply.json)
                })
            })
            .collect();
        posts.into_iter().map(|p| p.join().unwrap()).collect()
    });
    let won = statuses.iter().filter(|(status, _)| *status == 201).count();
    assert_eq!(won, 1, "{statuses:?}");
    for (status, body) in statuses.iter().filter(|(status, _)| *status != 201) {
        assert_eq!(*status, 400);
        assert_eq!(body["error"]["code"], "ping_used", "{body}");
    }
    receiver.wait_for_on("/sunco", 1, WAIT);
    let transactions = lr(&server.db, "transaction list").json();
    assert_eq!(transactions.as_array().unwrap().len(), 1);
}

#[test]
fn a_post_whose_email_does_not_match_the_ping_is_refused_and_the_reservation_stays() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "", "");
    let pinged = ping(&server, &ping_body("ann@example.org"));
    let ping_id = pinged["pingId"].as_str().unwrap();

    let wrong = server.post_json(POST, &post_body(ping_id, "lead-1", "eve@example.org"));
    assert_eq!(wrong.status, 400, "{}", wrong.text);
    assert_eq!(wrong.json["error"]["code"], "ping_mismatch");
    assert!(
        wrong.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("email")
    );
    let unknown = server.post_json(POST, &post_body("png_nothing", "lead-2", "ann@example.org"));
    assert_eq!(
        unknown.json["error"]["code"], "ping_unknown",
        "{}",
        unknown.text
    );
    assert_eq!(
        lr(&server.db, "lead list").json().as_array().unwrap().len(),
        0
    );

    let right = server.post_json(POST, &post_body(ping_id, "lead-3", "ann@example.org"));
    assert_eq!(right.status, 201, "{}", right.text);
}

#[test]
fn a_post_that_fails_validation_releases_its_reservation() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "--daily-cap 1", "");
    let pinged = ping(&server, &ping_body("ann@example.org"));
    let ping_id = pinged["pingId"].as_str().unwrap();

    let mut invalid = post_body(ping_id, "lead-1", "ann@example.org");
    invalid.as_object_mut().unwrap().remove("lastName");
    let refused = server.post_json(POST, &invalid);
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(refused.json["error"]["code"], "validation_failed");
    let shown = lr(&server.db, format!("ping show {ping_id}")).json();
    assert_eq!(shown["status"], "released", "{shown}");
    assert_eq!(shown["reason"], "validation_failed");
    // The place is free again.
    assert_eq!(
        ping(&server, &ping_body("bob@example.org"))["status"],
        "accepted"
    );
}

#[test]
fn a_ping_with_personal_data_is_refused_naming_each_path() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "", "");
    let mut body = ping_body("ann@example.org");
    body["email"] = json!("ann@example.org");
    body["houseNumber"] = json!("1");
    let reply = server.post_json(PING, &body);
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["error"]["code"], "personal_data_in_ping");
    let paths: Vec<&str> = reply.json["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/email", "/houseNumber"]);
    // Validation as for ingest: an unknown product, with its pointer.
    let unknown = server.post_json(PING, &json!({"productSlug": "wind"}));
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.json["error"]["code"], "validation_failed");
    assert_eq!(unknown.json["error"]["details"][0]["path"], "/productSlug");
    // The source's admission as for ingest: unknown source 404.
    let missing = server.post_json("/api/ping/channels/web/sources/nope", &ping_body("a@b.de"));
    assert_eq!(missing.status, 404);
    assert_eq!(
        lr(&server.db, "ping list").json().as_array().unwrap().len(),
        0
    );
}

#[test]
fn a_revenue_share_pays_the_supplier_its_share_of_the_winning_price() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "25.55", "", "");
    lr(&server.db, "source update src --revenue-share 40").json();

    let pinged = ping(&server, &ping_body("ann@example.org"));
    // 40% of 25.55 = 10.22
    assert_eq!(pinged["payout"], json!(10.22), "{pinged}");
    let ping_id = pinged["pingId"].as_str().unwrap();
    let posted = server.post_json(POST, &post_body(ping_id, "lead-1", "ann@example.org"));
    assert_eq!(posted.status, 201, "{}", posted.text);
    let event = receiver.wait_for_on("/sunco", 1, WAIT)[0].json();
    assert_eq!(event["pricing"]["supplierCost"], json!(10.22), "{event}");
    assert_eq!(event["pricing"]["marginAmount"], json!(15.33));
}

#[test]
fn a_reservation_holds_a_prepaid_balance_without_moving_money() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "", "--plan prepaid");
    lr(&server.db, "buyer fund sunco --amount 40").json();

    let first = ping(&server, &ping_body("ann@example.org"));
    assert_eq!(first["status"], "accepted", "{first}");
    // 10 of 40 is available now: the next ping finds too little.
    let second = ping(&server, &ping_body("bob@example.org"));
    assert_eq!(second["status"], "rejected", "{second}");
    let shown = lr(
        &server.db,
        format!("ping show {}", second["pingId"].as_str().unwrap()),
    )
    .json();
    assert_eq!(
        shown["decision"]["candidates"][0]["reason"],
        "insufficient_balance"
    );
    let ledger = lr(&server.db, "ledger list --buyer sunco").json();
    assert_eq!(
        ledger.as_array().unwrap().len(),
        1,
        "only the fund: {ledger}"
    );

    // The post charges the reserved price once.
    let ping_id = first["pingId"].as_str().unwrap();
    let posted = server.post_json(POST, &post_body(ping_id, "lead-1", "ann@example.org"));
    assert_eq!(posted.status, 201, "{}", posted.text);
    let buyer = lr(&server.db, "buyer show sunco").json();
    assert_eq!(buyer["balance"], json!(10.0), "{buyer}");
}

#[test]
fn a_late_bid_is_no_bid_and_a_bid_below_the_minimum_is_ignored() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "20", "", "");
    bidder(&server.db, &receiver, "late", "--bid-timeout 100ms");
    bidder(&server.db, &receiver, "cheap", "--min-price 30");
    bidder(
        &server.db,
        &receiver,
        "keen",
        "--min-price 10 --max-price 40",
    );
    receiver.answer(
        "/bid/late",
        Answer::ok()
            .json(&json!({"bid": 99, "bidId": "late-1"}))
            .delay(std::time::Duration::from_millis(600)),
    );
    receiver.answer("/bid/cheap", Answer::ok().json(&json!({"bid": 25})));
    receiver.answer(
        "/bid/keen",
        Answer::ok().json(&json!({"bid": 27.50, "bidId": "keen-7"})),
    );

    let pinged = ping(&server, &ping_body("ann@example.org"));
    assert_eq!(pinged["status"], "accepted", "{pinged}");
    let ping_id = pinged["pingId"].as_str().unwrap();
    let shown = lr(&server.db, format!("ping show {ping_id}")).json();
    let outcome = |buyer: &str| {
        shown["bids"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["buyerAccountId"] == buyer)
            .unwrap_or_else(|| panic!("no bid of {buyer}: {shown}"))
            .clone()
    };
    assert_eq!(outcome("late")["outcome"], "timeout", "{shown}");
    // Its wait, from when it was sent: the timeout counts from the ping's arrival.
    assert!(outcome("late")["latencyMs"].as_i64().unwrap() >= 0);
    assert_eq!(outcome("cheap")["outcome"], "below_min");
    assert_eq!(outcome("keen")["outcome"], "bid");
    assert_eq!(outcome("keen")["won"], true);
    assert_eq!(
        shown["reservations"][0]["buyerAccountId"], "keen",
        "{shown}"
    );
    assert_eq!(shown["reservations"][0]["buyerPrice"], json!(27.5));

    // Each bid request is signed and carries no person.
    let asked = receiver.requests_to("/bid/keen");
    assert!(asked[0].is_signed_with(SIGNING_SECRET));
    let request = asked[0].json();
    assert_eq!(request["type"], "lead.bid_request");
    assert_eq!(request["postalCode"], "10115");
    assert!(request.get("email").is_none() && request.get("emailSha256").is_none());

    let posted = server.post_json(POST, &post_body(ping_id, "lead-1", "ann@example.org"));
    assert_eq!(posted.status, 201, "{}", posted.text);
    let event = receiver.wait_for_on("/keen", 1, WAIT)[0].json();
    assert_eq!(event["pricing"]["buyerPrice"], json!(27.5), "{event}");
    assert_eq!(event["bid"]["bidId"], "keen-7");
    assert_eq!(event["bid"]["bidRequestId"], request["bidRequestId"]);
    let transactions = lr(&server.db, "transaction list").json();
    assert_eq!(transactions[0]["bid"]["bidId"], "keen-7", "{transactions}");
}

#[test]
fn bid_pricing_refuses_a_price_and_needs_a_url() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "20", "", "");
    buyer(&server.db, "b", &receiver.url("/b"), None, "");
    lr(
        &server.db,
        "buyer subscribe b --product solar --pricing bid --price 5 --bid-url http://127.0.0.1:9/x",
    )
    .fails(1)
    .stderr_contains("--price is refused with --pricing bid");
    lr(
        &server.db,
        "buyer subscribe b --product solar --pricing bid",
    )
    .fails(1)
    .stderr_contains("--bid-url");
    let terms = lr(&server.db, "buyer subscribe b --product solar --pricing bid --bid-url http://127.0.0.1:9/x --bid-timeout 250ms --max-price 50").json();
    assert_eq!(terms["pricing"], "bid", "{terms}");
    assert_eq!(terms["bid"]["timeout"], "250ms");
    assert_eq!(terms["bid"]["maxPrice"], json!(50.0));
    let fixed = lr(
        &server.db,
        "buyer terms set b --product solar --pricing fixed --price 12",
    )
    .json();
    assert_eq!(fixed["pricing"], "fixed");
    assert_eq!(fixed["price"], json!(12.0));
}

#[test]
fn lead_erase_takes_the_person_out_of_their_pings() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "", "");
    let db = &server.db;
    let id = |answer: &Value| answer["pingId"].as_str().unwrap().to_string();
    let post = |ping_id: &str, external_id: &str, email: &str| {
        let posted = server.post_json(POST, &post_body(ping_id, external_id, email));
        assert_eq!(posted.status, 201, "{}", posted.text);
        posted.json["item"]["leadId"].as_str().unwrap().to_string()
    };
    let shown = |ping_id: &str| lr(db, format!("ping show {ping_id}")).json();
    // Ann: a posted ping and one never posted; Bob: the same, his post a duplicate of
    // Ann's lead (the same phone) held for review, so his ping is released, not posted,
    // yet tied to his lead.
    let ann_posted = id(&ping(&server, &ping_body("ann@example.org")));
    post(&ann_posted, "ann-1", "ann@example.org");
    let ann_pending = id(&ping(&server, &ping_body("ann@example.org")));
    let bob_posted = id(&ping(&server, &ping_body("bob@example.org")));
    let bob_lead = post(&bob_posted, "bob-1", "bob@example.org");
    assert_eq!(shown(&bob_posted)["status"], "released");
    assert_eq!(shown(&bob_posted)["leadId"], bob_lead.as_str());
    let bob_pending = id(&ping(&server, &ping_body("bob@example.org")));
    assert_eq!(shown(&ann_pending)["emailSha256"], sha("ann@example.org"));

    // By email (normalised as for duplicates): every ping that promised Ann's hash.
    lr(db, "lead erase --email ANN@Example.org --yes").json();
    for ping_id in [&ann_posted, &ann_pending] {
        let erased = shown(ping_id);
        assert!(erased["emailSha256"].is_null(), "{erased}");
        assert!(erased["phoneSha256"].is_null(), "{erased}");
        assert_eq!(
            erased["body"],
            json!({"productSlug": "solar", "country": "DE"}),
            "no postal code or properties: {erased}"
        );
    }
    assert_eq!(shown(&ann_posted)["status"], "posted", "the record stays");
    assert_eq!(shown(&bob_posted)["emailSha256"], sha("bob@example.org"));

    // By lead: the ping whose post made the lead, no other.
    lr(db, format!("lead erase --lead {bob_lead} --yes")).json();
    let erased = shown(&bob_posted);
    assert!(
        erased["emailSha256"].is_null() && erased["phoneSha256"].is_null(),
        "{erased}"
    );
    assert_eq!(shown(&bob_pending)["emailSha256"], sha("bob@example.org"));
}

#[test]
fn a_post_its_reserved_buyer_refuses_falls_to_the_next_bidder() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "", "");
    let db = &server.db;
    // `sunco` takes leads into its own API, which refuses this one.
    let document = json!({
        "method": "POST", "format": "json", "url": receiver.url("/crm"),
        "body": {"email": {"from": "/lead/email"}, "price": {"from": "/pricing/buyerPrice"}},
        "accept": {"status": [200], "pointer": "/result", "equals": "success"},
        "rejectReason": "/message",
    });
    let file = db.path.parent().unwrap().join("sunco-integration.json");
    std::fs::write(&file, document.to_string()).unwrap();
    lr(db, "buyer integration set sunco --file")
        .arg(&file)
        .json();
    receiver.answer(
        "/crm",
        Answer::ok().json(&json!({"result": "failure", "message": "duplicate"})),
    );
    // Behind it: a bidder that bid 27.50 on the ping, and a fixed price of 20.
    bidder(&server.db, &receiver, "keen", "");
    receiver.answer(
        "/bid/keen",
        Answer::ok().json(&json!({"bid": 27.50, "bidId": "keen-7"})),
    );
    buyer(db, "low", &receiver.url("/low"), Some("20"), "");

    let pinged = ping(&server, &ping_body("ann@example.org"));
    let ping_id = pinged["pingId"].as_str().unwrap();
    let shown = lr(db, format!("ping show {ping_id}")).json();
    assert_eq!(
        shown["reservations"][0]["buyerAccountId"], "sunco",
        "{shown}"
    );
    let posted = server.post_json(POST, &post_body(ping_id, "lead-1", "ann@example.org"));
    assert_eq!(posted.status, 201, "{}", posted.text);
    let lead_id = posted.json["item"]["leadId"].as_str().unwrap();

    // Refused by sunco's API, the lead goes to the next bidder at its bid, the supplier
    // earning what the ping promised.
    let event = receiver.wait_for_on("/keen", 1, WAIT)[0].json();
    assert_eq!(event["leadId"], lead_id, "{event}");
    assert_eq!(event["pricing"]["buyerPrice"], json!(27.5), "{event}");
    assert_eq!(event["pricing"]["supplierCost"], json!(4.0));
    assert_eq!(event["bid"]["bidId"], "keen-7");
    let decision = lr(db, format!("lead show {lead_id}")).json()["requests"][0]["decision"].clone();
    let step = &decision["waterfall"][0];
    assert_eq!(step["refusedBy"], "sunco", "{decision}");
    assert_eq!(step["reason"], "duplicate");
    assert_eq!(step["deliveredTo"], json!(["keen"]));
    assert_eq!(
        decision["pingId"], ping_id,
        "the trace still names the ping"
    );
    assert_eq!(receiver.requests_to("/crm").len(), 1);
    assert!(receiver.requests_to("/low").is_empty());
}

#[test]
fn purge_deletes_old_pings_never_posted_with_their_bids_and_keeps_the_others() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "30", "--daily-cap 1", "");
    bidder(&server, &receiver, "keen", "--daily-cap 1");
    receiver.answer(
        "/bid/keen",
        Answer::ok().json(&json!({"bid": 27.50, "bidId": "keen-1"})),
    );
    let db = &server.db;
    let id = |answer: &Value| answer["pingId"].as_str().unwrap().to_string();
    let shown = |ping_id: &str| lr(db, format!("ping show {ping_id}")).json();
    // Posted: sunco's place (the higher price).
    let posted = id(&ping(&server, &ping_body("ann@example.org")));
    let lead = server.post_json(POST, &post_body(&posted, "ann-1", "ann@example.org"));
    assert_eq!(lead.status, 201, "{}", lead.text);
    // Released: keen's place, its post refused.
    let released = id(&ping(&server, &ping_body("bob@example.org")));
    let mut invalid = post_body(&released, "bob-1", "bob@example.org");
    invalid.as_object_mut().unwrap().remove("lastName");
    assert_eq!(server.post_json(POST, &invalid).status, 400);
    assert_eq!(shown(&released)["status"], "released");
    assert_eq!(shown(&released)["bids"][0]["buyerAccountId"], "keen");
    // Accepted and unexpired: keen's place again, held for its post.
    let pending = id(&ping(&server, &ping_body("cid@example.org")));
    assert_eq!(shown(&pending)["status"], "accepted");
    // Rejected: both places taken.
    let rejected = ping(&server, &ping_body("dan@example.org"));
    assert_eq!(rejected["status"], "rejected", "{rejected}");
    let rejected = id(&rejected);

    // Younger than the cutoff: nothing goes.
    let young = lr(db, "purge --older-than 1d").json();
    assert_eq!(young["pings"], 0, "{young}");
    let dry = lr(db, "purge --older-than 1ms --dry-run").json();
    assert_eq!(dry["pings"], 2, "the released and the rejected: {dry}");
    assert_eq!(
        shown(&released)["status"],
        "released",
        "a dry run keeps them"
    );

    let purged = lr(db, "purge --older-than 1ms").json();
    assert_eq!(purged["pings"], 2, "{purged}");
    assert_eq!(purged["leads"], 1, "{purged}");
    for gone in [&released, &rejected] {
        lr(db, format!("ping show {gone}"))
            .fails(1)
            .stderr_contains(gone.as_str());
    }
    let conn =
        rusqlite::Connection::open_with_flags(&db.path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let left = |sql: &str| -> i64 {
        conn.query_row(sql, [&released, &rejected], |row| row.get(0))
            .unwrap()
    };
    assert_eq!(
        left("SELECT count(*) FROM bids WHERE ping_id IN (?1, ?2)"),
        0,
        "their bids went too"
    );
    assert_eq!(
        left("SELECT count(*) FROM ping_reservations WHERE ping_id IN (?1, ?2)"),
        0
    );
    // The posted one stays with its lead's tombstone; the pending one with its place.
    let kept = shown(&posted);
    assert_eq!(kept["status"], "posted", "{kept}");
    assert!(
        kept["emailSha256"].is_null(),
        "tombstoned with its lead: {kept}"
    );
    assert_eq!(shown(&pending)["status"], "accepted");
    assert_eq!(lr(db, "purge --older-than 1ms").json()["pings"], 0);
    lr(db, "check").json();
}

#[test]
fn bid_timeouts_count_from_the_arrival_of_the_ping() {
    use std::io::{Read, Write};
    let receiver = Receiver::start();
    let server = TestServer::start();
    market(&server, &receiver, "20", "", "");
    bidder(&server.db, &receiver, "keen", "--bid-timeout 300ms");
    receiver.answer(
        "/bid/keen",
        Answer::ok().json(&json!({"bid": 27.50, "bidId": "keen-1"})),
    );
    // The partner waits from its request's arrival: a ping whose body comes 500 ms after
    // its headers has spent keen's 300 ms when it is read, and does not wait for keen
    // again (the delay is the scenario, not a wait for a condition).
    let body = ping_body("ann@example.org").to_string();
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    write!(
        stream,
        "POST {PING} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let json = &answer[answer.find('{').unwrap()..=answer.rfind('}').unwrap()];
    let pinged: Value = serde_json::from_str(json).unwrap();
    assert_eq!(pinged["status"], "accepted", "{pinged}");
    let shown = lr(
        &server.db,
        format!("ping show {}", pinged["pingId"].as_str().unwrap()),
    )
    .json();
    let keen = shown["bids"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["buyerAccountId"] == "keen")
        .unwrap_or_else(|| panic!("no bid of keen: {shown}"))
        .clone();
    assert_eq!(keen["outcome"], "timeout", "{shown}");
    assert_eq!(
        shown["reservations"][0]["buyerAccountId"], "sunco",
        "{shown}"
    );
}
