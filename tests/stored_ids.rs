//! Lead and lead-request ids stored as their ULID's 16 bytes (migration 20, `ids::LeadId`):
//! every column that names one holds the bytes, a file written before has its text ids
//! rewritten when it is opened and reads back exactly as it did, and an id that is not one
//! of ours is answered as unknown, as before. Request ids are text, ours and clients' alike
//! (migration 33).

use std::path::Path;

use serde_json::{Value, json};

use crate::lifecycle::{Fixture, SUPPLIER_CONFIRMATION, SUPPLIER_KEY};
use crate::util::receiver::Answer;
use crate::util::{bidder, complete_lead, lr};

/// Every column that names a lead or a lead request, with the id's prefix.
const ID_COLUMNS: [(&str, &str, &str); 9] = [
    ("leads", "id", "lead"),
    ("lead_requests", "id", "lreq"),
    ("lead_requests", "lead_id", "lead"),
    ("transactions", "lead_id", "lead"),
    ("transactions", "lead_request_id", "lreq"),
    ("evaluation_features", "lead_request_id", "lreq"),
    ("supplier_cancellations", "lead_id", "lead"),
    ("pings", "lead_id", "lead"),
    ("bids", "lead_request_id", "lreq"),
];

/// For each of [`ID_COLUMNS`], how many of its values (NULLs aside) are stored as a BLOB
/// and how many as text.
fn storage_classes(path: &Path) -> Vec<(String, i64, i64)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    ID_COLUMNS
        .iter()
        .map(|(table, column, _)| {
            let (blobs, texts) = conn
                .query_row(
                    &format!(
                        "SELECT count(*) FILTER (WHERE typeof({column}) = 'blob'),
                                count(*) FILTER (WHERE typeof({column}) = 'text')
                         FROM {table}"
                    ),
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            (format!("{table}.{column}"), blobs, texts)
        })
        .collect()
}

/// Makes the file at `path` what a build before migration 20 wrote: every id as its text,
/// schema version 19.
fn as_before_migration_20(path: &Path) {
    let mut conn = rusqlite::Connection::open(path).unwrap();
    conn.create_scalar_function(
        "id_text",
        2,
        rusqlite::functions::FunctionFlags::SQLITE_UTF8,
        |ctx| {
            Ok(match ctx.get::<String>(0)?.as_str() {
                "lead" => ctx
                    .get::<Option<leadrelay::ids::LeadId>>(1)?
                    .map(|id| id.to_string()),
                _ => ctx
                    .get::<Option<leadrelay::ids::LeadRequestId>>(1)?
                    .map(|id| id.to_string()),
            })
        },
    )
    .unwrap();
    let tx = conn.transaction().unwrap();
    tx.execute_batch("PRAGMA defer_foreign_keys = ON").unwrap();
    for (table, column, prefix) in ID_COLUMNS {
        tx.execute(
            &format!("UPDATE {table} SET {column} = id_text(?1, {column})"),
            [prefix],
        )
        .unwrap();
    }
    tx.pragma_update(None, "user_version", 19).unwrap();
    tx.commit().unwrap();
}

/// What the operator sees of everything in the file at `path`: every lead with its
/// requests, decisions, bids and body, every transaction and ping.
fn everything(path: &Path) -> Value {
    let leads = lr(path, "lead list").json();
    let shown: Vec<Value> = leads
        .as_array()
        .unwrap()
        .iter()
        .map(|lead| {
            let id = lead["id"].as_str().unwrap();
            lr(path, format!("lead show {id} --body")).json()
        })
        .collect();
    let pings: Vec<Value> = lr(path, "ping list")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|ping| lr(path, format!("ping show {}", ping["id"].as_str().unwrap())).json())
        .collect();
    json!({
        "leads": leads,
        "shown": shown,
        "transactions": lr(path, "transaction list").json(),
        "pings": pings,
    })
}

/// A file with every kind of row that names a lead or a lead request: a lead delivered by
/// hand whose supplier cancellation is open, an auto-delivered lead sold on a bid (its
/// stored features, its bid) and a lead posted for a ping. Returns the fixture and the
/// lead ids.
fn a_file_with_every_kind_of_id() -> (Fixture, Vec<String>) {
    let f = Fixture::new();
    f.buyer("a", &[]);
    let (cancelled, requests) = f.lead_on("src", &["solar", "heat"]);
    f.deliver(&requests[0], "a");
    lr(&f.server, format!("lead cancel {cancelled} --reason"))
        .arg("checked")
        .json();

    let pinged = f.server.post_json(
        "/api/ping/channels/web/sources/src",
        &json!({
            "productSlug": "solar",
            "postalCode": "10115",
            "country": "DE",
            "emailSha256": leadrelay::secrets::hash("bo@example.org"),
            "phoneSha256": leadrelay::secrets::hash("4930654321"),
        }),
    );
    assert_eq!(pinged.json["status"], "accepted", "{}", pinged.text);
    let mut post = complete_lead("posted-1", "bo@example.org", "+49 30 654321");
    post["pingId"] = pinged.json["pingId"].clone();
    let posted = f
        .server
        .post_json("/api/webhooks/channels/web/sources/src/leads", &post);
    assert_eq!(posted.status, 201, "{}", posted.text);

    bidder(
        &f.server,
        &f.receiver,
        "keen",
        "--min-price 10 --max-price 40",
    );
    f.receiver.answer(
        "/bid/keen",
        Answer::ok().json(&json!({"bid": 27.5, "bidId": "keen-7"})),
    );
    let auto = f.server.post_json(
        "/api/webhooks/channels/web/sources/src/leads",
        &complete_lead("auto-1", "ann@example.org", "+49 30 123456"),
    );
    assert_eq!(auto.status, 201, "{}", auto.text);
    assert_eq!(
        auto.json["item"]["autoDelivery"]["delivered"], 1,
        "{}",
        auto.text
    );

    let id =
        |reply: &crate::util::Reply| reply.json["item"]["leadId"].as_str().unwrap().to_string();
    let leads = vec![cancelled, id(&posted), id(&auto)];
    (f, leads)
}

#[test]
fn every_column_that_names_a_lead_or_request_stores_16_bytes() {
    let (f, leads) = a_file_with_every_kind_of_id();
    let copy = f.server.db.dir.path().join("copy.db");
    lr(&f.server, "backup --out").arg(&copy).json();
    for (column, blobs, texts) in storage_classes(&copy) {
        assert!(blobs > 0, "{column}: nothing stored");
        assert_eq!(texts, 0, "{column}: an id stored as text");
    }
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let stored: Vec<u8> = conn
        .query_row(
            "SELECT id FROM leads WHERE id = ?1",
            [leads[0].parse::<leadrelay::ids::LeadId>().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored.len(), 16);
}

#[test]
fn migration_20_rewrites_an_existing_files_ids_and_everything_reads_the_same() {
    let (f, _) = a_file_with_every_kind_of_id();
    let copy = f.server.db.dir.path().join("copy.db");
    lr(&f.server, "backup --out").arg(&copy).json();
    let before = everything(&copy);

    as_before_migration_20(&copy);
    for (column, blobs, texts) in storage_classes(&copy) {
        assert_eq!(
            (blobs, texts > 0),
            (0, true),
            "{column} as an older build wrote it"
        );
    }
    // `check` reads a file as it is (read-only): the older file is sound.
    assert_eq!(lr(&copy, "check").json()["ok"], true);

    // Any other command brings the file forward.
    let after = everything(&copy);
    assert_eq!(after, before);
    for (column, blobs, texts) in storage_classes(&copy) {
        assert_eq!(texts, 0, "{column}: an id left as text");
        assert!(blobs > 0, "{column}");
    }
    let report = lr(&copy, "check").json();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["schemaVersion"], leadrelay::db::SCHEMA_VERSION);
}

#[test]
fn an_id_that_is_not_one_of_ours_is_unknown_as_before() {
    let (f, leads) = a_file_with_every_kind_of_id();
    let lead = &leads[0];
    let request = lr(&f.server, format!("lead show {lead}")).json()["requests"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Well formed but never made, the right id in lower case, another kind's id, a ULID
    // without its prefix, the prefix alone.
    let never = format!("lead_{}", "0".repeat(26));
    let lower = lead.to_lowercase();
    let ulid_alone = lead["lead_".len()..].to_string();
    let supplier_answer = |lead: &str| {
        let answer = f
            .server
            .post(SUPPLIER_CONFIRMATION)
            .secret(SUPPLIER_KEY)
            .json(&json!({"leadId": lead, "status": "acknowledged"}))
            .send();
        (answer.status, answer.json)
    };
    // `lead_nope` binds as text in every build: how an unknown lead is answered.
    let unknown_answer = supplier_answer("lead_nope");
    assert_eq!(
        unknown_answer.1["code"], "lead_not_found",
        "{unknown_answer:?}"
    );
    for unknown in [&never, &lower, &request, &ulid_alone, "lead_"] {
        lr(&f.server, format!("lead show {unknown}"))
            .fails(1)
            .stderr_contains(&format!("unknown lead '{unknown}'"));
        lr(&f.server, format!("lead list --after {unknown}"))
            .fails(1)
            .stderr_contains(&format!("unknown lead '{unknown}'"));
        lr(&f.server, format!("lead cancel {unknown} --reason x"))
            .fails(1)
            .stderr_contains("lead not found");
        assert_eq!(supplier_answer(unknown), unknown_answer, "{unknown}");
    }
    let never_request = format!("lreq_{}", "0".repeat(26));
    for unknown in [&never_request, &request.to_lowercase(), lead] {
        lr(&f.server, format!("deliver --request {unknown} --buyer a"))
            .fails(1)
            .stderr_contains(unknown);
    }
    // The real ones are found.
    assert_eq!(
        lr(&f.server, format!("lead show {lead}")).json()["id"],
        lead.as_str()
    );
}

/// Each lead request's `request_id` in `path` (NULLs aside) with its storage class, in
/// insert order; a BLOB as the `req_` id its 16 bytes are.
fn request_ids(path: &Path) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut statement = conn
        .prepare(
            "SELECT typeof(request_id), request_id FROM lead_requests
             WHERE request_id IS NOT NULL ORDER BY rowid",
        )
        .unwrap();
    statement
        .query_map([], |row| {
            let text = match row.get::<_, rusqlite::types::Value>(1)? {
                rusqlite::types::Value::Blob(bytes) => {
                    let bytes: [u8; 16] = bytes.try_into().unwrap();
                    format!("req_{}", ulid::Ulid::from_bytes(bytes))
                }
                rusqlite::types::Value::Text(text) => text,
                other => panic!("a request id stored as {other:?}"),
            };
            Ok((row.get(0)?, text))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Makes the file at `path` what a build before migration 33 wrote: request id `ours` as
/// its ULID's 16 bytes (a client's stays text), schema version 32.
fn as_before_migration_33(path: &Path, ours: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let ulid = ulid::Ulid::from_string(ours.strip_prefix("req_").unwrap()).unwrap();
    let changed = conn
        .execute(
            "UPDATE lead_requests SET request_id = ?1 WHERE request_id = ?2",
            rusqlite::params![ulid.to_bytes().to_vec(), ours],
        )
        .unwrap();
    assert!(changed > 0, "no lead request of {ours}");
    conn.pragma_update(None, "user_version", 32).unwrap();
}

#[test]
fn migration_33_stores_every_request_id_as_its_text_and_reads_back_the_same_ids() {
    let f = Fixture::new();
    let post = |request_id: Option<&str>, external_id: &str, email: &str, phone: &str| {
        let mut request = f
            .server
            .post("/api/webhooks/channels/web/sources/src/leads")
            .json(&complete_lead(external_id, email, phone));
        if let Some(id) = request_id {
            request = request.header("X-Request-Id", id);
        }
        let reply = request.send();
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.header("x-request-id").unwrap().to_string()
    };
    let ours = post(None, "ours-1", "ann@example.org", "+49 30 123456");
    assert!(ours.starts_with("req_"), "{ours}");
    let theirs = post(
        Some("client-trace-7"),
        "theirs-1",
        "bo@example.org",
        "+49 30 654321",
    );
    assert_eq!(theirs, "client-trace-7");
    let text = |id: &str| ("text".to_string(), id.to_string());
    let blob = |id: &str| ("blob".to_string(), id.to_string());
    let copy = f.server.db.dir.path().join("copy.db");
    lr(&f.server, "backup --out").arg(&copy).json();
    assert_eq!(request_ids(&copy), [text(&ours), text(&theirs)]);

    as_before_migration_33(&copy, &ours);
    assert_eq!(
        request_ids(&copy),
        [blob(&ours), text(&theirs)],
        "as an older build stored them"
    );
    // Any command brings the file forward: the same ids, each as its text.
    lr(&copy, "lead list").json();
    assert_eq!(request_ids(&copy), [text(&ours), text(&theirs)]);
    let report = lr(&copy, "check").json();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["schemaVersion"], leadrelay::db::SCHEMA_VERSION);
}
