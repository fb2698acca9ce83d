//! The buyer lifecycle over HTTP (SPEC.md sections 3, 4.4 to 4.7, 5, 7; DESIGN.md section
//! 4): confirmation by any id field, `buyerPrice`, prepaid refunds, `autoPayoutPending`,
//! payout, cancellation and its window, the auth order, history, and one writer job per
//! call. Data is made through the real interfaces: leads over HTTP, `leadrelay deliver`,
//! configuration with the CLI.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::receiver::{Answer, Receiver};
use crate::util::{
    Reply, TestServer, basic_setup, deliver_command, lr, source, supplier, wait_until,
};

pub const CONFIRMATION: &str = "/api/webhooks/partner-confirmation";
pub const PAYOUT_PENDING: &str = "/api/webhooks/partner-payout-pending";
pub const PAYOUT: &str = "/api/webhooks/partner-payout";
pub const CANCELLATION: &str = "/api/webhooks/partner-cancellation";
pub const SUPPLIER_CONFIRMATION: &str = "/api/webhooks/supplier-cancellation-confirmation";

pub const SUPPLIER_KEY: &str = "supplier-key-of-sup-0123456789";
pub const OTHER_SUPPLIER_KEY: &str = "supplier-key-of-other-0123456789";

/// The secret `Fixture::buyer` gives buyer `id`.
pub fn secret_of(id: &str) -> String {
    format!("buyer-secret-of-{id}-0123456789")
}

/// A server with `basic_setup`, a product `heat`, suppliers `sup` and `other`, and three
/// channel sources without secret or duplicate rule: `src` (supplier `sup`, cost 4), `src2`
/// (supplier `other`) and `plain` (no supplier). Buyers post to a real local receiver.
pub struct Fixture {
    pub server: TestServer,
    pub receiver: Receiver,
    leads: AtomicU32,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::on(TestServer::start())
    }

    /// [`Fixture::new`] on a server already started (with its console, say).
    pub fn on(server: TestServer) -> Fixture {
        let receiver = Receiver::start();
        basic_setup(&server);
        lr(
            &server,
            "product create --workspace ws --slug heat --name 'Heat pump' --id heat",
        )
        .json();
        for (id, key) in [("sup", SUPPLIER_KEY), ("other", OTHER_SUPPLIER_KEY)] {
            supplier(&server, id, key);
        }
        let no_rule = "--no-secret --dedupe-fields none";
        source(
            &server,
            "web",
            "src",
            format!("{no_rule} --supplier sup --supplier-cost 4"),
        );
        source(
            &server,
            "web",
            "src2",
            format!("{no_rule} --supplier other --supplier-cost 4"),
        );
        source(&server, "web", "plain", no_rule);
        Fixture {
            server,
            receiver,
            leads: AtomicU32::new(0),
        }
    }

    /// Creates buyer `id` (posting to the receiver at `/id`, subscribed to `solar` at 25)
    /// with the secret [`secret_of`] unless `extra` has `--no-secret`.
    pub fn buyer(&self, id: &str, extra: &[&str]) -> String {
        let secret = secret_of(id);
        self.buyer_with_secret(id, &secret, extra);
        secret
    }

    /// [`Fixture::buyer`] with a given secret (none with `--no-secret` in `extra`).
    pub fn buyer_with_secret(&self, id: &str, secret: &str, extra: &[&str]) {
        let url = self.receiver.url(&format!("/{id}"));
        let mut flags = Vec::new();
        if !extra.contains(&"--no-secret") {
            flags.extend(["--secret", secret]);
        }
        flags.extend_from_slice(extra);
        crate::util::buyer(&self.server, id, &url, Some("25"), flags.as_slice());
    }

    /// Posts a new lead to `source` with one interest per product slug; returns the lead id
    /// and the lead request ids.
    pub fn lead_on(&self, source: &str, products: &[&str]) -> (String, Vec<String>) {
        let n = self.leads.fetch_add(1, Ordering::Relaxed) + 1;
        let requests: Vec<Value> = products
            .iter()
            .map(|slug| json!({"productSlug": slug}))
            .collect();
        let reply = self.server.post_json(
            &format!("/api/webhooks/channels/web/sources/{source}/leads"),
            &json!({
                "firstName": "Ada",
                "lastName": format!("Lovelace{n}"),
                "email": format!("ada{n}@example.com"),
                "phone": format!("+49 30 55{n:05}"),
                "requests": requests,
            }),
        );
        assert_eq!(reply.status, 201, "{}", reply.text);
        let item = &reply.json["item"];
        let request_ids = item["requestIds"]
            .as_array()
            .expect("requestIds is an array")
            .iter()
            .map(|id| id.as_str().expect("request ids are strings").to_string())
            .collect();
        (item["leadId"].as_str().unwrap().to_string(), request_ids)
    }

    /// `leadrelay deliver --request REQUEST --buyer BUYER`; the transaction id.
    pub fn deliver(&self, request: &str, buyer: &str) -> String {
        self.deliver_with(request, buyer, &[])
    }

    pub fn deliver_with(&self, request: &str, buyer: &str, extra: &[&str]) -> String {
        let out = deliver_command(&self.server, request, buyer, None)
            .args(extra)
            .json();
        out["transactionId"].as_str().unwrap().to_string()
    }

    /// A new lead on `src` with one `solar` interest, delivered to `buyer`.
    pub fn delivered(&self, buyer: &str) -> String {
        let (_, requests) = self.lead_on("src", &["solar"]);
        self.deliver(&requests[0], buyer)
    }

    /// POSTs `body` to `path` with `secret` in `X-Service-Webhook-Secret`.
    pub fn call(&self, path: &str, secret: &str, body: &Value) -> Reply {
        self.server.post(path).secret(secret).json(body).send()
    }

    /// `leadrelay transaction show ID --json`: the transaction with its history.
    pub fn transaction(&self, id: &str) -> Value {
        lr(&self.server, format!("transaction show {id}")).json()
    }

    pub fn status_of(&self, id: &str) -> String {
        self.transaction(id)["status"].as_str().unwrap().to_string()
    }

    /// The buyer's balance as `buyer list` shows it.
    pub fn balance(&self, buyer: &str) -> f64 {
        let buyers = lr(&self.server, "buyer list").json();
        buyers
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == buyer)
            .unwrap_or_else(|| panic!("buyer {buyer} is listed"))["balance"]
            .as_f64()
            .unwrap()
    }

    pub fn lead(&self, id: &str) -> Value {
        lr(&self.server, format!("lead show {id}")).json()
    }
}

fn confirm(f: &Fixture, secret: &str, body: Value) -> Reply {
    f.call(CONFIRMATION, secret, &body)
}

/// A confirmation of `txn` with `status`.
fn answer(txn: &str, status: &str) -> Value {
    json!({"transactionId": txn, "status": status})
}

/// An acknowledgement of `txn` with the `buyerPrice` `price` (a number as given: 30, 19.99).
fn priced(txn: &str, price: impl Into<Value>) -> Value {
    json!({"transactionId": txn, "status": "acknowledged", "buyerPrice": price.into()})
}

/// The error code of a lifecycle error body, checked to be in the partner form.
fn code(reply: &Reply) -> &str {
    assert_eq!(reply.json["accepted"], false, "{}", reply.text);
    assert_eq!(
        reply.json["code"], reply.json["error"]["code"],
        "{}",
        reply.text
    );
    assert!(reply.json["message"].is_string(), "{}", reply.text);
    reply.json["code"].as_str().unwrap()
}

#[test]
fn acknowledge_by_transaction_id_and_a_repeat_is_already_applied() {
    let f = Fixture::new();
    let secret = f.buyer("b", &[]);
    let txn = f.delivered("b");

    let reply = confirm(
        &f,
        &secret,
        json!({"transactionId": txn, "status": "acknowledged", "reason": "looks good"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["item"]["transactionId"], txn.as_str());
    assert_eq!(reply.json["item"]["status"], "acknowledged");
    assert_eq!(reply.json["autoStatusChangedTo"], Value::Null);
    assert_eq!(reply.json["alreadyApplied"], false);
    assert_eq!(reply.json["economicsApplied"], false);

    // The same call again, this time with the secret as a bearer token.
    let reply = f
        .server
        .post(CONFIRMATION)
        .bearer(&secret)
        .json(&answer(&txn, "acknowledged"))
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["alreadyApplied"], true);
    assert_eq!(reply.json["economicsApplied"], false);
    assert_eq!(reply.json["item"]["status"], "acknowledged");

    // Rejecting after acknowledging is not a move the machine has.
    let reply = confirm(&f, &secret, answer(&txn, "rejected"));
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(code(&reply), "transition_not_allowed");
    assert_eq!(reply.json["currentState"], "acknowledged");

    let history = f.transaction(&txn)["history"].clone();
    let moves: Vec<(&str, &str, &str)> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["from"].is_null())
        .map(|e| {
            (
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap(),
                e["actor"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        moves,
        vec![("delivered", "acknowledged", "buyer:b")],
        "one entry for the move, none for the repeat or the refused call"
    );
    assert_eq!(
        history.as_array().unwrap().last().unwrap()["reason"],
        "looks good"
    );
}

#[test]
fn buyer_price_on_acknowledge_reprices_and_moves_a_prepaid_balance() {
    let f = Fixture::new();
    let secret = f.buyer("pre", &["--plan", "prepaid", "--credit-limit", "10"]);
    lr(&f.server, "buyer fund pre --amount 200").json();

    // A higher price: the difference is charged, the margin follows (cost 4).
    let t1 = f.delivered("pre");
    assert_eq!(f.balance("pre"), 175.0);
    let reply = confirm(&f, &secret, priced(&t1, 30));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["economicsApplied"], true);
    assert_eq!(reply.json["item"]["buyerPrice"], 30.0);
    assert_eq!(reply.json["item"]["supplierCost"], 4.0);
    assert_eq!(reply.json["item"]["marginAmount"], 26.0);
    assert_eq!(f.balance("pre"), 170.0);

    // A lower price: the difference is refunded.
    let t2 = f.delivered("pre");
    assert_eq!(f.balance("pre"), 145.0);
    let reply = confirm(&f, &secret, priced(&t2, 19.99));
    assert_eq!(reply.json["economicsApplied"], true, "{}", reply.text);
    assert_eq!(reply.json["item"]["buyerPrice"], 19.99);
    assert_eq!(reply.json["item"]["marginAmount"], 15.99);
    assert_eq!(f.balance("pre"), 150.01);

    // The same price changes nothing.
    let t3 = f.delivered("pre");
    let reply = confirm(&f, &secret, priced(&t3, 25));
    assert_eq!(reply.json["economicsApplied"], false, "{}", reply.text);
    assert_eq!(f.balance("pre"), 125.01);

    // More than balance plus credit limit: refused, nothing changes.
    let t4 = f.delivered("pre");
    assert_eq!(f.balance("pre"), 100.01);
    let reply = confirm(&f, &secret, priced(&t4, 200));
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(code(&reply), "insufficient_balance");
    assert_eq!(reply.json["error"]["available"], 110.01);
    assert_eq!(f.status_of(&t4), "delivered");
    assert_eq!(f.transaction(&t4)["buyerPrice"], 25.0);
    assert_eq!(f.balance("pre"), 100.01);
    // Exactly up to the credit limit is allowed.
    let reply = confirm(&f, &secret, priced(&t4, 135.01));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(f.balance("pre"), -10.0);

    // A repeat with another price is already applied and changes nothing.
    let reply = confirm(&f, &secret, priced(&t1, 99));
    assert_eq!(reply.json["alreadyApplied"], true, "{}", reply.text);
    assert_eq!(reply.json["economicsApplied"], false);
    assert_eq!(reply.json["item"]["buyerPrice"], 30.0);

    // Cancelling refunds exactly what was charged.
    let reply = f.call(
        CANCELLATION,
        &secret,
        &json!({"transactionId": t4, "reason": "customer withdrew"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["economicsApplied"], true);
    assert_eq!(f.balance("pre"), 125.01);
}

#[test]
fn rejection_refunds_a_prepaid_buyer_and_economics_say_so() {
    let f = Fixture::new();
    let pre = f.buyer("pre", &["--plan", "prepaid"]);
    let post = f.buyer("post", &[]);
    lr(&f.server, "buyer fund pre --amount 100").json();

    let t_pre = f.delivered("pre");
    assert_eq!(f.balance("pre"), 75.0);
    let reply = confirm(
        &f,
        &pre,
        json!({"transactionId": t_pre, "status": "rejected", "reason": "wrong region", "buyerPrice": 1}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["item"]["status"], "rejected");
    assert_eq!(reply.json["economicsApplied"], true);
    assert_eq!(reply.json["autoStatusChangedTo"], Value::Null);
    assert_eq!(
        reply.json["item"]["buyerPrice"], 25.0,
        "buyerPrice applies on acknowledge only"
    );
    assert_eq!(f.balance("pre"), 100.0);

    let reply = confirm(&f, &pre, answer(&t_pre, "rejected"));
    assert_eq!(reply.json["alreadyApplied"], true, "{}", reply.text);
    assert_eq!(reply.json["economicsApplied"], false);
    assert_eq!(f.balance("pre"), 100.0, "a repeat refunds nothing");

    let t_post = f.delivered("post");
    let reply = confirm(&f, &post, answer(&t_post, "rejected"));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["economicsApplied"], false);
    assert_eq!(f.balance("post"), 0.0);
}

#[test]
fn concurrent_rejections_refund_once() {
    let f = Fixture::new();
    let secret = f.buyer("pre", &["--plan", "prepaid"]);
    lr(&f.server, "buyer fund pre --amount 25").json();
    let txn = f.delivered("pre");
    assert_eq!(f.balance("pre"), 0.0);

    let replies: Vec<Reply> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| confirm(&f, &secret, answer(&txn, "rejected"))))
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert!(replies.iter().all(|r| r.status == 200));
    let applied = replies
        .iter()
        .filter(|r| r.json["alreadyApplied"] == false)
        .count();
    assert_eq!(applied, 1, "exactly one call applies the move");
    let refunds = replies
        .iter()
        .filter(|r| r.json["economicsApplied"] == true)
        .count();
    assert_eq!(refunds, 1);
    assert_eq!(f.balance("pre"), 25.0);
    let history = f.transaction(&txn)["history"].clone();
    let rejections = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["to"] == "rejected")
        .count();
    assert_eq!(rejections, 1);
}

#[test]
fn auto_payout_pending_moves_on_after_the_acknowledge() {
    let f = Fixture::new();
    let secret = f.buyer("auto", &["--auto-payout-pending"]);
    let txn = f.delivered("auto");
    let reply = confirm(&f, &secret, answer(&txn, "acknowledged"));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["autoStatusChangedTo"], "payout_pending");
    assert_eq!(reply.json["item"]["status"], "payout_pending");
    assert_eq!(reply.json["alreadyApplied"], false);

    let shown = f.transaction(&txn);
    let entries = shown["history"].as_array().unwrap();
    let last_two: Vec<(&str, &str)> = entries[entries.len() - 2..]
        .iter()
        .map(|e| (e["from"].as_str().unwrap(), e["to"].as_str().unwrap()))
        .collect();
    assert_eq!(
        last_two,
        vec![
            ("delivered", "acknowledged"),
            ("acknowledged", "payout_pending")
        ]
    );
    assert_eq!(entries[entries.len() - 2]["actor"], "buyer:auto");
    assert_eq!(entries[entries.len() - 1]["actor"], "system");

    // A repeat is already applied and does not move it again.
    let reply = confirm(&f, &secret, answer(&txn, "acknowledged"));
    assert_eq!(reply.json["alreadyApplied"], true, "{}", reply.text);
    assert_eq!(reply.json["autoStatusChangedTo"], Value::Null);
}

#[test]
fn payout_pending_then_payout_with_history() {
    let f = Fixture::new();
    let secret = f.buyer("b", &[]);
    let txn = f.delivered("b");
    let body = json!({"transactionId": txn});

    let reply = f.call(PAYOUT_PENDING, &secret, &body);
    assert_eq!(reply.status, 400, "not acknowledged yet: {}", reply.text);
    assert_eq!(code(&reply), "transition_not_allowed");
    assert_eq!(reply.json["currentState"], "delivered");
    assert_eq!(reply.json["error"]["currentState"], "delivered");

    confirm(&f, &secret, answer(&txn, "acknowledged"));
    let reply = f.call(
        PAYOUT_PENDING,
        &secret,
        &json!({"transactionId": txn, "reason": "invoice sent"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.json,
        json!({
            "accepted": true,
            "code": "payout_pending",
            "alreadyApplied": false,
            "economicsApplied": false,
            "item": reply.json["item"].clone(),
        })
    );
    assert_eq!(reply.json["item"]["status"], "payout_pending");

    let reply = f.call(PAYOUT, &secret, &body);
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["code"], "paid");
    assert_eq!(reply.json["alreadyApplied"], false);

    for path in [PAYOUT, PAYOUT_PENDING] {
        let reply = f.call(path, &secret, &body);
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
        assert_eq!(reply.json["alreadyApplied"], true, "{path}");
        assert_eq!(reply.json["code"], "paid", "{path}");
    }
    let reply = f.call(
        CANCELLATION,
        &secret,
        &json!({"transactionId": txn, "reason": "too late"}),
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["currentState"], "paid");

    let shown = f.transaction(&txn);
    let moves: Vec<Value> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["from"].is_null())
        .map(|e| json!([e["from"], e["to"], e["actor"], e["reason"]]))
        .collect();
    assert_eq!(
        moves,
        vec![
            json!(["delivered", "acknowledged", "buyer:b", null]),
            json!(["acknowledged", "payout_pending", "buyer:b", "invoice sent"]),
            json!(["payout_pending", "paid", "buyer:b", null]),
        ]
    );
    for entry in shown["history"].as_array().unwrap() {
        assert!(
            leadrelay::clock::parse_iso(entry["at"].as_str().unwrap()).is_some(),
            "{entry}"
        );
    }

    // The text output of `transaction show` prints the history too.
    let output = lr(&f.server, format!("transaction show {txn}")).output();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("invoice sent"), "{text}");
    assert!(text.contains("payout_pending"), "{text}");
}

#[test]
fn cancellation_needs_a_reason_and_the_window() {
    let f = Fixture::new();
    let secret = f.buyer("b", &["--plan", "prepaid"]);
    lr(&f.server, "buyer fund b --amount 100").json();
    let closed = f.buyer("closed", &["--cancellation-window", "0"]);
    let short = f.buyer("short", &["--cancellation-window", "1s"]);

    let txn = f.delivered("b");
    for (body, path_code) in [
        (json!({"transactionId": txn}), ("/reason", "required")),
        (
            json!({"transactionId": txn, "reason": ""}),
            ("/reason", "min_length"),
        ),
        (
            json!({"transactionId": txn, "reason": 7}),
            ("/reason", "type"),
        ),
        (json!({"reason": "x"}), ("/transactionId", "required")),
    ] {
        let reply = f.call(CANCELLATION, &secret, &body);
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(code(&reply), "validation_failed");
        let detail = &reply.json["error"]["details"][0];
        assert_eq!(
            (detail["path"].as_str(), detail["code"].as_str()),
            (Some(path_code.0), Some(path_code.1)),
            "{}",
            reply.text
        );
    }
    assert_eq!(f.status_of(&txn), "delivered");

    let reply = f.call(
        CANCELLATION,
        &secret,
        &json!({"transactionId": txn, "reason": "duplicate of an older lead"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["accepted"], true);
    assert_eq!(reply.json["code"], "cancelled");
    assert_eq!(reply.json["economicsApplied"], true);
    assert_eq!(reply.json["item"]["status"], "cancelled");
    assert_eq!(f.balance("b"), 100.0);
    let reply = f.call(
        CANCELLATION,
        &secret,
        &json!({"transactionId": txn, "reason": "again"}),
    );
    assert_eq!(reply.json["alreadyApplied"], true, "{}", reply.text);
    assert_eq!(reply.json["economicsApplied"], false);
    assert_eq!(f.balance("b"), 100.0);

    // A window of 0 refuses every cancellation.
    let refused = f.delivered("closed");
    let reply = f.call(
        CANCELLATION,
        &closed,
        &json!({"transactionId": refused, "reason": "late"}),
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(code(&reply), "cancellation_window_elapsed");
    assert_eq!(
        reply.json["error"]["class"],
        "PartnerCancellationWindowError"
    );
    assert!(reply.json["error"]["message"].is_string());
    assert_eq!(reply.json["error"]["windowSeconds"], 0);
    assert_eq!(f.status_of(&refused), "delivered");

    // A window of 1 s: open right after the delivery, closed once a second has passed.
    let early = f.delivered("short");
    let reply = f.call(
        CANCELLATION,
        &short,
        &json!({"transactionId": early, "reason": "in time"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    let late = f.delivered("short");
    let delivered_by = Instant::now();
    wait_until(Duration::from_secs(5), "the 1 s window to pass", || {
        delivered_by.elapsed() > Duration::from_millis(1050)
    });
    let reply = f.call(
        CANCELLATION,
        &short,
        &json!({"transactionId": late, "reason": "too late"}),
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(code(&reply), "cancellation_window_elapsed");
    // An applied cancellation stays a success outside the window.
    let reply = f.call(
        CANCELLATION,
        &short,
        &json!({"transactionId": early, "reason": "retry"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["alreadyApplied"], true);
}

#[test]
fn auth_order_401_404_403_and_no_buyer_reaches_another() {
    let f = Fixture::new();
    let secret = f.buyer("b", &[]);
    let other = f.buyer("o", &[]);
    f.buyer("nosecret", &["--no-secret"]);
    let limited = f.buyer("limited", &["--capabilities", "payout,cancel"]);
    let txn = f.delivered("b");
    let unsecured = f.delivered("nosecret");
    let limited_txn = f.delivered("limited");
    let ack = |id: &str| answer(id, "acknowledged");

    // No credential: 401 before anything else, even for a transaction that does not exist.
    for id in [txn.as_str(), "txn_nothing"] {
        let reply = f.server.post(CONFIRMATION).json(&ack(id)).send();
        assert_eq!(reply.status, 401, "{}", reply.text);
        assert_eq!(code(&reply), "unauthorized");
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
    }
    // An empty header counts as none; a non-bearer Authorization too.
    let reply = f
        .server
        .post(CONFIRMATION)
        .header("Authorization", &format!("Basic {secret}"))
        .json(&ack(&txn))
        .send();
    assert_eq!(reply.status, 401, "{}", reply.text);

    // A credential, but no such transaction: 404.
    let reply = confirm(&f, "whatever-secret-value", ack("txn_nothing"));
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_eq!(code(&reply), "transaction_not_found");

    // The buyer has no secret: 403, whatever is presented.
    let reply = confirm(&f, &secret, ack(&unsecured));
    assert_eq!(reply.status, 403, "{}", reply.text);
    assert_eq!(code(&reply), "buyer_secret_not_configured");

    // A wrong secret, and another buyer's valid secret: 401, and nothing moves.
    for wrong in ["not-the-secret-at-all", other.as_str()] {
        for path in [CONFIRMATION, PAYOUT_PENDING, PAYOUT, CANCELLATION] {
            let body = json!({"transactionId": txn, "status": "rejected", "reason": "x"});
            let reply = f.call(path, wrong, &body);
            assert_eq!(reply.status, 401, "{path}: {}", reply.text);
        }
    }
    assert_eq!(f.status_of(&txn), "delivered");

    // The secret is checked before the capability.
    let reply = confirm(&f, "not-the-secret-at-all", ack(&limited_txn));
    assert_eq!(reply.status, 401, "{}", reply.text);
    let reply = confirm(&f, &limited, ack(&limited_txn));
    assert_eq!(reply.status, 403, "{}", reply.text);
    assert_eq!(code(&reply), "capability_denied");
    assert_eq!(reply.json["error"]["capability"], "confirm");
    // The capabilities it has still work.
    let reply = f.call(
        CANCELLATION,
        &limited,
        &json!({"transactionId": limited_txn, "reason": "not ours"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);

    // Naming the wrong buyer account: not found, nothing leaks.
    let reply = confirm(
        &f,
        &secret,
        json!({"transactionId": txn, "buyerAccountId": "o", "status": "acknowledged"}),
    );
    assert_eq!(reply.status, 404, "{}", reply.text);

    // Both headers with different values: either one may be the right one.
    let reply = f
        .server
        .post(CONFIRMATION)
        .secret("not-the-secret-at-all")
        .bearer(&secret)
        .json(&ack(&txn))
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
}

#[test]
fn bodies_are_validated_with_paths() {
    let f = Fixture::new();
    let secret = f.buyer("b", &[]);
    let txn = f.delivered("b");
    let cases = [
        (json!({"transactionId": txn}), "/status", "required"),
        (answer(&txn, "paid"), "/status", "enum"),
        (
            json!({"status": "acknowledged"}),
            "/transactionId",
            "required",
        ),
        (
            json!({"externalId": "a", "partnerExternalId": "b", "status": "acknowledged"}),
            "/partnerExternalId",
            "conflict",
        ),
        (
            json!({"transactionId": txn, "status": "acknowledged", "buyerPrice": -1}),
            "/buyerPrice",
            "minimum",
        ),
        (
            json!({"transactionId": txn, "status": "acknowledged", "buyerPrice": "12"}),
            "/buyerPrice",
            "type",
        ),
        (json!(["not", "an", "object"]), "", "type"),
    ];
    for (body, path, problem) in cases {
        let reply = confirm(&f, &secret, body.clone());
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(code(&reply), "validation_failed");
        let details = reply.json["error"]["details"].as_array().unwrap();
        assert!(
            details
                .iter()
                .any(|d| d["path"] == path && d["code"] == problem),
            "{body}: {}",
            reply.text
        );
    }
    let reply = f
        .server
        .post(CONFIRMATION)
        .secret(&secret)
        .header("Content-Type", "application/json")
        .body("{not json")
        .send();
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(code(&reply), "invalid_json");
    assert_eq!(f.status_of(&txn), "delivered");
}

/// Points buyer `id`'s webhook at an answer carrying `external_id`, so that the delivery
/// of its events sets the transactions' partnerExternalId.
fn answer_with_external_id(f: &Fixture, id: &str, key: &str, external_id: &str) {
    f.receiver.answer(
        &format!("/{id}"),
        Answer::ok().json(&json!({ key: external_id })),
    );
}

fn wait_for_external_id(f: &Fixture, txn: &str, external_id: &str) {
    wait_until(Duration::from_secs(15), "the event to be delivered", || {
        f.transaction(txn)["partnerExternalId"] == external_id
    });
}

#[test]
fn confirmation_by_external_id_alias_and_buyer_account() {
    let f = Fixture::new();
    let a = f.buyer("a", &[]);
    let b = f.buyer("b", &[]);
    answer_with_external_id(&f, "a", "externalId", "CRM-1");
    answer_with_external_id(&f, "b", "partnerExternalId", "CRM-1");
    let ta = f.delivered("a");
    let tb = f.delivered("b");
    wait_for_external_id(&f, &ta, "CRM-1");
    wait_for_external_id(&f, &tb, "CRM-1");

    // Two transactions share the id; each buyer's secret narrows it to its own.
    let reply = confirm(
        &f,
        &a,
        json!({"externalId": "CRM-1", "status": "acknowledged"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["item"]["transactionId"], ta.as_str());
    let reply = confirm(
        &f,
        &b,
        json!({"partnerExternalId": "CRM-1", "externalId": "CRM-1", "status": "rejected"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["item"]["transactionId"], tb.as_str());
    assert_eq!(f.status_of(&ta), "acknowledged");
    assert_eq!(f.status_of(&tb), "rejected");

    // A secret that fits neither: 401. An id nobody has: 404.
    let reply = confirm(
        &f,
        "not-the-secret-at-all",
        json!({"externalId": "CRM-1", "status": "acknowledged"}),
    );
    assert_eq!(reply.status, 401, "{}", reply.text);
    let reply = confirm(
        &f,
        &a,
        json!({"externalId": "CRM-2", "status": "acknowledged"}),
    );
    assert_eq!(reply.status, 404, "{}", reply.text);

    // buyerAccountId narrows the search: naming the other buyer finds nothing of ours.
    let reply = confirm(
        &f,
        &a,
        json!({"externalId": "CRM-1", "buyerAccountId": "a", "status": "acknowledged"}),
    );
    assert_eq!(reply.json["alreadyApplied"], true, "{}", reply.text);
    let reply = confirm(
        &f,
        &a,
        json!({"externalId": "CRM-1", "buyerAccountId": "b", "status": "rejected"}),
    );
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_eq!(f.status_of(&ta), "acknowledged");

    // A transactionId together with an external id must fit both.
    let reply = confirm(
        &f,
        &a,
        json!({"transactionId": ta, "externalId": "CRM-9", "status": "acknowledged"}),
    );
    assert_eq!(reply.status, 404, "{}", reply.text);
}

#[test]
fn an_external_id_the_secret_cannot_narrow_down_is_409() {
    let f = Fixture::new();
    // Two buyers that share one secret (the operator chose it twice), and one buyer that
    // gives the same external id to two of its leads.
    let shared = "one-secret-for-two-buyers-0123";
    for id in ["twin1", "twin2"] {
        f.buyer_with_secret(id, shared, &[]);
        answer_with_external_id(&f, id, "externalId", "SAME");
    }
    let repeat = f.buyer("repeat", &[]);
    answer_with_external_id(&f, "repeat", "externalId", "CONST");

    let t1 = f.delivered("twin1");
    let t2 = f.delivered("twin2");
    let t3 = f.delivered("repeat");
    let t4 = f.delivered("repeat");
    for (txn, id) in [(&t1, "SAME"), (&t2, "SAME"), (&t3, "CONST"), (&t4, "CONST")] {
        wait_for_external_id(&f, txn, id);
    }

    let reply = confirm(
        &f,
        shared,
        json!({"externalId": "SAME", "status": "acknowledged"}),
    );
    assert_eq!(reply.status, 409, "{}", reply.text);
    assert_eq!(code(&reply), "ambiguous_external_id");
    assert!(
        reply.json["message"]
            .as_str()
            .unwrap()
            .contains("buyerAccountId")
    );
    assert_eq!(f.status_of(&t1), "delivered");
    assert_eq!(f.status_of(&t2), "delivered");
    let reply = confirm(
        &f,
        shared,
        json!({"externalId": "SAME", "buyerAccountId": "twin2", "status": "acknowledged"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["item"]["transactionId"], t2.as_str());
    assert_eq!(f.status_of(&t1), "delivered");

    // One buyer, two transactions with the same id: buyerAccountId cannot help, the
    // transactionId can.
    let reply = confirm(
        &f,
        &repeat,
        json!({"externalId": "CONST", "buyerAccountId": "repeat", "status": "rejected"}),
    );
    assert_eq!(reply.status, 409, "{}", reply.text);
    let reply = confirm(
        &f,
        &repeat,
        json!({"transactionId": t4, "externalId": "CONST", "status": "rejected"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(f.status_of(&t3), "delivered");
    assert_eq!(f.status_of(&t4), "rejected");
}
