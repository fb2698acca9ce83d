//! The SQLite ceiling of plain ingest on the disk at hand (bench/reference.sh): realistic lead
//! writes straight into SQLite, with nothing of leadrelay around them, at 16 and at 100 leads
//! per commit, in WAL mode with `synchronous=FULL`. Per lead: the idempotency lookup, the
//! email and phone duplicate lookups, a lead row with three indexes and one interest row
//! with one. A throughput figure of leadrelay divided by the ceiling of the same run says how
//! much of what the disk and SQLite allow it reaches, whatever the machine.
//!
//! The emails are sequential (`p1@…`, `p2@…`), as the load's are by default: each commit then
//! adds to one leaf of the email index. With `random` as the second argument they are random,
//! as real traffic's are, and each lead adds to a leaf of its own (`KEYS=random` in
//! bench/reference.sh runs both the load and the ceiling so).
//!
//!   cargo run --release --example ceiling -- DIR [random]  # prints `ceiling per_commit=N: L leads/s`

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rusqlite::{Connection, params};

const SCHEMA: &str = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;
    CREATE TABLE leads (id TEXT PRIMARY KEY, source_id TEXT NOT NULL, container_id TEXT,
        workspace_id TEXT, external_id TEXT, email_key TEXT, phone_key TEXT, created_at INTEGER,
        body TEXT, quality_status TEXT, duplicate_status TEXT);
    CREATE UNIQUE INDEX leads_external ON leads (source_id, external_id);
    CREATE INDEX leads_email ON leads (container_id, email_key, created_at);
    CREATE INDEX leads_phone ON leads (container_id, phone_key, created_at);
    CREATE TABLE lead_requests (id TEXT PRIMARY KEY, lead_id TEXT NOT NULL REFERENCES leads (id),
        product_id TEXT, field_values TEXT, status TEXT);
    CREATE INDEX lead_requests_lead ON lead_requests (lead_id);";

fn main() -> rusqlite::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_string());
    let path = std::path::Path::new(&dir).join("ceiling.db");
    let remove = || {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    };
    let random_keys = std::env::args().nth(2).as_deref() == Some("random");
    let mut draws = rand::rngs::StdRng::seed_from_u64(32);
    let body = "x".repeat(700);
    for per_commit in [16usize, 100] {
        remove();
        let conn = Connection::open(&path)?;
        conn.execute_batch(SCHEMA)?;
        let leads = 40_000;
        let started = Instant::now();
        let mut i = 0;
        while i < leads {
            let tx = conn.unchecked_transaction()?;
            for _ in 0..per_commit.min(leads - i) {
                let email = if random_keys {
                    format!("{:016x}@example.com", draws.random::<u64>())
                } else {
                    format!("p{i}@example.com")
                };
                let phone = format!("4915{i:08}");
                let external = format!("ext-{i}");
                let lookups = [
                    (
                        "SELECT id FROM leads WHERE container_id = ?1 AND email_key = ?2 AND created_at > ?3 LIMIT 1",
                        &email,
                    ),
                    (
                        "SELECT id FROM leads WHERE container_id = ?1 AND phone_key = ?2 AND created_at > ?3 LIMIT 1",
                        &phone,
                    ),
                ];
                for (sql, key) in lookups {
                    tx.prepare_cached(sql)?
                        .query([&"ch" as &dyn rusqlite::ToSql, key, &0])?
                        .next()?;
                }
                tx.prepare_cached(
                    "SELECT id FROM leads WHERE source_id = ?1 AND external_id = ?2",
                )?
                .query(params!["src", external])?
                .next()?;
                tx.prepare_cached(
                    "INSERT INTO leads VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )?
                .execute(params![
                    format!("lead_{i:016}"),
                    "src",
                    "ch",
                    "ws",
                    external,
                    email,
                    phone,
                    i as i64,
                    body,
                    "ok",
                    "unique"
                ])?;
                tx.prepare_cached("INSERT INTO lead_requests VALUES (?1, ?2, ?3, ?4, ?5)")?
                    .execute(params![
                        format!("lreq_{i:016}"),
                        format!("lead_{i:016}"),
                        "product",
                        "{\"roof\":\"tile\"}",
                        "open"
                    ])?;
                i += 1;
            }
            tx.commit()?;
        }
        let rate = leads as f64 / started.elapsed().as_secs_f64();
        println!("ceiling per_commit={per_commit}: {rate:.0} leads/s");
    }
    remove();
    Ok(())
}
