//! The `report_buckets` table: every write to it, and the recount `check` compares it with.
//!
//! Two writers, each in the writer job of the change: the job that accepts leads
//! (`accept::job`) for every lead it receives ([`leads_received`]: stored, a duplicate it
//! drops, or leads of the request that failed validation), and
//! `delivery::transaction` for every write that changes a transaction's state, price or
//! supplier cost ([`transaction_changed`]: the row moves by the difference between what
//! the transaction counted for before and after). Nothing else writes the table.
//!
//! What the hooks cost the writer (callgrind, 65cd4d4): the lead-side upserts, written per
//! lead, were 38,000 instructions of a plain lead's 130,000 in the job
//! (`examples/autodelivery_cost`, which calls the job directly), which is why `serve` sums
//! the leads of a group and writes them once before the commit ([`Rollup`]: 3,700 per
//! single lead, under 1,000 per lead of a batch of 100, `bench/instructions.sh`); the
//! transaction side adds 41,000 of an auto-delivered lead's 717,000 (6%). In return a
//! report reads the rows of its period, not the leads and transactions of the file
//! (`bench/report.sh`).

use crate::db::PrepareKept;
use crate::ids::SourceId;
use rusqlite::{Connection, params};

use super::Figures;

/// A bucket's length: a quarter hour, in ms. Every time zone's offset is a multiple of it.
pub(crate) const BUCKET_MS: i64 = 15 * 60 * 1000;

/// The start of the quarter hour holding `at_ms`.
pub fn bucket_of(at_ms: i64) -> i64 {
    at_ms.div_euclid(BUCKET_MS) * BUCKET_MS
}

/// A bucket row's key: the bucket is the quarter hour of `at_ms`.
struct Key<'a> {
    workspace_id: &'a str,
    at_ms: i64,
    source_id: &'a SourceId,
    buyer_id: &'a str,
    product_id: &'a str,
}

/// A day of `report_days`: a UTC day, in ms.
pub(crate) const DAY_MS: i64 = 86_400_000;

/// The start of the UTC day holding `at_ms`.
pub(crate) fn day_of(at_ms: i64) -> i64 {
    at_ms.div_euclid(DAY_MS) * DAY_MS
}

/// Which table a [`Span`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grain {
    /// `report_buckets`: quarter hours.
    QuarterHour,
    /// `report_days`: whole UTC days.
    Day,
}

impl Grain {
    /// The table and the name of its time column.
    pub fn table(self) -> (&'static str, &'static str) {
        match self {
            Grain::QuarterHour => ("report_buckets", "bucket"),
            Grain::Day => ("report_days", "day"),
        }
    }
}

/// A range of one of the aggregate's tables: rows whose time is in `from..to` (ms UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub grain: Grain,
    pub from: i64,
    pub to: i64,
}

/// The ranges of the aggregate that together hold exactly the time `start..end` (both on
/// quarter hours, as every local midnight is): the whole UTC days inside it from
/// `report_days`, the quarter hours before the first and after the last of them from
/// `report_buckets`. Empty ranges are left out.
pub fn spans(start: i64, end: i64) -> Vec<Span> {
    let mut found = Vec::with_capacity(3);
    if start >= end {
        return found;
    }
    let first_day = day_of(start.saturating_add(DAY_MS - 1));
    let last_day = day_of(end);
    let mut push = |grain, from: i64, to: i64| {
        if from < to {
            found.push(Span { grain, from, to });
        }
    };
    if first_day < last_day {
        push(Grain::QuarterHour, start, first_day);
        push(Grain::Day, first_day, last_day);
        push(Grain::QuarterHour, last_day, end);
    } else {
        push(Grain::QuarterHour, start, end);
    }
    found
}

/// Adds `delta` to the row of `key` and to its day's, creating them: at once, or, inside
/// a writer job that defers to the roll-up ([`Rollup`]), when its group commits.
fn add(conn: &Connection, key: &Key, delta: &Figures) -> rusqlite::Result<()> {
    if delta.is_zero() {
        return Ok(());
    }
    if SUMS.with_borrow_mut(|sums| sums.take(key, delta)) {
        return Ok(());
    }
    add_to(conn, Grain::QuarterHour, bucket_of(key.at_ms), key, delta)?;
    add_to(conn, Grain::Day, day_of(key.at_ms), key, delta)
}

/// A bucket row's key as the roll-up keeps it: the quarter hour and the ids it counts under.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    workspace_id: String,
    bucket: i64,
    source_id: SourceId,
    buyer_id: String,
    product_id: String,
}

impl Row {
    fn is(&self, key: &Key) -> bool {
        self.bucket == bucket_of(key.at_ms)
            && self.source_id == *key.source_id
            && self.product_id == key.product_id
            && self.buyer_id == key.buyer_id
            && self.workspace_id == key.workspace_id
    }

    fn key(&self) -> Key<'_> {
        Key {
            workspace_id: &self.workspace_id,
            at_ms: self.bucket,
            source_id: &self.source_id,
            buyer_id: &self.buyer_id,
            product_id: &self.product_id,
        }
    }
}

/// What the writer's current group transaction has counted and not yet written: the sums
/// of its committed jobs' figures per bucket row (`group`) and of the running job's
/// (`job`, dropped when the job fails). A group's jobs nearly all count
/// under the same few rows, so each list stays short and is searched in order.
#[derive(Debug, Default)]
struct Sums {
    /// Whether the running job defers: only then does [`add`] collect instead of writing.
    collecting: bool,
    job: Vec<(Row, Figures)>,
    group: Vec<(Row, Figures)>,
}

impl Sums {
    /// Collects `delta` for `key` when the running job defers; false when it does not.
    fn take(&mut self, key: &Key, delta: &Figures) -> bool {
        if !self.collecting {
            return false;
        }
        sum_into(&mut self.job, key, delta);
        true
    }
}

/// Adds `delta` to the entry of `key` in `rows`, appending one when there is none.
fn sum_into(rows: &mut Vec<(Row, Figures)>, key: &Key, delta: &Figures) {
    match rows.iter_mut().find(|(row, _)| row.is(key)) {
        Some((_, sum)) => sum.add(delta),
        None => rows.push((
            Row {
                workspace_id: key.workspace_id.to_string(),
                bucket: bucket_of(key.at_ms),
                source_id: key.source_id.clone(),
                buyer_id: key.buyer_id.to_string(),
                product_id: key.product_id.to_string(),
            },
            *delta,
        )),
    }
}

thread_local! {
    /// The roll-up of the group transaction on this thread: only the writer thread, one
    /// connection with one transaction at a time, ever collects.
    static SUMS: std::cell::RefCell<Sums> = std::cell::RefCell::new(Sums::default());
}

/// The report roll-up of the writer's group transactions (`db::writer::Deferred`): a job
/// submitted with it (`Db::write_deferring(&report::ROLLUP, ..)`, ingest) adds its leads'
/// and transactions' figures to the group's sums instead of upserting a quarter-hour row and
/// a day row each time, and the writer writes the sums once per group, in the same
/// transaction, before its commit. So the reports stay exact and commit or roll back with
/// the leads they count. A job submitted without it (any other writer job: one may delete a
/// source the sums name) finds the sums written before it runs. Plain ingest spent 39,700
/// writer instructions per single lead and 36,700 per lead in batches of 100 on the two
/// upserts; with the roll-up 3,700 and under 1,000 (callgrind, BENCHMARKS.md "Plain
/// ingest").
pub struct Rollup;

/// The report roll-up (see [`Rollup`]).
pub static ROLLUP: Rollup = Rollup;

impl crate::db::Deferred for Rollup {
    fn job_start(&self) {
        SUMS.with_borrow_mut(|sums| {
            sums.collecting = true;
            sums.job.clear();
        });
    }

    fn job_end(&self, kept: bool) {
        SUMS.with_borrow_mut(|sums| {
            sums.collecting = false;
            let job = std::mem::take(&mut sums.job);
            if kept {
                for (row, delta) in &job {
                    sum_into(&mut sums.group, &row.key(), delta);
                }
            }
            sums.job = job;
            sums.job.clear();
        });
    }

    fn pending(&self) -> bool {
        SUMS.with_borrow(|sums| !sums.group.is_empty())
    }

    fn discard(&self) {
        SUMS.with_borrow_mut(|sums| sums.group.clear());
    }

    fn write(&self, conn: &Connection) -> rusqlite::Result<()> {
        let rows = SUMS.with_borrow_mut(|sums| std::mem::take(&mut sums.group));
        let mut days: Vec<(Row, Figures)> = Vec::new();
        for (row, sum) in &rows {
            let key = row.key();
            add_to(conn, Grain::QuarterHour, row.bucket, &key, sum)?;
            // A day starts on a quarter hour, so the day's key is a bucket key too.
            let day = Key {
                at_ms: day_of(row.bucket),
                ..key
            };
            sum_into(&mut days, &day, sum);
        }
        for (row, sum) in &days {
            add_to(conn, Grain::Day, row.bucket, &row.key(), sum)?;
        }
        Ok(())
    }
}

/// Adds `delta` to the row of `key` in the table of `grain`, whose time is `at`.
fn add_to(
    conn: &Connection,
    grain: Grain,
    at: i64,
    key: &Key,
    delta: &Figures,
) -> rusqlite::Result<()> {
    let sql = match grain {
        Grain::QuarterHour => UPSERT_BUCKET,
        Grain::Day => UPSERT_DAY,
    };
    conn.prepare_kept(sql)?.execute(params![
        key.workspace_id,
        at,
        key.source_id,
        key.buyer_id,
        key.product_id,
        delta.received,
        delta.accepted,
        delta.duplicates,
        delta.rejected,
        delta.dropped,
        delta.sold,
        delta.acknowledged,
        delta.returned,
        delta.paid,
        delta.revenue_cents,
        delta.supplier_cost_cents,
    ])?;
    Ok(())
}

/// The upsert of one row of counts into a report table keyed by `$key` (the quarter hour's
/// `bucket` or the `day`): the same columns and sums for both tables, one text each so the
/// statement cache holds them.
macro_rules! upsert_counts {
    ($table:literal, $key:literal) => {
        concat!(
            "INSERT INTO ",
            $table,
            " (workspace_id, ",
            $key,
            ", source_id, buyer_id, product_id,
            received, accepted, duplicates, rejected, dropped, sold, acknowledged, returned,
            paid, revenue_cents, supplier_cost_cents)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
         ON CONFLICT (workspace_id, ",
            $key,
            ", source_id, buyer_id, product_id) DO UPDATE SET
            received = received + excluded.received,
            accepted = accepted + excluded.accepted,
            duplicates = duplicates + excluded.duplicates,
            rejected = rejected + excluded.rejected,
            dropped = dropped + excluded.dropped,
            sold = sold + excluded.sold,
            acknowledged = acknowledged + excluded.acknowledged,
            returned = returned + excluded.returned,
            paid = paid + excluded.paid,
            revenue_cents = revenue_cents + excluded.revenue_cents,
            supplier_cost_cents = supplier_cost_cents + excluded.supplier_cost_cents"
        )
    };
}

const UPSERT_BUCKET: &str = upsert_counts!("report_buckets", "bucket");

const UPSERT_DAY: &str = upsert_counts!("report_days", "day");

/// What ingest did with leads it received (a replay of a known `externalId` is not
/// received again and is not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Received {
    /// Stored as unique.
    Accepted,
    /// Matched an earlier lead and stored for review.
    DuplicateKept,
    /// Matched an earlier lead under a `reject` rule: not stored.
    DuplicateDropped,
    /// Failed validation: not stored.
    Invalid,
}

/// Counts `count` leads of source `source_id` that ingest took as `how` at `at_ms`, under
/// the product of their first interest (`None`: none, or not known because they failed
/// validation).
pub(crate) fn leads_received(
    conn: &Connection,
    workspace_id: &str,
    source_id: &SourceId,
    product_id: Option<&str>,
    how: Received,
    count: i64,
    at_ms: i64,
) -> rusqlite::Result<()> {
    let of = |yes: bool| if yes { count } else { 0 };
    add(
        conn,
        &Key {
            workspace_id,
            at_ms,
            source_id,
            buyer_id: "",
            product_id: product_id.unwrap_or(""),
        },
        &Figures {
            received: count,
            accepted: of(how == Received::Accepted),
            duplicates: of(matches!(
                how,
                Received::DuplicateKept | Received::DuplicateDropped
            )),
            rejected: of(how == Received::Invalid),
            dropped: of(matches!(
                how,
                Received::DuplicateDropped | Received::Invalid
            )),
            ..Figures::default()
        },
    )
}

/// Where a transaction stands as the report counts it. Its owner (`delivery::transaction`)
/// tells it from the transaction's status, so the report names no status of another module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Delivered, not acknowledged yet.
    Delivered,
    /// Acknowledged, or further along but not paid (payout pending).
    Acknowledged,
    Paid,
    /// Rejected or cancelled by the buyer.
    Returned,
}

/// A transaction as the aggregate counts it: where (its workspace, the quarter hour it was
/// delivered, its lead's source, buyer and product) and its state and amounts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counted<'a> {
    pub(crate) workspace_id: &'a str,
    pub(crate) source_id: &'a SourceId,
    pub(crate) buyer_id: &'a crate::ids::BuyerId,
    pub(crate) product_id: &'a str,
    /// When it was delivered (`created_at`).
    pub(crate) delivered_at: i64,
    pub(crate) standing: Standing,
    pub(crate) buyer_price_cents: i64,
    /// The supplier cost it counts for: its own when it bought the lead (the first
    /// transaction of its request that carries one), 0 when it took the cost over from a
    /// returned one (`delivery::transaction::report_cost`).
    pub(crate) supplier_cost_cents: i64,
}

impl Counted<'_> {
    /// What one transaction counts for: sold once; acknowledged while it is acknowledged
    /// or further along (payout pending, paid); returned when the buyer rejected or
    /// cancelled it; paid when paid. A returned transaction carries no revenue, but the
    /// supplier cost stays where the lead was bought whatever the buyer did: the supplier
    /// is owed it (the supplier's ledger holds it) until its confirmed cancellation
    /// reverses it, which sets the cost to 0. A pending or disputed cancellation takes
    /// nothing back. So the report's supplier cost is what the suppliers' ledgers hold for
    /// the period's deliveries.
    fn figures(&self) -> Figures {
        let returned = self.standing == Standing::Returned;
        Figures {
            sold: 1,
            acknowledged: i64::from(matches!(
                self.standing,
                Standing::Acknowledged | Standing::Paid
            )),
            returned: i64::from(returned),
            paid: i64::from(self.standing == Standing::Paid),
            revenue_cents: if returned { 0 } else { self.buyer_price_cents },
            supplier_cost_cents: self.supplier_cost_cents,
            ..Figures::default()
        }
    }
}

/// Moves the aggregate by what a change did to one transaction: `before` is the
/// transaction as it was (`None` when it is new), `after` as it is now; both count at
/// `after`'s place (a transaction's place never changes).
pub(crate) fn transaction_changed(
    conn: &Connection,
    before: Option<&Counted>,
    after: &Counted,
) -> rusqlite::Result<()> {
    let was = before.map_or_else(Figures::default, Counted::figures);
    add(
        conn,
        &Key {
            workspace_id: after.workspace_id,
            at_ms: after.delivered_at,
            source_id: after.source_id,
            buyer_id: after.buyer_id.as_str(),
            product_id: after.product_id,
        },
        &after.figures().minus(&was),
    )
}

/// The bucket rows that differ from a recount of the stored leads and transactions, one
/// line each (`check`). Leads that were not stored (`dropped`: failed validation, rejected
/// duplicates) cannot be recounted: the comparison takes them out of `received` and
/// `duplicates` and leaves `rejected` unchecked.
pub(crate) fn mismatches(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut found = differing_rows(
        conn,
        QUARTER_HOUR_DIFFERENCES,
        |workspace, bucket, source, buyer, product| {
            format!(
                "report_buckets of workspace '{workspace}', quarter hour {}, source '{source}', \
                 buyer '{buyer}', product '{product}' differ from a recount of the leads and \
                 transactions",
                crate::clock::iso(bucket)
            )
        },
    )?;
    found.extend(day_mismatches(conn)?);
    Ok(found)
}

/// The keys of the quarter hours whose stored figures differ from a recount of the leads
/// and transactions. Stored rows and recounted ones (negated) go into one `GROUP BY` and a
/// key differs where any figure does not sum to zero: linear in the rows, where a
/// `FULL OUTER JOIN` of the two sides compares every stored row with every recounted one
/// (SQLite builds no index for either side of it: 25 minutes and more on a million leads).
/// A key on one side only differs unless all its figures are zero, as with the join.
pub(super) const QUARTER_HOUR_DIFFERENCES: &str = "WITH kept AS (
        SELECT workspace_id, bucket, source_id, buyer_id, product_id,
               received - dropped AS received, accepted,
               duplicates - (dropped - rejected) AS duplicates, sold, acknowledged,
               returned, paid, revenue_cents AS revenue, supplier_cost_cents AS cost
        FROM report_buckets),
     counted AS (
        SELECT l.workspace_id, (l.created_at / 900000) * 900000 AS bucket, l.source_id,
               '' AS buyer_id,
               coalesce((SELECT r.product_id FROM lead_requests r WHERE r.lead_id = l.id
                         ORDER BY r.position LIMIT 1), '') AS product_id,
               count(*) AS received, sum(l.duplicate_status = 'unique') AS accepted,
               sum(l.duplicate_status <> 'unique') AS duplicates, 0 AS sold,
               0 AS acknowledged, 0 AS returned, 0 AS paid, 0 AS revenue, 0 AS cost
        FROM leads l GROUP BY 1, 2, 3, 4, 5
        UNION ALL
        SELECT t.workspace_id, (t.created_at / 900000) * 900000, l.source_id, t.buyer_id,
               t.product_id, 0, 0, 0, count(*),
               sum(t.status IN ('acknowledged', 'payout_pending', 'paid')),
               sum(t.status IN ('rejected', 'cancelled')), sum(t.status = 'paid'),
               sum(CASE WHEN t.status IN ('rejected', 'cancelled') THEN 0
                   ELSE t.buyer_price_cents END),
               sum(CASE WHEN EXISTS (SELECT 1 FROM transactions e
                                     WHERE e.lead_request_id = t.lead_request_id
                                       AND e.supplier_cost_cents > 0
                                       AND (e.created_at, e.rowid)
                                           < (t.created_at, t.rowid))
                   THEN 0 ELSE t.supplier_cost_cents END)
        FROM transactions t JOIN leads l ON l.id = t.lead_id GROUP BY 1, 2, 3, 4, 5),
     both_sides AS (
        SELECT * FROM kept
        UNION ALL
        SELECT workspace_id, bucket, source_id, buyer_id, product_id, -received, -accepted,
               -duplicates, -sold, -acknowledged, -returned, -paid, -revenue, -cost
        FROM counted)
     SELECT workspace_id, bucket, source_id, buyer_id, product_id
     FROM both_sides GROUP BY 1, 2, 3, 4, 5
     HAVING total(received) <> 0 OR total(accepted) <> 0 OR total(duplicates) <> 0
         OR total(sold) <> 0 OR total(acknowledged) <> 0 OR total(returned) <> 0
         OR total(paid) <> 0 OR total(revenue) <> 0 OR total(cost) <> 0
     ORDER BY 1, 2, 3, 4, 5";

/// The `report_days` rows that differ from the sum of their day's quarter hours (which
/// [`mismatches`] recounts from the leads and transactions), one line each.
fn day_mismatches(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    differing_rows(
        conn,
        DAY_DIFFERENCES,
        |workspace, day, source, buyer, product| {
            format!(
                "report_days of workspace '{workspace}', UTC day {}, source '{source}', \
                 buyer '{buyer}', product '{product}' differ from the sum of its quarter hours",
                crate::clock::iso(day)
            )
        },
    )
}

/// The keys of the days whose stored figures differ from the sum of their quarter hours:
/// one `GROUP BY` over both sides, the quarter hours negated, as
/// [`QUARTER_HOUR_DIFFERENCES`] does and for the same reason.
pub(super) const DAY_DIFFERENCES: &str = "WITH both_sides AS (
        SELECT workspace_id, day, source_id, buyer_id, product_id, received, accepted,
               duplicates, rejected, dropped, sold, acknowledged, returned, paid,
               revenue_cents AS revenue, supplier_cost_cents AS cost
        FROM report_days
        UNION ALL
        SELECT workspace_id, (bucket / 86400000) * 86400000
                   - (bucket % 86400000 < 0) * 86400000,
               source_id, buyer_id, product_id, -received, -accepted, -duplicates,
               -rejected, -dropped, -sold, -acknowledged, -returned, -paid,
               -revenue_cents, -supplier_cost_cents
        FROM report_buckets)
     SELECT workspace_id, day, source_id, buyer_id, product_id
     FROM both_sides GROUP BY 1, 2, 3, 4, 5
     HAVING total(received) <> 0 OR total(accepted) <> 0 OR total(duplicates) <> 0
         OR total(rejected) <> 0 OR total(dropped) <> 0 OR total(sold) <> 0
         OR total(acknowledged) <> 0 OR total(returned) <> 0 OR total(paid) <> 0
         OR total(revenue) <> 0 OR total(cost) <> 0
     ORDER BY 1, 2, 3, 4, 5";

/// Runs a comparison query whose rows are the keys (workspace, time, source, buyer,
/// product) of the report rows that differ, and describes each with `describe`.
fn differing_rows(
    conn: &Connection,
    sql: &str,
    describe: impl Fn(String, i64, String, String, String) -> String,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], |row| {
        Ok(describe(
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
        ))
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_quarter_hours_also_before_1970() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(BUCKET_MS - 1), 0);
        assert_eq!(bucket_of(BUCKET_MS), BUCKET_MS);
        assert_eq!(bucket_of(-1), -BUCKET_MS);
    }

    static BUYER: std::sync::LazyLock<crate::ids::BuyerId> =
        std::sync::LazyLock::new(|| "b".into());

    fn counted(source_id: &SourceId, standing: Standing) -> Counted<'_> {
        Counted {
            workspace_id: "ws",
            source_id,
            buyer_id: &BUYER,
            product_id: "p",
            delivered_at: 0,
            standing,
            buyer_price_cents: 2500,
            supplier_cost_cents: 400,
        }
    }

    #[test]
    fn what_a_transaction_counts_for_in_each_state() {
        // (standing, acknowledged, returned, paid, revenue, cost)
        let table = [
            (Standing::Delivered, 0, 0, 0, 2500, 400),
            (Standing::Acknowledged, 1, 0, 0, 2500, 400),
            (Standing::Paid, 1, 0, 1, 2500, 400),
            // The supplier is owed the lead until a confirmed cancellation reverses it.
            (Standing::Returned, 0, 1, 0, 0, 400),
        ];
        let source_id = SourceId::from("src");
        for (standing, acknowledged, returned, paid, revenue, cost) in table {
            let f = counted(&source_id, standing).figures();
            assert_eq!(
                (f.sold, f.acknowledged, f.returned, f.paid),
                (1, acknowledged, returned, paid),
                "{standing:?}"
            );
            assert_eq!((f.revenue_cents, f.supplier_cost_cents), (revenue, cost));
        }
    }
}
