//! The operator console on a file of a million leads (bench/console.sh runs it in release
//! mode): generates the file, starts the real `leadrelay serve` with its console, signs in
//! with an operator token and times every page over HTTP.
//!
//! The data spreads `--leads` leads over `--days` days across 10 sources and 20 buyers:
//! 55% sold (30% still delivered, 40% acknowledged, 20% paid, 10% returned), one webhook
//! event with one attempt per sale (0.2% failed, 0.1% pending), each request with an
//! auto-delivery decision naming three candidates. Configuration is made with the CLI; the
//! bulk rows are inserted with SQL in one transaction (ingest would take an hour for a
//! million leads), with the columns ingest writes, but without raw bodies and with short
//! event payloads: no page reads those.
//!
//! With `--portal 1` (bench/portal.sh) it times the buyer and supplier portal instead, on the
//! same file: one supplier owning every source, a user of it and of the buyer of a recent
//! sale.
//!
//! ```text
//! console_bench --bin target/release/leadrelay --db /tmp/console.db [--leads 1000000] [--days 120] [--runs 20] [--portal 1]
//! ```

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use leadrelay::ingest::normalize::key_hash;
use rusqlite::{Connection, params};

struct Args {
    bin: PathBuf,
    db: PathBuf,
    leads: u64,
    days: i64,
    runs: usize,
    portal: bool,
}

fn args() -> Args {
    let mut args = Args {
        bin: PathBuf::from("target/release/leadrelay"),
        db: PathBuf::from("console-bench.db"),
        leads: 1_000_000,
        days: 120,
        runs: 20,
        portal: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().expect("every flag takes a value");
        match flag.as_str() {
            "--bin" => args.bin = value.into(),
            "--db" => args.db = value.into(),
            "--leads" => args.leads = value.parse().expect("a count"),
            "--days" => args.days = value.parse().expect("a count"),
            "--runs" => args.runs = value.parse().expect("a count"),
            "--portal" => args.portal = value == "1",
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

fn cli(args: &Args, line: &[&str]) -> serde_json::Value {
    let output = Command::new(&args.bin)
        .arg("--db")
        .arg(&args.db)
        .arg("--json")
        .args(line)
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "{line:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null)
}

fn configure(args: &Args) {
    cli(
        args,
        &["workspace", "create", "--name", "Bench", "--id", "ws"],
    );
    cli(
        args,
        &[
            "channel",
            "create",
            "--workspace",
            "ws",
            "--name",
            "Web",
            "--id",
            "web",
        ],
    );
    cli(
        args,
        &[
            "product",
            "create",
            "--workspace",
            "ws",
            "--slug",
            "solar",
            "--name",
            "Solar",
            "--id",
            "solar",
        ],
    );
    for s in 0..10 {
        let id = format!("src{s}");
        cli(
            args,
            &[
                "source",
                "create",
                "--channel",
                "web",
                "--name",
                &id,
                "--id",
                &id,
                "--no-secret",
                "--supplier-cost",
                "4",
            ],
        );
    }
    for b in 0..20 {
        let id = format!("b{b}");
        let url = format!("http://127.0.0.1:9/{id}");
        cli(
            args,
            &[
                "buyer",
                "create",
                "--workspace",
                "ws",
                "--name",
                &id,
                "--id",
                &id,
                "--webhook-url",
                &url,
            ],
        );
        let price = format!("{}", 25 + b % 15);
        cli(
            args,
            &[
                "buyer",
                "subscribe",
                &id,
                "--product",
                "solar",
                "--price",
                &price,
                "--daily-cap",
                "500",
            ],
        );
    }
}

/// A ULID-style id with the given time, as `ids::new` makes them.
fn id(prefix: &str, ms: i64, n: u64) -> String {
    format!(
        "{prefix}_{}",
        ulid::Ulid::from_parts(ms as u64, u128::from(n) * 0x9E37_79B9_7F4A_7C15)
    )
}

/// Id `text` as a file of schema `version` stores it: lead and lead-request ids as their
/// 16 bytes from migration 20 on (`leadrelay::ids::LeadId`), as text before, so the
/// generator fills a file made by an older binary too.
fn stored_id(version: i64, prefix: &str, text: &str) -> rusqlite::types::Value {
    if version >= 20 {
        match prefix {
            "lead" => leadrelay::ids::LeadId::parse(text).map(Into::into),
            _ => leadrelay::ids::LeadRequestId::parse(text).map(Into::into),
        }
        .expect("the generator makes our ids in their canonical text")
    } else {
        text.to_string().into()
    }
}

fn generate(args: &Args) -> (String, String) {
    let mut conn = Connection::open(&args.db).expect("the file opens");
    conn.pragma_update(None, "synchronous", "OFF").unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let tx = conn.transaction().unwrap();
    let now = jiff::Timestamp::now().as_millisecond();
    let span = args.days * 86_400_000;
    let step = span / args.leads as i64;
    let mut lead = tx
        .prepare(
            "INSERT INTO leads (id, source_id, container_id, workspace_id, external_id,
                first_name, last_name, email, phone, street, house_number, postal_code, city,
                country, consent_status, consent_captured_at, additional, email_key,
                phone_key, quality_status, quality_reasons, duplicate_status, status,
                created_at)
             VALUES (?1, ?2, 'web', 'ws', ?3, ?4, 'Lee', ?5, ?6, 'Hauptstr.', '1', '10115',
                'Berlin', 'DE', 'granted', '2025-01-06T10:00:00Z', '{}', ?7, ?8, ?9, ?10, ?11,
                'active', ?12)",
        )
        .unwrap();
    let mut request = tx
        .prepare(
            "INSERT INTO lead_requests (id, lead_id, position, product_id, routing_ready,
                trigger_auto_delivery, field_values, status, decision, created_at)
             VALUES (?1, ?2, 0, 'solar', 1, 1, '{}', ?3, ?4, ?5)",
        )
        .unwrap();
    let mut transaction = tx
        .prepare(
            "INSERT INTO transactions (id, lead_request_id, lead_id, buyer_id, product_id,
                workspace_id, delivery_mode, buyer_price_cents, supplier_cost_cents,
                margin_cents, status, delivery_status, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'solar', 'ws', 'exclusive', ?5, 400, ?6, ?7, ?8, ?9, ?9)",
        )
        .unwrap();
    let mut history = tx
        .prepare(
            "INSERT INTO transaction_history (transaction_id, from_status, to_status, actor,
                at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .unwrap();
    let mut event = tx
        .prepare(
            "INSERT INTO outbox_events (id, transaction_id, buyer_id, url, payload, status,
                attempts, next_attempt_at, last_error, created_at, delivered_at)
             VALUES (?1, ?2, ?3, 'http://127.0.0.1:9/', '{}', ?4, 1, ?5, ?6, ?5, ?7)",
        )
        .unwrap();
    let mut attempt = tx
        .prepare(
            "INSERT INTO outbox_attempts (event_id, attempt, url, started_at, duration_ms,
                http_status, error, response_excerpt, outcome)
             VALUES (?1, 1, 'http://127.0.0.1:9/', ?2, 120, ?3, ?4, ?5, ?6)",
        )
        .unwrap();
    let mut sample_sold = String::new();
    let started = Instant::now();
    for i in 0..args.leads {
        let at = now - span + i as i64 * step;
        let lead_id = id("lead", at, i);
        let request_id = id("lreq", at, i);
        let quality = match i % 100 {
            0..=84 => "ok",
            85..=96 => "suspect",
            _ => "invalid",
        };
        let duplicate = if i % 20 == 7 { "review" } else { "unique" };
        let sold = quality != "invalid" && duplicate == "unique" && i % 20 < 12;
        let buyer = format!("b{}", i % 20);
        let email = format!("user{i}@example.com");
        let phone_digits = format!("4930{i:07}");
        lead.execute(params![
            stored_id(version, "lead", &lead_id),
            format!("src{}", i % 10),
            format!("ext-{i}"),
            format!("Ann{}", i % 1000),
            email,
            format!("+49 30 {i:07}"),
            key_hash(&email),
            key_hash(&phone_digits),
            quality,
            if quality == "ok" {
                "[]"
            } else {
                "[\"placeholder_name\"]"
            },
            duplicate,
            at,
        ])
        .unwrap();
        let decision = format!(
            "{{\"requestId\":\"{request_id}\",\"outcome\":\"{}\",\"reason\":\"{}\",\
             \"evaluation\":{{\"model\":\"leadrelay-logistic-v1\",\"score\":91,\"threshold\":50,\
             \"passed\":true,\"factors\":[{{\"name\":\"validEmail\",\"value\":1,\"contribution\":1.5}},\
             {{\"name\":\"validPhone\",\"value\":1,\"contribution\":1.5}},\
             {{\"name\":\"names\",\"value\":1,\"contribution\":0.5}}]}},\
             \"candidates\":[{{\"buyerAccountId\":\"{buyer}\",\"eligible\":true,\"reason\":\"selected\"}},\
             {{\"buyerAccountId\":\"b19\",\"eligible\":false,\"reason\":\"filter_mismatch\"}},\
             {{\"buyerAccountId\":\"b18\",\"eligible\":false,\"reason\":\"daily_cap_reached\"}}],\
             \"decidedAt\":\"2026-01-01T00:00:00.000Z\"}}",
            if sold { "delivered" } else { "not_delivered" },
            if sold {
                "delivered"
            } else {
                "no_eligible_buyer"
            },
        );
        request
            .execute(params![
                stored_id(version, "lreq", &request_id),
                stored_id(version, "lead", &lead_id),
                if sold { "delivered" } else { "not_delivered" },
                decision,
                at
            ])
            .unwrap();
        if !sold {
            continue;
        }
        let txn_id = id("txn", at, i);
        let status = match i % 10 {
            0..=2 => "delivered",
            3..=6 => "acknowledged",
            7 | 8 => "paid",
            _ => {
                if i % 30 == 9 {
                    "cancelled"
                } else {
                    "rejected"
                }
            }
        };
        let price = 2500 + (i % 15) as i64 * 100;
        let event_status = match i % 1000 {
            0 | 1 => "failed",
            2 => "pending",
            _ => "delivered",
        };
        transaction
            .execute(params![
                txn_id,
                stored_id(version, "lreq", &request_id),
                stored_id(version, "lead", &lead_id),
                buyer,
                price,
                price - 400,
                status,
                if event_status == "delivered" {
                    "sent"
                } else {
                    event_status
                },
                at
            ])
            .unwrap();
        history
            .execute(params![
                txn_id,
                None::<String>,
                "delivered",
                "auto-delivery",
                at
            ])
            .unwrap();
        if status != "delivered" {
            history
                .execute(params![
                    txn_id,
                    "delivered",
                    status,
                    format!("buyer:{buyer}"),
                    at + 3_600_000
                ])
                .unwrap();
        }
        let event_id = id("evt", at, i);
        let error = (event_status != "delivered").then_some("HTTP 503 from the buyer");
        event
            .execute(params![
                event_id,
                txn_id,
                buyer,
                event_status,
                at,
                error,
                (event_status == "delivered").then_some(at + 150)
            ])
            .unwrap();
        attempt
            .execute(params![
                event_id,
                at,
                if error.is_some() { 503 } else { 200 },
                error,
                if error.is_some() {
                    "<h1>busy</h1>"
                } else {
                    "{\"ok\":true}"
                },
                if event_status == "delivered" {
                    "delivered"
                } else if event_status == "failed" {
                    "failed"
                } else {
                    "retry"
                },
            ])
            .unwrap();
        if status == "acknowledged" && i > args.leads / 2 {
            sample_sold.clone_from(&lead_id);
        }
        if i % 100_000 == 0 && i > 0 {
            eprintln!("  {i} leads, {:.0} s", started.elapsed().as_secs_f64());
        }
    }
    drop((lead, request, transaction, history, event, attempt));
    fill_report_buckets(&tx);
    tx.commit().unwrap();
    // No ANALYZE: a served file has no statistics either, so the plans are the ones users get.
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    (sample_sold, format!("user{}@example.com", args.leads / 3))
}

/// The report aggregate (`report_buckets`) of the rows inserted above, as the writer would
/// have kept it: the recount of migration 15, plus one lead per source and hour that
/// failed validation (counted, never stored), so the sources page has rejects to show.
fn fill_report_buckets(conn: &Connection) {
    conn.execute_batch(
        "DELETE FROM report_buckets;
         INSERT INTO report_buckets (workspace_id, bucket, source_id, buyer_id, product_id,
             received, accepted, duplicates)
         SELECT l.workspace_id, (l.created_at / 900000) * 900000, l.source_id, '', 'solar',
                count(*), sum(l.duplicate_status = 'unique'), sum(l.duplicate_status <> 'unique')
         FROM leads l GROUP BY 1, 2, 3;
         INSERT INTO report_buckets (workspace_id, bucket, source_id, buyer_id, product_id,
             sold, acknowledged, returned, paid, revenue_cents, supplier_cost_cents)
         SELECT t.workspace_id, (t.created_at / 900000) * 900000, l.source_id, t.buyer_id,
                t.product_id, count(*),
                sum(t.status IN ('acknowledged', 'payout_pending', 'paid')),
                sum(t.status IN ('rejected', 'cancelled')), sum(t.status = 'paid'),
                sum(CASE WHEN t.status IN ('rejected', 'cancelled') THEN 0
                    ELSE t.buyer_price_cents END),
                sum(CASE WHEN t.status IN ('rejected', 'cancelled') THEN 0
                    ELSE t.supplier_cost_cents END)
         FROM transactions t JOIN leads l ON l.id = t.lead_id GROUP BY 1, 2, 3, 4, 5;
         UPDATE report_buckets SET received = received + 1, rejected = rejected + 1,
             dropped = dropped + 1
         WHERE buyer_id = '' AND bucket % 3600000 = 0;",
    )
    .expect("the aggregate is filled");
    // Its roll-up per UTC day (migration 19), when the binary's schema has it.
    if has_table(conn, "report_days") {
        conn.execute_batch(
            "DELETE FROM report_days;
             INSERT INTO report_days (workspace_id, day, source_id, buyer_id, product_id,
                 received, accepted, duplicates, rejected, dropped, sold, acknowledged,
                 returned, paid, revenue_cents, supplier_cost_cents)
             SELECT workspace_id, (bucket / 86400000) * 86400000, source_id, buyer_id,
                    product_id, sum(received), sum(accepted), sum(duplicates), sum(rejected),
                    sum(dropped), sum(sold), sum(acknowledged), sum(returned), sum(paid),
                    sum(revenue_cents), sum(supplier_cost_cents)
             FROM report_buckets GROUP BY 1, 2, 3, 4, 5;",
        )
        .expect("the roll-up is filled");
    }
}

fn has_table(conn: &Connection, name: &str) -> bool {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        > 0
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `leadrelay serve` with the console (or, with `portal`, only the portal) on port 0; the
/// second listener's base URL.
fn serve(args: &Args, portal: bool) -> (Server, String) {
    let listeners: &[&str] = if portal {
        &["--console-listen", "off", "--portal-listen", "127.0.0.1:0"]
    } else {
        &["--console-listen", "127.0.0.1:0", "--portal-listen", "off"]
    };
    let mut child = Command::new(&args.bin)
        .arg("--db")
        .arg(&args.db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(listeners)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let console = line
        .split("http://")
        .nth(1)
        .expect("the console's or the portal's address")
        .trim();
    (Server(child), format!("http://{console}"))
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(60)))
            .build(),
    )
}

/// Milliseconds of each of `runs` GETs of `path` (after one untimed warm-up).
fn time_page(agent: &ureq::Agent, base: &str, path: &str, cookie: &str, runs: usize) -> Vec<f64> {
    let get = || {
        let started = Instant::now();
        let mut response = agent
            .get(&format!("{base}{path}"))
            .header("Cookie", cookie)
            .call()
            .expect("the console answers");
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().expect("a body");
        assert!(status == 200, "{path}: {status} {body}");
        started.elapsed().as_secs_f64() * 1000.0
    };
    get();
    let mut times: Vec<f64> = (0..runs).map(|_| get()).collect();
    times.sort_by(f64::total_cmp);
    times
}

/// The table's heading: what is timed on what file.
fn heading(args: &Args, what: &str, size: u64) {
    println!(
        "{what} pages on {} leads over {} days ({:.0} MiB file), {} runs each, ms:",
        args.leads,
        args.days,
        size as f64 / 1048576.0,
        args.runs
    );
    println!(
        "{:<42} {:>8} {:>8} {:>8} {:>8}",
        "page", "median", "p90", "p99", "max"
    );
}

/// Signs in at `base` with `token`; the session's `Cookie` value.
fn login(agent: &ureq::Agent, base: &str, token: &str) -> String {
    let login = agent
        .post(&format!("{base}/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send(format!("token={token}"))
        .expect("login answers");
    login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_string()
}

/// Times `pages` (name, path) at `base` with `cookie`, one line each.
fn time_pages(
    agent: &ureq::Agent,
    base: &str,
    cookie: &str,
    runs: usize,
    pages: &[(String, String)],
) {
    for (name, path) in pages {
        let times = time_page(agent, base, path, cookie, runs);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        println!(
            "{name:<42} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0)
        );
    }
}

/// The portal's pages: the buyer of `lead`'s sale and a supplier owning every source.
fn portal(args: &Args, lead: &str, email: &str, size: u64) {
    let conn = Connection::open(&args.db).expect("the file opens");
    let (txn, buyer): (String, String) = conn
        .query_row(
            "SELECT id, buyer_id FROM transactions WHERE lead_id = ?1 LIMIT 1",
            [lead.parse::<leadrelay::ids::LeadId>().expect("a lead id")],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the lead was sold");
    drop(conn);
    // A rerun on a kept file finds the supplier made already.
    let _ = Command::new(&args.bin)
        .arg("--db")
        .arg(&args.db)
        .args([
            "supplier",
            "create",
            "--workspace",
            "ws",
            "--name",
            "Bench supplier",
            "--id",
            "sup",
        ])
        .output();
    for s in 0..10 {
        cli(
            args,
            &["source", "update", &format!("src{s}"), "--supplier", "sup"],
        );
    }
    let token = |side: &str, id: &str| {
        cli(args, &[side, "user", "create", id, "--name", "bench"])["token"]
            .as_str()
            .expect("a token")
            .to_string()
    };
    let (buyer_token, supplier_token) = (token("buyer", &buyer), token("supplier", "sup"));
    let (_server, base) = serve(args, true);
    let agent = agent();
    heading(args, "portal", size);
    let month = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("%Y-%m")
        .to_string();
    let cookie = login(&agent, &base, &buyer_token);
    let buyer_pages: Vec<(String, String)> = [
        ("buyer /", "/".to_string()),
        ("buyer /leads", "/leads".into()),
        ("buyer /leads?status=paid", "/leads?status=paid".into()),
        (
            "buyer /leads?q=<email>",
            format!("/leads?q={}", email.replace('@', "%40")),
        ),
        ("buyer /leads?q=<name, none>", "/leads?q=Nobody".into()),
        ("buyer /leads?q=<transaction id>", format!("/leads?q={txn}")),
        ("buyer /leads/{transactionId}", format!("/leads/{txn}")),
        ("buyer /leads.csv", "/leads.csv".into()),
        ("buyer /account", "/account".into()),
        (
            "buyer /statement.csv",
            format!("/statement.csv?month={month}"),
        ),
        ("buyer /delivery", "/delivery".into()),
    ]
    .into_iter()
    .map(|(name, path)| (name.to_string(), path))
    .collect();
    time_pages(&agent, &base, &cookie, args.runs, &buyer_pages);
    let cookie = login(&agent, &base, &supplier_token);
    let supplier_pages: Vec<(String, String)> = [
        ("supplier /", "/".to_string()),
        ("supplier /leads", "/leads".into()),
        ("supplier /leads/{leadId}", format!("/leads/{lead}")),
        ("supplier /payouts", "/payouts".into()),
        (
            "supplier /statement.csv",
            format!("/statement.csv?month={month}"),
        ),
        ("supplier /sources", "/sources".into()),
        ("supplier /sources/{id}/docs", "/sources/src0/docs".into()),
    ]
    .into_iter()
    .map(|(name, path)| (name.to_string(), path))
    .collect();
    time_pages(&agent, &base, &cookie, args.runs, &supplier_pages);
}

fn main() {
    let args = args();
    if args.db.exists() {
        eprintln!("using the existing {}", args.db.display());
    } else {
        // Only `init` (and serve, demo) creates a database file.
        cli(&args, &["init"]);
        configure(&args);
    }
    let started = Instant::now();
    let (lead, email) = generate_if_empty(&args);
    eprintln!("data ready in {:.0} s", started.elapsed().as_secs_f64());
    let size = std::fs::metadata(&args.db).map(|m| m.len()).unwrap_or(0);
    if args.portal {
        portal(&args, &lead, &email, size);
        return;
    }
    let token = cli(&args, &["operator", "create", "--name", "bench"])["token"]
        .as_str()
        .expect("a token")
        .to_string();
    let (_server, base) = serve(&args, false);
    let agent = agent();
    let cookie = login(&agent, &base, &token);
    heading(&args, "console", size);
    let search = |q: &str| {
        format!(
            "/leads?q={}",
            q.replace('@', "%40").replace('+', "%2B").replace(' ', "+")
        )
    };
    // The workspace is in UTC: its dates are UTC dates.
    let date_ago = |days: i64| {
        jiff::Timestamp::now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date()
            .checked_sub(jiff::Span::new().days(days))
            .expect("a date in range")
    };
    let (month_ago, days_ago) = (date_ago(29), date_ago(args.days - 1));
    let pages = [
        (
            "/login (baseline: no data)".to_string(),
            "/login".to_string(),
        ),
        ("/".into(), "/".into()),
        ("/leads".into(), "/leads".into()),
        ("/leads?q=<email>".into(), search(&email)),
        ("/leads?q=<phone>".into(), search("+49 30 0333333")),
        ("/leads?q=<external id>".into(), search("ext-777777")),
        ("/leads?q=<lead id>".into(), search(&lead)),
        (
            "/leads/{id} (sold, with events)".into(),
            format!("/leads/{lead}"),
        ),
        ("/buyers".into(), "/buyers".into()),
        ("/sources".into(), "/sources".into()),
        ("/outbox".into(), "/outbox".into()),
        ("/reports (7 days by day)".into(), "/reports".into()),
        (
            "/reports (30 days by source, buyer)".into(),
            format!("/reports?from={month_ago}&by=source&by=buyer"),
        ),
        (
            "/reports (120 days by week, product)".into(),
            format!("/reports?from={days_ago}&by=week&by=product"),
        ),
        (
            "/reports.csv (30 days by day, buyer)".into(),
            format!("/reports.csv?from={month_ago}&by=day&by=buyer"),
        ),
    ];
    time_pages(&agent, &base, &cookie, args.runs, &pages);
    compare_overview_reads(&args);
}

/// The overview's figures over time (30 local days of sales, revenue, margin and returns,
/// 48 hours of leads) read two ways on the file itself, without the server: counting the
/// leads and transactions (`leads_created`, `transactions_status_created`) as the overview
/// did before the report aggregate, and summing the aggregate (`report_buckets`, one range
/// per workspace) as it does now. Prints the median and p90 ms of each, and checks that
/// both find the same sales and revenue.
fn compare_overview_reads(args: &Args) {
    const DAY: i64 = 86_400_000;
    const HOUR: i64 = 3_600_000;
    let conn = Connection::open(&args.db).expect("the file opens");
    let now = jiff::Timestamp::now().as_millisecond();
    // The bench's workspace is in UTC.
    let today = now.div_euclid(DAY) * DAY;
    let first_hour = now.div_euclid(HOUR) * HOUR - 47 * HOUR;
    let statuses = [
        "delivered",
        "acknowledged",
        "payout_pending",
        "paid",
        "rejected",
        "cancelled",
    ];
    let counted = || -> (i64, i64, i64) {
        let mut per_status = conn
            .prepare_cached(
                "SELECT count(*), coalesce(sum(buyer_price_cents), 0), coalesce(sum(margin_cents), 0)
                 FROM transactions WHERE status = ?1 AND created_at >= ?2 AND created_at < ?3",
            )
            .unwrap();
        let mut received = conn
            .prepare_cached("SELECT count(*) FROM leads WHERE created_at >= ?1 AND created_at < ?2")
            .unwrap();
        let (mut sold, mut revenue, mut leads) = (0, 0, 0);
        for back in 0..30 {
            let start = today - back * DAY;
            for status in statuses {
                let (count, price, _margin): (i64, i64, i64) = per_status
                    .query_row(params![status, start, start + DAY], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                    .unwrap();
                sold += count;
                if status != "rejected" && status != "cancelled" {
                    revenue += price;
                }
            }
            if back <= 1 {
                leads += received
                    .query_row(params![start, start + DAY], |r| r.get::<_, i64>(0))
                    .unwrap();
            }
        }
        for h in 0..48 {
            let start = first_hour + h * HOUR;
            leads += received
                .query_row(params![start, start + HOUR], |r| r.get::<_, i64>(0))
                .unwrap();
        }
        (sold, revenue, leads)
    };
    let aggregate = || -> (i64, i64, i64) {
        let mut buckets = conn
            .prepare_cached(
                "SELECT bucket, sum(received), sum(sold), sum(returned), sum(revenue_cents),
                        sum(supplier_cost_cents)
                 FROM report_buckets
                 WHERE workspace_id IN (SELECT id FROM workspaces) AND bucket >= ?1
                   AND bucket < ?2
                 GROUP BY bucket",
            )
            .unwrap();
        let (mut sold, mut revenue, mut leads) = (0, 0, 0);
        let mut rows = buckets
            .query(params![today - 29 * DAY, today + DAY])
            .unwrap();
        while let Some(row) = rows.next().unwrap() {
            let bucket: i64 = row.get(0).unwrap();
            let received: i64 = row.get(1).unwrap();
            sold += row.get::<_, i64>(2).unwrap();
            revenue += row.get::<_, i64>(4).unwrap();
            if bucket >= today - DAY || bucket >= first_hour {
                leads += received;
            }
        }
        (sold, revenue, leads)
    };
    // What the overview reads now (`report::totals_between`): the workspace is in UTC, so
    // each local day is one day of `report_days`.
    let days = || -> (i64, i64, i64) {
        let mut per_day = conn
            .prepare_cached(
                "SELECT sum(sold), sum(revenue_cents), sum(supplier_cost_cents)
                 FROM report_days
                 WHERE workspace_id IN (SELECT id FROM workspaces) AND day >= ?1 AND day < ?2",
            )
            .unwrap();
        let (mut sold, mut revenue) = (0, 0);
        for back in 0..30 {
            let start = today - back * DAY;
            let (s, r): (Option<i64>, Option<i64>) = per_day
                .query_row(params![start, start + DAY], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap();
            sold += s.unwrap_or(0);
            revenue += r.unwrap_or(0);
        }
        (sold, revenue, 0)
    };
    let time = |read: &dyn Fn() -> (i64, i64, i64)| -> (Vec<f64>, (i64, i64, i64)) {
        let found = read();
        let mut times: Vec<f64> = (0..args.runs)
            .map(|_| {
                let started = Instant::now();
                read();
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        (times, found)
    };
    let (counting, by_count) = time(&counted);
    let (summing, by_sum) = time(&aggregate);
    assert_eq!(
        (by_count.0, by_count.1),
        (by_sum.0, by_sum.1),
        "both reads find the same sales and revenue"
    );
    let mut reads = vec![
        ("counting leads and transactions", counting),
        ("summing report_buckets", summing),
    ];
    if has_table(&conn, "report_days") {
        let (per_day, by_day) = time(&days);
        assert_eq!(
            (by_count.0, by_count.1),
            (by_day.0, by_day.1),
            "the days find the same sales and revenue"
        );
        reads.push(("summing report_days per day (sales only)", per_day));
    }
    println!("overview figures read in-process ({} runs), ms:", args.runs);
    for (name, times) in reads {
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        println!(
            "{name:<42} {:>8.1} {:>8.1} {:>8.1}",
            at(0.5),
            at(0.9),
            at(1.0)
        );
    }
}

/// Generates the data unless the file already holds leads (a rerun on the same file).
fn generate_if_empty(args: &Args) -> (String, String) {
    let conn = Connection::open(&args.db).expect("the file opens");
    let count: i64 = conn
        .query_row("SELECT count(*) FROM leads", [], |r| r.get(0))
        .unwrap();
    if count == 0 {
        drop(conn);
        return generate(args);
    }
    // A file generated before the bench filled the aggregate.
    let buckets: i64 = conn
        .query_row("SELECT count(*) FROM report_buckets", [], |r| r.get(0))
        .unwrap();
    if buckets == 0 {
        fill_report_buckets(&conn);
    }
    let lead: String = conn
        .query_row(
            "SELECT lead_id FROM transactions WHERE status = 'acknowledged' ORDER BY created_at DESC LIMIT 1",
            [],
            |r| r.get::<_, leadrelay::ids::LeadId>(0).map(|id| id.to_string()),
        )
        .unwrap();
    (lead, format!("user{}@example.com", count / 3))
}
