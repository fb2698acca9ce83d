//! The evaluator that learns from buyers' outcomes (DESIGN.md section 17): weight versions,
//! `evaluator history` and `set --version`, and `evaluator train` on outcomes made through
//! the real interfaces.

use serde_json::{Value, json};

use crate::util::receiver::Receiver;
use crate::util::*;

#[test]
fn every_change_of_the_weights_is_a_version_and_set_version_goes_back() {
    let db = TempDb::new();
    basic_setup(&db.path);
    let empty = lr(&db, "evaluator history --workspace ws").json();
    assert_eq!(
        empty,
        json!({"workspaceId": "ws", "current": null, "versions": []})
    );
    assert_eq!(
        lr(&db, "evaluator show --workspace ws").json()["version"],
        Value::Null
    );

    let set = lr(&db, "evaluator set --workspace ws --weight validPhone=4").json();
    assert_eq!(
        set["version"], 2,
        "version 1 records the defaults it started from"
    );
    lr(&db, "evaluator set --workspace ws --weight names=0.5").json();
    let reset = lr(&db, "evaluator set --workspace ws --reset").json();
    assert_eq!(
        (reset["version"].clone(), reset["custom"].clone()),
        (json!(4), json!(false))
    );

    let history = lr(&db, "evaluator history --workspace ws").json();
    assert_eq!(history["current"], 4);
    let origins: Vec<(i64, &str)> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_i64().unwrap(),
                v["origin"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        origins,
        [(4, "reset"), (3, "set"), (2, "set"), (1, "initial")]
    );
    let third = &history["versions"][1];
    assert_eq!(third["weights"]["validPhone"], 4.0);
    assert_eq!(third["weights"]["names"], 0.5);

    let back = lr(&db, "evaluator set --workspace ws --version 3").json();
    assert_eq!(back["version"], 5);
    assert_eq!(back["weights"], third["weights"]);
    let restored = &lr(&db, "evaluator history --workspace ws").json()["versions"][0];
    assert_eq!(restored["origin"], "restore");
    assert_eq!(restored["detail"], json!({"restored": 3}));

    let start = lr(&db, "evaluator set --workspace ws --version 1").json();
    assert_eq!(start["custom"], false);
    assert_eq!(start["weights"], start["defaults"]);

    lr(&db, "evaluator set --workspace ws --version 9")
        .fails(1)
        .stderr_contains("no evaluator version 9");
    lr(&db, "evaluator set --workspace ws --version 2 --reset")
        .fails(2)
        .stderr_contains("cannot be used with");
    lr(&db, "evaluator history --workspace nope")
        .fails(1)
        .stderr_contains("unknown workspace 'nope'");
    let text = lr(&db, "evaluator history --workspace ws").ok();
    assert!(text.contains("origin: restore"), "{text}");
}

const CONFIRMATION: &str = "/api/webhooks/partner-confirmation";
const BUYER_SECRET: &str = "buyer-secret-of-b-0123456789";
const INGEST: &str = "/api/webhooks/channels/web/sources/src/leads";

/// A server where buyer `b` is subscribed to `solar` and gets every lead of source `src`
/// (no secret, no duplicate rule) by auto-delivery, posting to a real local receiver.
fn outcomes_server() -> (TestServer, Receiver) {
    let server = TestServer::start();
    let receiver = Receiver::start();
    basic_setup(&server.db.path);
    source(&server, "web", "src", "--no-secret --dedupe-fields none");
    buyer(
        &server,
        "b",
        &receiver.url("/b"),
        Some("20"),
        ["--secret", BUYER_SECRET],
    );
    (server, receiver)
}

/// Lead `n` of a stream where half the leads have a valid phone and the rest of what a
/// lead offers varies independently of it: address parts and consent follow fixed
/// patterns of `n`.
fn stream_lead(n: usize, phone: bool) -> Value {
    let mut lead = json!({
        "externalId": format!("lead-{n}"),
        "firstName": "Dana",
        "lastName": format!("Miller{n}"),
        "email": format!("dana{n}@example.org"),
        "productSlug": "solar",
        "triggerAutoDelivery": true,
    });
    if phone {
        lead["phone"] = json!(format!("+49 30 {:07}", 1_000_000 + n));
    }
    let address = ["street", "houseNumber", "postalCode", "city", "country"];
    let values = ["Main St", "1", "10115", "Berlin", "DE"];
    for (k, (field, value)) in address.iter().zip(values).enumerate() {
        if (n * 7 + k * 3) % 5 < 2 + (n % 3) {
            lead[*field] = json!(value);
        }
    }
    if !(n * 11).is_multiple_of(4) {
        lead["consentStatus"] = json!("granted");
        if !n.is_multiple_of(3) {
            lead["consentCapturedAt"] = json!("2025-05-01T10:00:00Z");
        }
    }
    lead
}

/// Ingests `count` leads in batches of 100 (lead `n` has a phone when `n` is even), waits
/// for their `lead.delivered` events, and answers each as the buyer would: a lead without
/// a valid phone is rejected, one with a phone acknowledged, but every 13th answer goes the
/// other way (buyers are not perfectly consistent).
fn make_outcomes(server: &TestServer, receiver: &Receiver, count: usize) {
    let leads: Vec<Value> = (0..count).map(|n| stream_lead(n, n % 2 == 0)).collect();
    for batch in leads.chunks(100) {
        let reply = server.post_json(INGEST, &json!({ "leads": batch }));
        assert_eq!(reply.status, 201, "{}", reply.text);
        assert_eq!(reply.json["summary"]["accepted"], batch.len());
    }
    let events = receiver.wait_for_on("/b", count, WAIT);
    for (k, event) in events.iter().enumerate() {
        let event = event.json();
        let has_phone = event["lead"]["phone"].is_string();
        let good = has_phone != (k % 13 == 0);
        let status = if good { "acknowledged" } else { "rejected" };
        let reply = server
            .request("POST", CONFIRMATION)
            .secret(BUYER_SECRET)
            .json(&json!({
                "transactionId": event["transactionId"],
                "status": status,
                "reason": if good { "reached" } else { "no phone to call" },
            }))
            .send();
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
}

/// The evaluation auto-delivery stored for the lead just posted (the operator's view).
fn posted_evaluation(server: &TestServer, lead: &Value) -> Value {
    let reply = server.post_json(INGEST, lead);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let id = reply.json["item"]["leadId"].as_str().unwrap().to_string();
    let shown = lr(server, format!("lead show {id}")).json();
    shown["requests"][0]["decision"]["evaluation"].clone()
}

#[test]
fn training_on_outcomes_learns_the_phone_and_apply_changes_the_next_score() {
    let (server, receiver) = outcomes_server();
    make_outcomes(&server, &receiver, 260);

    let trained = lr(&server, "evaluator train --workspace ws").json();
    assert_eq!(trained["rows"], 260);
    assert_eq!(trained["holdout"], 52, "the latest 20%");
    assert_eq!(trained["training"], 208);
    assert_eq!(trained["withoutFeatures"], 0);
    assert_eq!(trained["applied"], false);
    // The keys, in their order, as `--json` has printed them.
    assert_eq!(
        crate::util::json::keys(&trained),
        [
            "rows",
            "training",
            "holdout",
            "labels",
            "withoutFeatures",
            "unreadableFeatures",
            "rareCategories",
            "lambda",
            "iterations",
            "current",
            "trained",
            "weights",
            "workspaceId",
            "since",
            "product",
            "features",
            "currentVersion",
            "applied",
            "version",
        ]
    );
    let weights = &trained["weights"];
    let phone = weights["validPhone"].as_f64().unwrap();
    assert!(
        phone > 1.5,
        "the phone weight rises above the hand-set 1.5: {weights}"
    );
    for (name, weight) in weights.as_object().unwrap() {
        if name != "validPhone" && name != "intercept" {
            assert!(
                weight.as_f64().unwrap().abs() < phone,
                "{name} weighs less than the phone: {weights}"
            );
        }
    }
    let (current, learned) = (&trained["current"], &trained["trained"]);
    assert!(
        learned["auc"].as_f64().unwrap() > current["auc"].as_f64().unwrap() + 0.05,
        "trained holdout AUC beats the hand-set weights: {current} vs {learned}"
    );
    assert!(learned["logLoss"].as_f64().unwrap() < current["logLoss"].as_f64().unwrap());
    assert!(
        learned["badAboveThreshold"].as_f64().unwrap()
            < current["badAboveThreshold"].as_f64().unwrap(),
        "fewer bad leads pass the threshold"
    );
    assert_eq!(
        lr(&server, "evaluator show --workspace ws").json()["version"],
        Value::Null,
        "nothing changes without --apply"
    );

    // The same data gives the same weights, to the bit.
    let again = lr(&server, "evaluator train --workspace ws").json();
    assert_eq!(again["weights"].to_string(), weights.to_string());

    // Apply: the next lead is scored with the trained weights.
    // The same lead each time, under a new external id and email.
    let no_phone = |n: usize| {
        let mut lead = stream_lead(10_000, false);
        lead["externalId"] = json!(format!("probe-{n}"));
        lead["email"] = json!(format!("probe{n}@example.org"));
        lead
    };
    let before = posted_evaluation(&server, &no_phone(1));
    let applied = lr(&server, "evaluator train --workspace ws --apply").json();
    assert_eq!(applied["applied"], true);
    assert_eq!(applied["version"], 2);
    assert_eq!(applied["weights"].to_string(), weights.to_string());
    let after = posted_evaluation(&server, &no_phone(2));
    assert!(
        after["score"].as_i64().unwrap() < before["score"].as_i64().unwrap() - 20,
        "a lead without a phone scores far lower: {} then {}",
        before["score"],
        after["score"]
    );
    let phone_factor = after["factors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "validPhone")
        .unwrap()
        .clone();
    assert_eq!(phone_factor["weight"], weights["validPhone"]);

    let history = lr(&server, "evaluator history --workspace ws").json();
    assert_eq!(history["versions"][0]["origin"], "train");
    assert_eq!(history["versions"][0]["detail"]["rows"], 260);
    assert_eq!(history["versions"][1]["origin"], "initial");
    lr(&server, "evaluator set --workspace ws --version 1").json();
    let back = posted_evaluation(&server, &no_phone(3));
    assert_eq!(back["score"], before["score"], "version 1 scores as before");

    let text = lr(&server, "evaluator train --workspace ws").ok();
    assert!(text.contains("AUC"), "{text}");
    assert!(text.contains("not applied"), "{text}");
}

#[test]
fn training_refuses_too_little_data_and_changes_nothing() {
    let (server, receiver) = outcomes_server();
    make_outcomes(&server, &receiver, 60);
    lr(&server, "evaluator train --workspace ws --apply")
        .fails(1)
        .stderr_contains("not enough outcomes to train on: 60 labelled transactions")
        .stderr_contains("at least 200");
    lr(
        &server,
        "evaluator train --workspace ws --min-rows 100 --min-per-label 40",
    )
    .fails(1)
    .stderr_contains("at least 40 of each label");
    let small = lr(
        &server,
        "evaluator train --workspace ws --min-rows 50 --min-per-label 10",
    )
    .json();
    assert_eq!(small["rows"], 60);
    lr(
        &server,
        "product create --workspace ws --slug heat --name Heat --id heat",
    )
    .json();
    lr(&server, "evaluator train --workspace ws --product heat")
        .fails(1)
        .stderr_contains("0 labelled transactions");
    lr(&server, "evaluator train --workspace ws --product nope")
        .fails(1)
        .stderr_contains("unknown product 'nope'");
    lr(&server, "evaluator train --workspace nope")
        .fails(1)
        .stderr_contains("unknown workspace 'nope'");
    lr(
        &server,
        "evaluator train --workspace ws --features base,colour",
    )
    .fails(2)
    .stderr_contains("unknown feature group 'colour'");
    lr(&server, "evaluator train --workspace ws --since 90")
        .fails(2)
        .stderr_contains("no unit");
    assert_eq!(
        lr(&server, "evaluator history --workspace ws").json()["versions"],
        json!([]),
        "nothing applied"
    );
}

#[test]
fn the_trace_explains_categories_and_duplicates_and_delivered_requests_keep_their_features() {
    let (server, receiver) = outcomes_server();
    lr(
        &server,
        "product create --workspace ws --slug heat --name Heat --id heat --field 'homeowner:required=yes|no'",
    )
    .json();
    lr(&server, "buyer subscribe b --product heat --price 20").json();
    channel(&server, "other", "");
    source(&server, "other", "elsewhere", "--no-secret");
    let lead = |external_id: &str, homeowner: &str| {
        json!({
            "externalId": external_id, "firstName": "Kim", "lastName": "Berg",
            "email": "kim@example.org", "phone": "+49 30 5550100",
            "postalCode": "80331", "country": "de",
            "capturedAt": "2025-03-01T02:30:00Z",
            "productSlug": "heat", "fieldValues": {"homeowner": homeowner},
            "triggerAutoDelivery": true,
        })
    };
    let first = posted_evaluation(&server, &lead("k1", "no"));
    let factors = |evaluation: &Value| -> Vec<(String, f64, f64)> {
        evaluation["factors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["value"].as_f64().unwrap(),
                    f["contribution"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        factors(&first)[8..],
        [("duplicatesSeen".to_string(), 0.0, 0.0)],
        "no category group has a weight yet"
    );

    // The same person again, through another channel: seen once before.
    let reply = server.post_json(
        "/api/webhooks/channels/other/sources/elsewhere/leads",
        &lead("k2", "no"),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let id = reply.json["item"]["leadId"].as_str().unwrap();
    let again =
        &lr(&server, format!("lead show {id}")).json()["requests"][0]["decision"]["evaluation"];
    assert!(factors(again).contains(&("duplicatesSeen".to_string(), 1.0, 0.0)));

    // A category weight moves the score and shows in the trace.
    lr(
        &server,
        "evaluator set --workspace ws --weight answer:homeowner=no=-2.5",
    )
    .json();
    let weighted = posted_evaluation(&server, &lead("k3", "no"));
    assert!(factors(&weighted).contains(&("answer:homeowner=no".to_string(), 1.0, -2.5)));
    assert!(weighted["score"].as_i64().unwrap() < first["score"].as_i64().unwrap());
    let other_answer = posted_evaluation(&server, &lead("k4", "yes"));
    assert_eq!(
        other_answer["score"], first["score"],
        "only that answer weighs"
    );

    // Every delivered request kept the features it was scored with; the one below the
    // threshold (k3) was not delivered and has none.
    assert_eq!(weighted["passed"], false);
    receiver.wait_for_on("/b", 3, WAIT);
    let conn = rusqlite::Connection::open(&server.db.path).unwrap();
    let stored: Vec<(String, String)> = conn
        .prepare("SELECT container_id, features FROM evaluation_features ORDER BY lead_request_id")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(stored.len(), 3);
    assert_eq!(
        stored[0],
        (
            "web".to_string(),
            r#"[1,[1,1,1,0.4,0,1,0,0],["source:src","answer:homeowner=no","hourOfDay:night"]]"#
                .to_string()
        )
    );
    assert_eq!(stored[1].0, "other");
}
