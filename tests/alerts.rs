//! Alerts (DESIGN.md section 23): each rule driven through its real cause against a
//! running server that evaluates every 100 ms, with its messages caught by a real webhook
//! receiver (and a real SMTP server for email): exactly one `firing` and one `resolved`
//! message per condition, signed like our events.

use std::time::Duration;

use serde_json::Value;

use crate::util::receiver::{Answer, Receiver};
use crate::util::smtp::SmtpServer;
use crate::util::{
    TempDb, TestServer, WAIT, buyer, complete_lead, fast_options, lead_request, lr, setup,
    simple_lead,
};

/// How often the test servers evaluate the rules.
const INTERVAL: Duration = Duration::from_millis(100);

/// Options of a server that evaluates every [`INTERVAL`], with email through `smtp`.
fn options(smtp: Option<&SmtpServer>) -> leadrelay::service::ServiceOptions {
    let mut options = fast_options();
    options.alerts = leadrelay::outbox::alert::AlertOptions {
        interval: INTERVAL,
        smtp: smtp.map(|smtp| {
            leadrelay::outbox::alert::Smtp::parse(&smtp.url(), "leadrelay@example.org")
                .expect("a valid relay")
        }),
    };
    options
}

/// The workspace of `setup` with a webhook target on `receiver` (`/alerts`): its secret.
fn with_webhook(db: &TempDb, receiver: &Receiver) -> String {
    setup(db);
    let target = lr(
        db,
        format!(
            "alert target add --workspace ws --webhook {}",
            receiver.url("/alerts")
        ),
    )
    .json();
    target["signingSecret"].as_str().unwrap().to_string()
}

/// The alert messages received so far for `rule`: (state, subject) in arrival order.
fn states(receiver: &Receiver, rule: &str) -> Vec<(String, String)> {
    receiver
        .requests_to("/alerts")
        .iter()
        .map(|r| r.json())
        .filter(|m| m["alert"]["rule"] == rule)
        .map(|m| {
            let alert = &m["alert"];
            (
                alert["state"].as_str().unwrap().to_string(),
                alert["subject"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Waits for `rule`'s firing message for `subject`.
fn wait_firing(receiver: &Receiver, rule: &str, subject: &str) {
    crate::util::wait_until(WAIT, &format!("{rule} firing for {subject}"), || {
        states(receiver, rule).contains(&("firing".into(), subject.into()))
    });
}

/// Waits for the resolution of `rule` for `subject`.
fn wait_resolved(receiver: &Receiver, rule: &str, subject: &str) {
    crate::util::wait_until(WAIT, &format!("{rule} resolved for {subject}"), || {
        states(receiver, rule).contains(&("resolved".into(), subject.into()))
    });
}

/// Checks that `rule` fired and resolved exactly once for `subject`, nothing following for
/// a few evaluations.
fn assert_once(receiver: &Receiver, rule: &str, subject: &str) {
    std::thread::sleep(INTERVAL * 5);
    let of_subject: Vec<String> = states(receiver, rule)
        .into_iter()
        .filter(|(_, s)| s == subject)
        .map(|(state, _)| state)
        .collect();
    assert_eq!(of_subject, ["firing", "resolved"], "{rule} {subject}");
}

/// [`wait_resolved`], then [`assert_once`].
fn wait_resolved_once(receiver: &Receiver, rule: &str, subject: &str) {
    wait_resolved(receiver, rule, subject);
    assert_once(receiver, rule, subject);
}

/// A complete lead `n` (its own email and phone) with automated delivery.
fn lead(n: usize) -> Value {
    complete_lead(
        &format!("ext-{n}"),
        &format!("ann{n}@example.org"),
        &format!("+49 151 2345{n:04}"),
    )
}

#[test]
fn a_silent_source_fires_once_by_signed_webhook_and_email_and_resolves_when_it_sends() {
    let (receiver, smtp, db) = (Receiver::start(), SmtpServer::start(), TempDb::new());
    let secret = with_webhook(&db, &receiver);
    lr(
        &db,
        "alert target add --workspace ws --email ops@example.org",
    )
    .json();
    let server = TestServer::start_with(db, options(Some(&smtp)));
    lead_request(&server, &simple_lead(1));
    lr(
        &server,
        "alert rule set --workspace ws source_silent --for 700ms",
    )
    .json();

    wait_firing(&receiver, "source_silent", "source:src");
    let firing = &receiver.requests_to("/alerts")[0];
    assert!(
        firing.is_signed_with(&secret),
        "signed with the target's secret"
    );
    assert!(firing.header("webhook-id").unwrap().ends_with(".firing"));
    let body = firing.json();
    assert_eq!(crate::util::keys(&body), ["text", "alert"]);
    let alert = &body["alert"];
    assert_eq!(alert["state"], "firing");
    assert!(alert["since"].as_str().unwrap().ends_with('Z'), "{alert}");
    assert!(
        alert["detail"]
            .as_str()
            .unwrap()
            .contains("no lead from source src")
    );
    assert!(
        body["text"].as_str().unwrap().contains("source_silent"),
        "{body}"
    );
    let open = lr(&server, "alert list --open").json();
    assert_eq!(open.as_array().unwrap().len(), 1, "{open}");
    assert_eq!(open[0]["rule"], "source_silent");

    let mails = smtp.wait_for(1, WAIT);
    assert_eq!(mails[0].to, ["ops@example.org"]);
    assert_eq!(mails[0].from, "leadrelay@example.org");
    let subject = mails[0].header("subject").unwrap();
    assert!(
        subject.contains("FIRING") && subject.contains("source_silent"),
        "{subject}"
    );

    // The source sends again: resolved. Disabled, it is no longer watched (it would fall
    // silent again 1.5 s later).
    lead_request(&server, &simple_lead(2));
    wait_resolved(&receiver, "source_silent", "source:src");
    lr(&server, "source disable src").json();
    assert_once(&receiver, "source_silent", "source:src");
    let mails = smtp.wait_for(2, WAIT);
    assert!(mails[1].header("subject").unwrap().contains("RESOLVED"));
    std::thread::sleep(INTERVAL * 3);
    assert_eq!(smtp.mails().len(), 2, "one mail per change");
    assert_eq!(
        lr(&server, "alert list --open").json(),
        serde_json::json!([])
    );
    let all = lr(&server, "alert list").json();
    assert_eq!(all[0]["state"], "resolved");
    assert!(all[0]["resolvedAt"].is_string(), "{all}");
}

#[test]
fn an_endpoint_that_stops_answering_fires_buyer_endpoint_down_once() {
    let (receiver, db) = (Receiver::start(), TempDb::new());
    with_webhook(&db, &receiver);
    receiver.answer_sequence(
        "/down",
        vec![
            Answer::status(503),
            Answer::status(503),
            Answer::status(503),
            Answer::ok(),
        ],
    );
    buyer(&db, "down", &receiver.url("/down"), Some("20"), "");
    lr(
        &db,
        "alert rule set --workspace ws buyer_endpoint_down --for 200ms",
    )
    .json();
    let mut options = options(None);
    options.delivery.breaker = leadrelay::outbox::BreakerConfig {
        failures: 2,
        first_probe_ms: 400,
        max_probe_ms: 400,
        ..Default::default()
    };
    let server = TestServer::start_with(db, options);
    lead_request(&server, &lead(1));
    wait_firing(&receiver, "buyer_endpoint_down", "buyer:down");
    // The probe that the endpoint answers closes the breaker.
    wait_resolved_once(&receiver, "buyer_endpoint_down", "buyer:down");
}

#[test]
fn a_cap_filled_by_ingest_fires_cap_reached_once_and_the_console_shows_it() {
    let (receiver, db) = (Receiver::start(), TempDb::new());
    with_webhook(&db, &receiver);
    buyer(&db, "capped", &receiver.url("/capped"), None, "");
    lr(
        &db,
        "buyer subscribe capped --product solar --price 20 --daily-cap 2",
    )
    .json();
    lr(&db, "alert rule set --workspace ws cap_reached").json();
    let server = TestServer::start_with_console(
        db,
        options(None),
        leadrelay::console::ConsoleConfig::default(),
    );
    lead_request(&server, &lead(1));
    std::thread::sleep(INTERVAL * 3);
    assert!(
        states(&receiver, "cap_reached").is_empty(),
        "one of two places used"
    );
    lead_request(&server, &lead(2));
    let subject = "buyer:capped product:solar";
    wait_firing(&receiver, "cap_reached", subject);

    let cookie = crate::console::login(&server);
    let page = crate::util::Request::new("GET", &server.console_url("/"))
        .header("Cookie", &cookie)
        .send();
    assert!(page.text.contains("Open alerts"), "{}", page.text);
    assert!(page.text.contains("cap_reached"), "{}", page.text);

    lr(
        &server,
        "buyer terms set capped --product solar --daily-cap 3",
    )
    .json();
    wait_resolved_once(&receiver, "cap_reached", subject);
}

#[test]
fn deliveries_spending_a_prepaid_balance_fire_balance_low_once() {
    let (receiver, db) = (Receiver::start(), TempDb::new());
    with_webhook(&db, &receiver);
    buyer(
        &db,
        "pre",
        &receiver.url("/pre"),
        Some("40"),
        "--plan prepaid",
    );
    lr(&db, "buyer fund pre --amount 100").json();
    lr(
        &db,
        "alert rule set --workspace ws balance_low --threshold 50",
    )
    .json();
    let server = TestServer::start_with(db, options(None));
    lead_request(&server, &lead(1));
    std::thread::sleep(INTERVAL * 3);
    assert!(
        states(&receiver, "balance_low").is_empty(),
        "60.00 is not under 50"
    );
    lead_request(&server, &lead(2));
    wait_firing(&receiver, "balance_low", "buyer:pre");
    let detail = receiver.requests_to("/alerts")[0].json()["alert"]["detail"].clone();
    assert!(detail.as_str().unwrap().contains("20.00"), "{detail}");
    lr(&server, "buyer fund pre --amount 100").json();
    wait_resolved_once(&receiver, "balance_low", "buyer:pre");
}

#[test]
fn a_full_outbox_fires_outbox_backlog_once() {
    let (receiver, db) = (Receiver::start(), TempDb::new());
    with_webhook(&db, &receiver);
    receiver.answer_sequence(
        "/slow",
        vec![
            Answer::status(503),
            Answer::status(503),
            Answer::status(503),
            Answer::ok(),
        ],
    );
    buyer(&db, "slow", &receiver.url("/slow"), Some("20"), "");
    lr(
        &db,
        "alert rule set --workspace ws outbox_backlog --for 300ms",
    )
    .json();
    let mut options = options(None);
    options.delivery.retry_schedule =
        leadrelay::outbox::RetrySchedule::parse("400ms,400ms,400ms,400ms").unwrap();
    let server = TestServer::start_with(db, options);
    lead_request(&server, &lead(1));
    wait_firing(&receiver, "outbox_backlog", "outbox");
    // The fourth attempt is answered: nothing pending any more.
    wait_resolved_once(&receiver, "outbox_backlog", "outbox");
    assert_eq!(receiver.requests_to("/slow").len(), 4);
}

#[test]
fn a_return_storm_fires_return_rate_high_for_the_buyer_and_the_source() {
    let (receiver, db) = (Receiver::start(), TempDb::new());
    with_webhook(&db, &receiver);
    buyer(&db, "ret", &receiver.url("/ret"), Some("20"), "");
    lr(
        &db,
        "alert rule set --workspace ws return_rate_high --threshold 40",
    )
    .json();
    let server = TestServer::start_with(db, options(None));
    lead_request(&server, &lead(1));
    lead_request(&server, &lead(2));
    let transactions = lr(&server, "transaction list").json();
    let txn = transactions[0]["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    std::thread::sleep(INTERVAL * 3);
    assert!(states(&receiver, "return_rate_high").is_empty());
    // One of two sales returned: 50%.
    lr(
        &server,
        format!("transaction return request {txn} --reason-code out_of_area"),
    )
    .json();
    wait_firing(&receiver, "return_rate_high", "buyer:ret");
    wait_firing(&receiver, "return_rate_high", "source:src");
    // Two more sales: one of four, 25%.
    lead_request(&server, &lead(3));
    lead_request(&server, &lead(4));
    wait_resolved_once(&receiver, "return_rate_high", "buyer:ret");
    wait_resolved_once(&receiver, "return_rate_high", "source:src");
}

/// A small tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_filling_file_system_fires_disk_low_once() {
    let dir = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(dir.path())
        .output();
    match mounted {
        Ok(output) if output.status.success() => {}
        Ok(output) => {
            eprintln!(
                "skipped: cannot mount a tmpfs (needs root and mount): {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: cannot run mount: {e}");
            return;
        }
    }
    let tmpfs = Tmpfs(dir.path().to_path_buf());
    let db = TempDb {
        path: tmpfs.0.join("leadrelay.db"),
        dir: tempfile::tempdir().unwrap(),
    };
    let receiver = Receiver::start();
    with_webhook(&db, &receiver);
    lr(&db, "alert rule set --workspace ws disk_low --threshold 50").json();
    let server = TestServer::start_with(db, options(None));
    std::thread::sleep(INTERVAL * 3);
    assert!(
        states(&receiver, "disk_low").is_empty(),
        "a fresh tmpfs is mostly free"
    );
    let filler = tmpfs.0.join("filler");
    std::fs::write(&filler, vec![1u8; 10 << 20]).unwrap();
    wait_firing(&receiver, "disk_low", "disk");
    std::fs::remove_file(&filler).unwrap();
    wait_resolved_once(&receiver, "disk_low", "disk");
    drop(server);
}

#[test]
fn the_commands_check_what_they_are_given_and_list_what_was_set() {
    let db = TempDb::new();
    setup(&db);
    let target = lr(
        &db,
        "alert target add --workspace ws --webhook https://chat.example/hooks/1",
    )
    .json();
    assert!(
        target["signingSecret"]
            .as_str()
            .unwrap()
            .starts_with("whsec_")
    );
    let listed = lr(&db, "alert target list").json();
    assert_eq!(listed[0]["address"], "https://chat.example/hooks/1");
    assert!(listed[0].get("signingSecret").is_none(), "shown once only");
    lr(
        &db,
        "alert target add --workspace ws --webhook http://169.254.169.254/latest",
    )
    .fails_json(1)
    .stderr_contains("invalid");
    lr(
        &db,
        "alert target add --workspace ws --email not-an-address",
    )
    .fails_json(1);
    lr(
        &db,
        "alert target add --workspace nope --email a@example.org",
    )
    .fails_json(1)
    .stderr_contains("not_found");
    lr(&db, "alert rule set --workspace ws balance_low")
        .fails(1)
        .stderr_contains("needs --threshold");
    lr(&db, "alert rule set --workspace ws cap_reached --for 5m")
        .fails(1)
        .stderr_contains("takes no --for");
    lr(
        &db,
        "alert rule set --workspace ws disk_low --threshold 101",
    )
    .fails(1);
    lr(&db, "alert rule set --workspace ws no_such_rule").fails(2);

    lr(&db, "alert rule set --workspace ws disk_low").json();
    lr(
        &db,
        "alert rule set --workspace ws return_rate_high --threshold 12.5",
    )
    .json();
    lr(&db, "alert rule set --workspace ws source_silent --for 2h").json();
    let rules = lr(&db, "alert rule list --workspace ws").json();
    let shown: Vec<(String, Value, Value)> = rules
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap().to_string(),
                r["threshold"].clone(),
                r["for"].clone(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("disk_low".into(), "10".into(), Value::Null),
            ("return_rate_high".into(), "12.5".into(), Value::Null),
            ("source_silent".into(), Value::Null, "2h".into()),
        ]
    );
    assert_eq!(
        lr(&db, "alert rule remove --workspace ws disk_low").json()["removed"],
        true
    );
    let id = target["id"].as_str().unwrap();
    lr(&db, format!("alert target remove {id}")).json();
    lr(&db, format!("alert target remove {id}"))
        .fails_json(1)
        .stderr_contains("not_found");
    assert_eq!(lr(&db, "alert list").json(), serde_json::json!([]));
}
