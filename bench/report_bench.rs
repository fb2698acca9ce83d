//! Reports and exports on a large file (bench/report.sh runs it in release mode).
//!
//! `--mode report` generates a file of `--leads` leads and `--transactions` transactions
//! over `--days` days, then times the real `leadrelay report` for the last 30 days by day
//! and by buyer, against a baseline measured in the same run on the same file: the same
//! figures recounted from the lead and transaction rows, which is what a report without
//! the aggregate would have to read. `--mode export` generates a file and measures the
//! peak resident memory (the kernel's `ru_maxrss` of the child) of `leadrelay lead export`
//! and `transaction export` of every row, against the same exports of the first day only.
//!
//! The configuration is made with the CLI; the bulk rows are inserted with SQL in one
//! transaction per 100,000 leads (ingest would take hours for ten million leads), with the
//! columns ingest writes but without raw bodies and duplicate keys (no report reads them).
//! The aggregate rows are the ones the writer's hooks would have written: each lead counts
//! on its quarter hour under its source and product, each transaction under its lead's
//! source, its buyer and product, in its state; `check` on a small generated file confirms
//! that they equal its recount.
//!
//! ```text
//! report_bench --bin target/release/leadrelay --db /tmp/report.db --mode report \
//!     [--leads 10000000] [--transactions 2000000] [--days 180] [--runs 5] [--reuse yes]
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

struct Args {
    bin: PathBuf,
    db: PathBuf,
    mode: String,
    leads: u64,
    transactions: u64,
    days: i64,
    runs: usize,
    /// Measure an already generated `--db` again (after a change to the binary) instead of
    /// generating it.
    reuse: bool,
}

fn args() -> Args {
    let mut args = Args {
        bin: PathBuf::from("target/release/leadrelay"),
        db: PathBuf::from("report-bench.db"),
        mode: "report".into(),
        leads: 10_000_000,
        transactions: 2_000_000,
        days: 180,
        runs: 5,
        reuse: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().expect("every flag takes a value");
        match flag.as_str() {
            "--bin" => args.bin = value.into(),
            "--db" => args.db = value.into(),
            "--mode" => args.mode = value,
            "--leads" => args.leads = value.parse().expect("a count"),
            "--transactions" => args.transactions = value.parse().expect("a count"),
            "--days" => args.days = value.parse().expect("a count"),
            "--runs" => args.runs = value.parse().expect("a count"),
            "--reuse" => args.reuse = value == "yes",
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

fn cli(args: &Args, line: &[&str]) -> Vec<u8> {
    let output = Command::new(&args.bin)
        .arg("--db")
        .arg(&args.db)
        .args(line)
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "{line:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

const SOURCES: u64 = 20;
const BUYERS: u64 = 50;
const PRODUCTS: u64 = 5;

fn configure(args: &Args) {
    cli(args, &["init"]);
    cli(
        args,
        &[
            "workspace",
            "create",
            "--name",
            "Bench",
            "--id",
            "ws",
            "--timezone",
            "Europe/Berlin",
        ],
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
    for p in 0..PRODUCTS {
        let id = format!("p{p}");
        cli(
            args,
            &[
                "product",
                "create",
                "--workspace",
                "ws",
                "--slug",
                &id,
                "--name",
                &id,
                "--id",
                &id,
            ],
        );
    }
    for s in 0..SOURCES {
        let id = format!("s{s}");
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
    for b in 0..BUYERS {
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
/// 16 bytes from migration 20 on (`leadrelay::ids::LeadId`), as text before.
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

/// The counters of one aggregate row, in the table's column order from `received`.
type Counts = [i64; 11];

/// Writes the aggregate rows of one quarter hour.
fn flush(conn: &Connection, bucket: i64, rows: &mut BTreeMap<(String, String, String), Counts>) {
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO report_buckets (workspace_id, bucket, source_id, buyer_id, product_id,
                received, accepted, duplicates, rejected, dropped, sold, acknowledged,
                returned, paid, revenue_cents, supplier_cost_cents)
             VALUES ('ws', ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )
        .unwrap();
    for ((source, buyer, product), c) in std::mem::take(rows) {
        insert
            .execute(params![
                bucket, source, buyer, product, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
                c[8], c[9], c[10]
            ])
            .unwrap();
    }
}

fn generate(args: &Args) {
    configure(args);
    let mut conn = Connection::open(&args.db).expect("the file opens");
    // A bulk load: no journal, a large page cache, and the secondary indexes of the three
    // big tables made once at the end (CREATE INDEX sorts; a key inserted row by row
    // into a large B-tree costs a random page read, which made 6M leads take 18 minutes).
    // The file ends with the same schema.
    conn.pragma_update(None, "journal_mode", "OFF").unwrap();
    conn.pragma_update(None, "synchronous", "OFF").unwrap();
    conn.pragma_update(None, "cache_size", -262_144).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let indexes: Vec<(String, String)> = conn
        .prepare(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL
             AND tbl_name IN ('leads', 'lead_requests', 'transactions')",
        )
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (name, _) in &indexes {
        conn.execute_batch(&format!("DROP INDEX {name}")).unwrap();
    }
    let now = jiff::Timestamp::now().as_millisecond();
    let span = args.days * 86_400_000;
    let step = span / args.leads as i64;
    // Every `sell_every`th lead is sold once.
    let sell_every = (args.leads / args.transactions.max(1)).max(1);
    let started = Instant::now();
    let mut bucket = i64::MIN;
    let mut rows = BTreeMap::new();
    let mut i = 0;
    while i < args.leads {
        let tx = conn.transaction().unwrap();
        {
            let mut lead = tx
                .prepare_cached(
                    "INSERT INTO leads (id, source_id, container_id, workspace_id, external_id,
                        first_name, last_name, email, phone, postal_code, country,
                        consent_status, additional, quality_status, quality_reasons,
                        duplicate_status, status, created_at)
                     VALUES (?1, ?2, 'web', 'ws', ?3, ?4, 'Lee', ?5, ?6, '10115', 'DE',
                        'granted', '{}', 'ok', '[]', ?7, 'active', ?8)",
                )
                .unwrap();
            let mut request = tx
                .prepare_cached(
                    "INSERT INTO lead_requests (id, lead_id, position, product_id,
                        routing_ready, trigger_auto_delivery, field_values, status, created_at)
                     VALUES (?1, ?2, 0, ?3, 1, 1, '{}', ?4, ?5)",
                )
                .unwrap();
            let mut transaction = tx
                .prepare_cached(
                    "INSERT INTO transactions (id, lead_request_id, lead_id, buyer_id,
                        product_id, workspace_id, delivery_mode, buyer_price_cents,
                        supplier_cost_cents, margin_cents, status, delivery_status,
                        created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'ws', 'exclusive', ?6, 400, ?7, ?8, 'sent',
                        ?9, ?9)",
                )
                .unwrap();
            let end = (i + 100_000).min(args.leads);
            while i < end {
                let at = now - span + i as i64 * step;
                let this_bucket = at.div_euclid(900_000) * 900_000;
                if this_bucket != bucket {
                    if bucket != i64::MIN {
                        flush(&tx, bucket, &mut rows);
                    }
                    bucket = this_bucket;
                }
                let lead_id = id("lead", at, i);
                let request_id = id("lreq", at, i);
                let source = format!("s{}", i % SOURCES);
                let product = format!("p{}", (i / 7) % PRODUCTS);
                let duplicate = if i % 20 == 7 { "review" } else { "unique" };
                let sold = i % sell_every == 0;
                lead.execute(params![
                    stored_id(version, "lead", &lead_id),
                    source,
                    format!("ext-{i}"),
                    format!("Ann{}", i % 1000),
                    format!("user{i}@example.com"),
                    format!("+49 30 {i:07}"),
                    duplicate,
                    at,
                ])
                .unwrap();
                request
                    .execute(params![
                        stored_id(version, "lreq", &request_id),
                        stored_id(version, "lead", &lead_id),
                        product,
                        if sold { "delivered" } else { "open" },
                        at
                    ])
                    .unwrap();
                let counts = rows
                    .entry((source.clone(), String::new(), product.clone()))
                    .or_insert([0; 11]);
                counts[0] += 1;
                counts[if duplicate == "unique" { 1 } else { 2 }] += 1;
                if sold {
                    let buyer = format!("b{}", (i / sell_every) % BUYERS);
                    let status = match (i / sell_every) % 10 {
                        0..=2 => "delivered",
                        3..=5 => "acknowledged",
                        6 => "payout_pending",
                        7 => "paid",
                        8 => "rejected",
                        _ => "cancelled",
                    };
                    let price = 2500 + (i % 15) as i64 * 100;
                    transaction
                        .execute(params![
                            id("txn", at, i),
                            stored_id(version, "lreq", &request_id),
                            stored_id(version, "lead", &lead_id),
                            buyer,
                            product,
                            price,
                            price - 400,
                            status,
                            at
                        ])
                        .unwrap();
                    let counts = rows.entry((source, buyer, product)).or_insert([0; 11]);
                    let returned = matches!(status, "rejected" | "cancelled");
                    counts[5] += 1;
                    counts[6] +=
                        i64::from(matches!(status, "acknowledged" | "payout_pending" | "paid"));
                    counts[7] += i64::from(returned);
                    counts[8] += i64::from(status == "paid");
                    if !returned {
                        counts[9] += price;
                        counts[10] += 400;
                    }
                }
                i += 1;
            }
        }
        tx.commit().unwrap();
        if i % 1_000_000 == 0 {
            eprintln!("  {i} leads, {:.0} s", started.elapsed().as_secs_f64());
        }
    }
    flush(&conn, bucket, &mut rows);
    let indexed = Instant::now();
    for (_, sql) in &indexes {
        conn.execute_batch(sql).unwrap();
    }
    eprintln!(
        "  {} indexes made in {:.0} s",
        indexes.len(),
        indexed.elapsed().as_secs_f64()
    );
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    eprintln!(
        "generated {} leads in {:.0} s",
        args.leads,
        started.elapsed().as_secs_f64()
    );
}

/// The median of `runs` timings of `run`.
fn median(runs: usize, mut run: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The local dates of the last 30 days, in the workspace's zone.
fn last_30_days() -> (String, String) {
    let tz = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let today = jiff::Timestamp::now().to_zoned(tz).date();
    let from = today.checked_sub(jiff::Span::new().days(29)).unwrap();
    (from.to_string(), today.to_string())
}

fn report(args: &Args) {
    if !args.reuse {
        generate(args);
    }
    let (from, to) = last_30_days();
    let size = std::fs::metadata(&args.db).map(|m| m.len()).unwrap_or(0);
    println!(
        "file: {} leads, {} transactions over {} days, {:.1} GB",
        args.leads,
        args.transactions,
        args.days,
        size as f64 / 1e9
    );
    for by in ["day", "buyer"] {
        let line = ["report", "--from", &from, "--to", &to, "--by", by, "--json"];
        // A first run reads the file into the page cache, as a served file is.
        let shown: serde_json::Value = serde_json::from_slice(&cli(args, &line)).unwrap();
        let took = median(args.runs, || {
            cli(args, &line);
        });
        println!(
            "leadrelay report --from {from} --to {to} --by {by}: {:.0} ms (median of {}; {} rows, {} leads, {} sold)",
            took.as_secs_f64() * 1000.0,
            args.runs,
            shown["rows"].as_array().map_or(0, Vec::len),
            shown["totals"]["received"],
            shown["totals"]["sold"],
        );
    }
    // The baseline: the same period's figures recounted from the rows.
    let conn = Connection::open(&args.db).unwrap();
    let tz = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let start = |d: &str| {
        d.parse::<jiff::civil::Date>()
            .unwrap()
            .to_zoned(tz.clone())
            .unwrap()
            .timestamp()
            .as_millisecond()
    };
    let (start_ms, end_ms) = (start(&from), start(&to) + 86_400_000);
    let mut counted = (0i64, 0i64);
    let took = median(args.runs.min(3), || {
        let leads: i64 = conn
            .query_row(
                "SELECT count(*) FROM leads WHERE workspace_id = 'ws' AND created_at >= ?1
                 AND created_at < ?2",
                params![start_ms, end_ms],
                |row| row.get(0),
            )
            .unwrap();
        let sold: i64 = conn
            .query_row(
                "SELECT count(*) FROM (SELECT buyer_id, count(*), sum(buyer_price_cents)
                 FROM transactions WHERE workspace_id = 'ws' AND created_at >= ?1
                 AND created_at < ?2 GROUP BY buyer_id)",
                params![start_ms, end_ms],
                |row| row.get(0),
            )
            .unwrap();
        counted = (leads, sold);
    });
    println!(
        "baseline, recounting the rows (leads in the period, transactions by buyer; in \
         process, no CLI start): {:.0} ms (median; {} leads)",
        took.as_secs_f64() * 1000.0,
        counted.0
    );
    let took = median(args.runs, || {
        cli(args, &["workspace", "list", "--json"]);
    });
    println!(
        "baseline, a CLI command that reads one row (workspace list): {:.0} ms",
        took.as_secs_f64() * 1000.0
    );
}

/// Runs `leadrelay` with `line`, its stdout thrown away; the child's peak RSS in MB and
/// the run's time.
fn peak_rss(args: &Args, line: &[&str]) -> (f64, Duration) {
    let started = Instant::now();
    let child = Command::new(&args.bin)
        .arg("--db")
        .arg(&args.db)
        .args(line)
        .stdout(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for; both out pointers are valid.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "the export ends");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{line:?} failed"
    );
    std::mem::forget(child);
    // ru_maxrss is in kilobytes on Linux.
    (usage.ru_maxrss as f64 / 1024.0, started.elapsed())
}

fn export(args: &Args) {
    generate(args);
    let tz = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let first_day = jiff::Timestamp::now()
        .to_zoned(tz)
        .date()
        .checked_sub(jiff::Span::new().days(args.days))
        .unwrap()
        .to_string();
    println!(
        "file: {} leads, {} transactions over {} days",
        args.leads, args.transactions, args.days
    );
    for (what, noun) in [("leads", "lead"), ("transactions", "transaction")] {
        for format in ["ndjson", "csv"] {
            let (small, _) = peak_rss(
                args,
                &[noun, "export", "--format", format, "--to", &first_day],
            );
            let (all, took) = peak_rss(args, &[noun, "export", "--format", format]);
            println!(
                "leadrelay {noun} export --format {format}: every {what}: peak RSS {all:.1} MB \
                 ({:.1} s); the first day's only (baseline): {small:.1} MB",
                took.as_secs_f64()
            );
        }
    }
}

fn main() {
    let args = args();
    match args.mode.as_str() {
        "report" => report(&args),
        "export" => export(&args),
        "generate" => generate(&args),
        other => panic!("unknown mode {other}"),
    }
}
