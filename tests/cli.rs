//! The configuration command line, run as the real binary.

use serde_json::Value;

use crate::util::{TempDb, TestServer, basic_setup, lr};

fn count(db: &std::path::Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

#[test]
fn init_creates_a_migrated_database() {
    let db = TempDb::new();
    let out = lr(&db, "init").json();
    assert_eq!(out["schemaVersion"], leadrelay::db::SCHEMA_VERSION);
    assert!(db.path.exists());
}

#[test]
fn the_whole_configuration_tour_works_with_json_keys() {
    let db = TempDb::new();
    lr(&db, "init").json();
    let ws = lr(
        &db,
        "workspace create --name Acme --id ws --timezone Europe/Berlin",
    )
    .json();
    assert_eq!(ws["id"], "ws");
    assert_eq!(ws["timezone"], "Europe/Berlin");

    let channel = lr(
        &db,
        "channel create --workspace ws --name Web --id web \
         --delivery-mode multi --max-buyers 2 --score-threshold 40",
    )
    .json();
    assert_eq!(channel["autoDelivery"], true);
    assert_eq!(channel["deliveryMode"], "multi");
    assert_eq!(channel["maxBuyers"], 2);
    let table = lr(&db, "table create --workspace ws --name List").json();
    assert_eq!(table["autoDelivery"], false, "lead tables default to off");
    assert!(table["id"].as_str().unwrap().starts_with("tbl_"));

    let supplier = lr(&db, "supplier create --workspace ws --name Sup --id sup").json();
    let key = supplier["key"].as_str().unwrap();
    assert!(key.len() >= 32);

    let source = lr(
        &db,
        "source create --channel web --name Form --id form --supplier sup \
         --supplier-cost 4.50 --dedupe-fields email --dedupe-action reject",
    )
    .json();
    let secret = source["secret"].as_str().unwrap().to_string();
    assert!(
        secret.len() >= 32,
        "a generated secret has at least 128 bits"
    );
    assert_eq!(
        source["webhookPath"],
        "/api/webhooks/channels/web/sources/form/leads"
    );
    assert_eq!(source["supplierCost"], 4.5);
    let table_id = table["id"].as_str().unwrap();
    let table_source = lr(
        &db,
        format!("source create --table {table_id} --name Import --no-secret"),
    )
    .json();
    assert_eq!(table_source["secret"], Value::Null);
    assert_eq!(
        table_source["webhookPath"],
        format!(
            "/api/webhooks/lead-tables/{table_id}/sources/{}/leads",
            table_source["id"].as_str().unwrap()
        )
    );

    // The secret is shown once: show and list never print it, and only its hash is stored.
    let shown = lr(&db, "source show form").json();
    assert_eq!(shown["hasSecret"], true);
    assert!(shown.get("secret").is_none());
    let listed = lr(&db, "source list").json();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    let raw = std::fs::read(&db.path).unwrap();
    let stored = rusqlite::Connection::open(&db.path)
        .unwrap()
        .query_row(
            "SELECT secret_hash FROM sources WHERE id = 'form'",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap();
    assert_eq!(stored, leadrelay::secrets::hash(&secret));
    assert!(!String::from_utf8_lossy(&raw).contains(&secret));

    let rotated = lr(&db, "source rotate-secret form").json();
    assert_ne!(rotated["secret"], secret.as_str());
    let disabled = lr(&db, "source disable form").json();
    assert_eq!(disabled["enabled"], false);

    let product = lr(
        &db,
        "product create --workspace ws --slug solar --name Solar \
         --field 'roof:required=tile|flat' --field size --supplier-cost 3",
    )
    .json();
    assert_eq!(product["fields"][0]["required"], true);
    assert_eq!(product["fields"][0]["allowedValues"][1], "flat");

    let buyer = lr(
        &db,
        "buyer create --workspace ws --name B --id b --webhook-url http://127.0.0.1:9/hook \
         --plan prepaid --credit-limit 10 --cancellation-window 24h --capabilities confirm,cancel",
    )
    .json();
    assert!(buyer["secret"].as_str().unwrap().len() >= 32);
    assert!(
        buyer["signingSecret"]
            .as_str()
            .unwrap()
            .starts_with("whsec_")
    );
    assert_eq!(buyer["cancellationWindowSeconds"], 86_400);
    let subscription = lr(
        &db,
        "buyer subscribe b --product solar --price 20 --daily-cap 5 \
         --filter country=DE --filter 'postalCode=80*'",
    )
    .json();
    assert_eq!(subscription["price"], 20.0);
    assert_eq!(subscription["filters"][1], "postalCode=80*");
    let demoted = lr(&db, "buyer terms set b --product solar --priority -1").json();
    assert_eq!(demoted["priority"], -1);
    let funded = lr(&db, "buyer fund b --amount 100").json();
    assert_eq!(funded["balance"], 100.0);
    assert_eq!(lr(&db, "buyer pause b").json()["status"], "paused");
    assert_eq!(lr(&db, "buyer resume b").json()["status"], "active");
    let buyers = lr(&db, "buyer list").json();
    assert!(buyers[0].get("secret").is_none());
    assert!(buyers[0].get("signingSecret").is_none());
}

#[test]
fn bad_flags_are_usage_errors_with_exit_code_2() {
    let db = TempDb::new();
    basic_setup(&db);
    for line in [
        "workspace create",
        "workspace create --name X --timezone Mars/Base",
        "channel create --workspace ws --name X --delivery-mode x",
        "channel create --workspace ws --name X --score-threshold 101",
        "source create --name X",
        "source create --channel web --table list --name X",
        "source create --channel web --name X --supplier-cost -1",
        "source create --channel web --name X --dedupe-fields zip",
        "buyer create --workspace ws --name X --webhook-url http://x --plan free",
        "buyer create --workspace ws --name X --webhook-url http://x --cancellation-window soon",
        "buyer subscribe b --product solar --price 1.2.3",
        "nonsense",
    ] {
        let failure = lr(&db, line).fails(2);
        assert!(!failure.stderr.is_empty(), "{line}");
    }
}

#[test]
fn unknown_references_are_clear_errors_that_write_nothing() {
    let db = TempDb::new();
    basic_setup(&db);
    let tables = ["containers", "sources", "products", "buyers", "suppliers"];
    let before: Vec<i64> = tables.iter().map(|t| count(&db.path, t)).collect();
    for (line, message) in [
        (
            "channel create --workspace nope --name X",
            "unknown workspace 'nope'",
        ),
        (
            "source create --channel nope --name X",
            "unknown channel 'nope'",
        ),
        ("source create --table web --name X", "unknown table 'web'"),
        (
            "source create --channel web --name X --supplier nope",
            "unknown supplier 'nope'",
        ),
        (
            "product create --workspace nope --slug s --name S",
            "unknown workspace 'nope'",
        ),
        (
            "product create --workspace ws --slug solar --name S",
            "exists already",
        ),
        (
            "buyer create --workspace nope --name X --webhook-url http://x",
            "unknown workspace 'nope'",
        ),
        (
            "buyer create --workspace ws --name X --webhook-url ftp://x",
            "invalid webhook URL",
        ),
        (
            "buyer subscribe nope --product solar --price 1",
            "unknown buyer 'nope'",
        ),
        (
            "supplier create --workspace nope --name X",
            "unknown workspace 'nope'",
        ),
        ("source show nope", "unknown source 'nope'"),
        (
            "channel create --workspace ws --name X --id web",
            "exists already",
        ),
        (
            "source create --channel web --name X --secret short",
            "at least 16",
        ),
    ] {
        lr(&db, line).fails(1).stderr_contains(message);
    }
    let after: Vec<i64> = tables.iter().map(|t| count(&db.path, t)).collect();
    assert_eq!(before, after);
}

#[test]
fn configuration_works_while_the_server_runs() {
    let server = TestServer::start();
    basic_setup(&server);
    for n in 0..5 {
        let id = format!("src{n}");
        lr(
            &server,
            format!("source create --channel web --name S --id {id}"),
        )
        .json();
        assert_eq!(server.get("/api/health").status, 200);
    }
    let listed = lr(&server, "source list").json();
    assert_eq!(listed.as_array().unwrap().len(), 5);
}

#[test]
fn text_output_is_readable() {
    let db = TempDb::new();
    lr(&db, "init").json();
    let text = lr(&db, "workspace create --name Acme --id ws").ok();
    assert!(text.contains("id: ws"), "{text}");
    assert!(text.contains("timezone: UTC"), "{text}");
}

#[test]
fn demo_creates_a_sample_setup_once() {
    let db = TempDb::new();
    let demo = lr(&db, "demo --base-url http://127.0.0.1:8081").json();
    assert_eq!(demo["sourceId"], "demo-form");
    assert!(demo["sourceSecret"].as_str().unwrap().starts_with("lrs_"));
    let steps = demo["steps"].as_array().unwrap();
    assert!(steps.len() >= 8);
    let ingest = steps[2]["command"].as_str().unwrap();
    assert!(
        ingest.contains(
            "http://127.0.0.1:8081/api/webhooks/channels/demo-web/sources/demo-form/leads"
        )
    );
    assert!(ingest.contains(demo["sourceSecret"].as_str().unwrap()));
    assert_eq!(lr(&db, "buyer list").json().as_array().unwrap().len(), 2);
    assert_eq!(count(&db.path, "suppliers"), 1);
    assert_eq!(count(&db.path, "products"), 2);

    // Run again, it names another file to use: not the one it refused, and none that holds a
    // demo already.
    let refused = lr(&db, "demo")
        .fails(1)
        .stderr_contains("exists already")
        .stderr
        .clone();
    let advised = refused
        .split("--db ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no --db advice: {refused}"));
    assert_ne!(
        std::path::Path::new(advised),
        db.path.as_path(),
        "{refused}"
    );
    assert!(!std::path::Path::new(advised).exists(), "{refused}");
}

#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let db = TempDb::new();
    // The read end is closed before the command starts, so its first write to stdout meets a
    // broken pipe on every run. (Reading a byte and then closing raced the command, which
    // often wrote all of its output into the pipe's buffer before the close.)
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let output = lr(&db, "demo")
        .command(false)
        .stdout(writer)
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "nothing on stderr, no panic: {stderr}");
    // SIGPIPE ends it, as it ends Unix tools (`leadrelay lead list | head`): proof that it
    // did write to the closed pipe.
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}",
        output.status
    );
}
