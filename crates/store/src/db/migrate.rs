//! Versioned migrations, tracked in `PRAGMA user_version`.
//!
//! Migration 1 is `schema.sql` at the repository root (0.1.0 files have it); later ones are
//! `migrations/NNNN_name.sql`. They are appended to [`MIGRATIONS`] and never edited once
//! released, so any older file can be brought forward.

use rusqlite::Connection;

use super::DbError;

/// One migration: its SQL, then (for what SQL cannot do, like local time zones) a step in
/// Rust on the same transaction.
struct Migration {
    sql: &'static str,
    then: Option<fn(&Connection) -> rusqlite::Result<()>>,
}

const fn sql(sql: &'static str) -> Migration {
    Migration { sql, then: None }
}

const MIGRATIONS: &[Migration] = &[
    sql(include_str!("../../schema.sql")),
    // The money ledger; existing balances become opening rows.
    sql(include_str!("../../migrations/0002_ledger.sql")),
    // The operator console: operators, sessions and the console's two indexes.
    sql(include_str!("../../migrations/0003_operator_console.sql")),
    // Day-two configuration: archived records, previous secrets during a rotation's overlap.
    sql(include_str!("../../migrations/0004_config.sql")),
    // The evaluator's weight versions and stored features.
    sql(include_str!("../../migrations/0005_evaluator.sql")),
    // Running in production: lead_requests.request_id and the health probe's table.
    sql(include_str!("../../migrations/0006_production.sql")),
    // Privacy and storage: the body in the lead's row, no stored answer, erasure marks,
    // retention, the erasure log.
    sql(include_str!("../../migrations/0007_privacy.sql")),
    // Delivery under real conditions: buyer health, fair claiming, cap counters, which
    // are counted from the transactions of the current day and month in each workspace's
    // time zone.
    Migration {
        sql: include_str!("../../migrations/0008_delivery.sql"),
        then: Some(count_caps),
    },
    // The console's counts by group: indexes that lead with the source, buyer or status.
    sql(include_str!("../../migrations/0009_console_counts.sql")),
    // Buyer-native delivery: integration documents and secrets, the waterfall settings,
    // the request each mapped attempt sent.
    sql(include_str!("../../migrations/0010_integration.sql")),
    // What a source's ingest answer discloses: summary (default) or full.
    sql(include_str!("../../migrations/0011_disclosure.sql")),
    // Ping/post: pings and their reservations, bids, balance holds, bid pricing.
    sql(include_str!("../../migrations/0012_ping.sql")),
    // The evaluator's training read in time order without a sort.
    sql(include_str!("../../migrations/0013_training_order.sql")),
    // The pings tied to an erased person, found by lead and by the hashes they promised.
    sql(include_str!("../../migrations/0014_ping_contacts.sql")),
    // The report aggregate, filled from the stored leads and transactions.
    sql(include_str!("../../migrations/0015_report.sql")),
    // Storage per lead: `leads_source_created` goes, its readers walk `leads_source_mix`.
    sql(include_str!("../../migrations/0016_storage.sql")),
    // Retention takes the pings that never became a lead: their walk by workspace and age.
    sql(include_str!("../../migrations/0017_ping_retention.sql")),
    // The report's supplier cost counted as the ledger owes it (returned transactions too).
    sql(include_str!(
        "../../migrations/0018_report_supplier_cost.sql"
    )),
    // The report aggregate rolled up per UTC day: long reports read days, not quarter hours.
    sql(include_str!("../../migrations/0019_report_days.sql")),
    // Storage per lead: lead and lead-request ids stored as 16 bytes (`ids::LeadId`).
    Migration {
        sql: include_str!("../../migrations/0020_stored_ids.sql"),
        then: Some(compact_stored_ids),
    },
    // One index fewer per ping: `pings_source_created` had no reader.
    sql(include_str!("../../migrations/0021_ping_source_index.sql")),
    // The CHECKs written per delivery and outbox event compare with OR, not IN: no
    // temporary b-tree per insert (the tables' text only, see the file).
    Migration {
        sql: include_str!("../../migrations/0022_checks_without_in.sql"),
        then: Some(checks_rewritten),
    },
    // Returns: the state `return_requested` (the CHECK's text only), reason codes (the
    // defaults for every workspace), the buyers' return policy, the returns.
    Migration {
        sql: include_str!("../../migrations/0023_returns.sql"),
        then: Some(returns_added),
    },
    // An outbox event may be `voided` (its sale ended before its first attempt): the
    // status CHECK's text only, as in migration 22.
    Migration {
        sql: include_str!("../../migrations/0024_outbox_voided.sql"),
        then: Some(checks_rewritten),
    },
    // Suppression lists: keyed hashes per workspace and the workspace's action.
    Migration {
        sql: include_str!("../../migrations/0025_suppression.sql"),
        then: Some(suppression_added),
    },
    // Third-party check steps: the steps and their secrets, each lead's outcomes, a
    // subscription's required step.
    Migration {
        sql: include_str!("../../migrations/0026_checks.sql"),
        then: Some(checks_added),
    },
    // Accountability: operator roles (earlier operators are admins) and the audit log with
    // its hash chain.
    Migration {
        sql: include_str!("../../migrations/0027_audit.sql"),
        then: Some(roles_added),
    },
    // Alerts: targets, rules and each alert's firing and resolution.
    sql(include_str!("../../migrations/0028_alerts.sql")),
    // The buyer and supplier portal: partner users and their sessions.
    sql(include_str!("../../migrations/0029_portal.sql")),
    // Shared links to sources' posting instructions (the token's hash).
    sql(include_str!("../../migrations/0030_source_doc_shares.sql")),
    // A stamp of the sources' rows that ingest's kept sources are checked against.
    sql(include_str!("../../migrations/0031_source_stamp.sql")),
    // The same stamp for the workspaces' suppression keys and check steps.
    sql(include_str!("../../migrations/0032_ingest_stamp.sql")),
    // Request ids in one stored form, their text: the 16 bytes of ours become `req_…`.
    Migration {
        sql: include_str!("../../migrations/0033_request_ids_text.sql"),
        then: Some(request_ids_as_text),
    },
    // The same stamp for the workspaces' products and their bid-priced subscriptions.
    sql(include_str!("../../migrations/0034_product_stamp.sql")),
];

/// Migration 23's step: the transactions' CHECK was rewritten as in migration 22; the
/// buyers' return policy columns are added where missing.
fn returns_added(conn: &Connection) -> rusqlite::Result<()> {
    checks_rewritten(conn)?;
    let columns = [
        (
            "return_cap_bp",
            "ALTER TABLE buyers ADD COLUMN return_cap_bp INTEGER
                CHECK (return_cap_bp IS NULL OR (return_cap_bp >= 0 AND return_cap_bp <= 10000))",
        ),
        (
            "return_review",
            "ALTER TABLE buyers ADD COLUMN return_review TEXT NOT NULL DEFAULT 'auto'
                CHECK (return_review = 'auto' OR return_review = 'manual')",
        ),
    ];
    for (column, add) in columns {
        let present: bool = conn.query_row(
            "SELECT count(*) FROM pragma_table_info('buyers') WHERE name = ?1",
            [column],
            |row| row.get(0),
        )?;
        if !present {
            conn.execute_batch(add)?;
        }
    }
    Ok(())
}

/// Migration 25's step: what a workspace does with a lead whose contact is suppressed
/// (reject or flag), added where the column is missing (the migration may run again).
fn suppression_added(conn: &Connection) -> rusqlite::Result<()> {
    let present: bool = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('workspaces') WHERE name = 'suppression_action'",
        [],
        |row| row.get(0),
    )?;
    if !present {
        conn.execute_batch(
            "ALTER TABLE workspaces ADD COLUMN suppression_action TEXT NOT NULL DEFAULT 'reject'
                CHECK (suppression_action = 'reject' OR suppression_action = 'flag')",
        )?;
    }
    Ok(())
}

/// Migration 27's step: the operators' role, `admin` for those made before roles existed,
/// only where it is missing.
fn roles_added(conn: &Connection) -> rusqlite::Result<()> {
    let present: bool = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('operators') WHERE name = 'role'",
        [],
        |row| row.get(0),
    )?;
    if !present {
        conn.execute_batch(
            "ALTER TABLE operators ADD COLUMN role TEXT NOT NULL DEFAULT 'admin'
                CHECK (role = 'admin' OR role = 'finance' OR role = 'support' OR role = 'viewer')",
        )?;
    }
    Ok(())
}

/// Migration 26's step: `leads.checks` and `subscriptions.require_check`, where missing.
fn checks_added(conn: &Connection) -> rusqlite::Result<()> {
    let columns = [
        (
            "leads",
            "checks",
            "ALTER TABLE leads ADD COLUMN checks TEXT",
        ),
        (
            "subscriptions",
            "require_check",
            "ALTER TABLE subscriptions ADD COLUMN require_check TEXT",
        ),
    ];
    for (table, column, add) in columns {
        let present: bool = conn.query_row(
            "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
            [table, column],
            |row| row.get(0),
        )?;
        if !present {
            conn.execute_batch(add)?;
        }
    }
    Ok(())
}

/// Migration 8's step: the new cap counters counted from the live transactions of each
/// workspace's current local day and month. Frozen with the migration, as its SQL is: the
/// caps owner (`caps::rebuild` in the domain crate) recounts the same way today, but it may
/// change with the schema of a later migration, and this step must run on migration 8's.
fn count_caps(conn: &Connection) -> rusqlite::Result<()> {
    let now = leadrelay_rules::clock::now_ms();
    let workspaces: Vec<(String, String)> = conn
        .prepare("SELECT id, timezone FROM workspaces")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (workspace, zone) in workspaces {
        let tz = jiff::tz::TimeZone::get(&zone).unwrap_or(jiff::tz::TimeZone::UTC);
        let windows = leadrelay_rules::windows::Windows::at(now, &tz);
        conn.execute(
            "INSERT INTO cap_usage (buyer_id, product_id, day_start, day_count, month_start,
                month_count)
             SELECT buyer_id, product_id, ?2,
                    count(*) FILTER (WHERE created_at >= ?2 AND created_at < ?3), ?4, count(*)
             FROM transactions
             WHERE workspace_id = ?1 AND created_at >= ?4 AND created_at < ?5
               AND status NOT IN ('rejected', 'cancelled')
             GROUP BY buyer_id, product_id",
            rusqlite::params![
                workspace,
                windows.day.0,
                windows.day.1,
                windows.month.0,
                windows.month.1
            ],
        )?;
    }
    Ok(())
}

/// The step of migrations 22 and 24: moves the schema version on after the tables' SQL was rewritten in
/// `sqlite_schema`, so that every other connection parses it again (this one did at
/// `writable_schema = RESET`), and reads each table once so that a text SQLite cannot parse
/// fails the migration (and rolls it back) instead of the next open.
fn checks_rewritten(conn: &Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.pragma_query_value(None, "schema_version", |row| row.get(0))?;
    conn.pragma_update(None, "schema_version", version + 1)?;
    for table in ["outbox_events", "outbox_attempts", "transactions"] {
        conn.query_row(
            &format!("SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT 1)"),
            [],
            |_| Ok(()),
        )?;
    }
    Ok(())
}

/// Migration 20: every column that names a lead or a lead request to the ids' stored form
/// (`ids::LeadId`, `ids::LeadRequestId`; as SQL `leadrelay_compact_id`), parents first. A chunk of rows per
/// statement: a statement's journal (in memory, `temp_store=MEMORY`) holds every page the
/// statement changes, and one statement over a table of a million leads took 0.9 GB.
fn compact_stored_ids(conn: &Connection) -> rusqlite::Result<()> {
    const CHUNK: i64 = 4_096;
    let by_rowid = [
        ("leads", "id = leadrelay_compact_id('lead', id)"),
        (
            "lead_requests",
            "id = leadrelay_compact_id('lreq', id), lead_id = leadrelay_compact_id('lead', lead_id)",
        ),
        (
            "transactions",
            "lead_id = leadrelay_compact_id('lead', lead_id), \
             lead_request_id = leadrelay_compact_id('lreq', lead_request_id)",
        ),
        (
            "supplier_cancellations",
            "lead_id = leadrelay_compact_id('lead', lead_id)",
        ),
        ("pings", "lead_id = leadrelay_compact_id('lead', lead_id)"),
        (
            "bids",
            "lead_request_id = leadrelay_compact_id('lreq', lead_request_id)",
        ),
    ];
    for (table, set) in by_rowid {
        let last: i64 = conn.query_row(
            &format!("SELECT coalesce(max(rowid), 0) FROM {table}"),
            [],
            |row| row.get(0),
        )?;
        let mut update = conn.prepare(&format!(
            "UPDATE {table} SET {set} WHERE rowid > ?1 AND rowid <= ?2"
        ))?;
        let mut after = 0;
        while after < last {
            update.execute([after, after + CHUNK])?;
            after += CHUNK;
        }
    }
    // WITHOUT ROWID, keyed by the request: chunks in key order. Text sorts before a BLOB,
    // so the rewritten keys leave the range still to walk.
    let mut next_chunk = conn.prepare(
        "SELECT max(lead_request_id) FROM (SELECT lead_request_id FROM evaluation_features
         WHERE typeof(lead_request_id) = 'text' AND lead_request_id > ?1
         ORDER BY lead_request_id LIMIT ?2)",
    )?;
    let mut update = conn.prepare(
        "UPDATE evaluation_features
         SET lead_request_id = leadrelay_compact_id('lreq', lead_request_id)
         WHERE typeof(lead_request_id) = 'text' AND lead_request_id > ?1
           AND lead_request_id <= ?2",
    )?;
    let mut after = String::new();
    while let Some(last) = next_chunk.query_row(rusqlite::params![after, CHUNK], |row| {
        row.get::<_, Option<String>>(0)
    })? {
        update.execute([&after, &last])?;
        after = last;
    }
    Ok(())
}

/// Migration 33: every lead request's `request_id` stored as a BLOB (the 16 bytes of a
/// `req_` id leadrelay made) to its text (`leadrelay_id_text`), a chunk of rows per statement
/// as in [`compact_stored_ids`].
fn request_ids_as_text(conn: &Connection) -> rusqlite::Result<()> {
    const CHUNK: i64 = 4_096;
    let last: i64 = conn.query_row(
        "SELECT coalesce(max(rowid), 0) FROM lead_requests",
        [],
        |row| row.get(0),
    )?;
    let mut update = conn.prepare(
        "UPDATE lead_requests SET request_id = leadrelay_id_text('req', request_id)
         WHERE rowid > ?1 AND rowid <= ?2 AND typeof(request_id) = 'blob'",
    )?;
    let mut after = 0;
    while after < last {
        update.execute([after, after + CHUNK])?;
        after += CHUNK;
    }
    Ok(())
}

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// The SQL functions migrations call to compute what only Rust can (migration 7's
/// backfill of the duplicate keys' hashes, migration 20's stored ids, migration 33's text of
/// request ids).
fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    use rusqlite::types::Value;
    // Migration 20: a lead's or lead request's id in its canonical text (`lead_` or `lreq_`
    // and an upper-case ULID) to its 16 bytes; any other value as it is.
    conn.create_scalar_function(
        "leadrelay_compact_id",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let prefix = ctx.get::<String>(0)?;
            Ok(match ctx.get::<Value>(1)? {
                Value::Text(text) => match prefix.as_str() {
                    crate::ids::LeadId::PREFIX => crate::ids::LeadId::parse(&text).map(Value::from),
                    crate::ids::LeadRequestId::PREFIX => {
                        crate::ids::LeadRequestId::parse(&text).map(Value::from)
                    }
                    _ => None,
                }
                .unwrap_or(Value::Text(text)),
                other => other,
            })
        },
    )?;
    // Migration 33: a ULID's 16 bytes to `{prefix}_` and its text; any other value as it
    // is. A BLOB of another size is an error: the migration stops rather than guess.
    conn.create_scalar_function(
        "leadrelay_id_text",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let prefix = ctx.get::<String>(0)?;
            Ok(match ctx.get::<Value>(1)? {
                Value::Blob(bytes) => {
                    let bytes: [u8; 16] = bytes.as_slice().try_into().map_err(|_| {
                        rusqlite::Error::UserFunctionError(
                            format!("a stored id of {} bytes, not 16", bytes.len()).into(),
                        )
                    })?;
                    Value::Text(format!("{prefix}_{}", ulid::Ulid::from_bytes(bytes)))
                }
                other => other,
            })
        },
    )?;
    conn.create_scalar_function(
        "leadrelay_key_hash",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(ctx
                .get::<Option<String>>(0)?
                .map(|key| leadrelay_rules::normalize::key_hash(&key)))
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
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(migration.sql)?;
        if let Some(then) = migration.then {
            then(&tx)?;
        }
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
        log::info!("applied database migration {}", index + 1);
    }
    tx.commit()?;
    Ok(())
}
