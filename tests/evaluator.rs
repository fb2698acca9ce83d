//! The evaluator that learns from buyers' outcomes (DESIGN.md section 17): weight versions,
//! `evaluator history` and `set --version`, and `evaluator train` on outcomes made through
//! the real interfaces.

use serde_json::{Value, json};

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
