//! Part of `leadrelay check`: rows whose status columns hold a value this binary does not
//! know.
//!
//! Every status column maps to a stored enum (`db::stored`) that refuses an unknown value
//! when a row is read, so such a row stops whatever reads it. CHECK constraints keep most
//! columns clean, but not every column has one (the history's states, the event kind), and
//! a file edited by hand or by another program can hold anything. This scan names them
//! before an operation trips over them. Owns the list of status columns; the names are the
//! enums' own (`NAMES`), so a new state is known here as soon as its enum has it.

use std::collections::BTreeMap;

use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};
use serde::Serialize;

use crate::alerts;
use crate::autodelivery::weights::Origin as WeightsOrigin;
use crate::config::buyer::{BuyerStatus, Plan, ReturnReview};
use crate::config::container::{ContainerKind, DeliveryMode};
use crate::config::source::{DedupeAction, StoredScope};
use crate::delivery::transaction::{DeliveryStatus, Status};
use crate::ingest::dedupe::DuplicateStatus;
use crate::ingest::quality::QualityStatus;
use crate::ingest::status::{LeadStatus, RequestStatus};
use crate::ledger;
use crate::lifecycle::clawback::{CancellationStatus, Origin};
use crate::outbox::store::{EventKind, EventStatus, Outcome};

/// A table and its status columns, each with the values its enum knows.
type Table = (
    &'static str,
    &'static [(&'static str, &'static [&'static str])],
);

/// Every status column of the schema. NULL is never unknown: the one nullable column
/// (`transaction_history.from_status`) is NULL for the entry that created the transaction.
const STATUS_COLUMNS: &[Table] = &[
    (
        "containers",
        &[
            ("kind", ContainerKind::NAMES),
            ("delivery_mode", DeliveryMode::NAMES),
        ],
    ),
    (
        "sources",
        &[
            ("dedupe_scope", StoredScope::NAMES),
            ("dedupe_action", DedupeAction::NAMES),
        ],
    ),
    (
        "buyers",
        &[
            ("plan", Plan::NAMES),
            ("status", BuyerStatus::NAMES),
            ("return_review", ReturnReview::NAMES),
        ],
    ),
    (
        "leads",
        &[
            ("quality_status", QualityStatus::NAMES),
            ("duplicate_status", DuplicateStatus::NAMES),
            ("status", LeadStatus::NAMES),
        ],
    ),
    ("lead_requests", &[("status", RequestStatus::NAMES)]),
    (
        "transactions",
        &[
            ("delivery_mode", DeliveryMode::NAMES),
            ("status", Status::NAMES),
            ("delivery_status", DeliveryStatus::NAMES),
        ],
    ),
    (
        "transaction_history",
        &[("from_status", Status::NAMES), ("to_status", Status::NAMES)],
    ),
    (
        "outbox_events",
        &[("kind", EventKind::NAMES), ("status", EventStatus::NAMES)],
    ),
    ("outbox_attempts", &[("outcome", Outcome::NAMES)]),
    (
        "supplier_cancellations",
        &[
            ("status", CancellationStatus::NAMES),
            ("origin", Origin::NAMES),
        ],
    ),
    (
        "returns",
        &[
            ("status", crate::lifecycle::returns::ReturnStatus::NAMES),
            ("previous_status", Status::NAMES),
        ],
    ),
    ("ledger_entries", &[("kind", ledger::Kind::NAMES)]),
    (
        "buyer_health",
        &[("state", crate::outbox::health::State::NAMES)],
    ),
    ("evaluator_versions", &[("origin", WeightsOrigin::NAMES)]),
    (
        "pings",
        &[("status", crate::ping::store::PingStatus::NAMES)],
    ),
    ("alert_targets", &[("kind", alerts::TargetKind::NAMES)]),
    ("alert_rules", &[("rule", alerts::Rule::NAMES)]),
    (
        "alerts",
        &[
            ("rule", alerts::Rule::NAMES),
            ("state", alerts::State::NAMES),
        ],
    ),
];

/// Rows of one column holding one value its enum does not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownState {
    pub table: String,
    pub column: String,
    /// The stored value, as text (a number or blob as SQLite shows it).
    pub value: String,
    pub rows: u64,
}

impl UnknownState {
    /// The line `check` prints for it.
    pub(crate) fn problem(&self) -> String {
        format!(
            "{}.{}: {} row(s) hold '{}', which is not a known value ({})",
            self.table,
            self.column,
            self.rows,
            self.value,
            known(&self.table, &self.column).join(", ")
        )
    }
}

fn known(table: &str, column: &str) -> &'static [&'static str] {
    STATUS_COLUMNS
        .iter()
        .filter(|(t, _)| *t == table)
        .flat_map(|(_, columns)| columns.iter())
        .find(|(c, _)| *c == column)
        .map_or(&[], |(_, names)| *names)
}

/// Every (column, value) that is not known, with its row count; one pass per table.
pub(crate) fn scan(conn: &Connection) -> rusqlite::Result<Vec<UnknownState>> {
    let mut found = Vec::new();
    for (table, columns) in STATUS_COLUMNS {
        let selected = columns
            .iter()
            .map(|(column, _)| *column)
            .collect::<Vec<_>>()
            .join(", ");
        let mut values: Vec<Value> = Vec::new();
        let mut unknown = Vec::new();
        for (column, names) in columns.iter() {
            let placeholders = vec!["?"; names.len()].join(", ");
            unknown.push(format!(
                "({column} IS NOT NULL AND {column} NOT IN ({placeholders}))"
            ));
            values.extend(names.iter().map(|n| Value::Text((*n).to_string())));
        }
        // Table and column names are the constants above; the known values are bound.
        let unknown = unknown.join(" OR ");
        let sql = format!("SELECT {selected} FROM {table} WHERE {unknown}");
        let mut counts: BTreeMap<(usize, String), u64> = BTreeMap::new();
        let mut statement = conn.prepare(&sql)?;
        let mut rows = statement.query(params_from_iter(values))?;
        while let Some(row) = rows.next()? {
            for (index, (_, names)) in columns.iter().enumerate() {
                let text = match row.get::<_, Value>(index)? {
                    Value::Null => continue,
                    Value::Text(text) if names.contains(&text.as_str()) => continue,
                    Value::Text(text) => text,
                    Value::Integer(n) => n.to_string(),
                    Value::Real(x) => x.to_string(),
                    Value::Blob(bytes) => format!("blob of {} bytes", bytes.len()),
                };
                *counts.entry((index, text)).or_default() += 1;
            }
        }
        found.extend(
            counts
                .into_iter()
                .map(|((index, value), rows)| UnknownState {
                    table: table.to_string(),
                    column: columns[index].0.to_string(),
                    value,
                    rows,
                }),
        );
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_database_has_no_unknown_state_and_a_stray_one_is_named_with_its_count() {
        let conn = Connection::open_in_memory().unwrap();
        let mut conn = conn;
        crate::db::apply_migrations(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'W', 0);
             INSERT INTO buyers (id, workspace_id, name, webhook_url, signing_secret, created_at)
                 VALUES ('a', 'ws', 'A', 'http://x.test/', 'whsec_x', 0),
                        ('b', 'ws', 'B', 'http://x.test/', 'whsec_x', 0),
                        ('c', 'ws', 'C', 'http://x.test/', 'whsec_x', 0);",
        )
        .unwrap();
        assert_eq!(scan(&conn).unwrap(), Vec::new());

        // A file written by something that skipped the CHECK constraints.
        conn.execute_batch(
            "PRAGMA ignore_check_constraints = ON;
             UPDATE buyers SET status = 'suspended' WHERE id IN ('a', 'b');
             UPDATE buyers SET plan = 'barter' WHERE id = 'c';",
        )
        .unwrap();
        let found = scan(&conn).unwrap();
        let lines: Vec<String> = found.iter().map(UnknownState::problem).collect();
        assert_eq!(
            lines,
            [
                "buyers.plan: 1 row(s) hold 'barter', which is not a known value (postpaid, prepaid)",
                "buyers.status: 2 row(s) hold 'suspended', which is not a known value (active, paused)",
            ]
        );
    }

    #[test]
    fn every_listed_column_exists_in_the_schema() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::apply_migrations(&mut conn).unwrap();
        for (table, columns) in STATUS_COLUMNS {
            for (column, _) in columns.iter() {
                conn.prepare(&format!("SELECT {column} FROM {table}"))
                    .unwrap_or_else(|e| panic!("{table}.{column}: {e}"));
            }
        }
    }
}
