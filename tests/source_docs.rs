//! `source docs`: a source's posting instructions through the real binary. The example
//! request they print is run with `sh` and curl against the real server; the shared link's
//! token is checked in the file (the portal serves the link).

use std::path::Path;

use serde_json::json;

use crate::util::{TempDb, TestServer, basic_setup, lr, source};

/// The document's example request (the `sh` block of the Markdown form).
fn example_command(document: &str) -> &str {
    let start = document
        .find("```sh\n")
        .unwrap_or_else(|| panic!("no sh block in:\n{document}"));
    let rest = &document[start + "```sh\n".len()..];
    &rest[..rest.find("\n```").expect("the block ends")]
}

/// Runs `command` with the source's real secret in place of the placeholder; its status.
fn run_example(command: &str, secret: &str) -> String {
    let command = command.replace("YOUR_SOURCE_SECRET", secret);
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{command} -o /dev/null -w '%{{http_code}}'"))
        .output()
        .expect("sh runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn docs(db: &Path, line: &str) -> String {
    lr(db, format!("source docs {line}")).ok()
}

#[test]
fn the_example_request_with_the_real_secret_is_answered_201_native_and_mapped() {
    let server = TestServer::start();
    let db = &server.db.path;
    basic_setup(db);
    lr(
        db,
        "product update solar --name 'Solar <script>x</script>' --field 'roof:required=tile|flat' --field notes",
    )
    .json();
    let secret = source(db, "web", "landing", "")["secret"]
        .as_str()
        .expect("a secret")
        .to_string();
    let base = server.url("");
    let markdown = docs(db, &format!("landing --base-url {base}"));
    assert!(!markdown.contains(&secret), "the secret is never printed");
    for shown in [
        "X-Service-Webhook-Secret: YOUR_SOURCE_SECRET",
        "Authorization: Bearer YOUR_SOURCE_SECRET",
        "| `roof` | yes | `tile`, `flat` |",
        "| `notes` | no | any text |",
        "/api/ping/channels/web/sources/landing",
        "`validation_failed`",
        "idempotent_replay",
    ] {
        assert!(
            markdown.contains(shown),
            "{shown} missing from:\n{markdown}"
        );
    }
    let command = example_command(&markdown);
    assert!(command.starts_with(&format!("curl -s -X POST '{base}/api/webhooks/")));
    assert!(command.contains("-d '{"), "the body is inline: {command}");
    assert_eq!(run_example(command, &secret), "201");
    assert_eq!(run_example(command, &secret), "200", "a replay");
    assert_eq!(run_example(command, "wrong-secret-of-some-length"), "401");

    let html = docs(db, &format!("landing --format html --base-url {base}"));
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        html.contains("Solar &lt;script&gt;x&lt;/script&gt;"),
        "escaped: {html}"
    );
    assert!(!html.contains("<script>"));
    assert!(html.contains("<code class=\"language-sh\">curl -s -X POST"));
    assert!(!html.contains(&secret));

    // A source with a published mapping shows the partner's own JSON instead of the native
    // shapes, and its example works too.
    let partner = source(db, "web", "partner", "")["secret"]
        .as_str()
        .expect("a secret")
        .to_string();
    let mapping = json!({"items": "/contacts", "fields": {
        "externalId": {"from": "/id"},
        "firstName": {"from": "/name", "split": " ", "part": 0},
        "lastName": {"from": "/name", "split": " ", "part": -1},
        "email": {"from": "/mail", "transform": ["trim", "lowercase"]},
        "consentStatus": {"from": "/optin", "map": {"yes": "granted", "no": "denied"}},
        "productSlug": {"const": "solar"},
        "fieldValues.roof": {"from": "/details/roof", "map": {"Ziegel": "tile"}}}});
    let file = server.db.path.with_extension("mapping.json");
    std::fs::write(&file, mapping.to_string()).expect("the mapping file is written");
    lr(db, "mapping set partner --file").arg(&file).ok();
    lr(db, "mapping publish partner").ok();
    let mapped = docs(db, &format!("partner --base-url {base}"));
    assert!(mapped.contains("mapping version 1"), "{mapped}");
    assert!(mapped.contains("\"contacts\": ["), "{mapped}");
    assert!(mapped.contains("\"roof\": \"Ziegel\""), "{mapped}");
    assert!(
        !mapped.contains("A Lead's fields"),
        "no native shapes: {mapped}"
    );
    assert_eq!(run_example(example_command(&mapped), &partner), "201");
}

#[test]
fn a_change_of_a_products_fields_changes_the_document() {
    let db = TempDb::new();
    basic_setup(&db.path);
    source(&db.path, "web", "landing", "--no-secret");
    let before = docs(&db.path, "landing");
    assert!(
        !before.contains("YOUR_SOURCE_SECRET\" \\"),
        "no secret header in the example"
    );
    assert!(!before.contains("`size`"));
    lr(
        &db.path,
        "product update solar --field 'size:required=small|large'",
    )
    .json();
    let after = docs(&db.path, "landing");
    assert!(
        after.contains("| `size` | yes | `small`, `large` |"),
        "{after}"
    );
    assert!(
        after.contains("\"size\": \"small\""),
        "the example answers it: {after}"
    );
    let html = docs(&db.path, "landing --format html");
    assert!(html.contains("<td><code>size</code></td>"), "{html}");
}

#[test]
fn share_stores_a_hashed_token_that_finds_the_source_until_unshare() {
    let db = TempDb::new();
    basic_setup(&db.path);
    source(&db.path, "web", "landing", "");
    let shared = |token: &str| {
        let conn = rusqlite::Connection::open(&db.path).expect("the file opens");
        leadrelay::config::source::shared_source(&conn, token)
            .expect("the lookup runs")
            .map(|id| id.to_string())
    };
    let first = lr(
        &db.path,
        "source docs landing --share --portal-url https://portal.example",
    )
    .json();
    let token = first["token"].as_str().expect("a token").to_string();
    assert_eq!(first["url"], format!("https://portal.example/docs/{token}"));
    assert_eq!(shared(&token).as_deref(), Some("landing"));
    let stored: String = rusqlite::Connection::open(&db.path)
        .expect("the file opens")
        .query_row("SELECT token_hash FROM source_doc_shares", [], |r| r.get(0))
        .expect("one link");
    assert_ne!(stored, token, "only the hash is stored");

    let link = lr(&db.path, "source docs landing --share").ok();
    let second = link.trim().rsplit('/').next().expect("a token").to_string();
    assert!(link.starts_with("http://127.0.0.1:8082/docs/"), "{link}");
    assert_eq!(shared(&token), None, "a new link replaces the old");
    assert_eq!(shared(&second).as_deref(), Some("landing"));

    lr(&db.path, "source docs landing --unshare").ok();
    assert_eq!(shared(&second), None);
    assert_eq!(shared("not-a-token"), None);
}
