//! Data lifecycle and privacy (DESIGN.md section 12) through the real binary and server:
//! `lead erase` while the lead's event is still pending and while the same person keeps
//! coming in, twice, by the normalised email and phone, the erased bytes absent from a
//! backup and from the file; retention run by `serve`, `purge` and `vacuum` giving space
//! back.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::process::ServeProcess;
use crate::util::receiver::{Answer, Receiver};
use crate::util::{TempDb, TestServer, WAIT, buyer, deliver, lead_request, lr, setup, wait_until};

/// The person every test erases: each value distinctive enough to be searched for in the
/// file's raw bytes.
const FIRST: &str = "Wilhelmina";
const LAST: &str = "Quarterstaff";
const EMAIL: &str = "wilhelmina.quarterstaff@example.org";
const PHONE: &str = "+49 30 9876 5432";
const PHONE_DIGITS: &str = "493098765432";
const STREET: &str = "Zwetschgenallee";

fn person(external_id: &str) -> Value {
    json!({
        "externalId": external_id,
        "firstName": FIRST,
        "lastName": LAST,
        "email": EMAIL,
        "phone": PHONE,
        "street": STREET,
        "houseNumber": "17",
        "postalCode": "10115",
        "city": "Berlin",
        "country": "DE",
        "consentStatus": "granted",
        "productSlug": "solar",
    })
}

/// A different person, who must be left alone.
fn bystander(n: usize) -> Value {
    json!({"firstName": "Ada", "lastName": format!("Lovelace {n}"),
           "email": format!("ada{n}@example.org"), "productSlug": "solar"})
}

fn wait_for_status(db: &Path, event_id: &str, status: &str) -> Value {
    let show = || lr(db, format!("outbox show {event_id}")).json();
    wait_until(WAIT, &format!("event {event_id} to be {status}"), || {
        show()["status"] == status
    });
    show()
}

fn lead(db: &Path, id: &str) -> Value {
    lr(db, format!("lead show {id}")).json()
}

/// What the person left in `text`, by the values searched for.
fn traces(text: &str) -> Vec<&'static str> {
    [FIRST, LAST, EMAIL, PHONE, PHONE_DIGITS, STREET]
        .into_iter()
        .filter(|value| text.contains(value))
        .collect()
}

/// The same search on raw bytes (a database file, its WAL, a backup).
fn traces_in_file(path: &Path) -> Vec<&'static str> {
    let bytes = std::fs::read(path).unwrap_or_default();
    [FIRST, LAST, EMAIL, PHONE, PHONE_DIGITS, STREET]
        .into_iter()
        .filter(|value| {
            bytes
                .windows(value.len())
                .any(|window| window == value.as_bytes())
        })
        .collect()
}

#[test]
fn an_event_pending_at_the_erasure_is_sent_without_the_person() {
    // The first attempt is answered late with a 503 that echoes the person: the erasure
    // happens while it is in flight, and the retry carries the tombstone.
    let options = leadrelay::service::ServiceOptions {
        delivery: leadrelay::outbox::WorkerConfig {
            retry_schedule: leadrelay::outbox::RetrySchedule::parse("200ms,200ms,200ms")
                .expect("a valid schedule"),
            request_timeout: Duration::from_secs(30),
            ..Default::default()
        },
        ..Default::default()
    };
    let server = TestServer::start_with(TempDb::new(), options);
    let db = &server.db.path;
    let receiver = Receiver::start();
    setup(db);
    buyer(db, "b", &receiver.url("/hook"), Some("25"), []);
    receiver.answer_sequence(
        "/hook",
        vec![
            Answer::status(503)
                .body(&format!("busy, try {EMAIL} later"))
                .delay(Duration::from_secs(4)),
            Answer::ok().body(&format!("thanks for {FIRST} {LAST}")),
        ],
    );
    let (lead_id, request_id) = lead_request(&server, &person("p-1"));
    let delivered = deliver(db, &request_id, "b", None);
    let event_id = delivered["eventId"].as_str().unwrap().to_string();
    let first = receiver.wait_for_on("/hook", 1, WAIT);
    assert!(
        !traces(&first[0].text()).is_empty(),
        "sent with the person before"
    );

    let erased = lr(
        db,
        format!("lead erase --lead {lead_id} --yes --reason ticket-7"),
    )
    .json();
    assert_eq!(
        receiver.requests_to("/hook").len(),
        1,
        "the erasure finished while the first attempt was still waiting for its answer"
    );
    assert_eq!(erased["leads"], 1);
    assert_eq!(erased["records"]["events"], 1);
    assert_eq!(erased["noop"], false);

    let shown = wait_for_status(db, &event_id, "delivered");
    let requests = receiver.requests_to("/hook");
    let last = requests.last().unwrap();
    assert_eq!(last.header("webhook-id"), Some(event_id.as_str()));
    let body = last.json();
    assert_eq!(traces(&last.text()), Vec::<&str>::new(), "{body}");
    assert_eq!(body["lead"]["erased"], true);
    assert_eq!(body["lead"]["email"], Value::Null);
    assert_eq!(body["lead"]["externalId"], "p-1");
    assert_eq!(body["transactionId"], delivered["transactionId"]);
    // The in-flight attempt's answer echoed the person: it was recorded without an
    // excerpt, and the delivered one's excerpt too.
    assert_eq!(traces(&shown.to_string()), Vec::<&str>::new(), "{shown}");
    let tombstone = lead(db, &lead_id);
    assert_eq!(tombstone["erased"], true);
    assert_eq!(traces(&tombstone.to_string()), Vec::<&str>::new());
    // The money stays: the transaction is there with its price.
    let transaction = lr(
        db,
        format!(
            "transaction show {}",
            delivered["transactionId"].as_str().unwrap()
        ),
    )
    .json();
    assert_eq!(transaction["leadId"], lead_id.as_str());
}

#[test]
fn an_erasure_racing_ingest_of_the_same_email_takes_every_lead_stored_before_it() {
    // The guarantee: when `lead erase --email` returns, every lead with that email whose
    // ingest was answered before the command started is a tombstone; a lead whose ingest
    // was sent after the command returned is untouched. Ingest never stops meanwhile.
    let server = Arc::new(TestServer::start());
    let db = server.db.path.clone();
    setup(&db);
    let stop = Arc::new(AtomicBool::new(false));
    let ingesting = std::thread::spawn({
        let server = server.clone();
        let stop = stop.clone();
        move || {
            let mut stored = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                // The same person, typed differently each time.
                let mut lead = person(&format!("race-{n}"));
                lead["email"] = json!(if n % 2 == 0 {
                    format!("  {}", EMAIL.to_uppercase())
                } else {
                    EMAIL.to_string()
                });
                let sent = Instant::now();
                let (lead_id, _) = lead_request(&server, &lead);
                stored.push((lead_id, sent, Instant::now()));
            }
            stored
        }
    });
    let count = |server: &TestServer| {
        lr(&server.db.path, "lead list --limit 10000")
            .json()
            .as_array()
            .map_or(0, Vec::len)
    };
    wait_until(WAIT, "some leads before the erasure", || {
        count(&server) >= 10
    });
    let started = Instant::now();
    let erased = lr(&db, format!("lead erase --email {EMAIL} --yes")).json();
    let finished = Instant::now();
    wait_until(WAIT, "some leads after the erasure", || {
        count(&server) >= erased["leads"].as_u64().unwrap() as usize + 10
    });
    stop.store(true, Ordering::SeqCst);
    let stored = ingesting.join().expect("the ingest thread ends");

    let listed = lr(&db, "lead list --limit 10000").json();
    let erased_ids: std::collections::HashSet<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["erased"] == true)
        .map(|l| l["id"].as_str().unwrap())
        .collect();
    let (mut before, mut after) = (0, 0);
    for (id, sent, answered) in &stored {
        if *answered < started {
            before += 1;
            assert!(
                erased_ids.contains(id.as_str()),
                "{id} was stored before the erasure"
            );
        } else if *sent > finished {
            after += 1;
            assert!(
                !erased_ids.contains(id.as_str()),
                "{id} came after the erasure"
            );
        }
    }
    assert!(
        before >= 10 && after >= 10,
        "{before} before, {after} after"
    );
    assert_eq!(erased["leads"].as_u64().unwrap() as usize, erased_ids.len());

    // Erasing again takes the ones that came later; then none with that email is left.
    let again = lr(&db, format!("lead erase --email {EMAIL} --yes")).json();
    assert_eq!(
        again["leads"].as_u64().unwrap() as usize,
        stored.len() - erased_ids.len()
    );
    let listed = lr(&db, "lead list --limit 10000").json();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["erased"] == true),
        "{listed}"
    );
}

#[test]
fn erasing_twice_changes_nothing_the_second_time_and_the_log_keeps_no_value() {
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    let (lead_id, _) = lead_request(&server, &person("p-1"));
    let (other, _) = lead_request(&server, &bystander(1));

    let first = lr(db, format!("lead erase --lead {lead_id} --yes")).json();
    assert_eq!(
        (first["leads"].clone(), first["noop"].clone()),
        (json!(1), json!(false))
    );
    let erased_at = lead(db, &lead_id)["erasedAt"].clone();
    let second = lr(db, format!("lead erase --lead {lead_id} --yes")).json();
    assert_eq!(second["leads"], 0);
    assert_eq!(second["noop"], true);
    assert_eq!(second["alreadyErased"], true);
    assert_eq!(
        lead(db, &lead_id)["erasedAt"],
        erased_at,
        "the first erasure's time stays"
    );
    // By email, after the lead was erased: nothing holds it any more.
    let by_email = lr(db, format!("lead erase --email {EMAIL} --yes")).json();
    assert_eq!(by_email["noop"], true);

    let log = lr(db, "lead erasures").json();
    let rows = log.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{log}");
    assert_eq!(rows[2]["by"], "lead");
    assert_eq!(rows[2]["leads"], 1);
    assert_eq!(rows[0]["by"], "email");
    assert_eq!(rows[0]["leads"], 0);
    assert!(rows.iter().all(|r| r["finishedAt"].is_string()));
    assert_eq!(traces(&log.to_string()), Vec::<&str>::new(), "{log}");
    // The log takes no reason that holds the erased value.
    lr(db, format!("lead erase --email {EMAIL} --yes"))
        .arg("--reason")
        .arg(format!("request from {EMAIL}"))
        .fails(1)
        .stderr_contains("reason must not contain");
    // Someone else is untouched; an unknown lead is an error.
    assert_eq!(lead(db, &other)["erased"], false);
    lr(db, "lead erase --lead lead_nope --yes")
        .fails(1)
        .stderr_contains("unknown lead");
    // Without --yes and without a terminal: refused, nothing changed.
    lr(db, "lead erase --email ada1@example.org")
        .fails(1)
        .stderr_contains("without --yes");
    assert_eq!(lead(db, &other)["erased"], false);
}

#[test]
fn email_and_phone_are_matched_after_the_duplicate_normalisation() {
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    let mut typed = person("p-1");
    typed["email"] = json!("Foo@Example.com");
    typed["phone"] = json!("+49 (30) 1234-567");
    let (by_email, _) = lead_request(&server, &typed);
    let mut other = bystander(1);
    other["phone"] = json!("0049 30 1234567");
    let (different_digits, _) = lead_request(&server, &other);
    let (by_phone, _) = lead_request(&server, &{
        let mut p = bystander(2);
        p["phone"] = json!("49-30-123 4567");
        p
    });

    let erased = lr(db, "lead erase --yes --email")
        .arg("  Foo@Example.COM ")
        .json();
    assert_eq!(erased["leads"], 1);
    assert_eq!(lead(db, &by_email)["erased"], true);
    let erased = lr(db, "lead erase --yes --phone")
        .arg("+49 30 123 45 67")
        .json();
    assert_eq!(erased["leads"], 1, "{erased}");
    assert_eq!(lead(db, &by_phone)["erased"], true);
    // 0049… has other digits: not the same key, as for duplicates.
    assert_eq!(lead(db, &different_digits)["erased"], false);
    lr(db, "lead erase --yes --email not-an-address")
        .fails(1)
        .stderr_contains("not a usable email");
}

#[test]
fn after_an_erasure_no_byte_of_the_person_is_in_a_backup_or_the_file() {
    let server = TestServer::start();
    let db = server.db.path.clone();
    let receiver = Receiver::start();
    setup(&db);
    buyer(&db, "b", &receiver.url("/hook"), Some("25"), []);
    // The buyer's answer echoes the person into the attempt's excerpt.
    receiver.answer("/hook", Answer::ok().body(&format!("got {EMAIL} {PHONE}")));
    let mut with_properties = person("p-1");
    with_properties["notes"] = json!(format!("call {FIRST} at {PHONE_DIGITS}"));
    let (lead_id, request_id) = lead_request(&server, &with_properties);
    for n in 0..20 {
        lead_request(&server, &bystander(n));
    }
    let delivered = deliver(&db, &request_id, "b", None);
    let event_id = delivered["eventId"].as_str().unwrap();
    wait_for_status(&db, event_id, "delivered");

    let dir = server.db.dir.path();
    let before = dir.join("before.db");
    lr(&db, "backup --out").arg(&before).json();
    assert!(
        traces_in_file(&before).len() >= 4,
        "the backup held the person before the erasure: {:?}",
        traces_in_file(&before)
    );

    let erased = lr(&db, format!("lead erase --lead {lead_id} --yes")).json();
    assert_eq!(erased["walCheckpointed"], true);
    let after = dir.join("after.db");
    lr(&db, "backup --out").arg(&after).json();
    assert_eq!(traces_in_file(&after), Vec::<&str>::new(), "in the backup");
    assert_eq!(
        traces_in_file(&db),
        Vec::<&str>::new(),
        "in the database file"
    );
    let wal = crate::util::beside(&db, "-wal");
    assert_eq!(traces_in_file(&wal), Vec::<&str>::new(), "in the WAL");
    // The others are still there, in full.
    assert!(
        lr(&db, "lead list --limit 100")
            .ok()
            .contains("ada7@example.org")
    );
}

/// Another process holds SQLite's checkpoint lock on `db` (byte 121 of its `-shm` file, the
/// lock a running server's checkpointer takes for every pass) for `held`, then lets go.
/// Returns once the lock is held.
fn hold_checkpoint_lock(db: &Path, held: Duration) -> std::process::Child {
    use std::io::BufRead;
    const HOLD: &str = "
import fcntl, sys, time
shm = open(sys.argv[1], 'r+b')
while True:
    try:
        fcntl.lockf(shm, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 121)
        break
    except OSError:
        time.sleep(0.001)
print('held', flush=True)
time.sleep(float(sys.argv[2]))
";
    let mut child = std::process::Command::new("python3")
        .args(["-c", HOLD])
        .arg(crate::util::beside(db, "-shm"))
        .arg(held.as_secs_f64().to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    child
}

#[test]
fn an_erasure_waits_for_a_checkpoint_under_way_and_empties_the_wal() {
    let server = TestServer::start();
    let db = server.db.path.clone();
    setup(&db);
    let (lead_id, _) = lead_request(&server, &person("p-1"));
    // A checkpoint of the server's is under way (its checkpointer runs several a second under
    // load): SQLite answers the erasure's TRUNCATE busy at once instead of waiting for it.
    let mut checkpoint = hold_checkpoint_lock(&db, Duration::from_secs(2));
    let erased = lr(&db, format!("lead erase --lead {lead_id} --yes")).json();
    assert_eq!(erased["walCheckpointed"], true, "{erased}");
    checkpoint.wait().unwrap();
    let wal = crate::util::beside(&db, "-wal");
    assert_eq!(traces_in_file(&wal), Vec::<&str>::new(), "in the WAL");
}

/// Ingests `n` leads with a free-text property larger than a page: its overflow pages are
/// freed whole when the purge empties it.
fn fat_leads(server: &TestServer, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let mut lead = bystander(i);
            lead["notes"] = json!(format!("{i} {}", "note ".repeat(1_600)));
            lead_request(server, &lead).0
        })
        .collect()
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
        + std::fs::metadata(crate::util::beside(path, "-wal")).map_or(0, |m| m.len())
}

#[test]
fn purge_makes_tombstones_gives_pages_back_and_vacuum_packs_the_file() {
    let server = TestServer::start();
    let db = server.db.path.clone();
    setup(&db);
    let ids = fat_leads(&server, 300);
    lr(&db, "workspace create --name Other --id other").json();

    let dry = lr(&db, "purge --older-than 1ms --dry-run").json();
    assert_eq!(dry["leads"], 300);
    assert_eq!(dry["dryRun"], true);
    assert_eq!(lead(&db, &ids[0])["erased"], false);
    lr(&db, "purge --older-than 30d --workspace nope")
        .fails(1)
        .stderr_contains("unknown workspace");
    lr(&db, "purge --older-than 180")
        .fails(2)
        .stderr_contains("no unit");
    // Nothing in the other workspace, nothing older than a day.
    assert_eq!(
        lr(&db, "purge --older-than 1ms --workspace other").json()["leads"],
        0
    );
    assert_eq!(lr(&db, "purge --older-than 1d").json()["leads"], 0);

    let before = size(&db);
    let purged = lr(&db, "purge --older-than 1ms").json();
    assert_eq!(purged["leads"], 300);
    assert_eq!(purged["dryRun"], false);
    assert!(purged["pagesFreed"].as_i64().unwrap() > 300, "{purged}");
    let after_purge = size(&db);
    assert!(
        after_purge < before,
        "the purge gave pages back: {before} → {after_purge}"
    );
    let tombstone = lead(&db, &ids[0]);
    assert_eq!(tombstone["erased"], true);
    assert_eq!(tombstone["additionalProperties"], json!({}));
    assert_eq!(tombstone["requests"][0]["productSlug"], "solar");
    assert_eq!(
        lr(&db, "purge --older-than 1ms").json()["leads"],
        0,
        "twice: nothing"
    );
    let log = lr(&db, "lead erasures").json();
    assert_eq!(log[0]["kind"], "purge");
    assert_eq!(log[0]["leads"], 300);

    // Vacuum needs the file to itself.
    lr(&db, "vacuum").fails(1).stderr_contains("stop it first");
    let stopped = server.stop();
    let vacuumed = lr(&stopped.path, "vacuum").json();
    assert!(
        vacuumed["bytesAfter"].as_u64().unwrap() <= after_purge,
        "{vacuumed}"
    );
    assert_eq!(lr(&stopped.path, "check").json()["ok"], true);
}

/// `auto_vacuum` of the file at `path`: 0 none, 2 incremental.
fn auto_vacuum(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .pragma_query_value(None, "auto_vacuum", |row| row.get(0))
        .unwrap()
}

#[test]
fn vacuum_gives_an_older_files_free_pages_back_and_makes_it_incremental() {
    let server = TestServer::start();
    setup(&server.db.path);
    fat_leads(&server, 100);
    let stopped = server.stop();
    let db = stopped.path.clone();
    // A file from before incremental auto-vacuum was the default.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA auto_vacuum = NONE; VACUUM;")
        .unwrap();
    assert_eq!(auto_vacuum(&db), 0);

    // The purge frees the notes' pages but cannot give them back.
    let purged = lr(&db, "purge --older-than 1ms").json();
    assert_eq!(purged["leads"], 100);
    assert_eq!(purged["pagesFreed"], 0, "{purged}");
    let vacuumed = lr(&db, "vacuum").json();
    let (before, after) = (
        vacuumed["bytesBefore"].as_u64().unwrap(),
        vacuumed["bytesAfter"].as_u64().unwrap(),
    );
    // Each lead's notes (8 KB) filled two overflow pages.
    assert!(
        after + 100 * 2 * 4096 <= before,
        "the free pages went back: {vacuumed}"
    );
    assert_eq!(auto_vacuum(&db), 2, "incremental from now on");
    assert_eq!(lr(&db, "check").json()["ok"], true);
}

/// Leads of every stored quality and duplicate status, interleaved: `lead list --source`
/// and a purge walk a source's leads by time over one range of an index per pair of
/// statuses, so a pair left out or a wrong merge shows here.
#[test]
fn list_by_source_and_purge_take_leads_of_every_quality_and_duplicate_status() {
    let server = TestServer::start();
    let db = server.db.path.clone();
    setup(&db);
    let lead_of = |last: &str, contact: Value| {
        let mut lead = json!({"firstName": "Ada", "lastName": last, "productSlug": "solar"});
        lead.as_object_mut()
            .unwrap()
            .extend(contact.as_object().unwrap().clone());
        lead
    };
    let sent = [
        (
            "ok",
            "unique",
            lead_of("Ok", json!({"email": "ada.ok@example.org"})),
        ),
        (
            "suspect",
            "unique",
            lead_of("Suspect", json!({"email": "nope", "phone": "030 1234567"})),
        ),
        ("invalid", "unique", lead_of("Invalid", json!({}))),
        (
            "ok",
            "review",
            lead_of("Ok again", json!({"email": "ada.ok@example.org"})),
        ),
        (
            "suspect",
            "review",
            lead_of(
                "Suspect again",
                json!({"email": "nope", "phone": "030 1234567"}),
            ),
        ),
        ("invalid", "unique", lead_of("Invalid again", json!({}))),
        (
            "ok",
            "unique",
            lead_of("Last", json!({"email": "ada.last@example.org"})),
        ),
    ];
    let mut ids = Vec::new();
    for (quality, duplicate, body) in &sent {
        let (id, _) = lead_request(&server, body);
        let shown = lead(&db, &id);
        assert_eq!(
            (
                shown["qualityStatus"].as_str(),
                shown["duplicateStatus"].as_str()
            ),
            (Some(*quality), Some(*duplicate)),
            "{shown}"
        );
        ids.push(id);
    }
    let listed = |limit: usize| -> Vec<String> {
        lr(&db, format!("lead list --source src --limit {limit}"))
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_str().unwrap().to_string())
            .collect()
    };
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(listed(100), newest_first);
    assert_eq!(listed(3), newest_first[..3]);

    let purged = lr(&db, "purge --older-than 1ms --dry-run").json();
    assert_eq!(purged["leads"], ids.len());
    let purged = lr(&db, "purge --older-than 1ms").json();
    assert_eq!(purged["leads"], ids.len());
    for id in &ids {
        assert_eq!(lead(&db, id)["erased"], true, "{id}");
    }
}

#[test]
fn serve_purges_leads_past_their_workspace_retention_at_start() {
    let server = TestServer::start();
    let db = server.db.path.clone();
    setup(&db);
    let (old, _) = lead_request(&server, &person("p-1"));
    let stopped = server.stop();
    let shown = lr(&db, "workspace update ws --retention 1s").json();
    assert_eq!(shown["retention"], "1s");
    let ingested = Instant::now();
    wait_until(WAIT, "the lead to be older than the retention", || {
        ingested.elapsed() > Duration::from_millis(1_100)
    });
    let serve = ServeProcess::start(&db, &[]);
    wait_until(WAIT, "serve's retention run", || {
        lead(&db, &old)["erased"] == true
    });
    let log = lr(&db, "lead erasures").json();
    assert_eq!(log[0]["kind"], "purge");
    assert_eq!(log[0]["actor"], "retention");
    assert_eq!(log[0]["workspaceId"], "ws");
    let audit = lr(&db, "audit list --actor server").json();
    assert_eq!(audit.as_array().unwrap().len(), 1, "{audit}");
    assert_eq!(audit[0]["action"], "privacy.purge");
    assert_eq!(audit[0]["objectId"], "ws");
    serve.stop();
    // `none` keeps leads for ever again.
    let shown = lr(&db, "workspace update ws --retention none").json();
    assert_eq!(shown["retention"], Value::Null);
    drop(stopped);
}
