//! Exact amounts (DESIGN.md section 11): every amount is read from its decimal text, rounded
//! half away from zero to cents, bounded to ±1,000,000,000.00, and printed exactly, never in
//! exponent form. Out-of-range input is a 400 or exit 1 with a message naming the bound,
//! never a 500 or a database error, and it writes nothing. Tables of cases through the real
//! HTTP endpoint and the real CLI.

use serde_json::{Value, json};

use crate::lifecycle::{CONFIRMATION, Fixture};
use crate::util::receiver::Receiver;
use crate::util::{Reply, TestServer, basic_setup, buyer, complete_lead, lr, source};

const BOUND: &str = "1,000,000,000.00";

/// The ledger as `ledger list --json` prints it (every row), to show a refusal wrote none.
/// Acknowledges `txn` with `buyerPrice` written as the raw JSON number text `price`, so the
/// server reads exactly what the test typed (exponents, digits past a float's precision).
fn acknowledge_at(f: &Fixture, secret: &str, txn: &str, price: &str) -> Reply {
    f.server
        .post(CONFIRMATION)
        .secret(secret)
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"transactionId":"{txn}","status":"acknowledged","buyerPrice":{price}}}"#
        ))
        .send()
}

fn ledger(server: &TestServer) -> Value {
    lr(server, "ledger list").json()
}

/// The report of issue 14: `buyer create --plan prepaid --credit-limit 92233720368547758`
/// and a matching fund were accepted, then every auto-delivered lead answered 500 (the sum
/// of balance and credit limit overflowed in SQL) and was not stored. Now the limit and the
/// fund are refused (exit 1) naming the bound, and a buyer at the bound takes the lead.
#[test]
fn a_credit_limit_past_the_bound_is_refused_and_a_buyer_at_the_bound_is_served() {
    let server = TestServer::start();
    let receiver = Receiver::start();
    basic_setup(&server);
    source(&server, "web", "src", "--no-secret");
    let url = receiver.url("/hook");

    let create = format!(
        "buyer create --workspace ws --name Huge --id huge --webhook-url {url} --plan prepaid"
    );
    lr(
        &server,
        format!("{create} --credit-limit 92233720368547758"),
    )
    .fails(1)
    .stderr_contains(BOUND);
    let refused = lr(
        &server,
        format!("{create} --credit-limit 92233720368547758"),
    )
    .fails_json(1);
    let refused: Value = serde_json::from_str(&refused.stderr).expect("a JSON error");
    assert_eq!(refused["error"]["code"], "out_of_range", "{refused}");
    assert_eq!(
        lr(&server, "buyer list").json(),
        json!([]),
        "nothing created"
    );

    buyer(
        &server,
        "huge",
        &url,
        Some("25"),
        "--plan prepaid --credit-limit 1000000000",
    );
    lr(&server, "buyer fund huge --amount 92233720368547758")
        .fails(1)
        .stderr_contains(BOUND);
    let funded = lr(&server, "buyer fund huge --amount 1000000000").json();
    assert_eq!(funded["balance"], json!(1_000_000_000.0));
    assert_eq!(funded["creditLimit"], json!(1_000_000_000.0));

    // A cent more would take the balance past the bound: refused, nothing written.
    let rows = ledger(&server);
    lr(&server, "buyer fund huge --amount 0.01")
        .fails(1)
        .stderr_contains(BOUND);
    assert_eq!(ledger(&server), rows);

    let reply = server.post_json(
        "/api/webhooks/channels/web/sources/src/leads",
        &complete_lead("big-1", "ann@example.org", "+4930123456"),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(
        reply.json["item"]["autoDelivery"]["delivered"], 1,
        "{}",
        reply.text
    );
    let buyers = lr(&server, "buyer list").json();
    assert_eq!(buyers[0]["balance"], json!(999_999_975.0));
    assert_eq!(lr(&server, "check").json()["ok"], true);
}

/// (typed, cents as the interface prints them): half away from zero, never through a float.
const ROUNDING: &[(&str, &str)] = &[
    ("1.005", "1.01"),
    ("2.675", "2.68"),
    ("0.125", "0.13"),
    ("0.004", "0.0"),
    ("0.005", "0.01"),
    ("19.999", "20.0"),
    ("12.5", "12.5"),
    ("7", "7.0"),
    ("1000000000.004", "1000000000.0"),
    ("999999999.995", "1000000000.0"),
    ("0.0049999999999999999999", "0.0"),
];

/// The rounding table through the CLI: `buyer terms set --price`, `buyer fund --amount`.
#[test]
fn cli_amounts_round_half_away_from_zero() {
    let f = Fixture::new();
    f.buyer("b", &["--plan", "prepaid"]);
    for (typed, shown) in ROUNDING {
        let terms = lr(
            &f.server,
            format!("buyer terms set b --product solar --price {typed}"),
        )
        .json();
        assert_eq!(
            terms["price"].to_string(),
            *shown,
            "--price {typed}: {terms}"
        );
    }
    // A fund of 1.005 adds 1.01 (a float would have added 1.00); 2.675 adds 2.68.
    lr(&f.server, "buyer fund b --amount 1.005").json();
    let after = lr(&f.server, "buyer fund b --amount 2.675").json();
    assert_eq!(after["balance"].to_string(), "3.69", "{after}");
    let text = lr(&f.server, "buyer show b").ok();
    assert!(text.contains("3.69"), "{text}");
}

/// The rounding table through HTTP: a buyer's `buyerPrice` on acknowledge, sent as raw JSON
/// text (so the number is exactly what the test typed, exponents included).
#[test]
fn http_buyer_prices_are_read_from_their_decimal_text() {
    let f = Fixture::new();
    let secret = f.buyer("b", &[]);
    let mut table: Vec<(&str, &str)> = ROUNDING.to_vec();
    table.extend([
        ("1.25e1", "12.5"),
        ("5E-3", "0.01"),
        ("1e9", "1000000000.0"),
    ]);
    for (sent, shown) in table {
        let txn = f.delivered("b");
        let reply = acknowledge_at(&f, &secret, &txn, sent);
        assert_eq!(reply.status, 200, "{sent}: {}", reply.text);
        let stored = f.transaction(&txn);
        assert_eq!(
            stored["buyerPrice"].to_string(),
            shown,
            "buyerPrice {sent}: {stored}"
        );
    }
}

/// The overflow table through the CLI: every amount flag past the bound is refused with
/// exit 1 and a message naming the bound, and nothing is written.
#[test]
fn cli_amounts_past_the_bound_are_refused_naming_it() {
    let f = Fixture::new();
    f.buyer("b", &["--plan", "prepaid"]);
    let (_, requests) = f.lead_on("src", &["solar"]);
    let url = f.receiver.url("/x");
    let before = (ledger(&f.server), lr(&f.server, "buyer list").json());
    let cases = [
        format!(
            "buyer create --workspace ws --name X --id x --webhook-url {url} --credit-limit 1000000000.01"
        ),
        "buyer update b --credit-limit 92233720368547758".to_string(),
        "buyer fund b --amount 1000000000.005".to_string(),
        "buyer fund b --amount=99999999999999999999999".to_string(),
        "buyer adjust b --amount=-1000000000.01 --reason typo".to_string(),
        "buyer terms set b --product solar --price 1000000001".to_string(),
        "source create --channel web --name y --id y --supplier-cost 5000000000".to_string(),
        "product create --workspace ws --slug z --name z --supplier-cost=1000000000.01".to_string(),
        format!(
            "deliver --request {} --buyer b --price 92233720368547758",
            requests[0]
        ),
    ];
    for line in &cases {
        let failure = lr(&f.server, line).fails(1);
        failure.stderr_contains(BOUND);
        assert!(
            !failure.stderr.contains("database"),
            "{line}: {}",
            failure.stderr
        );
    }
    let after = (ledger(&f.server), lr(&f.server, "buyer list").json());
    assert_eq!(after, before, "nothing was written");
    // Not an amount at all is bad usage (exit 2), as before.
    lr(&f.server, "buyer fund b --amount 1e3").fails(2);
    lr(&f.server, "buyer fund b --amount 12,50").fails(2);
}

/// Balances are bounded so no sum overflows: a fund or an adjustment that would take a
/// balance past ±1,000,000,000.00 is refused, and the balance is unchanged.
#[test]
fn a_balance_never_leaves_its_bound() {
    let f = Fixture::new();
    f.buyer("b", &["--plan", "prepaid"]);
    lr(&f.server, "buyer fund b --amount 999999999.99").json();
    lr(&f.server, "buyer fund b --amount 0.02")
        .fails(1)
        .stderr_contains(BOUND);
    lr(&f.server, "buyer adjust b --amount 0.02 --reason bonus")
        .fails(1)
        .stderr_contains(BOUND);
    let at = lr(&f.server, "buyer adjust b --amount 0.01 --reason bonus").json();
    assert_eq!(at["balance"].to_string(), "1000000000.0");
    let down = lr(
        &f.server,
        "buyer adjust b --amount=-1000000000 --reason reset",
    )
    .json();
    assert_eq!(down["balance"].to_string(), "0.0");
    lr(
        &f.server,
        "buyer adjust b --amount=-1000000000 --reason reset",
    )
    .json();
    lr(&f.server, "buyer adjust b --amount=-0.01 --reason reset")
        .fails(1)
        .stderr_contains(BOUND);
    assert_eq!(f.balance("b"), -1_000_000_000.0);
    assert_eq!(lr(&f.server, "check").json()["ok"], true);
}

/// The overflow table through HTTP: a `buyerPrice` past the bound (or negative) is a 400
/// naming the field and the bound, never a 500; the transaction keeps its price.
#[test]
fn http_buyer_prices_past_the_bound_are_a_400() {
    let f = Fixture::new();
    let secret = f.buyer("b", &[]);
    let txn = f.delivered("b");
    for sent in [
        "1000000000.01",
        "1000000000.005",
        "92233720368547758",
        "1e10",
        "123456789012345678901234567890",
        "-1000000000.01",
    ] {
        let reply = acknowledge_at(&f, &secret, &txn, sent);
        assert_eq!(reply.status, 400, "{sent}: {}", reply.text);
        let text = &reply.text;
        assert!(text.contains("/buyerPrice"), "{sent}: {text}");
        if !sent.starts_with('-') {
            assert!(text.contains(BOUND), "{sent}: {text}");
        }
    }
    // A number no float holds is not JSON this interface takes, as before.
    let reply = acknowledge_at(&f, &secret, &txn, "1e400");
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["code"], "invalid_json", "{}", reply.text);
    assert!(reply.text.contains("out of range"), "{}", reply.text);
    assert_eq!(f.status_of(&txn), "delivered");
    assert_eq!(f.transaction(&txn)["buyerPrice"], json!(25.0));
}

/// `buyer adjust`: the operator's correction, either way, is an `adjustment` ledger row with
/// its reason and actor; a postpaid buyer has no balance to adjust.
#[test]
fn buyer_adjust_posts_an_adjustment_with_its_reason() {
    let f = Fixture::new();
    f.buyer("pre", &["--plan", "prepaid"]);
    f.buyer("post", &[]);
    lr(&f.server, "buyer fund pre --amount 50").json();
    let debited = lr(
        &f.server,
        "buyer adjust pre --amount=-12.50 --reason 'double charge on 3 May'",
    )
    .json();
    assert_eq!(debited["balance"], json!(37.5));
    lr(&f.server, "buyer adjust pre --amount 2.5 --reason goodwill").json();
    assert_eq!(f.balance("pre"), 40.0);
    let rows = lr(&f.server, "ledger list --buyer pre").json();
    let adjustments: Vec<(Value, Value, Value)> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "adjustment")
        .map(|r| (r["amount"].clone(), r["reason"].clone(), r["actor"].clone()))
        .collect();
    assert_eq!(
        adjustments,
        vec![
            (
                json!(-12.5),
                json!("double charge on 3 May"),
                json!("operator")
            ),
            (json!(2.5), json!("goodwill"), json!("operator")),
        ]
    );
    lr(&f.server, "buyer adjust post --amount 5 --reason x")
        .fails(1)
        .stderr_contains("postpaid");
    lr(&f.server, "buyer adjust pre --amount 0 --reason x").fails(1);
    lr(&f.server, "buyer adjust pre --amount 5").fails(2);
    lr(&f.server, "buyer adjust pre --amount -5 --reason x")
        .fails(2)
        .stderr_contains("--amount=-5");
    assert_eq!(lr(&f.server, "check").json()["ok"], true);
}
