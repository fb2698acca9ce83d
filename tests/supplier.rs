//! Supplier clawback over HTTP and the CLI (SPEC.md section 4.8; DESIGN.md sections 4 and
//! 6): a cancellation opens when a lead's last transaction ends rejected or cancelled, or by
//! hand with `leadrelay lead cancel`; the supplier confirms or disputes it with its key.

use serde_json::{Value, json};

use crate::lifecycle::{
    CANCELLATION, CONFIRMATION, Fixture, OTHER_SUPPLIER_KEY, SUPPLIER_CONFIRMATION, SUPPLIER_KEY,
};
use crate::util::{Reply, lr};

fn answer(f: &Fixture, key: &str, lead: &str, status: &str) -> Reply {
    f.server
        .post(SUPPLIER_CONFIRMATION)
        .secret(key)
        .json(&json!({"leadId": lead, "status": status, "reason": "checked"}))
        .send()
}

/// The partner-form error code of a 400 answer.
fn refused(reply: &Reply) -> &str {
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json["accepted"], false, "{}", reply.text);
    assert!(reply.json["message"].is_string(), "{}", reply.text);
    reply.json["code"].as_str().unwrap()
}

fn lead_status(f: &Fixture, lead: &str) -> String {
    f.lead(lead)["status"].as_str().unwrap().to_string()
}

/// `leadrelay lead cancel` with `--json`; the exit status and the JSON or the error text.
fn lead_cancel(f: &Fixture, lead: &str, reason: &str) -> Result<Value, String> {
    let output = lr(&f.server, format!("--json lead cancel {lead} --reason"))
        .arg(reason)
        .output();
    if output.status.success() {
        Ok(serde_json::from_slice(&output.stdout).expect("lead cancel prints JSON"))
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn the_last_transaction_ending_opens_a_clawback_the_supplier_confirms() {
    let f = Fixture::new();
    let a = f.buyer("a", &[]);
    let b = f.buyer("b", &[]);
    let (lead, requests) = f.lead_on("src", &["solar", "heat"]);
    let ta = f.deliver(&requests[0], "a");
    let tb = f.deliver_with(&requests[1], "b", &["--price", "30"]);
    assert_eq!(f.transaction(&ta)["supplierCost"], 4.0);

    assert_eq!(
        refused(&answer(&f, SUPPLIER_KEY, &lead, "acknowledged")),
        "no_cancellation_requested"
    );

    // One transaction ends; the other is still live: nothing opens.
    let reply = f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": ta, "status": "rejected"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(lead_status(&f, &lead), "active");
    assert_eq!(
        refused(&answer(&f, SUPPLIER_KEY, &lead, "acknowledged")),
        "no_cancellation_requested"
    );

    // The last one ends: the clawback opens in the same call.
    let reply = f.call(
        CANCELLATION,
        &b,
        &json!({"transactionId": tb, "reason": "customer unreachable"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(lead_status(&f, &lead), "cancellation_pending");
    // A repeat of the move does not open a second one.
    let reply = f.call(
        CANCELLATION,
        &b,
        &json!({"transactionId": tb, "reason": "again"}),
    );
    assert_eq!(reply.json["alreadyApplied"], true, "{}", reply.text);

    let reply = answer(&f, SUPPLIER_KEY, &lead, "acknowledged");
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["accepted"], true);
    assert_eq!(reply.json["code"], "cancellation_confirmed");
    assert_eq!(reply.json["leadId"], lead.as_str());
    assert_eq!(reply.json["alreadyApplied"], false);
    assert_eq!(reply.json["outcome"], "lead_cancelled");
    assert_eq!(reply.json["cancellation"]["origin"], "auto");
    assert_eq!(reply.json["cancellation"]["status"], "acknowledged");
    assert_eq!(reply.json["cancellation"]["responseReason"], "checked");
    assert_eq!(lead_status(&f, &lead), "cancelled");

    // The supplier cost is reversed where it was carried, and the history says so.
    let shown = f.transaction(&ta);
    assert_eq!(shown["supplierCost"], 0.0);
    assert_eq!(shown["marginAmount"], shown["buyerPrice"]);
    assert_eq!(shown["status"], "rejected");
    let last = shown["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["actor"], "supplier:sup");
    assert_eq!(last["from"], "rejected");
    assert_eq!(last["to"], "rejected");
    assert!(last["reason"].as_str().unwrap().contains("4.00"), "{last}");
    // Each interest's transaction carried the source's cost; both are reversed.
    let shown_b = f.transaction(&tb);
    assert_eq!(shown_b["supplierCost"], 0.0);
    assert_eq!(shown_b["marginAmount"], 30.0);
    assert_eq!(
        shown_b["history"].as_array().unwrap().last().unwrap()["actor"],
        "supplier:sup"
    );

    // The same answer again is already applied; the opposite one is refused.
    let reply = answer(&f, SUPPLIER_KEY, &lead, "acknowledged");
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["alreadyApplied"], true);
    assert_eq!(reply.json["outcome"], "lead_cancelled");
    assert_eq!(
        refused(&answer(&f, SUPPLIER_KEY, &lead, "rejected")),
        "cancellation_already_resolved"
    );
    assert_eq!(lead_status(&f, &lead), "cancelled");
    assert_eq!(
        f.transaction(&ta)["history"].as_array().unwrap().len(),
        shown["history"].as_array().unwrap().len(),
        "a repeat reverses nothing twice"
    );
}

#[test]
fn the_operator_opens_one_by_hand_and_the_supplier_disputes_it() {
    let f = Fixture::new();
    let a = f.buyer("a", &[]);
    let (lead, requests) = f.lead_on("src", &["solar"]);
    let ta = f.deliver(&requests[0], "a");
    f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": ta, "status": "acknowledged"}),
    );

    let opened = lead_cancel(&f, &lead, "fraud suspected").expect("lead cancel succeeds");
    assert_eq!(opened["leadId"], lead.as_str());
    assert_eq!(opened["supplierId"], "sup");
    assert_eq!(opened["status"], "pending");
    assert_eq!(opened["origin"], "operator");
    assert_eq!(opened["reason"], "fraud suspected");
    assert!(opened["id"].as_str().unwrap().starts_with("scan_"));
    assert_eq!(lead_status(&f, &lead), "cancellation_pending");
    let again = lead_cancel(&f, &lead, "twice").unwrap_err();
    assert!(
        again.contains("already has a supplier cancellation"),
        "{again}"
    );

    let reply = answer(&f, SUPPLIER_KEY, &lead, "rejected");
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.json["code"], "cancellation_rejected");
    assert_eq!(reply.json["outcome"], "cancellation_disputed");
    assert_eq!(reply.json["alreadyApplied"], false);
    assert_eq!(lead_status(&f, &lead), "active");
    assert_eq!(
        f.transaction(&ta)["supplierCost"],
        4.0,
        "a dispute reverses nothing"
    );
    assert_eq!(f.transaction(&ta)["status"], "acknowledged");

    let reply = answer(&f, SUPPLIER_KEY, &lead, "rejected");
    assert_eq!(reply.json["alreadyApplied"], true, "{}", reply.text);
    assert_eq!(reply.json["outcome"], "cancellation_disputed");
    assert_eq!(
        refused(&answer(&f, SUPPLIER_KEY, &lead, "acknowledged")),
        "cancellation_already_resolved"
    );
    // Resolved is resolved: the operator cannot reopen it either.
    let again = lead_cancel(&f, &lead, "reopen").unwrap_err();
    assert!(again.contains("rejected"), "{again}");
}

#[test]
fn lead_cancel_explains_what_it_cannot_do() {
    let f = Fixture::new();
    let a = f.buyer("a", &[]);
    let (plain_lead, requests) = f.lead_on("plain", &["solar"]);
    let (lead, _) = f.lead_on("src", &["solar"]);

    let error = lead_cancel(&f, &plain_lead, "no supplier").unwrap_err();
    assert!(error.contains("no supplier"), "{error}");
    let error = lead_cancel(&f, "lead_nothing", "x").unwrap_err();
    assert!(error.contains("lead not found"), "{error}");
    let error = lead_cancel(&f, &lead, "").unwrap_err();
    assert!(error.contains("reason"), "{error}");
    assert_eq!(lead_status(&f, &lead), "active");

    // Without a supplier, the last transaction ending opens nothing.
    let ta = f.deliver(&requests[0], "a");
    let reply = f.call(
        CONFIRMATION,
        &a,
        &json!({"transactionId": ta, "status": "rejected"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(lead_status(&f, &plain_lead), "active");

    // The text output names the cancellation too.
    let text = lr(&f.server, format!("lead cancel {lead} --reason 'by hand'")).ok();
    assert!(
        text.contains("pending") && text.contains("by hand"),
        "{text}"
    );
}

#[test]
fn supplier_keys_are_checked_and_no_supplier_answers_for_another() {
    let f = Fixture::new();
    let (lead, _) = f.lead_on("src", &["solar"]);
    let (other_lead, _) = f.lead_on("src2", &["solar"]);
    lead_cancel(&f, &lead, "by hand").unwrap();

    let body = json!({"leadId": lead, "status": "acknowledged"});
    let reply = f.server.post(SUPPLIER_CONFIRMATION).json(&body).send();
    assert_eq!(reply.status, 401, "{}", reply.text);
    assert_eq!(reply.json["code"], "unauthorized");
    let reply = answer(&f, "not-a-supplier-key-at-all", &lead, "acknowledged");
    assert_eq!(reply.status, 401, "{}", reply.text);
    // A buyer's secret is not a supplier key.
    let buyer_secret = f.buyer("a", &[]);
    assert_eq!(answer(&f, &buyer_secret, &lead, "acknowledged").status, 401);

    // Another supplier's lead answers exactly like a lead that does not exist.
    let foreign = answer(&f, OTHER_SUPPLIER_KEY, &lead, "acknowledged");
    let missing = answer(&f, OTHER_SUPPLIER_KEY, "lead_nothing", "acknowledged");
    assert_eq!(refused(&foreign), "lead_not_found");
    assert_eq!(foreign.json, missing.json);
    assert_eq!(lead_status(&f, &lead), "cancellation_pending");
    // Also when the other supplier has no cancellation for it.
    let foreign = answer(&f, SUPPLIER_KEY, &other_lead, "acknowledged");
    assert_eq!(foreign.json, missing.json);

    // The key in the bearer header works as well.
    let reply = f
        .server
        .post(SUPPLIER_CONFIRMATION)
        .bearer(SUPPLIER_KEY)
        .json(&body)
        .send();
    assert_eq!(reply.status, 200, "{}", reply.text);
}

#[test]
fn supplier_bodies_are_validated() {
    let f = Fixture::new();
    for (body, path) in [
        (json!({}), "/leadId"),
        (json!({"leadId": "lead_x"}), "/status"),
        (json!({"leadId": "lead_x", "status": "maybe"}), "/status"),
        (json!({"leadId": 5, "status": "acknowledged"}), "/leadId"),
        (
            json!({"leadId": "lead_x", "status": "rejected", "reason": false}),
            "/reason",
        ),
    ] {
        let reply = f
            .server
            .post(SUPPLIER_CONFIRMATION)
            .secret(SUPPLIER_KEY)
            .json(&body)
            .send();
        assert_eq!(refused(&reply), "validation_failed", "{body}");
        let details = reply.json["error"]["details"].as_array().unwrap();
        assert!(
            details.iter().any(|d| d["path"] == path),
            "{body}: {}",
            reply.text
        );
    }
    let reply = f
        .server
        .post(SUPPLIER_CONFIRMATION)
        .secret(SUPPLIER_KEY)
        .header("Content-Type", "application/json")
        .body("[")
        .send();
    assert_eq!(refused(&reply), "invalid_json");
}
