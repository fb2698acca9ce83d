//! Suppression lists (DESIGN.md section 22) through the real binary and server: the
//! commands and their --json, an import of good, repeated and unusable rows, refusal at
//! ingest (single and per item of a batch, the phone and the email written another way),
//! after `lead erase --suppress`, at ping; the `flag` action storing a lead that is never
//! delivered; no suppressed value in the file's bytes.

use std::path::Path;

use serde_json::{Value, json};

use crate::util::receiver::Receiver;
use crate::util::{TestServer, buyer, complete_lead, lr, setup};

const POST: &str = "/api/webhooks/channels/web/sources/src/leads";
const EMAIL: &str = "Zebulon.Quince@Example.org";
const PHONE: &str = "+49 (151) 1234-5678";
const PHONE_OTHER_WAY: &str = "+49151 12345678";

fn check(db: &Path, flag: &str, value: &str) -> Value {
    lr(db, "suppression check --workspace ws")
        .args([flag, value])
        .json()
}

/// Posts `lead` alone; the answer's (status, body).
fn post(server: &TestServer, lead: &Value) -> (u16, Value) {
    let reply = server.post_json(POST, lead);
    (reply.status, reply.json)
}

fn refused_at(body: &Value) -> Vec<(String, String)> {
    let details = body["error"]["details"]
        .as_array()
        .unwrap_or_else(|| panic!("no details: {body}"));
    details
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().to_string(),
                d["code"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn lead_count(db: &Path) -> usize {
    lr(db, "lead list").json().as_array().unwrap().len()
}

#[test]
fn add_check_list_remove_and_their_json() {
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    let added = lr(db, "suppression add --workspace ws --reason opt-out")
        .args(["--email", EMAIL])
        .json();
    assert_eq!(added, json!({"added": true, "alreadyPresent": false}));
    let again = lr(db, "suppression add --workspace ws")
        .args(["--email", " zebulon.quince@example.ORG "])
        .json();
    assert_eq!(
        again["alreadyPresent"], true,
        "the normalised email is one entry"
    );
    lr(db, "suppression add --workspace ws")
        .args(["--phone", PHONE])
        .json();

    let found = check(db, "--email", "zebulon.quince@example.org");
    assert_eq!(found["suppressed"], true, "{found}");
    assert_eq!(found["reason"], "opt-out");
    assert!(found["addedAt"].as_str().unwrap().ends_with('Z'), "{found}");
    assert_eq!(check(db, "--phone", PHONE_OTHER_WAY)["suppressed"], true);
    let absent = check(db, "--email", "someone@example.org");
    assert_eq!(
        absent,
        json!({"suppressed": false, "reason": null, "addedAt": null})
    );

    let listed = lr(db, "suppression list --workspace ws").json();
    let entries = listed.as_array().unwrap();
    assert_eq!(entries.len(), 2, "{listed}");
    let mut kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["email", "phone"]);
    for entry in entries {
        assert_eq!(entry["id"].as_str().unwrap().len(), 12, "{entry}");
        assert!(entry["addedAt"].is_string());
    }
    let text = listed.to_string().to_lowercase();
    assert!(
        !text.contains("zebulon") && !text.contains("12345678"),
        "{text}"
    );
    let plain = lr(db, "suppression list --workspace ws").ok();
    assert!(!plain.to_lowercase().contains("zebulon"), "{plain}");

    let removed = lr(db, "suppression remove --workspace ws")
        .args(["--phone", PHONE_OTHER_WAY])
        .json();
    assert_eq!(removed, json!({"removed": true}));
    assert_eq!(check(db, "--phone", PHONE)["suppressed"], false);
    let gone = lr(db, "suppression remove --workspace ws")
        .args(["--phone", PHONE])
        .json();
    assert_eq!(gone, json!({"removed": false}));

    lr(db, "suppression add --workspace ws --email not-an-email")
        .fails(1)
        .stderr_contains("not a usable email");
    lr(
        db,
        "suppression check --workspace nope --email a@example.org",
    )
    .fails(1)
    .stderr_contains("nope");
}

#[test]
fn import_counts_added_already_present_and_unusable_rows() {
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    lr(
        db,
        "suppression add --workspace ws --email first@example.org",
    )
    .json();
    let file = server.db.dir.path().join("dnc.csv");
    std::fs::write(
        &file,
        "name,email,phone\n\
         a,first@example.org,\n\
         b,Second@Example.org,+49 30 1234567\n\
         c,second@example.org,\n\
         d,not-an-email,12\n\
         e,,\n\
         f,third@example.org,+49-30-7654321\n",
    )
    .unwrap();
    let counts = lr(db, "suppression import --workspace ws --reason dnc")
        .arg("--file")
        .arg(&file)
        .json();
    // Added: second, its phone, third, its phone; present: first and second again;
    // unusable: the bad email and the 2-digit phone.
    assert_eq!(
        counts,
        json!({"added": 4, "alreadyPresent": 2, "unusable": 2}),
        "{counts}"
    );
    let text = lr(db, "suppression import --workspace ws")
        .arg("--file")
        .arg(&file)
        .ok();
    assert!(text.contains('6') && text.contains('2'), "{text}");
    assert_eq!(check(db, "--phone", "+49 (30) 765-4321")["reason"], "dnc");

    let headerless = server.db.dir.path().join("bad.csv");
    std::fs::write(&headerless, "name,address\nx,y\n").unwrap();
    lr(db, "suppression import --workspace ws")
        .arg("--file")
        .arg(&headerless)
        .fails(1)
        .stderr_contains("neither email nor phone");
}

#[test]
fn ingest_refuses_a_suppressed_contact_written_another_way_per_item() {
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    lr(db, "suppression add --workspace ws")
        .args(["--phone", PHONE])
        .json();
    lr(db, "suppression add --workspace ws")
        .args(["--email", EMAIL])
        .json();

    // The phone written another way: the same digits.
    let (status, body) = post(
        &server,
        &complete_lead("p1", "other@example.org", PHONE_OTHER_WAY),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "validation_failed");
    assert_eq!(refused_at(&body), [("/phone".into(), "suppressed".into())]);
    // The email in another case with spaces around it.
    let (status, body) = post(
        &server,
        &complete_lead("e1", "  zebulon.quince@EXAMPLE.org ", "+49 30 111222"),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(refused_at(&body), [("/email".into(), "suppressed".into())]);
    assert_eq!(lead_count(db), 0, "nothing stored");
    let message = body["error"]["details"][0]["message"].as_str().unwrap();
    assert!(!message.to_lowercase().contains("zebulon"), "{message}");

    // b2's misspelt property is warned about on b2, whatever was refused before it.
    let mut misspelt = complete_lead("b2", "also.fine@example.org", "+49 30 444555");
    misspelt["fristName"] = json!("Ann");
    let batch = json!({"leads": [
        complete_lead("b0", "fine@example.org", "+49 30 222333"),
        complete_lead("b1", "zebulon.quince@example.org", "+49 30 333444"),
        misspelt,
        complete_lead("b3", "third@example.org", "+49 151-1234 5678"),
    ]});
    let reply = server.post_json(POST, &batch);
    assert_eq!(reply.status, 201, "{}", reply.text);
    let items = reply.json["items"].as_array().unwrap();
    let statuses: Vec<&str> = items
        .iter()
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["accepted", "rejected", "accepted", "rejected"]);
    assert_eq!(
        items[1]["errors"][0]["path"], "/leads/1/email",
        "{}",
        reply.text
    );
    assert_eq!(items[1]["errors"][0]["code"], "suppressed");
    assert_eq!(items[3]["errors"][0]["path"], "/leads/3/phone");
    assert_eq!(
        items[2]["warnings"][0]["path"], "/leads/2/fristName",
        "{}",
        reply.text
    );
    assert_eq!(items[1]["externalId"], "b1");
    assert_eq!(reply.json["summary"]["rejected"], 2);
    assert_eq!(lead_count(db), 2, "only the two others stored");
}

#[test]
fn erase_with_suppress_refuses_the_person_posted_again() {
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    let (status, body) = post(&server, &complete_lead("x1", EMAIL, PHONE));
    assert_eq!(status, 201, "{body}");
    let erased = lr(db, "lead erase --yes --suppress")
        .args(["--email", EMAIL])
        .json();
    assert_eq!(erased["leads"], 1, "{erased}");
    let found = check(db, "--phone", PHONE_OTHER_WAY);
    assert_eq!(found["suppressed"], true);
    assert_eq!(found["reason"], "erased");

    let (status, body) = post(&server, &complete_lead("x2", EMAIL, "+49 30 999888"));
    assert_eq!(status, 400, "{body}");
    assert_eq!(refused_at(&body), [("/email".into(), "suppressed".into())]);
    let (status, body) = post(
        &server,
        &complete_lead("x3", "new@example.org", PHONE_OTHER_WAY),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(refused_at(&body), [("/phone".into(), "suppressed".into())]);

    // Without --suppress, erasing leaves the person free to come back.
    post(
        &server,
        &complete_lead("y1", "free@example.org", "+49 30 555666"),
    );
    lr(db, "lead erase --yes --email free@example.org").json();
    let (status, body) = post(
        &server,
        &complete_lead("y2", "free@example.org", "+49 30 555666"),
    );
    assert_eq!(status, 201, "{body}");
}

#[test]
fn flag_stores_the_lead_and_never_delivers_it() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    buyer(db, "sunco", &receiver.url("/sunco"), Some("30"), "");
    let updated = lr(db, "workspace update ws --suppression-action flag").json();
    assert_eq!(updated["suppressionAction"], "flag", "{updated}");
    lr(db, "workspace update ws --suppression-action maybe").fails(2);
    lr(db, "suppression add --workspace ws")
        .args(["--email", EMAIL])
        .json();

    let (status, body) = post(&server, &complete_lead("f1", EMAIL, "+49 30 123123"));
    assert_eq!(status, 201, "{body}");
    let lead_id = body["item"]["leadId"].as_str().unwrap().to_string();
    let request = body["item"]["requestIds"][0].as_str().unwrap().to_string();
    let shown = lr(db, format!("lead show {lead_id}")).json();
    assert_eq!(shown["qualityStatus"], "invalid", "{shown}");
    assert!(
        shown["qualityReasons"]
            .as_array()
            .unwrap()
            .contains(&json!("suppressed")),
        "{shown}"
    );
    // A lead of another person is delivered, so auto-delivery was on.
    let (status, _) = post(
        &server,
        &complete_lead("f2", "ok@example.org", "+49 30 321321"),
    );
    assert_eq!(status, 201);
    crate::util::wait_until(crate::util::WAIT, "the other lead delivered", || {
        receiver.requests().len() == 1
    });
    let delivered = receiver.requests();
    let sent = String::from_utf8_lossy(&delivered[0].body).to_string();
    assert!(
        !sent.contains("\"f1\""),
        "the flagged lead was sold: {sent}"
    );
    lr(
        db,
        format!("deliver --request {request} --buyer sunco --price 30"),
    )
    .fails(1)
    .stderr_contains("suppressed");
}

#[test]
fn a_ping_for_a_suppressed_hash_gets_no_offer() {
    let receiver = Receiver::start();
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    buyer(db, "sunco", &receiver.url("/sunco"), Some("30"), "");
    let ping = |email: &str| {
        let reply = server.post_json(
            "/api/ping/channels/web/sources/src",
            &json!({"productSlug": "solar", "postalCode": "10115", "country": "DE",
                    "emailSha256": leadrelay::secrets::hash(email)}),
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json
    };
    assert_eq!(ping("before@example.org")["status"], "accepted");
    lr(db, "suppression add --workspace ws")
        .args(["--email", EMAIL])
        .json();
    let answer = ping("zebulon.quince@example.org");
    assert_eq!(answer["status"], "rejected", "{answer}");
    assert_eq!(answer["reason"], "suppressed");
}

#[test]
fn the_file_holds_no_suppressed_value() {
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    let values = ["zebulon.quince@example.org", "4915112345678"];
    lr(db, "suppression add --workspace ws --reason opt-out")
        .args(["--email", EMAIL])
        .json();
    lr(db, "suppression add --workspace ws")
        .args(["--phone", PHONE])
        .json();
    let (status, _) = post(&server, &complete_lead("z1", EMAIL, "+49 30 777888"));
    assert_eq!(status, 400);
    for file in ["leadrelay.db", "leadrelay.db-wal"] {
        let bytes = std::fs::read(server.db.dir.path().join(file)).unwrap_or_default();
        let lower = bytes.to_ascii_lowercase();
        for value in values {
            assert!(
                !lower.windows(value.len()).any(|w| w == value.as_bytes()),
                "{file} holds {value}"
            );
        }
        // Nor the value's plain SHA-256, which a dictionary would reverse.
        for value in values {
            let hash = leadrelay::secrets::hash(value);
            assert!(
                !lower.windows(hash.len()).any(|w| w == hash.as_bytes()),
                "{file} holds the hash of {value}"
            );
        }
    }
}
