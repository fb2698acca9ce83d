//! Stored states and money: a status the binary does not know is an error that `check`
//! reports (never a silent default), the ledger behind every balance, and files of 0.1.0
//! brought forward. Data is made through the real interfaces (HTTP, the CLI); a test that
//! tampers with the file does so with SQL, as a hand edit or another program would.

use std::path::Path;

use serde_json::{Value, json};

use crate::lifecycle::{CONFIRMATION, Fixture, SUPPLIER_CONFIRMATION, SUPPLIER_KEY};
use crate::util::{TempDb, TestServer, basic_setup, buyer, lr};

/// Runs `sql` on the file as another program would, CHECK constraints off.
fn tamper(db: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(&format!("PRAGMA ignore_check_constraints = ON; {sql}"))
        .unwrap();
}

#[test]
fn an_unknown_stored_state_is_an_error_that_check_reports() {
    let db = TempDb::new();
    basic_setup(&db);
    buyer(&db.path, "b", "http://127.0.0.1:9/hook", None, "");
    assert_eq!(lr(&db, "check").json()["ok"], true);

    tamper(
        &db.path,
        "UPDATE buyers SET status = 'suspended' WHERE id = 'b'",
    );

    // Reading the buyer stops with the reason instead of taking it for active or paused.
    lr(&db, "buyer list")
        .fails(1)
        .stderr_contains("unknown buyer status 'suspended' stored in the database");
    let text = lr(&db, "check").fails(1).stdout;
    assert!(
        text.contains(
            "buyers.status: 1 row(s) hold 'suspended', which is not a known value (active, paused)"
        ),
        "{text}"
    );
    let report = lr(&db, "check").fails_json(1).json();
    assert_eq!(report["ok"], false);
    assert_eq!(
        report["unknownStates"],
        json!([{"table": "buyers", "column": "status", "value": "suspended", "rows": 1}])
    );
}

/// `ledger list` rows as (kind, amount, transaction id or "") for easy comparison.
fn ledger_rows(db: &Path, party: &str) -> Vec<(String, f64, String)> {
    lr(db, format!("ledger list {party}"))
        .json()
        .as_array()
        .expect("ledger list prints an array")
        .iter()
        .map(|row| {
            (
                row["kind"].as_str().unwrap().to_string(),
                row["amount"].as_f64().unwrap(),
                row["transactionId"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn row(kind: &str, amount: f64, transaction: &str) -> (String, f64, String) {
    (kind.to_string(), amount, transaction.to_string())
}

#[test]
fn every_money_move_is_a_ledger_row_and_a_balance_is_the_sum_of_its_rows() {
    let f = Fixture::new();
    let secret = f.buyer("pre", &["--plan", "prepaid"]);
    f.buyer("post", &[]);
    let db = f.server.db.path.clone();
    lr(&db, "buyer fund pre --amount 100").json();

    // A delivery charges the prepaid buyer and buys the lead from the source's supplier.
    let t1 = f.delivered("pre");
    // A new price on acknowledge charges the difference.
    let reply = f.call(
        CONFIRMATION,
        &secret,
        &json!({"transactionId": t1, "status": "acknowledged", "buyerPrice": 30}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    // A rejection refunds the charge; the lead's last transaction ended, so a clawback
    // opens, and the supplier's confirmation reverses its cost.
    let (lead2, requests) = f.lead_on("src", &["solar"]);
    let t2 = f.deliver(&requests[0], "pre");
    let reply = f.call(
        CONFIRMATION,
        &secret,
        &json!({"transactionId": t2, "status": "rejected", "reason": "wrong number"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = f
        .server
        .request("POST", SUPPLIER_CONFIRMATION)
        .secret(SUPPLIER_KEY)
        .json(&json!({"leadId": lead2, "status": "acknowledged"}))
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    // A postpaid buyer's delivery moves no balance; the supplier still earns its cost.
    let t3 = f.delivered("post");
    // A lead from a source without a supplier moves no supplier money.
    let (_, plain) = f.lead_on("plain", &["solar"]);
    f.deliver(&plain[0], "post");

    assert_eq!(
        ledger_rows(&db, "--buyer pre"),
        [
            row("fund", 100.0, ""),
            row("charge", -25.0, &t1),
            row("price_change", -5.0, &t1),
            row("charge", -25.0, &t2),
            row("refund", 25.0, &t2),
        ]
    );
    assert_eq!(f.balance("pre"), 70.0, "the balance is the sum of the rows");
    assert_eq!(ledger_rows(&db, "--buyer post"), []);
    assert_eq!(f.balance("post"), 0.0);
    assert_eq!(
        ledger_rows(&db, "--supplier sup"),
        [
            row("supplier_cost", 4.0, &t1),
            row("supplier_cost", 4.0, &t2),
            row("supplier_reversal", -4.0, &t2),
            row("supplier_cost", 4.0, &t3),
        ]
    );
    let listed = lr(&db, "ledger list --buyer pre").json();
    let refund = &listed[4];
    assert_eq!(refund["actor"], "buyer:pre");
    assert_eq!(refund["reason"], "rejected: wrong number");
    assert_eq!(refund["buyerId"], "pre");
    assert_eq!(refund["supplierId"], Value::Null);
    assert_eq!(listed[0]["actor"], "operator");
    assert_eq!(
        lr(&db, "ledger list --supplier sup").json()[2]["actor"],
        "supplier:sup"
    );
    // A transaction shows the money it moved.
    let shown = f.transaction(&t1);
    let kinds: Vec<&str> = shown["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["charge", "supplier_cost", "price_change"]);

    assert_eq!(lr(&db, "check").json()["ok"], true);
    lr(&db, "ledger list --buyer nobody")
        .fails(1)
        .stderr_contains("unknown buyer 'nobody'");
}

#[test]
fn a_lead_is_bought_from_its_supplier_once_per_request() {
    let f = Fixture::new();
    let a = f.buyer("a", &[]);
    f.buyer("b", &[]);
    let db = f.server.db.path.clone();
    let (lead, requests) = f.lead_on("src", &["solar"]);
    let t1 = f.deliver(&requests[0], "a");
    let reply = f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": t1, "status": "rejected"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    // The supplier disputes the clawback: the lead stays bought and can be sold again.
    let reply = f
        .server
        .request("POST", SUPPLIER_CONFIRMATION)
        .secret(SUPPLIER_KEY)
        .json(&json!({"leadId": lead, "status": "rejected"}))
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    let t2 = f.deliver(&requests[0], "b");
    // The new transaction carries the cost for its margin, but the supplier is paid once.
    assert_eq!(f.transaction(&t2)["supplierCost"], 4.0);
    assert_eq!(
        ledger_rows(&db, "--supplier sup"),
        [row("supplier_cost", 4.0, &t1)]
    );
}

#[test]
fn check_reports_a_balance_that_is_not_the_sum_of_its_ledger() {
    let f = Fixture::new();
    f.buyer("pre", &["--plan", "prepaid"]);
    let db = f.server.db.path.clone();
    lr(&db, "buyer fund pre --amount 50").json();
    f.delivered("pre");
    assert_eq!(lr(&db, "check").json()["ok"], true);

    tamper(
        &db,
        "UPDATE buyers SET balance_cents = balance_cents + 1000 WHERE id = 'pre'",
    );
    let text = lr(&db, "check").fails(1).stdout;
    assert!(
        text.contains(
            "buyer 'pre': balance 35.00 differs from the sum of its ledger 25.00 (by 10.00)"
        ),
        "{text}"
    );
    // The text names the check as `--json` does, not only the problem.
    assert!(
        text.contains("balances: 1 buyer(s) not matching their ledger"),
        "{text}"
    );
    let report = lr(&db, "check").fails_json(1).json();
    assert_eq!(
        report["balanceMismatches"],
        json!([{"buyerId": "pre", "cachedCents": 3500, "ledgerCents": 2500}])
    );
}

/// A file as leadrelay 0.1.0 left it: migration 1 (`schema.sql`) only, with buyers that have
/// balances and transactions with supplier costs, among them one that took the cost over
/// from a rejected one, one whose cost a clawback reversed, one from a source without a
/// supplier, and one whose margin does not match its price and cost. Its lead and request ids
/// are as 0.1.0 made them (a prefix and a ULID), which migration 20 stores as 16 bytes.
fn version_one_file(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(include_str!("../crates/store/schema.sql"))
        .unwrap();
    conn.execute_batch(
        "PRAGMA user_version = 1;
         INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'Acme', 1000);
         INSERT INTO containers (id, workspace_id, kind, name, auto_delivery, created_at)
             VALUES ('web', 'ws', 'channel', 'Web', 1, 1000);
         INSERT INTO suppliers (id, workspace_id, name, key_hash, created_at)
             VALUES ('sup', 'ws', 'Sup', 'hash-of-key', 1000);
         INSERT INTO sources (id, container_id, name, supplier_id, supplier_cost_cents,
                 dedupe_scope, created_at)
             VALUES ('src', 'web', 'Src', 'sup', 400, 'channel', 1000),
                    ('own', 'web', 'Own', NULL, NULL, 'channel', 1000);
         INSERT INTO products (id, workspace_id, slug, name, default_supplier_cost_cents,
                 created_at)
             VALUES ('solar', 'ws', 'solar', 'Solar', 300, 1000);
         INSERT INTO buyers (id, workspace_id, name, webhook_url, signing_secret, plan,
                 balance_cents, credit_limit_cents, created_at)
             VALUES ('pre', 'ws', 'Pre', 'http://127.0.0.1:9/', 'whsec_x', 'prepaid', 7500,
                     0, 1000),
                    ('owing', 'ws', 'Owing', 'http://127.0.0.1:9/', 'whsec_x', 'prepaid',
                     -1250, 5000, 1001),
                    ('post', 'ws', 'Post', 'http://127.0.0.1:9/', 'whsec_x', 'postpaid', 0,
                     0, 1002);
         INSERT INTO leads (id, source_id, container_id, workspace_id, first_name, last_name,
                 quality_status, duplicate_status, status, created_at)
             VALUES ('lead_01JD7Q4N9V0000000000000001', 'src', 'web', 'ws', 'A', 'A', 'ok', 'unique', 'active', 2000),
                    ('lead_01JD7Q4N9V0000000000000002', 'src', 'web', 'ws', 'B', 'B', 'ok', 'unique', 'active', 2000),
                    ('lead_01JD7Q4N9V0000000000000003', 'src', 'web', 'ws', 'C', 'C', 'ok', 'unique', 'cancelled', 2000),
                    ('lead_01JD7Q4N9V0000000000000004', 'own', 'web', 'ws', 'D', 'D', 'ok', 'unique', 'active', 2000);
         INSERT INTO lead_requests (id, lead_id, position, product_id, status, created_at)
             VALUES ('lreq_01JD7Q4N9V0000000000000001', 'lead_01JD7Q4N9V0000000000000001', 0, 'solar', 'delivered', 2000),
                    ('lreq_01JD7Q4N9V0000000000000002', 'lead_01JD7Q4N9V0000000000000002', 0, 'solar', 'delivered', 2000),
                    ('lreq_01JD7Q4N9V0000000000000003', 'lead_01JD7Q4N9V0000000000000003', 0, 'solar', 'delivered', 2000),
                    ('lreq_01JD7Q4N9V0000000000000004', 'lead_01JD7Q4N9V0000000000000004', 0, 'solar', 'delivered', 2000);
         INSERT INTO transactions (id, lead_request_id, lead_id, buyer_id, product_id,
                 workspace_id, delivery_mode, buyer_price_cents, supplier_cost_cents,
                 margin_cents, charged_cents, status, created_at, updated_at)
             VALUES ('txn_1', 'lreq_01JD7Q4N9V0000000000000001', 'lead_01JD7Q4N9V0000000000000001', 'pre', 'solar', 'ws', 'exclusive', 2500, 400,
                     2100, 2500, 'acknowledged', 3000, 3000),
                    ('txn_2a', 'lreq_01JD7Q4N9V0000000000000002', 'lead_01JD7Q4N9V0000000000000002', 'pre', 'solar', 'ws', 'exclusive', 2500, 400,
                     2100, 0, 'rejected', 3001, 3001),
                    ('txn_2b', 'lreq_01JD7Q4N9V0000000000000002', 'lead_01JD7Q4N9V0000000000000002', 'post', 'solar', 'ws', 'exclusive', 2000,
                     400, 1600, 0, 'delivered', 3002, 3002),
                    ('txn_3', 'lreq_01JD7Q4N9V0000000000000003', 'lead_01JD7Q4N9V0000000000000003', 'post', 'solar', 'ws', 'exclusive', 2000, 0,
                     2000, 0, 'cancelled', 3003, 3003),
                    ('txn_4', 'lreq_01JD7Q4N9V0000000000000004', 'lead_01JD7Q4N9V0000000000000004', 'owing', 'solar', 'ws', 'exclusive', 1000,
                     300, 999, 1000, 'delivered', 3004, 3004);",
    )
    .unwrap();
    conn.execute(
        "UPDATE buyers SET secret_hash = ?1 WHERE id = 'owing'",
        [leadrelay::secrets::hash(OWING_SECRET)],
    )
    .unwrap();
}

/// The lifecycle secret of buyer `owing` in [`version_one_file`].
const OWING_SECRET: &str = "secret-of-owing-0123456789";

#[test]
fn a_version_one_file_gets_its_balances_as_opening_rows_and_its_supplier_costs() {
    let db = TempDb::new();
    version_one_file(&db.path);

    // Any command on the file brings it forward; `check` alone never does (read-only).
    let buyers = lr(&db.path, "buyer list").json();
    let balance = |id: &str| {
        buyers
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == id)
            .unwrap()["balance"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(
        (balance("pre"), balance("owing"), balance("post")),
        (75.0, -12.5, 0.0),
        "balances are what they were"
    );
    let report = lr(&db.path, "check").json();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["schemaVersion"], leadrelay::db::SCHEMA_VERSION);

    let opening = lr(&db.path, "ledger list --buyer pre").json();
    assert_eq!(opening.as_array().unwrap().len(), 1, "{opening}");
    assert_eq!(opening[0]["kind"], "adjustment");
    assert_eq!(opening[0]["amount"], 75.0);
    assert_eq!(opening[0]["actor"], "migration");
    assert_eq!(
        opening[0]["reason"],
        "opening balance: the balance before the ledger"
    );
    assert_eq!(
        ledger_rows(&db.path, "--buyer owing"),
        [row("adjustment", -12.5, "")]
    );
    assert_eq!(ledger_rows(&db.path, "--buyer post"), []);
    // The supplier earned once per bought request: not again for the transaction that took
    // the cost over, nothing for a reversed cost or a source without a supplier.
    assert_eq!(
        ledger_rows(&db.path, "--supplier sup"),
        [
            row("supplier_cost", 4.0, "txn_1"),
            row("supplier_cost", 4.0, "txn_2a"),
        ]
    );
    let margin = lr(&db.path, "transaction show txn_4").json()["marginAmount"].clone();
    assert_eq!(margin, 7.0, "the margin is the price less the cost");

    // The migrated file goes on as any other: a refund returns the charge made before the
    // ledger, on top of the opening row.
    let server = TestServer::start_with(db, Default::default());
    let reply = server
        .request("POST", CONFIRMATION)
        .secret(OWING_SECRET)
        .json(&json!({"transactionId": "txn_4", "status": "rejected"}))
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["economicsApplied"], true);
    assert_eq!(
        ledger_rows(&server.db.path, "--buyer owing"),
        [row("adjustment", -12.5, ""), row("refund", 10.0, "txn_4")]
    );
    assert_eq!(lr(&server.db.path, "check").json()["ok"], true);
}
