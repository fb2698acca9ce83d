//! Automated delivery (Delivery 1.0): the evaluator and schedule commands, and the whole
//! path over HTTP — a lead posted to the real server is evaluated, delivered to a real
//! local webhook receiver, and its decision is shown by `leadrelay lead show`.

use serde_json::{Value, json};

use crate::util::{TempDb, basic_setup, cli_json, cli_output};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn evaluator_weights_are_shown_changed_and_reset_per_workspace() {
    let db = TempDb::new();
    basic_setup(&db.path);
    cli_json(
        &db.path,
        &["workspace", "create", "--name", "Other", "--id", "other"],
    );

    let shown = cli_json(&db.path, &["evaluator", "show", "--workspace", "ws"]);
    assert_eq!(shown["model"], "leadrelay-logistic-v1");
    assert_eq!(shown["custom"], false);
    assert_eq!(shown["weights"], shown["defaults"]);
    let names: Vec<&str> = shown["weights"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
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
            "softQualityFlags"
        ]
    );
    assert_eq!(
        shown["thresholds"],
        json!([
            {"containerId": "web", "kind": "channel", "autoDelivery": true, "scoreThreshold": 50},
            {"containerId": "list", "kind": "table", "autoDelivery": false, "scoreThreshold": 50},
        ])
    );

    let set = cli_json(
        &db.path,
        &[
            "evaluator",
            "set",
            "--workspace",
            "ws",
            "--weight",
            "validPhone=2.5",
            "--weight",
            "intercept=-2",
        ],
    );
    assert_eq!(set["custom"], true);
    assert_eq!(set["weights"]["validPhone"], 2.5);
    assert_eq!(set["weights"]["intercept"], -2.0);
    assert_eq!(set["weights"]["validEmail"], 1.5, "others keep their value");
    let again = cli_json(&db.path, &["evaluator", "show", "--workspace", "ws"]);
    assert_eq!(again["weights"], set["weights"], "stored");
    let other = cli_json(&db.path, &["evaluator", "show", "--workspace", "other"]);
    assert_eq!(other["custom"], false, "weights are per workspace");

    // A file replaces the whole model: names it leaves out take their defaults.
    let file = db.dir.path().join("weights.json");
    std::fs::write(&file, r#"{"names": 3, "softQualityFlags": -0.25}"#).unwrap();
    let from_file = cli_json(
        &db.path,
        &[
            "evaluator",
            "set",
            "--workspace",
            "ws",
            "--file",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(from_file["weights"]["names"], 3.0);
    assert_eq!(from_file["weights"]["softQualityFlags"], -0.25);
    assert_eq!(
        from_file["weights"]["validPhone"], 1.5,
        "back to the default"
    );

    let reset = cli_json(
        &db.path,
        &["evaluator", "set", "--workspace", "ws", "--reset"],
    );
    assert_eq!(reset["custom"], false);
    assert_eq!(reset["weights"], reset["defaults"]);
}

#[test]
fn evaluator_set_refuses_bad_input_and_changes_nothing() {
    let db = TempDb::new();
    basic_setup(&db.path);
    cli_json(
        &db.path,
        &[
            "evaluator",
            "set",
            "--workspace",
            "ws",
            "--weight",
            "names=2",
        ],
    );
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
        let mut full = vec!["evaluator", "set", "--workspace", "ws"];
        full.extend_from_slice(args);
        let output = cli_output(&db.path, &full);
        assert_eq!(
            output.status.code(),
            Some(*code),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let unknown = cli_output(&db.path, &["evaluator", "show", "--workspace", "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("unknown workspace 'nope'"));
    let shown = cli_json(&db.path, &["evaluator", "show", "--workspace", "ws"]);
    assert_eq!(shown["weights"]["names"], 2.0, "nothing changed");
}

#[test]
fn subscriptions_take_schedules() {
    let db = TempDb::new();
    basic_setup(&db.path);
    cli_json(
        &db.path,
        &[
            "buyer",
            "create",
            "--workspace",
            "ws",
            "--name",
            "SunCo",
            "--id",
            "sunco",
            "--webhook-url",
            "http://127.0.0.1:9/leads",
        ],
    );
    let subscribed = cli_json(
        &db.path,
        &[
            "buyer",
            "subscribe",
            "sunco",
            "--product",
            "solar",
            "--price",
            "25",
            "--schedule",
            "mon-fri 08:00-18:00",
            "--schedule",
            "sat 22:00-02:00",
        ],
    );
    assert_eq!(
        subscribed["schedule"],
        json!([
            {"days": [1, 2, 3, 4, 5], "from": "08:00", "to": "18:00"},
            {"days": [6], "from": "22:00", "to": "02:00"},
        ])
    );
    let stored: String = rusqlite::Connection::open(&db.path)
        .unwrap()
        .query_row("SELECT schedule FROM subscriptions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&stored).unwrap(),
        subscribed["schedule"]
    );
    // Subscribing again replaces the terms: no schedule means always open.
    let always = cli_json(
        &db.path,
        &[
            "buyer",
            "subscribe",
            "sunco",
            "--product",
            "solar",
            "--price",
            "25",
        ],
    );
    assert_eq!(always["schedule"], Value::Null);

    let bad = cli_output(
        &db.path,
        &[
            "buyer",
            "subscribe",
            "sunco",
            "--product",
            "solar",
            "--price",
            "25",
            "--schedule",
            "someday 8-18",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("schedule 'someday 8-18'"),
        "{}",
        stderr(&bad)
    );
}
