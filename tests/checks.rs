//! Third-party check steps (DESIGN.md section 22) through the real server and CLI, with a
//! real local HTTP service (`Receiver`) standing in for a consent certificate's claim API:
//! a passed certificate sold, a failed one rejected with `check_failed` (alone and per item
//! of a batch), a service that times out flagging the lead within the step's timeout, a
//! buyer requiring the check never offered a lead it did not pass, answers reused for
//! `cacheTtl`, filters on kept values, the commands' refusals, and the URL rules at
//! connect time.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::receiver::{Answer, Receiver};
use crate::util::{TempDb, TestServer, WAIT, buyer, complete_lead, fast_options, lr, setup};

const POST: &str = "/api/webhooks/channels/web/sources/src/leads";
const TIMEOUT_MS: u64 = 300;

/// The claim step of DESIGN.md section 22, calling `url`, with `on_error` for errors.
fn step(url: &str, on_error: &str) -> Value {
    json!({
        "url": url, "method": "POST", "format": "json",
        "when": "/consentCertificateUrl",
        "headers": {"Authorization": {"secret": "cert-key"}},
        "body": {"cert_url": {"from": "/consentCertificateUrl"}},
        "pass": {"status": [200], "pointer": "/outcome", "equals": "success"},
        "keep": {"certificateExpires": "/expires_at"},
        "onFail": "reject", "onError": on_error, "timeoutMs": TIMEOUT_MS, "cacheTtl": "24h"
    })
}

fn set_step(db: &Path, document: &Value) -> Value {
    lr(db, "check-step set --workspace ws --name cert --file -")
        .stdin(document.to_string())
        .json()
}

fn claimed(expires: &str) -> Answer {
    Answer::ok().json(&json!({"outcome": "success", "expires_at": expires}))
}

/// A complete lead `n` (its own email and phone) with certificate `cert`.
fn lead(n: u32, cert: Option<&str>) -> Value {
    let mut lead = complete_lead(
        &format!("c-{n}"),
        &format!("person{n}@example.org"),
        &format!("+49 30 5550{n:03}"),
    );
    if let Some(cert) = cert {
        lead["consentCertificateUrl"] = json!(cert);
    }
    lead
}

fn shown(db: &Path, lead_id: &str) -> Value {
    lr(db, format!("lead show {lead_id}")).json()
}

/// Posts `lead`; (status, body, how long the answer took).
fn post(server: &TestServer, lead: &Value) -> (u16, Value, Duration) {
    let started = Instant::now();
    let reply = server.post_json(POST, lead);
    (reply.status, reply.json, started.elapsed())
}

fn stored_id(body: &Value) -> String {
    body["item"]["leadId"]
        .as_str()
        .unwrap_or_else(|| panic!("not stored: {body}"))
        .to_string()
}

#[test]
fn a_certificate_check_decides_which_leads_are_stored_flagged_and_sold() {
    let claims = Receiver::start();
    let server = TestServer::start();
    let db = &server.db.path;
    setup(db);
    set_step(db, &step(&claims.url("/claim"), "flag"));
    lr(db, "check-step secret cert cert-key --value s3cret").json();
    // `careful` pays more but takes only leads whose certificate passed and lasts into 2027.
    buyer(db, "careful", &claims.url("/careful"), None, "");
    lr(
        db,
        "buyer subscribe careful --product solar --price 40 --require-check cert",
    )
    .args(["--filter", "check.cert.certificateExpires=2027*"])
    .json();
    buyer(db, "any", &claims.url("/any"), Some("30"), "");

    // A valid certificate: checked, kept, sold to the careful buyer.
    claims.answer("/claim", claimed("2027-06-01"));
    let (status, body, _) = post(&server, &lead(1, Some("https://cert.example/c1")));
    assert_eq!(status, 201, "{body}");
    let first = shown(db, &stored_id(&body));
    let check = &first["checks"][0];
    assert_eq!(check["name"], "cert", "{first}");
    assert_eq!(check["outcome"], "passed", "{first}");
    assert_eq!(check["kept"], json!({"certificateExpires": "2027-06-01"}));
    assert!(check["latencyMs"].is_i64(), "{check}");
    claims.wait_for_on("/careful", 1, WAIT);
    let call = &claims.requests_to("/claim")[0];
    assert_eq!(call.header("authorization"), Some("s3cret"));
    assert_eq!(call.json(), json!({"cert_url": "https://cert.example/c1"}));

    // The same certificate again: answered from the cache, the service not called.
    let (status, body, _) = post(&server, &lead(2, Some("https://cert.example/c1")));
    assert_eq!(status, 201, "{body}");
    assert_eq!(claims.requests_to("/claim").len(), 1, "cached");
    assert_eq!(
        shown(db, &stored_id(&body))["checks"][0]["outcome"],
        "passed"
    );
    claims.wait_for_on("/careful", 2, WAIT);

    // A certificate that expires sooner passes, but the kept value's filter sends the lead
    // to the other buyer; the trace names the filter.
    claims.answer("/claim", claimed("2026-12-31"));
    let (_, body, _) = post(&server, &lead(3, Some("https://cert.example/c3")));
    let third = shown(db, &stored_id(&body));
    claims.wait_for_on("/any", 1, WAIT);
    let trace = third["requests"][0]["decision"].to_string();
    assert!(trace.contains("check.cert.certificateExpires"), "{trace}");

    // An invalid certificate: refused with check_failed naming the step, nothing stored;
    // in a batch, per item (a lead without a certificate skips the step).
    claims.answer("/claim", Answer::ok().json(&json!({"outcome": "failure"})));
    let before = lr(db, "lead list").json().as_array().unwrap().len();
    let (status, body, _) = post(&server, &lead(4, Some("https://cert.example/bad")));
    assert_eq!(status, 400, "{body}");
    let detail = &body["error"]["details"][0];
    assert_eq!(detail["code"], "check_failed", "{body}");
    assert!(
        detail["message"].as_str().unwrap().contains("'cert'"),
        "{body}"
    );
    let batch = json!({"leads": [lead(5, Some("https://cert.example/bad2")), lead(6, None)]});
    let reply = server.post_json(POST, &batch);
    let items = reply.json["items"].as_array().unwrap().clone();
    assert_eq!(items[0]["status"], "rejected", "{}", reply.text);
    assert_eq!(
        items[0]["errors"][0]["code"], "check_failed",
        "{}",
        reply.text
    );
    assert_eq!(items[0]["errors"][0]["path"], "/leads/0", "{}", reply.text);
    assert_eq!(items[1]["status"], "accepted", "{}", reply.text);
    let skipped = shown(db, items[1]["leadId"].as_str().unwrap());
    assert_eq!(skipped["checks"][0]["outcome"], "skipped", "{skipped}");
    assert_eq!(
        lr(db, "lead list").json().as_array().unwrap().len(),
        before + 1
    );

    // A service that does not answer in time: the lead is flagged, never sold, and the
    // answer comes within the step's timeout plus 50 ms beyond what a lead the step skips
    // takes just before (the suite's other tests share the machine's cores).
    claims.answer(
        "/claim",
        claimed("2027-01-01").delay(Duration::from_secs(3)),
    );
    let (_, _, plain) = post(&server, &lead(10, None));
    let (status, body, took) = post(&server, &lead(7, Some("https://cert.example/slow")));
    assert_eq!(status, 201, "{body}");
    assert!(
        took < Duration::from_millis(TIMEOUT_MS + 50) + plain,
        "answered after {took:?}, a lead the step skips after {plain:?}"
    );
    let flagged = shown(db, &stored_id(&body));
    assert_eq!(flagged["qualityStatus"], "invalid", "{flagged}");
    assert!(
        flagged["qualityReasons"]
            .as_array()
            .unwrap()
            .contains(&json!("check_error:cert")),
        "{flagged}"
    );
    assert_eq!(flagged["checks"][0]["outcome"], "error");

    // With onError pass, an erroring service (a 5xx, then garbage) lets the lead be sold,
    // but never to the buyer that requires the check: its trace says why.
    set_step(db, &step(&claims.url("/claim"), "pass"));
    for (n, answer) in [
        (8, Answer::status(503)),
        (9, Answer::ok().body("<html>claimed</html>")),
    ] {
        claims.answer("/claim", answer);
        let (status, body, _) = post(
            &server,
            &lead(n, Some(&format!("https://cert.example/e{n}"))),
        );
        assert_eq!(status, 201, "{body}");
        let sold = shown(db, &stored_id(&body));
        assert_eq!(sold["checks"][0]["outcome"], "error", "{sold}");
        let trace = sold["requests"][0]["decision"].to_string();
        assert!(trace.contains("requireCheck"), "{trace}");
    }
    claims.wait_for_on("/any", 3, WAIT);
    assert_eq!(claims.requests_to("/careful").len(), 2, "only passed leads");
}

#[test]
fn check_step_commands_refuse_bad_documents_and_outbound_urls_with_the_path() {
    let db_file = TempDb::new();
    let db = &db_file.path;
    setup(db);
    let refused = |document: Value| -> Vec<(String, String)> {
        let failure = lr(db, "check-step set --workspace ws --name cert --file -")
            .stdin(document.to_string())
            .fails_json(1);
        let body = failure.json();
        assert_eq!(body["error"]["code"], "invalid_check_step", "{body}");
        body["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["path"].as_str().unwrap().to_string(),
                    d["code"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let found = refused(json!({
        "url": "http://claims.example/x", "body": {"a": {"from": "nope"}},
        "pass": {"status": [500]}, "timeoutMs": 0, "onError": "ignore", "other": 1}));
    for expected in [
        ("/body/a/from", "invalid_pointer"),
        ("/pass/status/0", "invalid_value"),
        ("/timeoutMs", "invalid_value"),
        ("/onError", "invalid_value"),
        ("/other", "unknown_key"),
    ] {
        assert!(
            found.contains(&(expected.0.into(), expected.1.into())),
            "{expected:?} in {found:?}"
        );
    }
    // The URL rules of buyer webhooks: no credentials, no link-local address.
    for url in [
        "http://user:pw@claims.example/",
        "http://169.254.169.254/latest",
        "ftp://claims.example/",
    ] {
        let found = refused(json!({"url": url, "body": {"a": {"const": 1}}}));
        assert_eq!(found, [("/url".into(), "invalid_url".into())], "{url}");
    }
    lr(db, "check-step set --workspace ws --name cert --file -")
        .stdin("{not json")
        .fails(1)
        .stderr_contains("not JSON");
    lr(db, "check-step set --workspace nope --name cert --file -")
        .stdin(step("http://claims.example/", "flag").to_string())
        .fails(1)
        .stderr_contains("unknown workspace 'nope'");

    // Stored, listed, shown without secret values, removed.
    let stored = set_step(db, &step("http://claims.example/claim", "flag"));
    assert_eq!(stored["missingSecrets"], json!(["cert-key"]), "{stored}");
    lr(db, "check-step secret cert cert-key --value hush-hush").json();
    let shown = lr(db, "check-step show cert").json();
    assert_eq!(shown["missingSecrets"], json!([]));
    assert!(!shown.to_string().contains("hush-hush"), "{shown}");
    let listed = lr(db, "check-step list --workspace ws").json();
    assert_eq!(listed[0]["name"], "cert", "{listed}");
    assert_eq!(listed[0]["onError"], "flag", "{listed}");
    buyer(db, "b", "http://buyer.example/hook", None, "");
    lr(
        db,
        "buyer subscribe b --product solar --price 5 --require-check nope",
    )
    .fails(1)
    .stderr_contains("unknown check step 'nope'");
    lr(db, "buyer subscribe b --product solar --price 5")
        .args(["--filter", "check.nope.score=1"])
        .fails(1)
        .stderr_contains("unknown check step 'nope'");
    let terms = lr(
        db,
        "buyer subscribe b --product solar --price 5 --require-check cert",
    )
    .json();
    assert_eq!(terms["requireCheck"], "cert", "{terms}");
    lr(db, "check-step remove cert").json();
    lr(db, "check-step show cert")
        .fails(1)
        .stderr_contains("unknown check step 'cert'");

    // Each change has its audit entry; the secret's value is in none.
    let entries = lr(db, "audit list --action check_step").json();
    let actions: Vec<&str> = entries
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|entry| entry["action"].as_str())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "check_step.set").count(),
        1,
        "{entries}"
    );
    assert!(actions.contains(&"check_step.secret"), "{entries}");
    assert!(actions.contains(&"check_step.remove"), "{entries}");
    assert!(!entries.to_string().contains("hush-hush"), "{entries}");
}

#[test]
fn public_outbound_only_refuses_a_step_host_resolving_to_loopback_at_connect_time() {
    let claims = Receiver::start();
    // A host name, not an address: only what it resolves to says it is loopback.
    let by_name = claims.url("/claim").replace("127.0.0.1", "localhost");
    let mut options = fast_options();
    options.delivery.public_outbound_only = true;
    let server = TestServer::start_with(TempDb::new(), options);
    let db = &server.db.path;
    setup(db);
    set_step(db, &step(&by_name, "flag"));
    lr(db, "check-step secret cert cert-key --value s3cret").json();
    let (status, body, _) = post(&server, &lead(1, Some("https://cert.example/c1")));
    assert_eq!(status, 201, "{body}");
    let check = &shown(db, &stored_id(&body))["checks"][0];
    assert_eq!(check["outcome"], "error", "{check}");
    let reason = check["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("not sent: localhost") && reason.contains("loopback"),
        "{reason}"
    );
    assert_eq!(claims.count(), 0);
}
