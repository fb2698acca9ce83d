//! Idempotency, duplicate rules and quality (SPEC.md 2.5; DESIGN.md section 2): a repeated
//! externalId is a replay, never a second lead, also in one batch or from concurrent
//! requests; duplicate rules per source; quality status and reasons.

use std::sync::Barrier;

use serde_json::{Value, json};

use crate::ingest::{CHANNEL_PATH, jane, lead_count, person, server, shown, with};
use crate::util::{TestServer, lr};

/// Posts `body` to `path` from `count` threads at the same moment; the replies.
fn post_concurrently(
    server: &TestServer,
    path: &str,
    body: &Value,
    count: usize,
) -> Vec<(u16, Value)> {
    let barrier = Barrier::new(count);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..count)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    let reply = server.post_json(path, body);
                    (reply.status, reply.json)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn a_repeated_external_id_is_an_idempotent_replay() {
    let server = server();
    let first = server.post_json(CHANNEL_PATH, &with(jane(), json!({"productSlug": "solar"})));
    assert_eq!(first.status, 201, "{}", first.text);
    // The retry may even differ: the externalId names the lead.
    let retry = server.post_json(CHANNEL_PATH, &with(jane(), json!({"firstName": "Janet"})));
    assert_eq!(retry.status, 200, "{}", retry.text);
    let (a, b) = (&first.json["item"], &retry.json["item"]);
    assert_eq!(b["status"], "idempotent_replay");
    assert_eq!(b["idempotentReplay"], true);
    for key in [
        "leadId",
        "channelId",
        "sourceId",
        "externalId",
        "requestIds",
        "ingest",
    ] {
        assert_eq!(a[key], b[key], "{key}");
    }
    assert_eq!(lead_count(&server, "landing"), 1);
    assert_eq!(shown(&server, &retry)["person"]["firstName"], "Jane");

    // The same externalId on another source is another lead.
    lr(
        &server,
        "source create --channel web --name B --id b --no-secret --result-detail full --dedupe-fields none",
    )
    .json();
    let other = server.post_json("/api/webhooks/channels/web/sources/b/leads", &jane());
    assert_eq!(other.status, 201, "{}", other.text);
    assert_ne!(other.json["item"]["leadId"], a["leadId"]);
}

#[test]
fn a_repeat_inside_one_batch_is_a_replay_of_the_earlier_item() {
    let server = server();
    let body =
        json!({"leads": [person(1), person(2), with(person(1), json!({"lastName": "Other"}))]});
    let reply = server.post_json(CHANNEL_PATH, &body);
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(
        reply.json["summary"],
        json!({"received": 3, "accepted": 2, "duplicate": 0, "idempotentReplay": 1, "rejected": 0})
    );
    let items = reply.json["items"].as_array().unwrap();
    assert_eq!(items[2]["index"], 2);
    assert_eq!(items[2]["status"], "idempotent_replay");
    assert_eq!(items[2]["idempotentReplay"], true);
    assert_eq!(items[2]["leadId"], items[0]["leadId"]);
    assert_eq!(lead_count(&server, "landing"), 2);

    // The whole batch again: every item is a replay, nothing is created, 200.
    let again = server.post_json(CHANNEL_PATH, &body);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json["summary"]["idempotentReplay"], 3);
    for (before, after) in items.iter().zip(again.json["items"].as_array().unwrap()) {
        assert_eq!(before["leadId"], after["leadId"]);
        assert_eq!(before["index"], after["index"]);
    }
}

#[test]
fn concurrent_requests_with_one_external_id_make_one_lead() {
    let server = server();
    let replies = post_concurrently(&server, CHANNEL_PATH, &jane(), 16);
    let created: Vec<_> = replies
        .iter()
        .filter(|(status, _)| *status == 201)
        .collect();
    assert_eq!(created.len(), 1, "{replies:?}");
    let lead_id = &created[0].1["item"]["leadId"];
    for (status, body) in &replies {
        assert!(*status == 201 || *status == 200, "{body}");
        assert_eq!(&body["item"]["leadId"], lead_id);
        if *status == 200 {
            assert_eq!(body["item"]["status"], "idempotent_replay");
        }
    }
    assert_eq!(lead_count(&server, "landing"), 1);
}

#[test]
fn the_default_rule_marks_duplicates_for_review() {
    let server = server();
    let first = server.post_json(CHANNEL_PATH, &jane());
    assert_eq!(first.status, 201, "{}", first.text);
    let first_id = first.json["item"]["leadId"].clone();
    let first_created = shown(&server, &first)["createdAt"].clone();

    // Email compared trimmed and lower-cased.
    let by_email = with(person(1), json!({"email": "  JANE@Example.com "}));
    let reply = server.post_json(CHANNEL_PATH, &by_email);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let item = &reply.json["item"];
    assert_eq!(item["status"], "duplicate");
    assert_eq!(item["ingest"]["duplicateStatus"], "review");
    assert_eq!(
        item["ingest"]["duplicateMatch"],
        json!({"leadId": first_id, "matchedOn": "email", "scope": "channel",
               "createdAt": first_created})
    );
    let stored = shown(&server, &reply);
    assert_eq!(stored["duplicateStatus"], "review");
    assert_eq!(stored["duplicateMatch"]["leadId"], first_id);

    // Phone compared by its digits.
    let by_phone = with(person(2), json!({"phone": "49-30-123 4567"}));
    let reply = server.post_json(CHANNEL_PATH, &by_phone);
    assert_eq!(reply.json["item"]["status"], "duplicate", "{}", reply.text);
    assert_eq!(
        reply.json["item"]["ingest"]["duplicateMatch"]["matchedOn"],
        "phone"
    );

    // Another channel and the lead table are other scopes.
    lr(
        &server,
        "channel create --workspace ws --name 'Web 2' --id web2",
    )
    .json();
    lr(
        &server,
        "source create --channel web2 --name S --id s2 --no-secret --result-detail full",
    )
    .json();
    let reply = server.post_json(
        "/api/webhooks/channels/web2/sources/s2/leads",
        &with(jane(), json!({"externalId": "x"})),
    );
    assert_eq!(
        reply.json["item"]["ingest"]["duplicateStatus"], "unique",
        "{}",
        reply.text
    );
    let reply = server.post_json(crate::ingest::TABLE_PATH, &jane());
    assert_eq!(
        reply.json["item"]["ingest"]["duplicateStatus"], "unique",
        "{}",
        reply.text
    );
    assert!(reply.json["item"]["ingest"].get("duplicateMatch").is_none());
    assert_eq!(lead_count(&server, "landing"), 3);
}

#[test]
fn a_lead_table_is_its_own_scope() {
    let server = server();
    let first = server.post_json(crate::ingest::TABLE_PATH, &jane());
    assert_eq!(first.status, 201, "{}", first.text);
    let reply = server.post_json(
        crate::ingest::TABLE_PATH,
        &with(person(1), json!({"phone": "+49 (30) 1234567"})),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    let ingest = &reply.json["item"]["ingest"];
    assert_eq!(reply.json["item"]["status"], "duplicate");
    assert_eq!(ingest["duplicateMatch"]["scope"], "table");
    assert_eq!(ingest["duplicateMatch"]["matchedOn"], "phone");
    assert_eq!(
        ingest["duplicateMatch"]["leadId"],
        first.json["item"]["leadId"]
    );
}

#[test]
fn a_reject_rule_stores_nothing() {
    let server = server();
    lr(
        &server,
        "source create --channel web --name Strict --id strict --no-secret --result-detail full --dedupe-action reject \
         --dedupe-scope workspace --dedupe-fields email",
    )
    .json();
    let strict = "/api/webhooks/channels/web/sources/strict/leads";
    // The original came in through the lead table: the workspace scope sees it.
    let original = server.post_json(crate::ingest::TABLE_PATH, &jane());
    assert_eq!(original.status, 201);
    let reply = server.post_json(strict, &with(jane(), json!({"externalId": "s-1"})));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let item = &reply.json["item"];
    assert_eq!(item["status"], "rejected");
    assert_eq!(item["leadId"], Value::Null);
    assert_eq!(item["externalId"], "s-1");
    assert_eq!(item["idempotentReplay"], false);
    assert_eq!(item["requestIds"], json!([]));
    assert_eq!(item["ingest"]["duplicateStatus"], "rejected");
    assert_eq!(item["ingest"]["qualityStatus"], "ok");
    assert_eq!(
        item["ingest"]["duplicateMatch"]["leadId"],
        original.json["item"]["leadId"]
    );
    assert_eq!(item["ingest"]["duplicateMatch"]["scope"], "workspace");
    assert_eq!(lead_count(&server, "strict"), 0);

    // Only email counts for this source: the same phone is no duplicate.
    let reply = server.post_json(strict, &with(person(1), json!({"phone": "+49 30 1234567"})));
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["item"]["status"], "accepted");

    // In a batch, the rejected duplicate is one item among others.
    let batch = json!({"leads": [with(jane(), json!({"externalId": "s-2"})), person(2)]});
    let reply = server.post_json(strict, &batch);
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["summary"]["rejected"], 1);
    assert_eq!(reply.json["summary"]["accepted"], 1);
    assert_eq!(
        reply.json["items"][0]["ingest"]["duplicateStatus"],
        "rejected"
    );
    assert_eq!(lead_count(&server, "strict"), 2);
}

#[test]
fn the_window_limits_how_far_back_duplicates_are_found() {
    let server = server();
    lr(
        &server,
        "source create --channel web --name Week --id week --no-secret --result-detail full --dedupe-window-days 7",
    )
    .json();
    lr(
        &server,
        "source create --channel web --name Ever --id ever --no-secret --result-detail full --dedupe-window-days 0",
    )
    .json();
    // An original in the channel, made `days` old; then a lead with its email to `source`.
    let duplicate_status_after = |n: usize, days: i64, source: &str| {
        let email = format!("w{n}@example.com");
        let original = server.post_json(CHANNEL_PATH, &with(person(n), json!({"email": email})));
        assert_eq!(original.status, 201, "{}", original.text);
        let conn = rusqlite::Connection::open(&server.db.path).unwrap();
        conn.execute(
            "UPDATE leads SET created_at = created_at - ?2 WHERE id = ?1",
            rusqlite::params![
                original.json["item"]["leadId"]
                    .as_str()
                    .unwrap()
                    .parse::<leadrelay::ids::LeadId>()
                    .unwrap(),
                days * 86_400_000
            ],
        )
        .unwrap();
        let reply = server.post_json(
            &format!("/api/webhooks/channels/web/sources/{source}/leads"),
            &with(person(n + 100), json!({"email": email})),
        );
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json["item"]["ingest"]["duplicateStatus"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(duplicate_status_after(1, 6, "week"), "review");
    assert_eq!(duplicate_status_after(2, 8, "week"), "unique");
    // A window of 0 days has no limit.
    assert_eq!(duplicate_status_after(3, 1000, "ever"), "review");
}

#[test]
fn a_source_without_rule_finds_no_duplicates() {
    let server = server();
    lr(
        &server,
        "source create --channel web --name Open --id open --no-secret --result-detail full --dedupe-fields none",
    )
    .json();
    let path = "/api/webhooks/channels/web/sources/open/leads";
    for n in 0..2 {
        let reply = server.post_json(path, &with(jane(), json!({"externalId": format!("o-{n}")})));
        assert_eq!(reply.json["item"]["status"], "accepted", "{}", reply.text);
        assert_eq!(reply.json["item"]["ingest"]["duplicateStatus"], "unique");
    }
}

#[test]
fn concurrent_identical_leads_are_still_caught() {
    let server = server();
    let mut lead = jane();
    lead.as_object_mut().unwrap().remove("externalId");
    let replies = post_concurrently(&server, CHANNEL_PATH, &lead, 16);
    let statuses: Vec<&str> = replies
        .iter()
        .map(|(_, body)| body["item"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == "accepted").count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == "duplicate").count(),
        15,
        "{statuses:?}"
    );
    let original = replies
        .iter()
        .find(|(_, body)| body["item"]["status"] == "accepted")
        .map(|(_, body)| body["item"]["leadId"].clone())
        .unwrap();
    for (status, body) in &replies {
        assert_eq!(*status, 201);
        if body["item"]["status"] == "duplicate" {
            assert_eq!(body["item"]["ingest"]["duplicateMatch"]["leadId"], original);
        }
    }
    assert_eq!(lead_count(&server, "landing"), 16);
}

#[test]
fn quality_status_and_reasons() {
    let server = server();
    lr(
        &server,
        "source create --channel web --name Q --id q --no-secret --result-detail full --dedupe-fields none",
    )
    .json();
    let path = "/api/webhooks/channels/web/sources/q/leads";
    let base = json!({"firstName": "Jane", "lastName": "Doe"});
    let cases: Vec<(Value, &str, Vec<&str>)> = vec![
        (json!({"email": "jane@example.com"}), "ok", vec![]),
        (json!({"phone": "+49 (30) 123-4567"}), "ok", vec![]),
        (json!({}), "invalid", vec!["no_valid_contact"]),
        (
            json!({"email": "jane@", "phone": "12"}),
            "invalid",
            vec!["no_valid_contact", "email_invalid", "phone_invalid"],
        ),
        (
            json!({"email": "nope", "phone": "030 1234567"}),
            "suspect",
            vec!["email_invalid"],
        ),
        (
            json!({"email": "jane@mailinator.com"}),
            "suspect",
            vec!["disposable_email"],
        ),
        (
            json!({"email": "j@x.de", "firstName": "Test"}),
            "suspect",
            vec!["placeholder_name"],
        ),
        (
            json!({"email": "j@x.de", "lastName": "asdf"}),
            "suspect",
            vec!["placeholder_name"],
        ),
        (
            json!({"email": "j@x.de", "postalCode": "1234", "country": "DE"}),
            "suspect",
            vec!["postal_code_implausible"],
        ),
        (
            json!({"email": "j@x.de", "postalCode": "1234", "country": "AT"}),
            "ok",
            vec![],
        ),
        (
            json!({"email": "j@x.de", "postalCode": "1012 AB", "country": "NL"}),
            "ok",
            vec![],
        ),
        (
            json!({"email": "j@x.de", "postalCode": "SW1A 1AA", "country": "GB"}),
            "ok",
            vec![],
        ),
        (
            json!({"email": "j@x.de", "postalCode": "90210-1234", "country": "US"}),
            "ok",
            vec![],
        ),
        (
            json!({"email": "j@x.de", "postalCode": "?", "country": "Atlantis"}),
            "ok",
            vec![],
        ),
        (
            json!({"email": "j@x.de", "consentStatus": "denied"}),
            "suspect",
            vec!["consent_not_granted"],
        ),
        (
            json!({"email": "j@x.de", "consentStatus": "Opt-In"}),
            "ok",
            vec![],
        ),
        (
            json!({"email": "x@yopmail.com", "firstName": "xxx", "consentStatus": "no"}),
            "suspect",
            vec![
                "disposable_email",
                "placeholder_name",
                "consent_not_granted",
            ],
        ),
        (
            json!({"firstName": "test", "consentStatus": "pending"}),
            "invalid",
            vec![
                "no_valid_contact",
                "placeholder_name",
                "consent_not_granted",
            ],
        ),
    ];
    for (fields, status, reasons) in cases {
        let lead = with(base.clone(), fields.clone());
        let reply = server.post_json(path, &lead);
        // Invalid leads are stored all the same.
        assert_eq!(reply.status, 201, "{fields}: {}", reply.text);
        let ingest = &reply.json["item"]["ingest"];
        assert_eq!(ingest["qualityStatus"], status, "{fields}");
        assert_eq!(ingest["qualityReasons"], json!(reasons), "{fields}");
        let stored = shown(&server, &reply);
        assert_eq!(stored["qualityStatus"], status);
        assert_eq!(stored["qualityReasons"], json!(reasons));
    }
}
