//! `leadrelay demo`: the printed walk-through works when pasted into a shell. Each step's
//! command runs as printed (curl and the real binary on PATH), with only the ids a user
//! would copy from earlier answers filled in.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::receiver::{Answer, Receiver};
use crate::util::{TempDb, TestServer, fast_options, lr};

const WAIT: Duration = Duration::from_secs(20);

/// Runs `command` with `sh -c` as a user would paste it, with the binary's folder on PATH.
fn shell(command: &str) -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_leadrelay"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("the binary is in a folder").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("PATH", path)
        .env_remove("LEADRELAY_DB")
        .output()
        .expect("sh runs");
    assert!(
        output.status.success(),
        "step failed: {command}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn shell_json(command: &str) -> Value {
    let text = shell(command);
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{command} printed no JSON ({e}): {text}"))
}

fn step<'a>(demo: &'a Value, starts_with: &str) -> &'a str {
    demo["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["title"].as_str().unwrap().starts_with(starts_with))
        .unwrap_or_else(|| panic!("no step '{starts_with}'"))["command"]
        .as_str()
        .unwrap()
}

#[test]
fn the_printed_walk_through_runs_end_to_end() {
    let server = TestServer::start_with(TempDb::new(), fast_options());
    let receiver = Receiver::start();
    receiver.answer("/leads", Answer::ok().json(&json!({"externalId": "crm-1"})));
    let base = format!("http://{}", server.addr);
    let demo = lr(
        &server,
        format!(
            "demo --base-url {base} --webhook-url {}",
            &receiver.url("/leads")
        ),
    )
    .json();

    // Ingest with auto-delivery: SunCo pays most for solar and gets the lead.
    let ingested = shell_json(step(&demo, "Ingest a lead"));
    let auto = &ingested["item"]["autoDelivery"];
    assert_eq!(auto["delivered"], 1, "{ingested}");
    let delivery = &auto["requests"][0]["deliveries"][0];
    assert_eq!(delivery["buyerAccountId"], "demo-sunco");
    let sunco_txn = delivery["transactionId"].as_str().unwrap().to_string();
    let events = receiver.wait_for_on("/leads", 1, WAIT);
    assert_eq!(events[0].json()["transactionId"], sunco_txn);

    // Deliver by hand to HeatCo: the curl, then the CLI line with the copied request id.
    let manual = step(&demo, "Deliver a lead by hand");
    let (curl, rest) = manual.split_once("\n#").unwrap();
    let second = shell_json(curl);
    let lead_id = second["item"]["leadId"].as_str().unwrap().to_string();
    let request_id = second["item"]["requestIds"][0].as_str().unwrap();
    let deliver_line = rest.lines().last().unwrap().replace("LREQ_ID", request_id);
    let delivered = shell(&format!("{deliver_line} --json"));
    let heatco_txn = serde_json::from_str::<Value>(&delivered).unwrap()["transactionId"]
        .as_str()
        .unwrap()
        .to_string();
    receiver.wait_for_on("/leads", 2, WAIT);

    shell(step(&demo, "Look at what happened"));

    let acknowledged = shell_json(&step(&demo, "SunCo acknowledges").replace("TXN_ID", &sunco_txn));
    assert_eq!(
        acknowledged["item"]["status"], "acknowledged",
        "{acknowledged}"
    );
    shell(&step(&demo, "SunCo marks the payout").replace("TXN_ID", &sunco_txn));
    let paid = lr(&server, format!("transaction show {sunco_txn}")).json();
    assert_eq!(paid["status"], "paid", "{paid}");

    let cancelled =
        shell_json(&step(&demo, "HeatCo cancels").replace("HEATCO_TXN_ID", &heatco_txn));
    assert_eq!(cancelled["code"], "cancelled", "{cancelled}");
    let confirmed = shell_json(&step(&demo, "The supplier confirms").replace("LEAD_ID", &lead_id));
    assert_eq!(confirmed["code"], "cancellation_confirmed", "{confirmed}");
    assert_eq!(confirmed["outcome"], "lead_cancelled");

    let health = shell_json(step(&demo, "Check the service"));
    assert_eq!(health["status"], "ok");
}
