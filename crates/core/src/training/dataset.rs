//! The labelled rows `evaluator train` learns from: a workspace's transactions with a
//! buyer's outcome, joined to the features their lead request was scored with.
//!
//! A transaction is labelled good (1) when acknowledged, payout pending or paid, bad (0)
//! when rejected or cancelled; one still `delivered` has no outcome yet and is left out, as
//! is one whose request has no stored features (delivered by hand, or before features were
//! stored). Rows come in the order the transactions were created (then by id), so the last
//! ones are the most recent: the holdout. Each row also carries the current weights' `z`
//! on its full stored features and its container's threshold now, for the comparison.
//!
//! Owns this read (transactions, `evaluation_features` and containers, read only)
//! and the columns: the numeric features of the selected groups in their fixed order, then
//! each category factor in the order first seen. Reads transactions and
//! `evaluation_features` only: the feature row names the lead's container.

use std::collections::HashMap;

use rusqlite::Connection;

use super::fit::Rows;
use crate::autodelivery::evaluator::Weights;
use crate::autodelivery::features::{FEATURES, Group};
use crate::autodelivery::stored_features;
use crate::delivery::transaction::Status;

/// Which transactions to learn from.
#[derive(Debug, Clone)]
pub struct Selection {
    pub workspace_id: String,
    /// Transactions created at or after this time.
    pub since_ms: i64,
    pub product_id: Option<String>,
}

/// The outcome a transaction's status says: good, bad, or none yet.
pub(crate) fn label(status: Status) -> Option<bool> {
    match status {
        Status::Acknowledged | Status::PayoutPending | Status::Paid => Some(true),
        Status::Rejected | Status::Cancelled => Some(false),
        // A pending return is the buyer's claim, not yet an outcome.
        Status::Delivered | Status::ReturnRequested => None,
    }
}

/// The rows, their columns, and what was left out.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub rows: Rows,
    /// The name of column `j` is `names[j - 1]` (column 0 is the intercept).
    pub names: Vec<String>,
    /// Per row: `z` of the weights in use on the row's stored features.
    pub current_z: Vec<f64>,
    /// Per row: the threshold of the lead's container now.
    pub thresholds: Vec<i64>,
    /// Labelled transactions whose request has no stored features.
    pub without_features: usize,
    /// Labelled transactions whose stored features could not be read (written by a newer
    /// binary, or damaged).
    pub unreadable: usize,
}

impl Dataset {
    pub(crate) fn good(&self) -> usize {
        (0..self.rows.len()).filter(|&i| self.rows.label(i)).count()
    }
}

/// The workspace's transactions with their request's stored features (a primary-key
/// lookup each) by creation time. Rows of the same millisecond (several buyers'
/// transactions of one lead share it) are ordered by id in `load`, a few at a time, so
/// migration 13's index `transactions_workspace_created` gives this order without any
/// sort.
const IN_TIME_ORDER: &str = "SELECT t.status, t.created_at, t.id, f.container_id, f.features
     FROM transactions t
     LEFT JOIN evaluation_features f ON f.lead_request_id = t.lead_request_id
     WHERE t.workspace_id = ?1 AND t.created_at >= ?2 AND (?3 IS NULL OR t.product_id = ?3)
     ORDER BY t.created_at";

/// A labelled row with stored features, held until every row of its millisecond is read.
#[derive(Debug, Default)]
struct Pending {
    id: String,
    container: String,
    features: String,
    good: bool,
}

/// Reads the labelled rows of `selection` in creation order (then by id), with columns
/// for the features of `groups`; `current` scores each row's full stored features. One
/// pass over the rows.
pub fn load(
    conn: &Connection,
    selection: &Selection,
    groups: &[Group],
    current: &Weights,
) -> rusqlite::Result<Dataset> {
    let thresholds: HashMap<String, i64> = conn
        .prepare("SELECT id, score_threshold FROM containers WHERE workspace_id = ?1")?
        .query_map([&selection.workspace_id], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<Result<_, _>>()?;
    let mut builder = Builder::new(groups, current, thresholds);
    // The rows of the millisecond being read: `pending[..used]`, their strings reused.
    let mut pending: Vec<Pending> = Vec::new();
    let mut used = 0;
    let mut at_of_pending = i64::MIN;
    let mut statement = conn.prepare(IN_TIME_ORDER)?;
    let mut found = statement.query(rusqlite::params![
        selection.workspace_id,
        selection.since_ms,
        selection.product_id
    ])?;
    while let Some(row) = found.next()? {
        let Some(good) = label(row.get(0)?) else {
            continue;
        };
        let Some(features) = row.get_ref(4)?.as_str_or_null()? else {
            builder.data.without_features += 1;
            continue;
        };
        let at: i64 = row.get(1)?;
        if at != at_of_pending {
            builder.push_all(&mut pending[..used]);
            used = 0;
            at_of_pending = at;
        }
        if used == pending.len() {
            pending.push(Pending::default());
        }
        let slot = &mut pending[used];
        used += 1;
        slot.good = good;
        for (text, column) in [(&mut slot.id, 2), (&mut slot.container, 3)] {
            text.clear();
            text.push_str(row.get_ref(column)?.as_str()?);
        }
        slot.features.clear();
        slot.features.push_str(features);
    }
    builder.push_all(&mut pending[..used]);
    Ok(builder.finish())
}

/// Turns stored rows, given in time order, into the dataset's columns.
struct Builder<'a> {
    groups: &'a [Group],
    current: &'a Weights,
    thresholds: HashMap<String, i64>,
    /// The columns of the numeric features selected: their feature indexes.
    numeric: Vec<usize>,
    names: Vec<String>,
    category_columns: HashMap<String, u32>,
    entries: Vec<(u32, f64)>,
    data: Dataset,
}

impl<'a> Builder<'a> {
    fn new(
        groups: &'a [Group],
        current: &'a Weights,
        thresholds: HashMap<String, i64>,
    ) -> Builder<'a> {
        let numeric: Vec<usize> = FEATURES
            .iter()
            .filter(|f| groups.contains(&f.group()))
            .map(|f| f.index())
            .collect();
        let names = numeric
            .iter()
            .map(|&i| FEATURES[i].name().to_string())
            .collect();
        Builder {
            groups,
            current,
            thresholds,
            data: Dataset {
                rows: Rows::new(numeric.len()),
                names: Vec::new(),
                current_z: Vec::new(),
                thresholds: Vec::new(),
                without_features: 0,
                unreadable: 0,
            },
            numeric,
            names,
            category_columns: HashMap::new(),
            entries: Vec::new(),
        }
    }

    /// Adds the rows of one millisecond, by id.
    fn push_all(&mut self, rows: &mut [Pending]) {
        rows.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        for row in rows {
            self.push(row);
        }
    }

    fn push(&mut self, row: &Pending) {
        let Ok(stored) = stored_features::decode(&row.features) else {
            self.data.unreadable += 1;
            return;
        };
        self.entries.clear();
        for (column, &index) in self.numeric.iter().enumerate() {
            let value = stored.values[index];
            if value != 0.0 {
                self.entries.push((column as u32 + 1, value));
            }
        }
        for category in &stored.categories {
            if !Group::of_name(category).is_some_and(|g| self.groups.contains(&g)) {
                continue;
            }
            let column = match self.category_columns.get(category.as_ref()) {
                Some(&column) => column,
                None => {
                    self.names.push(category.to_string());
                    let column = self.names.len() as u32;
                    self.category_columns.insert(category.to_string(), column);
                    column
                }
            };
            self.entries.push((column, 1.0));
        }
        self.entries.sort_unstable_by_key(|(c, _)| *c);
        self.entries.dedup_by_key(|(c, _)| *c);
        self.data.current_z.push(
            self.current
                .linear_of(&stored.values, stored.categories.iter().map(|c| c.as_ref())),
        );
        // A container deleted since counts as never passing.
        self.data.thresholds.push(
            self.thresholds
                .get(row.container.as_str())
                .copied()
                .unwrap_or(i64::MAX),
        );
        self.data.rows.push(self.entries.iter().copied(), row.good);
    }

    fn finish(mut self) -> Dataset {
        self.data.names = self.names;
        self.data
    }
}

impl Dataset {
    /// Leaves out the category columns seen in fewer than `min` rows of `range` (their
    /// weights would be noise; they stay at 0, neutral); returns how many went.
    pub(crate) fn drop_rare(&mut self, range: std::ops::Range<usize>, min: usize) -> usize {
        let mut counts = vec![0usize; self.names.len() + 1];
        for row in range {
            for (column, _) in self.rows.entries(row) {
                counts[column] += 1;
            }
        }
        let mut renumbered = vec![0u32; self.names.len() + 1];
        let mut names = Vec::with_capacity(self.names.len());
        for (index, name) in self.names.iter().enumerate() {
            let column = index + 1;
            let category = FEATURES.iter().all(|f| f.name() != name);
            if !category || counts[column] >= min {
                names.push(name.clone());
                renumbered[column] = names.len() as u32;
            }
        }
        let dropped = self.names.len() - names.len();
        if dropped == 0 {
            return 0;
        }
        let mut rows = Rows::new(names.len());
        for row in 0..self.rows.len() {
            let kept = self
                .rows
                .entries(row)
                .filter(|(c, _)| renumbered[*c] != 0)
                .map(|(c, v)| (renumbered[c], v));
            rows.push(kept, self.rows.label(row));
        }
        self.rows = rows;
        self.names = names;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodelivery::evaluator::DEFAULT_WEIGHTS;
    use crate::autodelivery::features::GROUPS;

    /// Requests `lreq_N` of `lead_test` with a transaction each: (N, created_at, status,
    /// stored features text or none). Rows written the way the owners write them, in the
    /// order given.
    fn transactions(rows: &[(u32, i64, &str, Option<&str>)]) -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::apply_migrations(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'W', 0);
             INSERT INTO products (id, workspace_id, slug, name, created_at)
                 VALUES ('solar', 'ws', 'solar', 'Solar', 0), ('heat', 'ws', 'heat', 'Heat', 0);
             INSERT INTO containers (id, workspace_id, kind, name, auto_delivery,
                 score_threshold, created_at)
                 VALUES ('web', 'ws', 'channel', 'Web', 1, 50, 0),
                        ('strict', 'ws', 'channel', 'Strict', 1, 99, 0);
             INSERT INTO sources (id, container_id, name, dedupe_scope, created_at)
                 VALUES ('src', 'web', 'S', 'channel', 0);
             INSERT INTO leads (id, source_id, container_id, workspace_id, first_name,
                 last_name, quality_status, duplicate_status, created_at)
                 VALUES ('lead_test', 'src', 'web', 'ws', 'Ann', 'Lee', 'ok', 'unique', 0);
             INSERT INTO buyers (id, workspace_id, name, webhook_url, signing_secret, created_at)
                 VALUES ('b', 'ws', 'B', 'http://127.0.0.1:9/', 'whsec_x', 0);",
        )
        .unwrap();
        for &(n, at, status, features) in rows {
            let request = format!("lreq_{n}");
            conn.execute(
                "INSERT INTO lead_requests (id, lead_id, position, product_id, created_at)
                 VALUES (?1, 'lead_test', ?2, 'solar', 0)",
                rusqlite::params![request, n],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO transactions (id, lead_request_id, lead_id, buyer_id, product_id,
                     workspace_id, delivery_mode, buyer_price_cents, margin_cents, status,
                     created_at, updated_at)
                 VALUES (?1, ?2, 'lead_test', 'b', 'solar', 'ws', 'exclusive', 100, 100, ?3,
                     ?4, ?4)",
                rusqlite::params![format!("txn_{n}"), request, status, at],
            )
            .unwrap();
            if let Some(text) = features {
                let container = if n == 3 { "strict" } else { "web" };
                conn.execute(
                    "INSERT INTO evaluation_features (lead_request_id, container_id, features)
                     VALUES (?1, ?2, ?3)",
                    rusqlite::params![request, container, text],
                )
                .unwrap();
            }
        }
        conn
    }

    fn selection(since_ms: i64) -> Selection {
        Selection {
            workspace_id: "ws".into(),
            since_ms,
            product_id: None,
        }
    }

    #[test]
    fn rows_come_in_time_order_with_labels_thresholds_and_columns() {
        let phone = r#"[1,[1,1,1,1,1,1,0,0],["source:a","hourOfDay:night"]]"#;
        let plain = r#"[1,[1,0,1,0,0,1,0,0],["source:b"]]"#;
        let conn = transactions(&[
            (1, 30, "rejected", Some(plain)),
            (2, 10, "acknowledged", Some(phone)),
            (3, 20, "paid", Some(phone)),
            (4, 15, "delivered", Some(phone)),
            (5, 25, "cancelled", None),
            (6, 5, "rejected", Some("junk")),
            (7, 1, "rejected", Some(plain)),
        ]);
        let data = load(&conn, &selection(2), &GROUPS, &DEFAULT_WEIGHTS).unwrap();
        let labels: Vec<bool> = (0..data.rows.len()).map(|i| data.rows.label(i)).collect();
        assert_eq!(labels, [true, true, false], "created at 10, 20, 30");
        assert_eq!((data.without_features, data.unreadable), (1, 1));
        assert_eq!(
            data.thresholds,
            [50, 99, 50],
            "row 3 is in the strict container"
        );
        assert_eq!(data.names[..8], FEATURES.map(|f| f.name().to_string()));
        assert_eq!(
            &data.names[8..],
            ["source:a", "hourOfDay:night", "source:b"],
            "in the order first seen in time"
        );
        let expected =
            DEFAULT_WEIGHTS.linear(&stored_features::decode(phone).unwrap().into_features());
        assert_eq!(data.current_z[..2], [expected, expected]);
        let last: Vec<(usize, f64)> = data.rows.entries(2).collect();
        assert_eq!(last, [(1, 1.0), (3, 1.0), (6, 1.0), (11, 1.0)]);

        let base = load(&conn, &selection(2), &[Group::Base], &DEFAULT_WEIGHTS).unwrap();
        assert_eq!(base.names.len(), 7, "only the seven base features");
        assert_eq!(
            base.current_z, data.current_z,
            "the current weights see everything"
        );
        let mut other = selection(0);
        other.product_id = Some("heat".into());
        assert_eq!(
            load(&conn, &other, &GROUPS, &DEFAULT_WEIGHTS)
                .unwrap()
                .rows
                .len(),
            0
        );
    }

    #[test]
    fn rows_of_one_millisecond_come_by_id_and_dropped_categories_are_ignored() {
        let phone = r#"[1,[1,1,1,1,1,1,0,0],["source:a","hourOfDay:night"]]"#;
        // Written by a build that still had the postal-prefix group.
        let old = r#"[1,[1,0,1,0,0,1,0,0],["source:b","postalPrefix:DE-80"]]"#;
        let conn = transactions(&[
            // Written first (and first by status too), so only the order by id puts it
            // second.
            (9, 20, "acknowledged", Some(old)),
            (3, 20, "rejected", Some(phone)),
            (1, 10, "acknowledged", Some(old)),
        ]);
        let data = load(&conn, &selection(0), &GROUPS, &DEFAULT_WEIGHTS).unwrap();
        let labels: Vec<bool> = (0..data.rows.len()).map(|i| data.rows.label(i)).collect();
        assert_eq!(
            labels,
            [true, false, true],
            "txn_1, then txn_3 before txn_9"
        );
        assert_eq!(data.thresholds, [50, 99, 50]);
        assert_eq!(
            &data.names[8..],
            ["source:b", "source:a", "hourOfDay:night"]
        );
        assert_eq!(data.unreadable, 0);
    }

    #[test]
    fn every_status_has_a_decided_label() {
        let labels: Vec<(Status, Option<bool>)> =
            Status::ALL.iter().map(|&s| (s, label(s))).collect();
        assert_eq!(
            labels,
            [
                (Status::Delivered, None),
                (Status::Acknowledged, Some(true)),
                (Status::Rejected, Some(false)),
                (Status::PayoutPending, Some(true)),
                (Status::Paid, Some(true)),
                (Status::Cancelled, Some(false)),
                (Status::ReturnRequested, None),
            ]
        );
    }
}
