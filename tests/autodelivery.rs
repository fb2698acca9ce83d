//! Automated delivery (Delivery 1.0): the evaluator and schedule commands, and the whole
//! path over HTTP — a lead posted to the real server is evaluated, delivered to a real
//! local webhook receiver, and its decision is shown by `leadrelay lead show`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::receiver::Receiver;
use crate::util::{
    TempDb, TestServer, WAIT, Words, basic_setup, buyer, channel, complete_lead, keys, lr, product,
    source, table_source,
};

#[test]
fn evaluator_weights_are_shown_changed_and_reset_per_workspace() {
    let db = TempDb::new();
    basic_setup(&db);
    lr(&db, "workspace create --name Other --id other").json();

    let shown = lr(&db, "evaluator show --workspace ws").json();
    assert_eq!(shown["model"], "leadrelay-logistic-v1");
    assert_eq!(shown["custom"], false);
    assert_eq!(shown["weights"], shown["defaults"]);
    let names = keys(&shown["weights"]);
    assert_eq!(
        names,
        [
            "intercept",
            "validEmail",
            "validPhone",
            "names",
            "addressCompleteness",
            "consentGranted",
            "requiredFields",
            "softQualityFlags",
            "duplicatesSeen"
        ]
    );
    assert_eq!(
        shown["thresholds"],
        json!([
            {"containerId": "web", "kind": "channel", "autoDelivery": true, "scoreThreshold": 50},
            {"containerId": "list", "kind": "table", "autoDelivery": false, "scoreThreshold": 50},
        ])
    );

    let set = lr(
        &db,
        "evaluator set --workspace ws --weight validPhone=2.5 --weight intercept=-2",
    )
    .json();
    assert_eq!(set["custom"], true);
    assert_eq!(set["weights"]["validPhone"], 2.5);
    assert_eq!(set["weights"]["intercept"], -2.0);
    assert_eq!(set["weights"]["validEmail"], 1.5, "others keep their value");
    let again = lr(&db, "evaluator show --workspace ws").json();
    assert_eq!(again["weights"], set["weights"], "stored");
    let other = lr(&db, "evaluator show --workspace other").json();
    assert_eq!(other["custom"], false, "weights are per workspace");

    // A file replaces the whole model: names it leaves out take their defaults.
    let file = db.dir.path().join("weights.json");
    std::fs::write(&file, r#"{"names": 3, "softQualityFlags": -0.25}"#).unwrap();
    let from_file = lr(
        &db,
        format!(
            "evaluator set --workspace ws --file {}",
            file.to_str().unwrap()
        ),
    )
    .json();
    assert_eq!(from_file["weights"]["names"], 3.0);
    assert_eq!(from_file["weights"]["softQualityFlags"], -0.25);
    assert_eq!(
        from_file["weights"]["validPhone"], 1.5,
        "back to the default"
    );

    let reset = lr(&db, "evaluator set --workspace ws --reset").json();
    assert_eq!(reset["custom"], false);
    assert_eq!(reset["weights"], reset["defaults"]);
}

#[test]
fn evaluator_set_refuses_bad_input_and_changes_nothing() {
    let db = TempDb::new();
    basic_setup(&db);
    lr(&db, "evaluator set --workspace ws --weight names=2").json();
    let bad_file = db.dir.path().join("bad.json");
    std::fs::write(&bad_file, r#"{"names": "lots"}"#).unwrap();
    let not_json = db.dir.path().join("not.json");
    std::fs::write(&not_json, "names=3").unwrap();
    let bad_file = bad_file.to_str().unwrap();
    let not_json = not_json.to_str().unwrap();
    // (arguments, exit code, a piece of the message)
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--weight", "shoeSize=1"], 2, "unknown weight 'shoeSize'"),
        (&["--weight", "names=high"], 2, "not a number"),
        (&["--weight", "names"], 2, "NAME=NUMBER"),
        (&["--weight", "names=1e9"], 2, "-100 to 100"),
        (
            &["--reset", "--weight", "names=1"],
            2,
            "cannot be used with",
        ),
        (&[], 2, "required"),
        (&["--file", bad_file], 1, "weight names must be a number"),
        (&["--file", not_json], 1, "is not JSON"),
        (&["--file", "/nonexistent/w.json"], 1, "cannot read"),
    ];
    for (args, code, message) in cases {
        lr(&db, "evaluator set --workspace ws")
            .args(*args)
            .fails(*code)
            .stderr_contains(message);
    }
    lr(&db, "evaluator show --workspace nope")
        .fails(1)
        .stderr_contains("unknown workspace 'nope'");
    let shown = lr(&db, "evaluator show --workspace ws").json();
    assert_eq!(shown["weights"]["names"], 2.0, "nothing changed");
}

#[test]
fn subscriptions_take_schedules() {
    let db = TempDb::new();
    basic_setup(&db);
    lr(
        &db,
        "buyer create --workspace ws --name SunCo --id sunco --webhook-url \
         http://127.0.0.1:9/leads",
    )
    .json();
    let subscribed = lr(
        &db,
        "buyer subscribe sunco --product solar --price 25 --schedule 'mon-fri 08:00-18:00' \
         --schedule 'sat 22:00-02:00'",
    )
    .json();
    assert_eq!(
        subscribed["schedules"],
        json!(["mon-fri 08:00-18:00", "sat 22:00-02:00"])
    );
    let stored: String = rusqlite::Connection::open(&db.path)
        .unwrap()
        .query_row("SELECT schedule FROM subscriptions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&stored).unwrap(),
        json!([
            {"days": [1, 2, 3, 4, 5], "from": "08:00", "to": "18:00"},
            {"days": [6], "from": "22:00", "to": "02:00"},
        ])
    );
    // Clearing the schedule means always open.
    let always = lr(
        &db,
        "buyer terms set sunco --product solar --clear-schedule",
    )
    .json();
    assert_eq!(always["schedules"], json!([]));

    lr(
        &db,
        "buyer terms set sunco --product solar --schedule 'someday 8-18'",
    )
    .fails(2)
    .stderr_contains("schedule 'someday 8-18'");
}

// ---------------------------------------------------------------------------------------
// Over HTTP, with a real local receiver.
// ---------------------------------------------------------------------------------------

/// The path of source `source` in channel `channel`.
fn lead_path(channel: &str, source: &str) -> String {
    format!("/api/webhooks/channels/{channel}/sources/{source}/leads")
}

/// The path of source `source` in lead table `table`.
fn table_path(table: &str, source: &str) -> String {
    format!("/api/webhooks/lead-tables/{table}/sources/{source}/leads")
}

/// A server whose outbox workers look for due events only once a minute: an event that
/// reaches the receiver within [`WAIT`] was sent because ingest woke the workers.
fn start() -> (TestServer, Receiver) {
    let options = leadrelay::service::ServiceOptions {
        delivery: leadrelay::outbox::WorkerConfig {
            poll_interval: Duration::from_secs(60),
            ..Default::default()
        },
        ..Default::default()
    };
    let server = TestServer::start_with(TempDb::new(), options);
    basic_setup(&server);
    source(
        &server,
        "web",
        "landing",
        "--no-secret --result-detail full",
    );
    (server, Receiver::start())
}

/// A buyer `id` posting to the receiver's `/id`, subscribed to `solar` at `price` with
/// `terms` (`--daily-cap 5`, `--filter …`); `create` adds flags to `buyer create`.
fn add_buyer(
    server: &TestServer,
    receiver: &Receiver,
    id: &str,
    price: &str,
    create: impl Words,
    terms: impl Words,
) {
    buyer(server, id, &receiver.url(&format!("/{id}")), None, create);
    lr(
        server,
        format!("buyer subscribe {id} --product solar --price {price}"),
    )
    .args(terms.words())
    .json();
}

/// A complete lead (score 99 with the default weights) interested in `solar` with
/// automated delivery; `n` makes its external id and contact data unique.
fn lead(n: usize) -> Value {
    let phone = format!("+49 30 {:07}", 1_000_000 + n);
    complete_lead(&format!("lead-{n}"), &format!("ann{n}@example.com"), &phone)
}

/// Posts `body` to `path`; returns the status and the `item`.
fn post(server: &TestServer, path: &str, body: &Value) -> (u16, Value) {
    let reply = server.post_json(path, body);
    assert!(
        reply.status == 200 || reply.status == 201,
        "{path}: {} {}",
        reply.status,
        reply.text
    );
    (reply.status, reply.json["item"].clone())
}

fn count(db: &Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// The candidates as (buyer, eligible, reason), in the order given.
fn verdicts(request: &Value) -> Vec<(String, bool, String)> {
    request["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["buyerAccountId"].as_str().unwrap().to_string(),
                c["eligible"].as_bool().unwrap(),
                c["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// ISO weekday names (`mon` …) of the local dates `offsets` days from today in `zone`.
fn local_days(zone: &str, offsets: &[i64]) -> Vec<&'static str> {
    const NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::get(zone).unwrap())
        .date();
    offsets
        .iter()
        .map(|offset| {
            let day = today.checked_add(jiff::Span::new().days(*offset)).unwrap();
            NAMES[day.weekday().to_monday_zero_offset() as usize]
        })
        .collect()
}

#[test]
fn a_lead_goes_to_the_best_eligible_buyer_and_the_decision_explains_every_buyer() {
    let (server, receiver) = start();
    let db = &server.db.path;
    // Days on which the schedule of `closed` is open: neither today nor tomorrow (UTC), so
    // the test cannot straddle an opening.
    let other_days = local_days("UTC", &[2, 3, 4, 5, 6]).join(",");
    let buyers: &[(&str, &str, &[&str], &[&str])] = &[
        ("top", "30", &[], &[]),
        ("runner", "25", &[], &["--priority", "9"]),
        ("paused", "90", &[], &[]),
        (
            "munich",
            "80",
            &[],
            &["--filter", "country=DE", "--filter", "postalCode=80*"],
        ),
        ("closed", "70", &[], &["--schedule", &other_days]),
        ("full_today", "65", &[], &["--daily-cap", "0"]),
        (
            "full_month",
            "60",
            &[],
            &["--daily-cap", "9", "--monthly-cap", "0"],
        ),
        (
            "broke",
            "55",
            &["--plan", "prepaid", "--credit-limit", "54.99"],
            &[],
        ),
    ];
    for (id, price, create, terms) in buyers {
        add_buyer(&server, &receiver, id, price, create, terms);
    }
    lr(&server, "buyer pause paused").json();

    let (status, item) = post(&server, &lead_path("web", "landing"), &lead(1));
    assert_eq!(status, 201);
    assert_eq!(item["status"], "accepted");
    let auto = &item["autoDelivery"];
    assert_eq!(auto["version"], "1.0");
    assert_eq!(auto["delivered"], 1);
    let request = &auto["requests"][0];
    assert_eq!(request["requestId"], item["requestIds"][0]);
    assert_eq!(request["outcome"], "delivered");
    assert_eq!(request["reason"], "delivered");

    let evaluation = &request["evaluation"];
    assert_eq!(evaluation["model"], "leadrelay-logistic-v1");
    assert_eq!(evaluation["score"], 99);
    assert_eq!(evaluation["threshold"], 50);
    assert_eq!(evaluation["passed"], true);
    let factors: Vec<(&str, f64)> = evaluation["factors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["value"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        factors,
        [
            ("intercept", 1.0),
            ("validEmail", 1.0),
            ("validPhone", 1.0),
            ("names", 1.0),
            ("addressCompleteness", 1.0),
            ("consentGranted", 1.0),
            ("requiredFields", 1.0),
            ("softQualityFlags", 0.0),
            ("duplicatesSeen", 0.0)
        ]
    );
    // No category group weighs anything with the default weights, so none is listed.

    let delivery = &request["deliveries"][0];
    assert_eq!(request["deliveries"].as_array().unwrap().len(), 1);
    assert_eq!(delivery["buyerAccountId"], "top");
    assert_eq!(delivery["buyerPrice"], 30.0);
    assert_eq!(delivery["deliveryMode"], "exclusive");

    // Ranked by price; each ineligible buyer says why.
    let expected = [
        ("paused", false, "buyer_paused"),
        ("munich", false, "filter_mismatch"),
        ("closed", false, "schedule_closed"),
        ("full_today", false, "daily_cap_reached"),
        ("full_month", false, "monthly_cap_reached"),
        ("broke", false, "insufficient_balance"),
        ("top", true, "selected"),
        ("runner", true, "not_selected"),
    ];
    let expected: Vec<(String, bool, String)> = expected
        .iter()
        .map(|(b, e, r)| (b.to_string(), *e, r.to_string()))
        .collect();
    assert_eq!(verdicts(request), expected);
    assert_eq!(
        request["candidates"][1]["detail"],
        json!({"field": "postalCode"}),
        "the partner learns which field"
    );
    assert!(
        request["candidates"][5].get("detail").is_none()
            && request["candidates"][5].get("buyerPrice").is_none(),
        "a buyer's balance and price are not the partner's business"
    );

    // The event reaches the buyer at once (the workers poll only once a minute).
    let events = receiver.wait_for_on("/top", 1, WAIT);
    let event = events[0].json();
    assert_eq!(event["transactionId"], delivery["transactionId"]);
    assert_eq!(event["leadRequestId"], request["requestId"]);
    assert_eq!(event["pricing"]["buyerPrice"], 30.0);
    assert_eq!(count(db, "SELECT count(*) FROM transactions"), 1);

    // The operator's view keeps the decision with every detail.
    let lead_id = item["leadId"].as_str().unwrap();
    let shown = lr(&server, format!("lead show {lead_id}")).json();
    let stored = &shown["requests"][0];
    assert_eq!(stored["status"], "delivered");
    let decision = &stored["decision"];
    assert_eq!(decision["version"], "1.0");
    assert_eq!(decision["reason"], "delivered");
    assert_eq!(decision["evaluation"], request["evaluation"]);
    assert_eq!(decision["deliveries"], request["deliveries"]);
    assert_eq!(verdicts(decision), verdicts(request));
    let candidates = &decision["candidates"];
    assert_eq!(
        candidates[1]["detail"],
        json!({"field": "postalCode", "op": "prefix", "values": ["80"]})
    );
    assert_eq!(candidates[2]["detail"]["timezone"], "UTC");
    assert_eq!(candidates[3]["detail"], json!({"cap": 0, "count": 0}));
    assert_eq!(
        candidates[5]["detail"],
        json!({"buyerPrice": 55.0, "available": 54.99})
    );
    assert_eq!(candidates[6]["buyerPrice"], 30.0);
    assert_eq!(candidates[7]["priority"], 9);
    let text = lr(db, format!("lead show {lead_id}")).ok();
    for expected in [
        "filter_mismatch",
        "postalCode",
        "schedule_closed",
        "not_selected",
    ] {
        assert!(
            text.contains(expected),
            "lead show prints {expected}:\n{text}"
        );
    }
}

#[test]
fn every_early_stop_ends_with_its_reason_and_delivers_nothing() {
    let (server, receiver) = start();
    let db = &server.db.path;
    add_buyer(&server, &receiver, "anyone", "10", "", "");
    channel(&server, "manual", "--auto-delivery off");
    source(
        &server,
        "manual",
        "manual-src",
        "--no-secret --result-detail full",
    );
    table_source(
        &server,
        "list",
        "list-src",
        "--no-secret --result-detail full",
    );
    channel(&server, "picky", "--score-threshold 100");
    source(
        &server,
        "picky",
        "picky-src",
        "--no-secret --result-detail full",
    );
    product(&server, "wind", "");
    // The first lead of this email arrives without auto-delivery; the second is its
    // duplicate and is kept for review.
    let mut original = lead(100);
    original["triggerAutoDelivery"] = json!(false);
    let (_, original) = post(&server, &lead_path("web", "landing"), &original);
    assert!(
        original.get("autoDelivery").is_none(),
        "not requested, not present"
    );

    let web = lead_path("web", "landing");
    let mut not_ready = lead(1);
    not_ready["routingReady"] = json!(false);
    let mut duplicate = lead(2);
    duplicate["email"] = json!("ann100@example.com");
    let mut invalid = lead(3);
    invalid["email"] = json!("not-an-address");
    invalid.as_object_mut().unwrap().remove("phone");
    let mut unwanted = lead(6);
    unwanted["productSlug"] = json!("wind");
    // (path, lead, reason, evaluated)
    let cases: Vec<(String, Value, &str, bool)> = vec![
        (web.clone(), not_ready, "not_routing_ready", false),
        (web.clone(), duplicate, "duplicate_review", false),
        (web.clone(), invalid, "quality_invalid", false),
        (
            lead_path("manual", "manual-src"),
            lead(4),
            "auto_delivery_disabled",
            false,
        ),
        (
            table_path("list", "list-src"),
            lead(7),
            "auto_delivery_disabled",
            false,
        ),
        (
            lead_path("picky", "picky-src"),
            lead(5),
            "score_below_threshold",
            true,
        ),
        (web.clone(), unwanted, "no_eligible_buyer", true),
    ];
    for (path, body, reason, evaluated) in &cases {
        let (_, item) = post(&server, path, body);
        let auto = &item["autoDelivery"];
        assert_eq!(auto["delivered"], 0, "{reason}");
        let request = &auto["requests"][0];
        assert_eq!(request["outcome"], "not_delivered", "{reason}");
        assert_eq!(request["reason"], *reason);
        assert_eq!(request["deliveries"], json!([]), "{reason}");
        assert_eq!(request["candidates"], json!([]), "{reason}");
        assert_eq!(!request["evaluation"].is_null(), *evaluated, "{reason}");
        let shown = lr(
            &server,
            format!("lead show {}", item["leadId"].as_str().unwrap()),
        )
        .json();
        assert_eq!(shown["requests"][0]["status"], "not_delivered", "{reason}");
        assert_eq!(shown["requests"][0]["decision"]["reason"], *reason);
    }
    let low = &cases[5];
    let (_, replay) = post(&server, &low.0, &low.1);
    let evaluation = &replay["autoDelivery"]["requests"][0]["evaluation"];
    assert_eq!(evaluation["score"], 99);
    assert_eq!(evaluation["threshold"], 100);
    assert_eq!(evaluation["passed"], false);

    assert_eq!(count(db, "SELECT count(*) FROM transactions"), 0);
    assert_eq!(count(db, "SELECT count(*) FROM outbox_events"), 0);
    assert_eq!(
        count(
            db,
            "SELECT count(*) FROM lead_requests WHERE status = 'open'"
        ),
        1,
        "only the request that did not ask stays open"
    );
    assert_eq!(receiver.count(), 0);
}

#[test]
fn multi_mode_delivers_to_up_to_max_buyers_and_charges_each() {
    let (server, receiver) = start();
    let db = &server.db.path;
    channel(&server, "shared", "--delivery-mode multi --max-buyers 2");
    source(
        &server,
        "shared",
        "shared-src",
        "--no-secret --result-detail full",
    );
    add_buyer(&server, &receiver, "first", "30", "--plan prepaid", "");
    lr(&server, "buyer fund first --amount 100").json();
    add_buyer(&server, &receiver, "second", "20", "", "");
    add_buyer(&server, &receiver, "third", "10", "", "");
    lr(&server, "product update solar --supplier-cost 4").json();

    let (_, item) = post(&server, &lead_path("shared", "shared-src"), &lead(1));
    let auto = &item["autoDelivery"];
    assert_eq!(auto["delivered"], 2);
    let request = &auto["requests"][0];
    let delivered: Vec<(&str, f64, &str)> = request["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["buyerAccountId"].as_str().unwrap(),
                d["buyerPrice"].as_f64().unwrap(),
                d["deliveryMode"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        delivered,
        [("first", 30.0, "multi"), ("second", 20.0, "multi")]
    );
    let reasons: Vec<String> = verdicts(request).into_iter().map(|v| v.2).collect();
    assert_eq!(reasons, ["selected", "selected", "not_selected"]);
    receiver.wait_for_on("/first", 1, WAIT);
    receiver.wait_for_on("/second", 1, WAIT);
    let buyers = lr(&server, "buyer list").json();
    let first = buyers
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "first")
        .unwrap();
    assert_eq!(first["balance"], 70.0, "the prepaid buyer paid its price");
    assert_eq!(count(db, "SELECT count(*) FROM transactions"), 2);
    // The lead is bought once: the second delivery of the request, in the same job as the
    // first, sees the first's transaction.
    let costs: Vec<(String, f64)> = lr(&server, "transaction list")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let buyer = t["buyerAccountId"].as_str().unwrap().to_string();
            (buyer, t["supplierCost"].as_f64().unwrap())
        })
        .collect();
    assert_eq!(
        costs,
        [("second".to_string(), 0.0), ("first".to_string(), 4.0)],
        "newest first"
    );
    let lead_id = item["leadId"].as_str().unwrap();
    let shown = lr(&server, format!("lead show {lead_id}")).json();
    assert_eq!(shown["requests"][0]["status"], "delivered");
}

#[test]
fn equal_buyers_take_turns_by_who_was_served_longest_ago() {
    let (server, receiver) = start();
    add_buyer(&server, &receiver, "a", "20", "", "");
    add_buyer(&server, &receiver, "b", "20", "", "");
    add_buyer(&server, &receiver, "c", "20", "", "--priority=-1");
    let mut winners = Vec::new();
    for n in 0..4 {
        let (_, item) = post(&server, &lead_path("web", "landing"), &lead(n));
        winners.push(
            item["autoDelivery"]["requests"][0]["deliveries"][0]["buyerAccountId"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(winners, ["a", "b", "a", "b"], "c has a lower priority");
}

#[test]
fn one_leads_interests_are_decided_in_order_and_share_the_balance() {
    let (server, receiver) = start();
    product(&server, "heat", "");
    add_buyer(&server, &receiver, "both", "20", "--plan prepaid", "");
    lr(&server, "buyer subscribe both --product heat --price 20").json();
    lr(&server, "buyer fund both --amount 30").json();
    let mut two = lead(1);
    for key in ["productSlug", "triggerAutoDelivery"] {
        two.as_object_mut().unwrap().remove(key);
    }
    two["requests"] = json!([
        {"productSlug": "solar", "triggerAutoDelivery": true},
        {"productSlug": "heat", "triggerAutoDelivery": true},
    ]);
    let (_, item) = post(&server, &lead_path("web", "landing"), &two);
    let auto = &item["autoDelivery"];
    assert_eq!(auto["delivered"], 1);
    assert_eq!(auto["requests"][0]["requestId"], item["requestIds"][0]);
    assert_eq!(auto["requests"][0]["reason"], "delivered");
    assert_eq!(auto["requests"][1]["reason"], "no_eligible_buyer");
    assert_eq!(
        auto["requests"][1]["candidates"][0]["reason"], "insufficient_balance",
        "the second interest sees the first one's charge"
    );
}

#[test]
fn daily_caps_and_prepaid_balances_hold_under_concurrent_ingest() {
    const LEADS: usize = 40;
    const CAP: usize = 5;
    const AFFORDABLE: usize = 3;
    let (server, receiver) = start();
    let db = &server.db.path;
    add_buyer(&server, &receiver, "capped", "30", "", "--daily-cap 5");
    add_buyer(&server, &receiver, "prepaid", "20", "--plan prepaid", "");
    lr(&server, "buyer fund prepaid --amount 60").json();

    let path = lead_path("web", "landing");
    let results: Vec<Value> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|worker| {
                let (server, path) = (&server, &path);
                scope.spawn(move || {
                    (worker..LEADS)
                        .step_by(8)
                        .map(|n| post(server, path, &lead(n)).1)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a posting thread finishes"))
            .collect()
    });
    let winners = |buyer: &str| {
        results
            .iter()
            .filter(|item| {
                item["autoDelivery"]["requests"][0]["deliveries"][0]["buyerAccountId"] == buyer
            })
            .count()
    };
    assert_eq!(winners("capped"), CAP);
    assert_eq!(winners("prepaid"), AFFORDABLE);
    let left_out: Vec<&Value> = results
        .iter()
        .filter(|item| item["autoDelivery"]["delivered"] == 0)
        .collect();
    assert_eq!(left_out.len(), LEADS - CAP - AFFORDABLE);
    for item in left_out {
        let request = &item["autoDelivery"]["requests"][0];
        assert_eq!(request["reason"], "no_eligible_buyer");
        let reasons: Vec<String> = verdicts(request).into_iter().map(|v| v.2).collect();
        assert_eq!(reasons, ["daily_cap_reached", "insufficient_balance"]);
    }

    let total = CAP + AFFORDABLE;
    assert_eq!(
        count(db, "SELECT count(*) FROM transactions") as usize,
        total
    );
    assert_eq!(
        count(db, "SELECT balance_cents FROM buyers WHERE id = 'prepaid'"),
        0
    );
    // Every event was sent once: once all are delivered, no further one can come.
    wait_until_delivered(db, total);
    assert_eq!(receiver.requests_to("/capped").len(), CAP);
    assert_eq!(receiver.requests_to("/prepaid").len(), AFFORDABLE);
}

fn wait_until_delivered(db: &Path, total: usize) {
    crate::util::wait_until(WAIT, "every event delivered", || {
        count(
            db,
            "SELECT count(*) FROM outbox_events WHERE status = 'delivered'",
        ) as usize
            == total
    });
    assert_eq!(
        count(db, "SELECT count(*) FROM outbox_events") as usize,
        total
    );
}

#[test]
fn scores_are_deterministic_and_follow_the_workspace_weights() {
    let (server, receiver) = start();
    source(
        &server,
        "web",
        "open",
        "--no-secret --dedupe-fields none --result-detail full",
    );
    add_buyer(&server, &receiver, "anyone", "10", "", "");
    let path = lead_path("web", "open");
    // Valid email, names, nothing else: just above the default threshold.
    // Each one a new person (no duplicate seen), captured at the same hour.
    let sparse = |n: usize| {
        json!({
            "externalId": format!("sparse-{n}"),
            "firstName": "Bea",
            "lastName": "Kim",
            "email": format!("bea{n}@example.com"),
            "capturedAt": "2025-06-01T10:00:00Z",
            "productSlug": "solar",
            "triggerAutoDelivery": true,
        })
    };
    let first = post(&server, &path, &sparse(1)).1["autoDelivery"]["requests"][0].clone();
    let second = post(&server, &path, &sparse(2)).1["autoDelivery"]["requests"][0].clone();
    assert_eq!(first["evaluation"]["score"], 62);
    assert_eq!(
        first["evaluation"], second["evaluation"],
        "same lead, same score"
    );
    assert_eq!(first["reason"], "delivered");

    lr(
        &server,
        "evaluator set --workspace ws --weight intercept=-4",
    )
    .json();
    let lowered = post(&server, &path, &sparse(3)).1["autoDelivery"]["requests"][0].clone();
    assert_eq!(lowered["evaluation"]["score"], 38);
    assert_eq!(lowered["evaluation"]["factors"][0]["contribution"], -4.0);
    assert_eq!(lowered["reason"], "score_below_threshold");

    lr(&server, "evaluator set --workspace ws --reset").json();
    let reset = post(&server, &path, &sparse(4)).1["autoDelivery"]["requests"][0].clone();
    assert_eq!(reset["evaluation"], first["evaluation"]);
}

#[test]
fn schedules_open_and_close_in_the_workspace_time_zone() {
    // Kiritimati is UTC+14: for most of the UTC day its date is a day ahead, so reading the
    // schedule in UTC would pick the wrong buyer.
    const ZONE: &str = "Pacific/Kiritimati";
    let server = TestServer::start();
    let receiver = Receiver::start();
    let db = &server.db.path;
    lr(
        db,
        format!("workspace create --name Far --id ws --timezone {ZONE}"),
    )
    .json();
    channel(&server, "web", "");
    product(&server, "solar", "");
    source(
        &server,
        "web",
        "landing",
        "--no-secret --result-detail full",
    );
    // Open today and tomorrow in the workspace's zone, closed on the other days; the other
    // buyer pays more but is open only on those other days.
    let open_days = local_days(ZONE, &[0, 1]).join(",");
    let closed_days = local_days(ZONE, &[2, 3, 4, 5, 6]).join(",");
    let open_window = format!("{open_days} 00:00-24:00");
    add_buyer(
        &server,
        &receiver,
        "open",
        "20",
        "",
        ["--schedule", &open_window],
    );
    add_buyer(
        &server,
        &receiver,
        "closed",
        "40",
        "",
        ["--schedule", &closed_days],
    );
    let (_, item) = post(&server, &lead_path("web", "landing"), &lead(1));
    let request = &item["autoDelivery"]["requests"][0];
    assert_eq!(request["deliveries"][0]["buyerAccountId"], "open");
    assert_eq!(
        verdicts(request),
        [
            ("closed".to_string(), false, "schedule_closed".to_string()),
            ("open".to_string(), true, "selected".to_string())
        ]
    );
    let shown = lr(
        &server,
        format!("lead show {}", item["leadId"].as_str().unwrap()),
    )
    .json();
    assert_eq!(
        shown["requests"][0]["decision"]["candidates"][0]["detail"]["timezone"],
        ZONE
    );
}

#[test]
fn a_replay_answers_the_first_decision_and_delivers_once() {
    let (server, receiver) = start();
    add_buyer(&server, &receiver, "anyone", "10", "", "");
    let path = lead_path("web", "landing");
    let (created, first) = post(&server, &path, &lead(1));
    let (replayed, again) = post(&server, &path, &lead(1));
    assert_eq!((created, replayed), (201, 200));
    assert_eq!(again["status"], "idempotent_replay");
    assert_eq!(again["autoDelivery"], first["autoDelivery"]);
    assert_eq!(
        count(&server.db.path, "SELECT count(*) FROM transactions"),
        1
    );
    wait_until_delivered(&server.db.path, 1);
    assert_eq!(receiver.count(), 1);
}

#[test]
fn a_lead_table_with_auto_delivery_on_uses_its_own_threshold() {
    let (server, receiver) = start();
    lr(
        &server,
        "table create --workspace ws --name Hot --id hot --auto-delivery on --score-threshold 70",
    )
    .json();
    table_source(
        &server,
        "hot",
        "hot-src",
        "--no-secret --result-detail full",
    );
    add_buyer(&server, &receiver, "anyone", "10", "", "");
    let path = table_path("hot", "hot-src");
    // Valid email and names only: 62, below this table's 70 (and above the default 50).
    let sparse = json!({"firstName": "Bea", "lastName": "Kim", "email": "bea@example.com",
                        "productSlug": "solar", "triggerAutoDelivery": true});
    let (_, item) = post(&server, &path, &sparse);
    let request = &item["autoDelivery"]["requests"][0];
    assert_eq!(request["reason"], "score_below_threshold");
    assert_eq!(request["evaluation"]["score"], 62);
    assert_eq!(request["evaluation"]["threshold"], 70);
    let (_, item) = post(&server, &path, &lead(1));
    assert_eq!(item["tableId"], "hot");
    assert_eq!(item["autoDelivery"]["requests"][0]["reason"], "delivered");
    receiver.wait_for_on("/anyone", 1, WAIT);
}

/// The writer keeps the subscribed buyers between leads (`autodelivery::subscribers`); the
/// CLI changes them from its own process while the server runs, and the server's own
/// deliveries and lifecycle calls change them too. Each change decides the very next lead: a
/// pause and a resume, a top-up, a balance spent by the server's own delivery, a price, a
/// daily cap, a rejection over HTTP that gives a cap's place back, an unsubscription.
#[test]
fn buyers_changed_through_the_cli_decide_the_very_next_lead() {
    let (server, receiver) = start();
    add_buyer(&server, &receiver, "high", "30", "", "");
    let low_secret = "low-secret-0123456789abcdef";
    let create_low = format!("--plan prepaid --secret {low_secret}");
    add_buyer(&server, &receiver, "low", "20", create_low.as_str(), "");
    let path = lead_path("web", "landing");
    let mut n = 0;
    let mut next = || {
        n += 1;
        post(&server, &path, &lead(n)).1["autoDelivery"]["requests"][0].clone()
    };
    let taker = |request: &Value| request["deliveries"][0]["buyerAccountId"].clone();
    let verdict = |request: &Value, buyer: &str| {
        verdicts(request)
            .into_iter()
            .find(|(id, _, _)| id == buyer)
            .map(|(_, _, reason)| reason)
    };

    assert_eq!(taker(&next()), "high");
    lr(&server, "buyer pause high").json();
    let paused = next();
    assert_eq!(paused["reason"], "no_eligible_buyer", "{paused}");
    assert_eq!(verdict(&paused, "high").as_deref(), Some("buyer_paused"));
    assert_eq!(
        verdict(&paused, "low").as_deref(),
        Some("insufficient_balance")
    );

    lr(&server, "buyer fund low --amount 20").json();
    assert_eq!(taker(&next()), "low", "topped up");
    let spent = next();
    assert_eq!(
        verdict(&spent, "low").as_deref(),
        Some("insufficient_balance"),
        "the server's own charge: {spent}"
    );

    lr(&server, "buyer resume high").json();
    assert_eq!(taker(&next()), "high", "resumed");

    lr(&server, "buyer fund low --amount 100").json();
    lr(&server, "buyer terms set high --product solar --price 10").json();
    let cheaper = next();
    assert_eq!(taker(&cheaper), "low", "a lower price for high");

    // low has two deliveries today.
    lr(&server, "buyer terms set low --product solar --daily-cap 2").json();
    let capped = next();
    assert_eq!(taker(&capped), "high");
    assert_eq!(
        verdict(&capped, "low").as_deref(),
        Some("daily_cap_reached")
    );

    let rejection = json!({
        "transactionId": cheaper["deliveries"][0]["transactionId"],
        "status": "rejected",
    });
    let reply = server
        .post("/api/webhooks/partner-confirmation")
        .secret(low_secret)
        .json(&rejection)
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        taker(&next()),
        "low",
        "the rejection gave the cap's place back"
    );

    lr(&server, "buyer unsubscribe high --product solar").json();
    let unsubscribed = next();
    assert_eq!(unsubscribed["reason"], "no_eligible_buyer");
    assert_eq!(
        verdicts(&unsubscribed),
        [("low".to_string(), false, "daily_cap_reached".to_string())],
        "an ended subscription is no candidate"
    );
}

/// The decision trace is stored compressed (`ingest::trace`) and shown as the JSON it was;
/// a trace stored as text by an older build reads the same, and `vacuum` compresses it.
#[test]
fn the_stored_decision_is_compressed_and_reads_back_as_it_was_written() {
    let (server, receiver) = start();
    for (id, price) in [("alpha", "21"), ("beta", "23"), ("gamma", "22")] {
        add_buyer(&server, &receiver, id, price, "", "");
    }
    let (_, item) = post(&server, &lead_path("web", "landing"), &lead(1));
    let lead_id = item["leadId"].as_str().unwrap().to_string();
    let shown = |db: &Path| lr(db, format!("lead show {lead_id}")).json()["requests"][0].clone();
    let decision = shown(&server.db.path)["decision"].clone();
    assert_eq!(decision["outcome"], "delivered", "{decision}");
    assert_eq!(decision["candidates"].as_array().unwrap().len(), 3);
    let text = decision.to_string();
    let stored = |db: &Path| -> (String, i64) {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.query_row(
            "SELECT typeof(decision), length(CAST(decision AS BLOB)) FROM lead_requests",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap()
    };
    let (kind, bytes) = stored(&server.db.path);
    assert_eq!(kind, "blob");
    assert!(
        bytes * 4 < text.len() as i64,
        "{bytes} bytes stored for a trace of {}",
        text.len()
    );

    // As an older build stored it: the JSON text.
    let db = server.stop();
    rusqlite::Connection::open(&db.path)
        .unwrap()
        .execute("UPDATE lead_requests SET decision = ?1", [&text])
        .unwrap();
    assert_eq!(stored(&db.path).0, "text");
    assert_eq!(shown(&db.path)["decision"], decision);
    let vacuumed = lr(&db.path, "vacuum").json();
    assert_eq!(vacuumed["decisionsCompressed"], 1, "{vacuumed}");
    assert_eq!(stored(&db.path), (kind, bytes));
    assert_eq!(shown(&db.path)["decision"], decision);
    assert_eq!(lr(&db.path, "check").json()["ok"], true);
}
