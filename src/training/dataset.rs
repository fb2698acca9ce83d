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
//! Owns this read (transactions, `evaluation_features`, leads and containers, read only)
//! and the columns: the numeric features of the selected groups in their fixed order, then
//! each category factor in the order first seen.

use std::collections::HashMap;

use rusqlite::Connection;

use super::fit::Rows;
use crate::autodelivery::evaluator::Weights;
use crate::autodelivery::features::{FEATURES, Group};
use crate::autodelivery::stored_features;
use crate::delivery::transaction::Status;

/// Which transactions to learn from.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
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
        Status::Delivered => None,
    }
}

/// The rows, their columns, and what was left out.
#[derive(Debug, Clone)]
pub(crate) struct Dataset {
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

/// Reads the labelled rows of `selection`, with columns for the features of `groups`;
/// `current` scores each row's full stored features.
pub(crate) fn load(
    conn: &Connection,
    selection: &Selection,
    groups: &[Group],
    current: &Weights,
) -> rusqlite::Result<Dataset> {
    let numeric: Vec<usize> = FEATURES
        .iter()
        .filter(|f| groups.contains(&f.group()))
        .map(|f| f.index())
        .collect();
    let mut names: Vec<String> = numeric
        .iter()
        .map(|&i| FEATURES[i].name().to_string())
        .collect();
    let mut category_columns: HashMap<String, u32> = HashMap::new();
    let mut data = Dataset {
        rows: Rows::new(numeric.len()),
        names: Vec::new(),
        current_z: Vec::new(),
        thresholds: Vec::new(),
        without_features: 0,
        unreadable: 0,
    };
    let mut entries: Vec<(u32, f64)> = Vec::new();
    let mut statement = conn.prepare(
        "SELECT t.status, f.features, c.score_threshold
         FROM transactions t
         LEFT JOIN evaluation_features f ON f.lead_request_id = t.lead_request_id
         JOIN leads l ON l.id = t.lead_id
         JOIN containers c ON c.id = l.container_id
         WHERE t.workspace_id = ?1 AND t.created_at >= ?2
           AND (?3 IS NULL OR t.product_id = ?3)
         ORDER BY t.created_at, t.id",
    )?;
    let mut found = statement.query(rusqlite::params![
        selection.workspace_id,
        selection.since_ms,
        selection.product_id
    ])?;
    while let Some(row) = found.next()? {
        let Some(good) = label(row.get(0)?) else {
            continue;
        };
        let Some(text) = row.get_ref(1)?.as_str_or_null()? else {
            data.without_features += 1;
            continue;
        };
        let Ok(features) = stored_features::decode(text) else {
            data.unreadable += 1;
            continue;
        };
        entries.clear();
        for (column, &index) in numeric.iter().enumerate() {
            let value = features.values[index];
            if value != 0.0 {
                entries.push((column as u32 + 1, value));
            }
        }
        for category in &features.categories {
            if !Group::of_name(category).is_some_and(|g| groups.contains(&g)) {
                continue;
            }
            let next = (names.len() + 1) as u32;
            let column = *category_columns.entry(category.clone()).or_insert_with(|| {
                names.push(category.clone());
                next
            });
            entries.push((column, 1.0));
        }
        entries.sort_unstable_by_key(|(c, _)| *c);
        entries.dedup_by_key(|(c, _)| *c);
        data.current_z.push(current.linear(&features));
        data.thresholds.push(row.get(2)?);
        data.rows.push(entries.iter().copied(), good);
    }
    data.names = names;
    Ok(data)
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
            ]
        );
    }
}
