//! `leadrelay demo`: a sample setup in the database and copy-paste commands that walk a new
//! user through the whole flow: ingest, delivery, every lifecycle call, supplier clawback.
//!
//! It only creates records through `config`, like the other commands; it starts nothing.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::output::Output;
use crate::config::container::{ContainerKind, DeliveryMode, NewContainer};
use crate::config::source::{DedupeAction, NewSource};
use crate::config::{ConfigError, buyer, container, product, source, supplier, workspace};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the server listens, for the printed curl commands.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub base_url: String,
    /// Where the demo buyers receive `lead.delivered` events.
    #[arg(long, default_value = "http://127.0.0.1:9000/leads")]
    pub webhook_url: String,
}

/// What the demo created, with the secrets it prints once.
struct Created {
    source_secret: String,
    webhook_path: String,
    sunco_secret: String,
    heatco_secret: String,
    supplier_key: String,
}

fn create_all(conn: &rusqlite::Connection, webhook_url: &str) -> Result<Created, ConfigError> {
    workspace::create(
        conn,
        &workspace::NewWorkspace {
            id: Some("demo"),
            name: "Demo Leads",
            timezone: "UTC",
            retention: None,
            suppression_action: None,
        },
    )?;
    for (id, kind, name) in [
        ("demo-web", ContainerKind::Channel, "Demo web forms"),
        ("demo-list", ContainerKind::Table, "Demo lead list"),
    ] {
        container::create(
            conn,
            &NewContainer {
                id: Some(id),
                workspace_id: "demo",
                kind,
                name,
                auto_delivery: None,
                delivery_mode: DeliveryMode::Exclusive,
                max_buyers: 3,
                score_threshold: 40,
                ping_ttl_ms: None,
                waterfall: None,
                waterfall_max: None,
            },
        )?;
    }
    product::create(
        conn,
        &product::NewProduct {
            id: Some("demo-solar"),
            workspace_id: "demo",
            slug: "solar",
            name: "Solar panels",
            fields: vec![
                product::FieldDef::parse("roof:required=tile|flat|metal")
                    .expect("the demo's field definition is valid"),
            ],
            default_supplier_cost_cents: Some(400),
        },
    )?;
    product::create(
        conn,
        &product::NewProduct {
            id: Some("demo-heatpump"),
            workspace_id: "demo",
            slug: "heatpump",
            name: "Heat pumps",
            fields: Vec::new(),
            default_supplier_cost_cents: Some(600),
        },
    )?;
    let (_, supplier_key) = supplier::create(
        conn,
        &supplier::NewSupplier {
            id: Some("demo-supplier"),
            workspace_id: "demo",
            name: "Demo Supplier Ltd",
            key: None,
        },
    )?;
    let created_source = source::create(
        conn,
        &NewSource {
            id: Some("demo-form"),
            container_id: "demo-web",
            container_kind: ContainerKind::Channel,
            name: "Demo landing page",
            secret: Some(None),
            supplier_id: Some(&"demo-supplier".into()),
            supplier_cost_cents: Some(500),
            revenue_share_bp: None,
            dedupe_fields: None,
            dedupe_scope: None,
            dedupe_action: DedupeAction::Review,
            dedupe_window_days: 30,
            // The operator's own landing page: its answers may show the whole trace.
            result_detail: Some(source::ResultDetail::Full),
        },
    )?;
    let mut secrets = Vec::new();
    for (id, name, plan) in [
        ("demo-sunco", "SunCo", buyer::Plan::Postpaid),
        ("demo-heatco", "HeatCo", buyer::Plan::Prepaid),
    ] {
        let created = buyer::create(
            conn,
            &buyer::NewBuyer {
                id: Some(id),
                workspace_id: "demo",
                name,
                webhook_url,
                secret: Some(None),
                signing_secret: None,
                capabilities: buyer::CAPABILITIES.iter().map(|c| c.to_string()).collect(),
                cancellation_window_secs: 72 * 3600,
                auto_payout_pending: false,
                plan,
                credit_limit_cents: 0,
                return_cap_bp: None,
                return_review: buyer::ReturnReview::Auto,
            },
        )?;
        secrets.push(
            created
                .secret
                .expect("the demo buyers get a generated secret"),
        );
    }
    for (buyer_id, product_id, price_cents) in [
        ("demo-sunco", "demo-solar", 3000),
        ("demo-heatco", "demo-solar", 2500),
        ("demo-heatco", "demo-heatpump", 4000),
    ] {
        buyer::subscribe(
            conn,
            &buyer::NewSubscription {
                pricing: Default::default(),
                buyer_id: &buyer_id.into(),
                product: product_id,
                price_cents,
                daily_cap: Some(100),
                monthly_cap: None,
                priority: 0,
                filters: Vec::new(),
                schedule: None,
                require_check: None,
            },
        )?;
    }
    buyer::fund(conn, &"demo-heatco".into(), 10_000)?;
    Ok(Created {
        source_secret: created_source
            .secret
            .expect("the demo source gets a generated secret"),
        webhook_path: created_source.source.webhook_path(),
        sunco_secret: secrets[0].clone(),
        heatco_secret: secrets[1].clone(),
        supplier_key,
    })
}

pub(super) fn run(path: &Path, out: &Output, args: DemoArgs) -> anyhow::Result<ExitCode> {
    let db = super::setup::create_or_open(path)?;
    let webhook_url = args.webhook_url.clone();
    let result = db.write_blocking(move |conn| create_all(conn, &webhook_url));
    db.close();
    let created = match result {
        Err(ConfigError::AlreadyExists { .. }) => anyhow::bail!(
            "the demo exists already in {}; use a fresh database (--db {})",
            path.display(),
            fresh_path(path).display()
        ),
        other => other?,
    };
    let base = args.base_url.trim_end_matches('/');
    let steps = steps(
        base,
        &args.webhook_url,
        &created,
        &path.display().to_string(),
    );
    if out.is_json() {
        out.show(&DemoCreated {
            workspace_id: "demo",
            channel_id: "demo-web",
            table_id: "demo-list",
            source_id: "demo-form",
            webhook_path: &created.webhook_path,
            source_secret: &created.source_secret,
            buyers: [
                DemoBuyer {
                    id: "demo-sunco",
                    secret: &created.sunco_secret,
                    plan: "postpaid",
                },
                DemoBuyer {
                    id: "demo-heatco",
                    secret: &created.heatco_secret,
                    plan: "prepaid",
                },
            ],
            supplier: DemoSupplier {
                id: "demo-supplier",
                key: &created.supplier_key,
            },
            steps: steps
                .iter()
                .map(|(title, command)| DemoStep { title, command })
                .collect(),
        });
    } else {
        println!("Demo created in {} (workspace 'demo').", path.display());
        println!("Secrets below are shown once.\n");
        for (index, (title, command)) in steps.iter().enumerate() {
            println!("{}. {title}\n{command}\n", index + 1);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The host and port a webhook URL points at, for the printed receiver to listen on
/// (`http://127.0.0.1:9100/leads` → `("127.0.0.1", 9100)`).
fn listen_address(webhook_url: &str) -> (String, u16) {
    let (scheme, rest) = webhook_url
        .split_once("://")
        .unwrap_or(("http", webhook_url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    // `[::1]:9000` or `host:9000`; a colon inside the brackets is the address's own.
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, port.parse().ok()),
        _ => (authority, None),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host.to_string(), port.unwrap_or(default_port))
}

/// A shell word for `text` in single quotes (the demo's paths and URLs are plain, but a
/// path with a space must still paste).
fn quoted(text: &str) -> String {
    if text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The walk-through, as (title, shell command) pairs. The steps after the two background
/// ones run in one shell, in order: each captures the ids later steps need in a variable
/// (`LEAD_ID=$(… --get id)`), so they run as pasted, with nothing filled in by hand.
fn steps(base: &str, webhook_url: &str, created: &Created, db: &str) -> Vec<(String, String)> {
    let lr = format!("leadrelay --db {}", quoted(db));
    let (host, port) = listen_address(webhook_url);
    let receiver = format!(
        r#"python3 -c 'import http.server,json
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body=json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        print(json.dumps(body, indent=2), flush=True); self.send_response(200); self.end_headers()
        self.wfile.write(json.dumps({{"externalId": "crm-" + body["transactionId"][-6:]}}).encode())
http.server.HTTPServer(("{host}", {port}), H).serve_forever()'"#
    );
    let ingest = format!(
        "curl -s -X POST {base}{path} \\\n  -H 'Content-Type: application/json' \\\n  \
         -H 'X-Service-Webhook-Secret: {secret}' \\\n  -d '{{\"externalId\": \"demo-1\", \
         \"firstName\": \"Ada\", \"lastName\": \"Lovelace\", \"email\": \"ada@example.org\", \
         \"phone\": \"+44 20 7946 0000\", \"postalCode\": \"10115\", \"country\": \"DE\", \
         \"consentStatus\": \"granted\", \"consentCapturedAt\": \"2026-01-01T10:00:00Z\", \
         \"productSlug\": \"solar\", \"fieldValues\": {{\"roof\": \"tile\"}}, \
         \"triggerAutoDelivery\": true}}'",
        path = created.webhook_path,
        secret = created.source_secret
    );
    let manual = format!(
        "curl -s -X POST {base}{path} \\\n  -H 'Content-Type: application/json' \\\n  \
         -H 'Authorization: Bearer {secret}' \\\n  -d '{{\"externalId\": \"demo-2\", \
         \"firstName\": \"Alan\", \"lastName\": \"Turing\", \"email\": \"alan@example.org\", \
         \"productSlug\": \"heatpump\"}}'\n\
         LEAD_ID=$({lr} lead list --source demo-form --limit 1 --get 0.id)\n\
         LREQ_ID=$({lr} lead show \"$LEAD_ID\" --get requests.0.id)\n\
         HEATCO_TXN_ID=$({lr} deliver --request \"$LREQ_ID\" --buyer demo-heatco --get transactionId)\n\
         echo \"lead $LEAD_ID, request $LREQ_ID, HeatCo's transaction $HEATCO_TXN_ID\"",
        path = created.webhook_path,
        secret = created.source_secret
    );
    // The body in double quotes, so the shell puts the captured id in.
    let lifecycle = |endpoint: &str, secret: &str, body: &str| {
        format!(
            "curl -s -X POST {base}/api/webhooks/{endpoint} \\\n  \
             -H 'Content-Type: application/json' \\\n  -H 'X-Service-Webhook-Secret: {secret}' \\\n  \
             -d \"{}\"",
            body.replace('"', "\\\"")
        )
    };
    vec![
        (
            "Start the server (another terminal)".into(),
            format!("{lr} serve --listen {}", base.trim_start_matches("http://")),
        ),
        (
            format!(
                "Start a buyer webhook receiver on {host}:{port} that prints events (another terminal)"
            ),
            receiver,
        ),
        (
            "Ingest a lead with auto-delivery (SunCo pays most for solar, so it gets it)".into(),
            ingest,
        ),
        (
            "Deliver a lead by hand to the prepaid buyer HeatCo (the ids go into shell variables)"
                .into(),
            manual,
        ),
        (
            "Look at what happened, and keep SunCo's transaction id".into(),
            format!(
                "{lr} transaction list\n{lr} outbox list\n\
                 TXN_ID=$({lr} transaction list --buyer demo-sunco --limit 1 --get 0.transactionId)"
            ),
        ),
        (
            "SunCo acknowledges its transaction".into(),
            lifecycle(
                "partner-confirmation",
                &created.sunco_secret,
                r#"{"transactionId": "$TXN_ID", "status": "acknowledged"}"#,
            ),
        ),
        (
            "SunCo marks the payout pending, then paid".into(),
            format!(
                "{}\n{}",
                lifecycle(
                    "partner-payout-pending",
                    &created.sunco_secret,
                    r#"{"transactionId": "$TXN_ID"}"#
                ),
                lifecycle(
                    "partner-payout",
                    &created.sunco_secret,
                    r#"{"transactionId": "$TXN_ID"}"#
                )
            ),
        ),
        (
            "HeatCo cancels its transaction (refunds its prepaid balance; the lead's supplier \
             cancellation opens)"
                .into(),
            lifecycle(
                "partner-cancellation",
                &created.heatco_secret,
                r#"{"transactionId": "$HEATCO_TXN_ID", "reason": "customer unreachable"}"#,
            ),
        ),
        (
            "The supplier confirms the clawback".into(),
            lifecycle(
                "supplier-cancellation-confirmation",
                &created.supplier_key,
                r#"{"leadId": "$LEAD_ID", "status": "acknowledged"}"#,
            ),
        ),
        (
            "Check the service".into(),
            format!("curl -s {base}/api/health"),
        ),
    ]
}

/// A database path for another demo: in the temp directory, named with the first number
/// that names no file yet (and not `taken`, the file the demo is already in), so the advice
/// never names the file that was just refused.
fn fresh_path(taken: &Path) -> std::path::PathBuf {
    let dir = std::env::temp_dir();
    (1u32..)
        .map(|n| dir.join(format!("leadrelay-demo-{n}.db")))
        .find(|candidate| candidate != taken && !candidate.exists())
        .expect("some number names no file")
}

/// What `demo --json` prints: the records made, their secrets (shown once) and the steps.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DemoCreated<'a> {
    workspace_id: &'static str,
    channel_id: &'static str,
    table_id: &'static str,
    source_id: &'static str,
    webhook_path: &'a str,
    source_secret: &'a str,
    buyers: [DemoBuyer<'a>; 2],
    supplier: DemoSupplier<'a>,
    steps: Vec<DemoStep<'a>>,
}

#[derive(serde::Serialize)]
struct DemoBuyer<'a> {
    id: &'static str,
    secret: &'a str,
    plan: &'static str,
}

#[derive(serde::Serialize)]
struct DemoSupplier<'a> {
    id: &'static str,
    key: &'a str,
}

#[derive(serde::Serialize)]
struct DemoStep<'a> {
    title: &'a str,
    command: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receiver_listens_where_the_webhook_url_points() {
        for (url, host, port) in [
            ("http://127.0.0.1:9100/leads", "127.0.0.1", 9100),
            ("http://localhost/leads", "localhost", 80),
            ("https://hooks.example:8443", "hooks.example", 8443),
            ("http://[::1]:9000/x", "::1", 9000),
            ("https://[::1]/x", "::1", 443),
        ] {
            assert_eq!(listen_address(url), (host.to_string(), port), "{url}");
        }
    }
}
