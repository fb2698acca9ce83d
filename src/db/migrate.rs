//! Versioned migrations, tracked in `PRAGMA user_version`.
//!
//! Migration 1 is `schema.sql` at the repository root (0.1.0 files have it); later ones are
//! `migrations/NNNN_name.sql`. They are appended to [`MIGRATIONS`] and never edited once
//! released, so any older file can be brought forward.

use rusqlite::Connection;

use super::DbError;

const MIGRATIONS: &[&str] = &[
    include_str!("../../schema.sql"),
    // The money ledger; existing balances become opening rows.
    include_str!("../../migrations/0002_ledger.sql"),
    // The operator console: operators, sessions and the console's two indexes.
    include_str!("../../migrations/0003_operator_console.sql"),
    // Day-two configuration: archived records, previous secrets during a rotation's overlap.
    include_str!("../../migrations/0004_config.sql"),
    // The evaluator's weight versions and stored features.
    include_str!("../../migrations/0005_evaluator.sql"),
    // Running in production: lead_requests.request_id and the health probe's table.
    include_str!("../../migrations/0006_production.sql"),
    // Privacy and storage: the body in the lead's row, no stored answer, erasure marks,
    // retention, the erasure log.
    include_str!("../../migrations/0007_privacy.sql"),
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// The SQL functions migrations call to compute what only Rust can (migration 7's
/// backfill of the duplicate keys' hashes).
fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "leadrelay_key_hash",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(ctx
                .get::<Option<String>>(0)?
                .map(|key| crate::ingest::normalize::key_hash(&key)))
        },
    )
}

/// Brings the file to [`SCHEMA_VERSION`]. Runs under `BEGIN IMMEDIATE`, so a CLI command
/// and a starting server that open a new file at the same moment do not both migrate it.
pub fn apply(conn: &mut Connection) -> Result<(), DbError> {
    if schema_version(conn)? == SCHEMA_VERSION {
        return Ok(());
    }

    register_functions(conn)?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found = schema_version(&tx)?;
    if found > SCHEMA_VERSION {
        return Err(DbError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
        log::info!("applied database migration {}", index + 1);
    }
    tx.commit()?;
    Ok(())
}
