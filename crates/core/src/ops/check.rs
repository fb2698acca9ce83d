//! `leadrelay check`: whether a database file is sound. Runs SQLite's integrity check and
//! foreign key check, compares the schema version with this binary's, looks for schema
//! objects that should be there, and on a complete schema checks the rows: status columns
//! hold only known states (`states`), each buyer's cached balance is the sum of its
//! ledger (`ledger::query`), and the report aggregate equals a recount of the leads and
//! transactions (`report::mismatches`), and the audit log's hash chain is unbroken
//! (`audit::verify`); the verdict is `ok` or the list of problems.
//!
//! The file is opened read-only and never created, migrated or repaired, so `check` is safe
//! on the live file while `serve` runs (it reads one consistent snapshot, committed data in
//! the WAL included) and on a backup before it is restored. It leaves no file behind, and
//! works on a read-only file in a read-only directory (`ops::ReadOnlyDb` says how).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode};
use serde::Serialize;

use super::states::UnknownState;
use crate::db::SCHEMA_VERSION;
use crate::ledger::query::BalanceMismatch;

/// At most this many integrity or foreign-key problems are listed; the count is exact.
const MAX_LISTED: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Nothing to check: the file is not there (and was not created).
    #[error("database file {} does not exist", .0.display())]
    Missing(PathBuf),
    /// The file exists but cannot be opened (permissions, a directory, …).
    #[error("cannot open {}: {}", .0.display(), .1)]
    Open(PathBuf, rusqlite::Error),
}

/// One row that points at a parent row that does not exist.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForeignKeyViolation {
    pub table: String,
    pub rowid: Option<i64>,
    pub parent: String,
}

/// The verdict. `ok` is true exactly when `problems` is empty.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    pub database: String,
    pub ok: bool,
    /// SQLite's integrity check messages; `["ok"]` for a sound file.
    pub integrity: Vec<String>,
    pub foreign_key_violations: usize,
    pub foreign_keys: Vec<ForeignKeyViolation>,
    pub schema_version: Option<i64>,
    pub expected_schema_version: i64,
    /// Tables, indexes and triggers of the schema that the file lacks.
    pub missing_objects: Vec<String>,
    /// Status columns holding values this binary does not know (`ops::states`).
    pub unknown_states: Vec<UnknownState>,
    /// Buyers whose cached balance is not the sum of their ledger.
    pub(crate) balance_mismatches: Vec<BalanceMismatch>,
    /// Rows of the report aggregate that differ from a recount (the first 100 are listed
    /// in `problems`).
    pub report_mismatches: usize,
    pub problems: Vec<String>,
}

impl CheckReport {
    /// How many buyers' balances are not the sum of their ledger.
    pub fn balance_mismatch_count(&self) -> usize {
        self.balance_mismatches.len()
    }
}

/// Checks the database at `path`.
pub fn check(path: &Path) -> Result<CheckReport, CheckError> {
    if !path.exists() {
        return Err(CheckError::Missing(path.to_path_buf()));
    }
    // A check of a file opened immutable is repeated when a server opened it meanwhile
    // (see `ops::ReadOnlyDb`); the repeat reads through the server's WAL.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let db =
            super::ReadOnlyDb::open(path).map_err(|e| CheckError::Open(path.to_path_buf(), e))?;
        let mut report = CheckReport {
            database: path.display().to_string(),
            ok: false,
            integrity: Vec::new(),
            foreign_key_violations: 0,
            foreign_keys: Vec::new(),
            schema_version: None,
            expected_schema_version: SCHEMA_VERSION,
            missing_objects: Vec::new(),
            unknown_states: Vec::new(),
            balance_mismatches: Vec::new(),
            report_mismatches: 0,
            problems: Vec::new(),
        };
        if let Err(e) = inspect(&db.conn, &mut report) {
            report.problems.push(match e.sqlite_error_code() {
                Some(ErrorCode::NotADatabase) => "not an SQLite database".to_string(),
                _ => format!("cannot read the database: {e}"),
            });
        }
        if db.changed_meanwhile(path) {
            if attempts < super::READ_ATTEMPTS {
                log::info!(
                    "{} was opened by a server during the check; checking it again",
                    path.display()
                );
                continue;
            }
            report
                .problems
                .push("the file kept changing during the check; check it again".to_string());
        }
        report.ok = report.problems.is_empty();
        return Ok(report);
    }
}

fn inspect(conn: &Connection, report: &mut CheckReport) -> rusqlite::Result<()> {
    // One read transaction: every check sees the same snapshot, even while a server writes.
    conn.execute_batch("BEGIN DEFERRED")?;
    let version = crate::db::schema_version(conn)?;
    report.schema_version = Some(version);

    report.integrity = integrity(conn)?;
    if report.integrity != ["ok"] {
        report.problems.push(format!(
            "integrity check failed: {}",
            report.integrity.join("; ")
        ));
    }

    let (count, listed) = foreign_key_violations(conn)?;
    report.foreign_key_violations = count;
    report.foreign_keys = listed;
    if count > 0 {
        report
            .problems
            .push(format!("{count} rows point at missing parent rows"));
    }

    if version == 0 {
        report
            .problems
            .push("not a leadrelay database (no schema version)".to_string());
    } else if version > SCHEMA_VERSION {
        report.problems.push(format!(
            "schema version {version} is newer than this binary knows ({SCHEMA_VERSION}); \
             use a newer leadrelay"
        ));
    } else if version == SCHEMA_VERSION {
        // An older version is fine: `serve` or `init` migrates it. Only a current one can
        // be compared with the objects this binary expects.
        match missing_objects(conn) {
            Ok(missing) => report.missing_objects = missing,
            Err(e) => report
                .problems
                .push(format!("cannot compare the schema objects: {e}")),
        }
        if !report.missing_objects.is_empty() {
            report.problems.push(format!(
                "schema objects missing: {}",
                report.missing_objects.join(", ")
            ));
        } else {
            contents(conn, report)?;
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// What the rows say, on a file whose schema is complete: states this binary knows, and
/// every buyer's cached balance equal to the sum of its ledger, the report aggregate equal
/// to a recount.
fn contents(conn: &Connection, report: &mut CheckReport) -> rusqlite::Result<()> {
    report.unknown_states = super::states::scan(conn)?;
    report
        .problems
        .extend(report.unknown_states.iter().map(UnknownState::problem));
    report.balance_mismatches = crate::ledger::query::balance_mismatches(conn)?;
    report.problems.extend(
        report
            .balance_mismatches
            .iter()
            .map(BalanceMismatch::problem),
    );
    if let Err(broken) = crate::audit::verify(conn)? {
        report.problems.push(broken.to_string());
    }
    let differing = crate::report::mismatches(conn)?;
    report.report_mismatches = differing.len();
    report
        .problems
        .extend(differing.into_iter().take(MAX_LISTED));
    Ok(())
}

fn integrity(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement = conn.prepare(&format!("PRAGMA integrity_check({MAX_LISTED})"))?;
    let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
    rows.collect()
}

fn foreign_key_violations(
    conn: &Connection,
) -> rusqlite::Result<(usize, Vec<ForeignKeyViolation>)> {
    let mut statement = conn.prepare("PRAGMA foreign_key_check")?;
    let mut rows = statement.query([])?;
    let mut count = 0;
    let mut listed = Vec::new();
    while let Some(row) = rows.next()? {
        count += 1;
        if listed.len() < MAX_LISTED {
            listed.push(ForeignKeyViolation {
                table: row.get(0)?,
                rowid: row.get(1)?,
                parent: row.get(2)?,
            });
        }
    }
    Ok((count, listed))
}

/// Named schema objects (`type name`) of a connection, SQLite's own excluded.
fn schema_objects(conn: &Connection) -> rusqlite::Result<BTreeSet<String>> {
    let mut statement = conn.prepare(
        "SELECT type, name FROM sqlite_schema
         WHERE type IN ('table', 'index', 'trigger', 'view') AND name NOT LIKE 'sqlite_%'",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(format!(
            "{} {}",
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?
        ))
    })?;
    rows.collect()
}

/// The objects a freshly migrated database has and this file lacks.
fn missing_objects(conn: &Connection) -> Result<Vec<String>, crate::db::DbError> {
    let mut reference = Connection::open_in_memory()?;
    crate::db::apply_migrations(&mut reference)?;
    let expected = schema_objects(&reference)?;
    let present = schema_objects(conn)?;
    Ok(expected.difference(&present).cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_database_is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        crate::db::Db::open(&path).unwrap().close();
        let report = check(&path).unwrap();
        assert!(report.ok, "{report:?}");
        assert_eq!(report.integrity, vec!["ok"]);
        assert_eq!(report.schema_version, Some(SCHEMA_VERSION));
    }

    #[test]
    fn a_missing_file_is_an_error_and_stays_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.db");
        assert!(matches!(check(&path), Err(CheckError::Missing(_))));
        assert!(!path.exists());
    }

    #[test]
    fn a_file_that_is_not_a_database_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, vec![b'x'; 4096]).unwrap();
        let report = check(&path).unwrap();
        assert!(!report.ok);
        assert_eq!(report.problems, vec!["not an SQLite database"]);
    }

    #[test]
    fn an_empty_sqlite_file_is_not_a_leadrelay_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        let report = check(&path).unwrap();
        assert!(!report.ok);
        assert!(
            report.problems[0].contains("not a leadrelay database"),
            "{report:?}"
        );
    }
}
