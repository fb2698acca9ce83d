//! Reports (DESIGN.md section 11): the numbers equal what the test computes from the leads
//! it sent and the deliveries and lifecycle moves it made (leads over HTTP, deliveries and
//! reports with the CLI); `--csv` is RFC 4180; `check` recounts the aggregate.

use serde_json::{Value, json};

use crate::lifecycle::{
    CANCELLATION, CONFIRMATION, Fixture, PAYOUT, PAYOUT_PENDING, SUPPLIER_CONFIRMATION,
    SUPPLIER_KEY,
};
use crate::util::{Reply, lr, source};

fn report(f: &Fixture, flags: &str) -> Value {
    lr(&f.server, format!("report --workspace ws {flags}")).json()
}

fn ok(reply: Reply) {
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// The row of `rows` whose `key` is `value` (`null` for none).
fn row<'r>(shown: &'r Value, key: &str, value: Value) -> &'r Value {
    shown["rows"]
        .as_array()
        .expect("rows is an array")
        .iter()
        .find(|r| r[key] == value)
        .unwrap_or_else(|| panic!("a row with {key} {value}: {shown}"))
}

/// The columns of a row or the totals that the test checks, in a fixed order: received,
/// accepted, duplicates, rejected, sold, acknowledged, returned, paid, revenue,
/// supplierCost, margin.
fn figures(row: &Value) -> Value {
    json!([
        row["received"],
        row["accepted"],
        row["duplicates"],
        row["rejected"],
        row["sold"],
        row["acknowledged"],
        row["returned"],
        row["paid"],
        row["revenue"],
        row["supplierCost"],
        row["margin"],
    ])
}

/// What supplier `supplier` is owed: the sum of its ledger.
fn owed(f: &Fixture, supplier: &str) -> f64 {
    lr(&f.server, format!("ledger list --supplier {supplier}"))
        .json()
        .as_array()
        .expect("a list")
        .iter()
        .map(|entry| entry["amount"].as_f64().expect("an amount"))
        .sum()
}

/// A person with `email` (both duplicate sources are in one channel: each gets its own).
fn twin(email: &str) -> Value {
    json!({"firstName": "Tess", "lastName": "Twin", "email": email,
           "requests": [{"productSlug": "solar"}]})
}

#[test]
fn report_numbers_equal_what_the_test_did() {
    let f = Fixture::new();
    let caps = ["--capabilities", "confirm,payout,cancel"];
    let a = f.buyer("a", &caps);
    let b = f.buyer("b", &caps);
    source(&f.server, "web", "dup", "--no-secret --dedupe-fields email");
    source(
        &f.server,
        "web",
        "strict",
        "--no-secret --dedupe-fields email --dedupe-action reject",
    );

    // src (supplier sup, cost 4): acknowledged at a new price of 30.
    let ta = f.delivered("a");
    ok(f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": ta, "status": "acknowledged", "buyerPrice": 30}),
    ));
    // src: rejected by the buyer, and the supplier confirms the clawback.
    let (lead_b, requests) = f.lead_on("src", &["solar"]);
    let tb = f.deliver(&requests[0], "b");
    ok(f.call(
        CONFIRMATION,
        &b,
        &json!({"transactionId": tb, "status": "rejected", "reason": "wrong number"}),
    ));
    ok(f.server
        .request("POST", SUPPLIER_CONFIRMATION)
        .secret(SUPPLIER_KEY)
        .json(&json!({"leadId": lead_b, "status": "acknowledged"}))
        .send());
    // src: acknowledged, then cancelled.
    let tc = f.delivered("a");
    ok(f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": tc, "status": "acknowledged"}),
    ));
    ok(f.call(
        CANCELLATION,
        &a,
        &json!({"transactionId": tc, "reason": "unreachable"}),
    ));
    // plain (no supplier): acknowledged, payout pending, paid at 25.
    let (_, plain) = f.lead_on("plain", &["solar"]);
    let td = f.deliver(&plain[0], "b");
    let body = json!({"transactionId": td});
    ok(f.call(
        CONFIRMATION,
        &b,
        &json!({"transactionId": td, "status": "acknowledged"}),
    ));
    ok(f.call(PAYOUT_PENDING, &b, &body));
    ok(f.call(PAYOUT, &b, &body));
    // src2 (supplier other, cost 4): delivered, no answer yet.
    let (_, src2) = f.lead_on("src2", &["solar"]);
    f.deliver(&src2[0], "a");

    // Leads that fail validation: one alone on src, one in a batch on plain.
    let reply = f.server.post_json(
        "/api/webhooks/channels/web/sources/src/leads",
        &json!({"firstName": "Ann"}),
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    let reply = f.server.post_json(
        "/api/webhooks/channels/web/sources/plain/leads",
        &json!({"leads": [{"firstName": "Ann"},
                          {"firstName": "Bo", "lastName": "Li", "email": "bo@example.org"}]}),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    // Duplicates: one kept for review (dup), one dropped under a reject rule (strict).
    for path in ["dup", "dup", "strict", "strict"] {
        let reply = f.server.post_json(
            &format!("/api/webhooks/channels/web/sources/{path}/leads"),
            &twin(&format!("{path}@example.org")),
        );
        assert!(reply.status == 201 || reply.status == 200, "{}", reply.text);
    }
    // A replay of a known externalId is not received again.
    for _ in 0..2 {
        let replayed = json!({"externalId": "x-1", "firstName": "Cy", "lastName": "Ray",
                              "email": "cy@example.org"});
        let reply = f
            .server
            .post_json("/api/webhooks/channels/web/sources/plain/leads", &replayed);
        assert!(reply.status == 201 || reply.status == 200, "{}", reply.text);
    }

    // received, accepted, duplicates, rejected, sold, acknowledged, returned, paid,
    // revenue, supplierCost, margin
    let shown = report(&f, "");
    assert_eq!(
        figures(&shown["totals"]),
        // Supplier cost: ta's, tc's (its cancellation is still pending: the supplier's
        // ledger holds it) and src2's; tb's was reversed by the confirmed cancellation.
        json!([13, 9, 2, 2, 5, 2, 2, 1, 80.0, 12.0, 68.0]),
        "{shown}"
    );
    assert_eq!(shown["totals"]["returnRate"], json!(0.4));
    assert_eq!(shown["by"], json!(["day"]));
    // The default: the last 7 days of the workspace's zone, one row each, today's last.
    let rows = shown["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 7, "{shown}");
    assert_eq!(rows[6]["day"], shown["to"]);
    assert_eq!(figures(&rows[6]), figures(&shown["totals"]));
    assert_eq!(
        figures(&rows[0]),
        json!([0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0])
    );
    assert_eq!(rows[0]["returnRate"], Value::Null);

    let by_buyer = report(&f, "--by buyer");
    assert_eq!(
        figures(row(&by_buyer, "buyer", json!("a"))),
        json!([0, 0, 0, 0, 3, 1, 1, 0, 55.0, 12.0, 43.0])
    );
    assert_eq!(
        figures(row(&by_buyer, "buyer", json!("b"))),
        json!([0, 0, 0, 0, 2, 1, 1, 1, 25.0, 0.0, 25.0])
    );
    // Lead counts belong to no buyer.
    assert_eq!(
        figures(row(&by_buyer, "buyer", Value::Null)),
        json!([13, 9, 2, 2, 0, 0, 0, 0, 0.0, 0.0, 0.0])
    );
    assert_eq!(figures(&by_buyer["totals"]), figures(&shown["totals"]));

    let by_supplier = report(&f, "--by supplier");
    assert_eq!(
        figures(row(&by_supplier, "supplier", json!("sup"))),
        json!([4, 3, 0, 1, 3, 1, 2, 0, 30.0, 8.0, 22.0])
    );
    assert_eq!(
        owed(&f, "sup"),
        8.0,
        "the report's supplier cost is the ledger's"
    );
    assert_eq!(
        figures(row(&by_supplier, "supplier", json!("other"))),
        json!([1, 1, 0, 0, 1, 0, 0, 0, 25.0, 4.0, 21.0])
    );
    let by_source = report(&f, "--by source --by buyer");
    assert_eq!(by_source["by"], json!(["source", "buyer"]));
    let plain_b = by_source["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["source"] == "plain" && r["buyer"] == "b")
        .expect("a row for plain and b");
    assert_eq!(
        figures(plain_b),
        json!([0, 0, 0, 0, 1, 1, 0, 1, 25.0, 0.0, 25.0])
    );
    let dup = row(&report(&f, "--by source"), "source", json!("dup")).clone();
    assert_eq!(
        figures(&dup),
        json!([2, 1, 1, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0])
    );
    let by_product = report(&f, "--by product");
    assert_eq!(row(&by_product, "product", json!("solar"))["sold"], 5);

    // Week and month rows cover the range; the totals stay.
    let by_month = report(&f, "--by month --by week");
    assert_eq!(figures(&by_month["totals"]), figures(&shown["totals"]));

    assert_eq!(lr(&f.server, "check").json()["ok"], true);
}

#[test]
fn csv_is_rfc_4180_with_a_header_and_money_in_two_decimals() {
    let f = Fixture::new();
    let a = f.buyer("a", &["--capabilities", "confirm"]);
    let t = f.delivered("a");
    ok(f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": t, "status": "acknowledged", "buyerPrice": 19.999}),
    ));
    let text = lr(&f.server, "report --workspace ws --by buyer --csv").ok();
    let lines: Vec<&str> = text.split_terminator("\r\n").collect();
    assert_eq!(
        lines[0],
        "buyer,received,accepted,duplicates,rejected,sold,acknowledged,returned,paid,\
         revenue,supplierCost,margin,returnRate"
    );
    assert!(
        lines.contains(&"a,0,0,0,0,1,1,0,0,20.00,4.00,16.00,0.0000"),
        "{text:?}"
    );
    assert!(
        lines.contains(&",1,1,0,0,0,0,0,0,0.00,0.00,0.00,"),
        "{text:?}"
    );
    assert_eq!(lines.len(), 3, "{text:?}");
    assert!(text.ends_with("\r\n"));
}

#[test]
fn report_flags_are_checked() {
    let f = Fixture::new();
    lr(&f.server, "report --by year").fails(2);
    lr(&f.server, "report --from 2026-13-01").fails(2);
    lr(&f.server, "report --csv --json").fails(2);
    lr(&f.server, "report --from 2026-11-23 --to 2026-11-01")
        .fails(1)
        .stderr_contains("after it ends");
    lr(&f.server, "report --by day --by day")
        .fails(1)
        .stderr_contains("twice");
    lr(&f.server, "report --workspace nope")
        .fails(1)
        .stderr_contains("unknown workspace 'nope'");
    // The one workspace is the default; the text form is a table with totals.
    let text = lr(&f.server, "report --from 2026-11-01 --to 2026-11-03").ok();
    assert!(text.contains("2026-11-03"), "{text}");
    assert!(text.lines().last().unwrap().starts_with("total"), "{text}");
}

#[test]
fn check_reports_an_aggregate_that_differs_from_a_recount() {
    let f = Fixture::new();
    f.buyer("a", &[]);
    f.delivered("a");
    assert_eq!(lr(&f.server, "check").json()["ok"], true);
    let db = f.server.db.path.clone();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE report_buckets SET revenue_cents = revenue_cents + 1 WHERE buyer_id = 'a'",
        [],
    )
    .unwrap();
    drop(conn);
    let failed = lr(&db, "check").fails_json(1);
    assert!(
        failed.stdout.contains("report_buckets") && failed.stdout.contains("buyer 'a'"),
        "{}",
        failed.stdout
    );
}

#[test]
fn check_reports_a_day_roll_up_that_differs_from_its_quarter_hours() {
    let f = Fixture::new();
    f.buyer("a", &[]);
    f.delivered("a");
    assert_eq!(lr(&f.server, "check").json()["ok"], true);
    let db = f.server.db.path.clone();
    let conn = rusqlite::Connection::open(&db).unwrap();
    // The quarter hours still match the transactions: only the day differs.
    let changed = conn
        .execute(
            "UPDATE report_days SET sold = sold + 1 WHERE buyer_id = 'a'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);
    let failed = lr(&db, "check").fails_json(1);
    assert!(
        failed.stdout.contains("report_days") && failed.stdout.contains("buyer 'a'"),
        "{}",
        failed.stdout
    );
    assert!(
        !failed.stdout.contains("report_buckets"),
        "{}",
        failed.stdout
    );
}

/// The statements of the report migrations that fill the aggregate from the stored rows:
/// the first one's, then the one that counts the supplier cost again (found by name: a
/// migration's number is the next free one when it lands).
fn backfill() -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/store/migrations");
    let migration = |suffix: &str| {
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(suffix))
            .expect("the report migration exists");
        std::fs::read_to_string(file).unwrap()
    };
    let first = migration("_report.sql");
    let at = first
        .find("INSERT INTO report_buckets")
        .expect("it fills the table");
    let days = migration("_report_days.sql");
    let days_at = days
        .find("INSERT INTO report_days")
        .expect("it fills the roll-up");
    format!(
        "{}\n{}\n{}",
        &first[at..],
        migration("_report_supplier_cost.sql"),
        &days[days_at..]
    )
}

#[test]
fn the_migration_fills_the_aggregate_of_an_existing_file_from_its_rows() {
    let f = Fixture::new();
    let a = f.buyer("a", &["--capabilities", "confirm"]);
    let t1 = f.delivered("a");
    ok(f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": t1, "status": "acknowledged", "buyerPrice": 31.5}),
    ));
    let t2 = f.delivered("a");
    ok(f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": t2, "status": "rejected"}),
    ));
    f.lead_on("plain", &["solar"]);
    let before = report(&f, "--by source --by buyer");
    assert_eq!(before["totals"]["supplierCost"], 8.0, "{before}");

    // A file from before the aggregate: its rows, and no counts.
    let db = f.server.db.path.clone();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("DELETE FROM report_buckets", []).unwrap();
    conn.execute("DELETE FROM report_days", []).unwrap();
    assert_eq!(report(&f, "")["totals"]["received"], 0);
    conn.execute_batch(&backfill()).unwrap();
    drop(conn);
    assert_eq!(report(&f, "--by source --by buyer"), before);
    assert_eq!(lr(&db, "check").json()["ok"], true);
}

#[test]
fn supplier_cost_is_what_the_suppliers_ledger_holds() {
    let f = Fixture::new();
    let caps = ["--capabilities", "confirm"];
    let a = f.buyer("a", &caps);
    let b = f.buyer("b", &caps);
    let reject = |secret: &str, transaction: &str| {
        ok(f.call(
            CONFIRMATION,
            secret,
            &json!({"transactionId": transaction, "status": "rejected"}),
        ))
    };
    let supplier_answers = |lead: &str, status: &str| {
        ok(f.server
            .request("POST", SUPPLIER_CONFIRMATION)
            .secret(SUPPLIER_KEY)
            .json(&json!({"leadId": lead, "status": status}))
            .send())
    };
    let cost = || {
        row(&report(&f, "--by supplier"), "supplier", json!("sup"))["supplierCost"]
            .as_f64()
            .unwrap()
    };

    // Sold and rejected: a cancellation opens, and until the supplier confirms it the
    // supplier is owed the lead.
    let (disputed, requests) = f.lead_on("src", &["solar"]);
    let t1 = f.deliver(&requests[0], "a");
    reject(&a, &t1);
    assert_eq!((cost(), owed(&f, "sup")), (4.0, 4.0));
    // The supplier disputes: it keeps the money, the operator bears the cost.
    supplier_answers(&disputed, "rejected");
    assert_eq!((cost(), owed(&f, "sup")), (4.0, 4.0));
    // The lead, active again, sold to another buyer: that transaction takes the cost over
    // and buys nothing new, so the lead is counted once.
    let t2 = f.deliver(&requests[0], "b");
    assert_eq!(f.transaction(&t2)["supplierCost"], 4.0);
    assert_eq!((cost(), owed(&f, "sup")), (4.0, 4.0));
    reject(&b, &t2);
    assert_eq!((cost(), owed(&f, "sup")), (4.0, 4.0));
    // Rejected and confirmed: the cost is reversed, in the ledger and in the report.
    let (confirmed, requests) = f.lead_on("src", &["solar"]);
    let t3 = f.deliver(&requests[0], "a");
    assert_eq!((cost(), owed(&f, "sup")), (8.0, 8.0));
    reject(&a, &t3);
    supplier_answers(&confirmed, "acknowledged");
    assert_eq!((cost(), owed(&f, "sup")), (4.0, 4.0));
    assert_eq!(lr(&f.server, "check").json()["ok"], true);
}
