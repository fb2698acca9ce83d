//! Stored states and money: a status the binary does not know is an error that `check`
//! reports (never a silent default), the ledger behind every balance, and files of 0.1.0
//! brought forward. Data is made through the real interfaces (HTTP, the CLI); a test that
//! tampers with the file does so with SQL, as a hand edit or another program would.

use std::path::Path;

use crate::util::{TempDb, basic_setup, cli_json, cli_output};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `sql` on the file as another program would, CHECK constraints off.
fn tamper(db: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(&format!("PRAGMA ignore_check_constraints = ON; {sql}"))
        .unwrap();
}

#[test]
fn an_unknown_stored_state_is_an_error_that_check_reports() {
    let db = TempDb::new();
    basic_setup(&db.path);
    crate::delivery::buyer(&db.path, "b", "http://127.0.0.1:9/hook", None, &[]);
    assert_eq!(cli_json(&db.path, &["check"])["ok"], true);

    tamper(
        &db.path,
        "UPDATE buyers SET status = 'suspended' WHERE id = 'b'",
    );

    // Reading the buyer stops with the reason instead of taking it for active or paused.
    let listed = cli_output(&db.path, &["buyer", "list"]);
    assert_eq!(listed.status.code(), Some(1), "{}", stdout(&listed));
    assert!(
        stderr(&listed).contains("unknown buyer status 'suspended' stored in the database"),
        "{}",
        stderr(&listed)
    );

    let checked = cli_output(&db.path, &["check"]);
    assert_eq!(checked.status.code(), Some(1), "{}", stdout(&checked));
    assert!(
        stdout(&checked).contains(
            "buyers.status: 1 row(s) hold 'suspended', which is not a known value (active, paused)"
        ),
        "{}",
        stdout(&checked)
    );
    let output = cli_output(&db.path, &["--json", "check"]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(
        report["unknownStates"],
        serde_json::json!([{"table": "buyers", "column": "status", "value": "suspended", "rows": 1}])
    );
}
