//! Stored states and money: a status the binary does not know is an error that `check`
//! reports (never a silent default), the ledger behind every balance, and files of 0.1.0
//! brought forward. Data is made through the real interfaces (HTTP, the CLI); a test that
//! tampers with the file does so with SQL, as a hand edit or another program would.

use std::path::Path;

use serde_json::json;

use crate::util::{TempDb, basic_setup, buyer, lr};

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
    buyer(&db.path, "b", "http://127.0.0.1:9/hook", None, "");
    assert_eq!(lr(&db.path, "check").json()["ok"], true);

    tamper(
        &db.path,
        "UPDATE buyers SET status = 'suspended' WHERE id = 'b'",
    );

    // Reading the buyer stops with the reason instead of taking it for active or paused.
    lr(&db.path, "buyer list")
        .fails(1)
        .stderr_contains("unknown buyer status 'suspended' stored in the database");
    let text = lr(&db.path, "check").fails(1).stdout;
    assert!(
        text.contains(
            "buyers.status: 1 row(s) hold 'suspended', which is not a known value (active, paused)"
        ),
        "{text}"
    );
    let report = lr(&db.path, "check").fails_json(1).json();
    assert_eq!(report["ok"], false);
    assert_eq!(
        report["unknownStates"],
        json!([{"table": "buyers", "column": "status", "value": "suspended", "rows": 1}])
    );
}
