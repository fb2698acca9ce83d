//! Partner-native mappings through the real binary (`mapping set/preview/publish/show`) and
//! through the real server (both ingest endpoints with a published mapping).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::util::{TempDb, basic_setup, bin, cli_json, cli_output};

/// The example partner of the README: contacts in an array, names in one field.
fn partner_mapping() -> Value {
    json!({"items": "/contacts", "fields": {
        "externalId": {"from": "/id"},
        "firstName": {"from": "/name", "split": " ", "part": 0},
        "lastName": {"from": "/name", "split": " ", "part": -1},
        "email": {"from": "/mail", "transform": ["trim", "lowercase"]},
        "phone": {"from": "/tel", "transform": ["digits"]},
        "consentStatus": {"from": "/optin", "map": {"true": "granted", "false": "denied"}},
        "routingReady": {"from": "/ready", "default": true},
        "productSlug": {"const": "solar"},
        "capture.metadata.campaign": {"from": "/utm/campaign"},
        "fieldValues.roof": {"from": "/details/roof", "default": "unknown"}}})
}

fn write_file(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    path
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON on stdout ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The (path, code) pairs of an error body's details.
fn details(error: &Value) -> Vec<(String, String)> {
    error["error"]["details"]
        .as_array()
        .unwrap_or_else(|| panic!("no details in {error}"))
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().to_string(),
                d["code"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect()
}

/// Stores `document` as the draft of `source` with `mapping set`; returns its JSON.
fn set_draft(db: &Path, source: &str, document: &Value) -> Value {
    let dir = db.parent().expect("the database is in a temp dir");
    let file = write_file(dir, &format!("mapping-{source}.json"), document);
    cli_json(
        db,
        &["mapping", "set", source, "--file", file.to_str().unwrap()],
    )
}

/// A database with the basic setup and a channel source `landing` without a secret.
fn setup_with_source() -> TempDb {
    let db = TempDb::new();
    basic_setup(&db.path);
    cli_json(
        &db.path,
        &[
            "source",
            "create",
            "--channel",
            "web",
            "--name",
            "Landing",
            "--id",
            "landing",
            "--no-secret",
        ],
    );
    db
}

#[test]
fn a_bad_document_is_refused_with_every_path_and_nothing_is_stored() {
    let db = setup_with_source();
    let bad = json!({"items": "contacts", "extra": 1, "fields": {
        "email": {"from": "/mail", "transform": ["trim", "lower"]},
        "first_name": {"from": "/n"},
        "firstName": {"from": "/name", "part": 0},
        "routingReady": {"const": "maybe"},
        "phone": {"from": "/tel", "const": "1"}}});
    let file = write_file(db.dir.path(), "bad.json", &bad);
    let file = file.to_str().unwrap();

    let output = cli_output(
        &db.path,
        &["--json", "mapping", "set", "landing", "--file", file],
    );
    assert_eq!(output.status.code(), Some(1));
    let error = stdout_json(&output);
    assert_eq!(error["error"]["code"], "invalid_mapping");
    assert_eq!(
        details(&error),
        pairs(&[
            ("/extra", "unknown_key"),
            ("/items", "invalid_pointer"),
            ("/fields/email/transform/1", "unknown_transform"),
            ("/fields/first_name", "unknown_target"),
            ("/fields/firstName/part", "part_without_split"),
            ("/fields/routingReady/const", "invalid_value"),
            ("/fields/phone/const", "conflicting_source"),
        ])
    );

    // As text: one line per problem on stderr, exit 1.
    let output = cli_output(&db.path, &["mapping", "set", "landing", "--file", file]);
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(text.contains("7 problems"), "{text}");
    assert!(
        text.contains("/fields/email/transform/1: unknown transform 'lower'"),
        "{text}"
    );
    assert!(text.contains("did you mean 'firstName'"), "{text}");

    let shown = cli_json(&db.path, &["mapping", "show", "landing"]);
    assert_eq!(shown["draft"], Value::Null, "nothing was stored");
    assert_eq!(shown["version"], 0);
}

#[test]
fn set_preview_publish_show_round_trip() {
    let db = setup_with_source();
    let dir = db.dir.path();
    let stored = set_draft(&db.path, "landing", &partner_mapping());
    assert_eq!(stored["sourceId"], "landing");
    assert_eq!(stored["draft"]["document"], partner_mapping());
    assert!(
        stored["draft"]["updatedAt"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(stored["published"], Value::Null);
    assert_eq!(stored["version"], 0);
    assert_eq!(stored["unpublishedChanges"], true);

    // Preview runs the draft on a sample and prints the native batch.
    let sample = json!({"contacts": [
        {"id": "c-1", "name": "Ada King Lovelace", "mail": " ADA@Example.ORG ",
         "tel": "+49 170 1234567", "optin": true, "utm": {"campaign": "spring"},
         "details": {"roof": "tile"}},
        {"id": "c-2", "name": "Grace Hopper", "optin": "false", "ready": "no"}]});
    let sample_file = write_file(dir, "sample.json", &sample);
    let sample_file = sample_file.to_str().unwrap();
    let preview = cli_json(
        &db.path,
        &["mapping", "preview", "landing", "--file", sample_file],
    );
    assert_eq!(preview["mapping"], "draft");
    assert_eq!(preview["leads"], 2);
    assert_eq!(
        preview["native"],
        json!({"leads": [
            {"externalId": "c-1", "firstName": "Ada", "lastName": "Lovelace",
             "email": "ada@example.org", "phone": "491701234567", "consentStatus": "granted",
             "routingReady": true, "productSlug": "solar",
             "capture": {"metadata": {"campaign": "spring"}}, "fieldValues": {"roof": "tile"}},
            {"externalId": "c-2", "firstName": "Grace", "lastName": "Hopper",
             "consentStatus": "denied", "routingReady": false, "productSlug": "solar",
             "fieldValues": {"roof": "unknown"}}]})
    );

    // A sample the draft cannot transform: every problem with its path in the sample.
    let bad_sample = json!({"contacts": [
        {"id": "c-1", "name": "Ada Lovelace", "ready": "maybe"},
        {"id": {"n": 2}, "name": "Grace Hopper", "utm": {"campaign": ["a"]}}]});
    let bad_file = write_file(dir, "bad-sample.json", &bad_sample);
    let bad_file = bad_file.to_str().unwrap();
    let output = cli_output(
        &db.path,
        &[
            "--json", "mapping", "preview", "landing", "--file", bad_file,
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    let error = stdout_json(&output);
    assert_eq!(error["error"]["code"], "mapping_error");
    assert_eq!(
        details(&error),
        pairs(&[
            ("/contacts/0/ready", "not_a_boolean"),
            ("/contacts/1/id", "not_a_scalar"),
            ("/contacts/1/utm/campaign", "not_a_scalar"),
        ])
    );
    let output = cli_output(
        &db.path,
        &["mapping", "preview", "landing", "--file", bad_file],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("/contacts/0/ready: expected a boolean"),
        "{}",
        stderr(&output)
    );

    // Nothing is published yet.
    let preview_published = [
        "mapping",
        "preview",
        "landing",
        "--file",
        sample_file,
        "--published",
    ];
    let output = cli_output(&db.path, &preview_published);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no published mapping"),
        "{}",
        stderr(&output)
    );

    let published = cli_json(&db.path, &["mapping", "publish", "landing"]);
    assert_eq!(published["version"], 1);
    assert_eq!(published["changed"], true);
    assert_eq!(published["published"]["version"], 1);
    assert_eq!(published["published"]["document"], partner_mapping());
    assert_eq!(published["unpublishedChanges"], false);

    // Publishing the same draft again changes nothing.
    let again = cli_json(&db.path, &["mapping", "publish", "landing"]);
    assert_eq!(again["version"], 1);
    assert_eq!(again["changed"], false);

    // A new draft does not touch the published version until it is published.
    let mut changed = partner_mapping();
    changed["fields"]["city"] = json!({"const": "Berlin"});
    set_draft(&db.path, "landing", &changed);
    let shown = cli_json(&db.path, &["mapping", "show", "landing"]);
    assert_eq!(shown["draft"]["document"], changed);
    assert_eq!(shown["published"]["document"], partner_mapping());
    assert_eq!(shown["unpublishedChanges"], true);
    let old = cli_json(&db.path, &preview_published);
    assert_eq!(old["mapping"], "published");
    assert_eq!(old["native"]["leads"][0].get("city"), None);
    let new = cli_json(
        &db.path,
        &["mapping", "preview", "landing", "--file", sample_file],
    );
    assert_eq!(new["native"]["leads"][0]["city"], "Berlin");

    let published = cli_json(&db.path, &["mapping", "publish", "landing"]);
    assert_eq!(published["version"], 2);
    assert_eq!(published["published"]["document"], changed);

    // The source shows its mapping state too.
    let source = cli_json(&db.path, &["source", "show", "landing"]);
    assert_eq!(source["mapping"]["version"], 2);
    assert_eq!(source["mapping"]["published"], true);

    // Text output of show lists one rule per line.
    let output = cli_output(&db.path, &["mapping", "show", "landing"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("published: version 2"), "{text}");
    assert!(text.contains("items: /contacts"), "{text}");
    assert!(
        text.contains(r#"city "#) && text.contains(r#"{"const":"Berlin"}"#),
        "{text}"
    );
    assert!(text.contains("same as the published version"), "{text}");
}

#[test]
fn unpublish_returns_the_source_to_native_shapes_and_keeps_the_draft() {
    let db = setup_with_source();
    set_draft(&db.path, "landing", &partner_mapping());
    let nothing = cli_json(&db.path, &["mapping", "unpublish", "landing"]);
    assert_eq!(nothing["changed"], false);
    cli_json(&db.path, &["mapping", "publish", "landing"]);
    let withdrawn = cli_json(&db.path, &["mapping", "unpublish", "landing"]);
    assert_eq!(withdrawn["changed"], true);
    assert_eq!(withdrawn["published"], Value::Null);
    assert_eq!(withdrawn["draft"]["document"], partner_mapping());
    assert_eq!(withdrawn["version"], 1);
    // Publishing again is a new version.
    let republished = cli_json(&db.path, &["mapping", "publish", "landing"]);
    assert_eq!(republished["version"], 2);
}

#[test]
fn mapping_commands_fail_clearly() {
    let db = setup_with_source();
    let dir = db.dir.path();
    let mapping = write_file(dir, "mapping.json", &partner_mapping());
    let mapping = mapping.to_str().unwrap();
    let not_json = dir.join("not.json");
    std::fs::write(&not_json, "{\"fields\": ").unwrap();
    let missing = dir.join("missing.json");

    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["mapping", "publish", "landing"],
            "has no draft mapping",
        ),
        (
            vec!["mapping", "preview", "landing", "--file", mapping],
            "no draft mapping",
        ),
        (
            vec!["mapping", "set", "nope", "--file", mapping],
            "unknown source 'nope'",
        ),
        (vec!["mapping", "show", "nope"], "unknown source 'nope'"),
        (vec!["mapping", "publish", "nope"], "unknown source 'nope'"),
        (
            vec!["mapping", "unpublish", "nope"],
            "unknown source 'nope'",
        ),
        (
            vec![
                "mapping",
                "set",
                "landing",
                "--file",
                not_json.to_str().unwrap(),
            ],
            "is not valid JSON",
        ),
        (
            vec![
                "mapping",
                "set",
                "landing",
                "--file",
                missing.to_str().unwrap(),
            ],
            "cannot read",
        ),
    ];
    for (args, message) in cases {
        let output = cli_output(&db.path, &args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let shown = cli_json(&db.path, &["mapping", "show", "landing"]);
    assert_eq!(shown["draft"], Value::Null);
    assert_eq!(shown["published"], Value::Null);
}

#[test]
fn documents_and_samples_can_come_from_standard_input() {
    let db = setup_with_source();
    let run = |args: &[&str], input: &Value| -> Value {
        let mut child = bin()
            .arg("--db")
            .arg(&db.path)
            .arg("--json")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        stdout_json(&output)
    };
    let document = json!({"fields": {"email": {"from": "/e"}, "firstName": {"const": "X"}}});
    let stored = run(&["mapping", "set", "landing", "--file", "-"], &document);
    assert_eq!(stored["draft"]["document"], document);
    let preview = run(
        &["mapping", "preview", "landing", "--file", "-"],
        &json!({"e": "a@b.org"}),
    );
    assert_eq!(
        preview["native"],
        json!({"email": "a@b.org", "firstName": "X"})
    );
    assert_eq!(preview["leads"], 1);
}
