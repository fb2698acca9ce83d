//! The buyers subscribed to a product in a workspace, as eligibility checks them: each
//! subscription's terms with its buyer's standing (status, plan, balance less holds, credit,
//! when last served), its endpoint's health and its cap counters.
//!
//! Read fresh ([`read`]), or kept between leads on the thread that decides ([`kept`]): the
//! ingest job's auto-delivery ran the same twenty-row join for every lead (15% of the writer
//! thread, which sets how many leads a second can be routed), although between two leads
//! only the buyer that got the earlier one changed. Kept, an auto-delivered lead with twenty
//! subscribed buyers, each with caps and a filter, costs its writer job 717,000
//! instructions; read fresh, 906,000 (+26%) (callgrind of `examples/autodelivery_cost` with `ONLY=5 LEADS=1000`, the 20-buyer
//! scenario, counting only the writer jobs; 65cd4d4).
//! What is kept must be exactly what the join would read now, so every answer is checked
//! against three things first:
//!
//! - another connection's commit (the CLI changes buyers, subscriptions and balances from its
//!   own process): `PRAGMA data_version` moved, and everything kept is dropped;
//! - this connection's own writes: temporary triggers on `buyers`, `subscriptions`,
//!   `buyer_health` and `cap_usage`, installed on the connection by the first [`kept`] read,
//!   name each buyer whose row changed (or "all", for a change of the subscriptions or of a
//!   buyer's id or workspace) to [`mark`], and only those buyers are read again, whoever
//!   wrote (a delivery, a lifecycle call, the outbox's health, a ping's hold). The two
//!   changes every delivery makes carry their new values instead, which are written into
//!   the kept rows without reading them again: a buyer's `last_served_at` ([`served`]) and
//!   its cap counters for a product ([`counted`]). Reading the served buyer's row again
//!   for the next lead was 10% of an auto-delivered lead's job instructions (the join, its
//!   parse, the copy's new stamp, the two triggers' marks);
//! - a rolled-back savepoint or transaction (the writer rolls back a failed job), which
//!   undoes writes without a trigger: every read into the copy writes a new stamp into a
//!   temporary table, which the rollback undoes with the rest, and a stamp that no longer
//!   matches drops everything kept. The triggers and the stamp table are created in the
//!   same savepoint, so a rollback that undoes one undoes the other, and the next read
//!   installs both again. The values the triggers carry are written into the copy at its
//!   next read, in the same job or a later one, without a stamp: on the writer its count of
//!   rollbacks (`db::rollbacks`) guards them, and any rollback drops everything kept; on
//!   another connection, whose rollbacks nothing counts, each check turns the carried
//!   values into marks. A job that went on after a failed write of a served time or a
//!   cap counter (the failure undoes the statement, not what its trigger carried) would
//!   defeat this: the writes that carry them (`buyer::mark_served`, `caps`) are single
//!   rows by key, and their callers fail the job on any error.
//!
//! On the writer these checks run once per job (`db::running_job`): inside a job nothing but
//! its own writes can change what it reads, and the triggers mark those.
//!
//! The same copy keeps what every routed lead read again besides: the settings of its
//! container and source ([`kept_settings`]) and its product's terms
//! ([`kept_product_terms`]), 20,000 of an auto-delivered lead's 610,000 job instructions
//! (callgrind as above). A change of any container, workspace, source or product marks
//! "all"; such changes are rare.
//!
//! The kept rows keep the join's order; readers rank them anyway (`select`).
//!
//! Owns the SQL that reads subscribed buyers, the parse of their stored filters, the kept
//! copy, and the temporary table and triggers it installs (nothing in the file: they live
//! and die with the connection).

use crate::db::PrepareKept;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, OptionalExtension};

use serde_json::Value;

use super::schedule::Schedule;
use crate::caps::{self, Counters};
use crate::config::buyer::{BuyerStatus, Filter, Plan};

/// A subscribed buyer as read, before the checks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Subscribed {
    pub(crate) buyer_id: crate::ids::BuyerId,
    pub(crate) paused: bool,
    pub(crate) unhealthy: bool,
    pub(crate) plan: Plan,
    /// The balance less what ping reservations hold of it (`ledger::hold`).
    pub(crate) balance_cents: i64,
    pub(crate) credit_limit_cents: i64,
    pub(crate) last_served_at: Option<i64>,
    pub(crate) created_at: i64,
    pub(crate) price_cents: i64,
    /// Bid-priced: the price is the buyer's bid, so the balance is checked when it is known
    /// (`eligibility::apply_bids`).
    pub(crate) bids: bool,
    pub(crate) daily_cap: Option<i64>,
    pub(crate) monthly_cap: Option<i64>,
    pub(crate) priority: i64,
    /// The subscription's filters, parsed when the row is read (kept rows are checked
    /// against every lead); the parse error's text when the stored text does not read.
    pub(crate) filters: Result<Arc<Vec<Filter>>, String>,
    /// The subscription's schedule, read when the row is read, as the filters are.
    pub(crate) schedule: Option<StoredSchedule>,
    /// The check step a lead must have passed (DESIGN.md section 22).
    pub(crate) require_check: Option<String>,
    pub(crate) caps: Counters,
}

/// A subscription's stored schedule as the checks use it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredSchedule {
    /// The stored text as JSON, which a trace shows (null when it is not JSON).
    pub(crate) shown: Arc<Value>,
    /// The schedule, or why the stored text does not read as one (then it is never open).
    pub(crate) read: Result<Schedule, String>,
}

impl StoredSchedule {
    fn parse(stored: &str) -> StoredSchedule {
        let value = serde_json::from_str::<Value>(stored);
        let read = value
            .as_ref()
            .map_err(|e| e.to_string())
            .and_then(Schedule::from_json);
        StoredSchedule {
            shown: Arc::new(value.unwrap_or(Value::Null)),
            read,
        }
    }
}

/// The join's columns, each row a [`Subscribed`] ([`from_row`]).
fn select_sql(one_buyer: bool) -> String {
    let sql = format!(
        "SELECT b.id, b.status, b.plan, b.balance_cents - b.held_cents, b.credit_limit_cents,
                b.last_served_at, b.created_at,
                s.price_cents, s.daily_cap, s.monthly_cap, s.priority, s.filters, s.schedule,
                h.state = 'unhealthy', s.pricing = 'bid', s.require_check, {}
         FROM subscriptions s JOIN buyers b ON b.id = s.buyer_id
         LEFT JOIN buyer_health h ON h.buyer_id = b.id
         LEFT JOIN cap_usage u ON u.buyer_id = s.buyer_id AND u.product_id = s.product_id
         WHERE s.product_id = ?1 AND b.workspace_id = ?2",
        caps::COUNTER_COLUMNS
    );
    if one_buyer {
        sql + " AND s.buyer_id = ?3"
    } else {
        sql
    }
}

fn from_row(row: &rusqlite::Row) -> rusqlite::Result<Subscribed> {
    Ok(Subscribed {
        buyer_id: row.get(0)?,
        paused: row.get::<_, BuyerStatus>(1)? == BuyerStatus::Paused,
        plan: row.get(2)?,
        balance_cents: row.get(3)?,
        credit_limit_cents: row.get(4)?,
        last_served_at: row.get(5)?,
        created_at: row.get(6)?,
        price_cents: row.get(7)?,
        daily_cap: row.get(8)?,
        monthly_cap: row.get(9)?,
        priority: row.get(10)?,
        filters: parsed_filters(&row.get::<_, String>(11)?).map_err(|e| e.to_string()),
        schedule: row
            .get::<_, Option<String>>(12)?
            .map(|stored| StoredSchedule::parse(&stored)),
        unhealthy: row.get::<_, Option<bool>>(13)?.unwrap_or(false),
        bids: row.get(14)?,
        require_check: row.get(15)?,
        caps: caps::counters_from_row(row, 16)?,
    })
}

/// A subscription's stored filters, parsed once per thread rather than for every row read
/// (a ping's profile had 4% of its samples in this parse; a kept row carries its parsed
/// filters, so it is not looked up here for every lead). Keyed by the stored text itself,
/// so an edited subscription is a new key and never reads stale filters; the map is emptied
/// when it grows past what any workspace has.
fn parsed_filters(stored: &str) -> Result<Arc<Vec<Filter>>, serde_json::Error> {
    const MOST_KEPT: usize = 4096;
    thread_local! {
        static PARSED: RefCell<HashMap<String, Arc<Vec<Filter>>>> = RefCell::new(HashMap::new());
    }
    PARSED.with(|parsed| {
        if let Some(filters) = parsed.borrow().get(stored) {
            return Ok(Arc::clone(filters));
        }
        let filters = Arc::new(serde_json::from_str::<Vec<Filter>>(stored)?);
        let mut parsed = parsed.borrow_mut();
        if parsed.len() >= MOST_KEPT {
            parsed.clear();
        }
        parsed.insert(stored.to_owned(), Arc::clone(&filters));
        Ok(filters)
    })
}

/// Every buyer of `workspace_id` subscribed to `product_id`, read now.
pub(crate) fn read(
    conn: &Connection,
    workspace_id: &str,
    product_id: &str,
) -> rusqlite::Result<Vec<Rc<Subscribed>>> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| select_sql(false));
    let mut stmt = conn.prepare_kept(&SQL)?;
    let rows = stmt.query_map([product_id, workspace_id], |row| from_row(row).map(Rc::new))?;
    rows.collect()
}

/// Buyer `buyer_id`'s row of [`read`]; `None` when it is no longer one of them.
fn read_one(
    conn: &Connection,
    workspace_id: &str,
    product_id: &str,
    buyer_id: &crate::ids::BuyerId,
) -> rusqlite::Result<Option<Subscribed>> {
    // Built once: this runs for nearly every routed lead (the buyer served last).
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| select_sql(true));
    conn.prepare_kept(&SQL)?
        .query_row(
            rusqlite::params![product_id, workspace_id, buyer_id],
            from_row,
        )
        .optional()
}

/// What [`read`] answers now, from the copy kept on this thread where it is still exact
/// (see the module header); use it only on a connection whose writes this thread makes.
pub(crate) fn kept(
    conn: &Connection,
    workspace_id: &str,
    product_id: &str,
) -> rusqlite::Result<Vec<Rc<Subscribed>>> {
    with_checked(conn, |kept| refresh(conn, kept, workspace_id, product_id))
}

/// The settings of leads from `source_id` in `container_id` as
/// [`SettingsRow::read`](super::SettingsRow::read) reads them now, kept beside the
/// subscribed buyers under the same checks: a change of a container, workspace, source or
/// product through this connection drops both (the triggers mark all), as does another
/// connection's commit or a rollback. `None` when the container is missing.
pub(crate) fn kept_settings(
    conn: &Connection,
    container_id: &str,
    source_id: &crate::ids::SourceId,
) -> rusqlite::Result<Option<Arc<super::SettingsRow>>> {
    let key = (container_id.to_owned(), source_id.as_str().to_owned());
    with_checked(conn, |kept| {
        kept_or_read(
            conn,
            kept,
            |kept| &mut kept.settings,
            &key,
            || super::SettingsRow::read(conn, container_id, source_id),
        )
    })
}

/// What auto-delivery needs of product `product_id` as
/// [`product_terms`](super::product_terms) reads it now, kept as [`kept_settings`] keeps
/// the settings; `None` when there is no such product.
pub(crate) fn kept_product_terms(
    conn: &Connection,
    product_id: &str,
) -> rusqlite::Result<Option<Arc<super::ProductTerms>>> {
    with_checked(conn, |kept| {
        kept_or_read(
            conn,
            kept,
            |kept| &mut kept.products,
            product_id,
            || super::product_terms(conn, product_id),
        )
    })
}

/// `work` on the kept copy, checked against `conn` first ([`checked`]) and put back on this
/// thread whatever happens: an error leaves the copy as it was, which is still exact for
/// the marks not yet taken (they are put back too).
fn with_checked<T>(
    conn: &Connection,
    work: impl FnOnce(&mut Kept) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut kept = checked(conn)?;
    let result = work(&mut kept);
    KEPT.with(|slot| slot.replace(kept));
    result
}

/// The value kept under `key` in the map `map` picks out of the copy, or, when there is
/// none, what `read` reads now, kept and stamped (it may hold this transaction's writes);
/// `None` when `read` finds nothing, which is not kept.
fn kept_or_read<K, Q, V>(
    conn: &Connection,
    kept: &mut Kept,
    map: fn(&mut Kept) -> &mut HashMap<K, Arc<V>>,
    key: &Q,
    read: impl FnOnce() -> rusqlite::Result<Option<V>>,
) -> rusqlite::Result<Option<Arc<V>>>
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
{
    drop_all_if_marked(kept);
    if let Some(found) = map(kept).get(key) {
        return Ok(Some(Arc::clone(found)));
    }
    let Some(value) = read()? else {
        return Ok(None);
    };
    let value = Arc::new(value);
    map(kept).insert(key.to_owned(), Arc::clone(&value));
    stamp_again(conn, kept)?;
    Ok(Some(value))
}

/// Drops everything kept when a change may have touched any of it (a mark for all), and
/// with it every mark: nothing kept is left for them to name.
fn drop_all_if_marked(kept: &mut Kept) {
    CHANGED.with(|changed| {
        let mut changed = changed.borrow_mut();
        if changed.all {
            kept.clear();
            changed.take();
        }
    });
}

/// The kept copy taken from this thread, checked against `conn` (see the module header):
/// `PRAGMA data_version` for other connections' commits, the stamp for a rollback. Checked
/// once per writer job (`db::running_job`): for the rest of the job only its own writes
/// change what it reads, and the triggers mark those. The caller puts the copy back.
fn checked(conn: &Connection) -> rusqlite::Result<Kept> {
    // The job and the connection the copy was checked in (a job could open another): the
    // connection's address, which does not move while a job borrows it.
    let checked_in = crate::db::running_job().map(|job| (job, std::ptr::from_ref(conn) as usize));
    if checked_in.is_some() && KEPT.with(|kept| kept.borrow().checked_in == checked_in) {
        return Ok(KEPT.with(|kept| kept.take()));
    }
    let data_version: i64 = conn
        .prepare_kept("PRAGMA data_version")?
        .query_row([], |row| row.get(0))?;
    let (token, stamp) = match stamp_of(conn)? {
        Some(found) => found,
        None => install(conn)?,
    };
    let rollbacks = crate::db::rollbacks();
    let mut kept = KEPT.with(|kept| kept.take());
    if kept.token != token
        || kept.stamp != stamp
        || kept.data_version != data_version
        || kept.rollbacks != rollbacks
    {
        kept = Kept {
            token,
            stamp,
            data_version,
            rollbacks,
            ..Kept::default()
        };
        // Marks made before were for what is dropped now.
        CHANGED.with(|changed| changed.replace(Changed::for_token(token)));
    } else if checked_in.is_none() {
        // Not in a writer job: a rollback since the values were carried would not show.
        CHANGED.with(|changed| changed.borrow_mut().carried_to_marks());
    }
    kept.checked_in = checked_in;
    Ok(kept)
}

/// Brings the kept rows of (`workspace_id`, `product_id`) up to date with this connection's
/// marked changes and returns them.
fn refresh(
    conn: &Connection,
    kept: &mut Kept,
    workspace_id: &str,
    product_id: &str,
) -> rusqlite::Result<Vec<Rc<Subscribed>>> {
    let marks = CHANGED.with(|changed| changed.borrow_mut().take());
    if !marks.all {
        // Only a writer job's check leaves carried values (elsewhere `checked` turns them
        // into marks): the writer's count of rollbacks guards the rows they patch, which
        // therefore need no new stamp.
        patch(kept, &marks);
    }
    let refreshed = refresh_marked(conn, kept, marks, workspace_id, product_id);
    if refreshed.is_err() {
        // Read again in part, not stamped: nothing kept is sure.
        kept.clear();
    }
    refreshed
}

/// Writes the new values `marks` carry into every kept row they name, but a marked buyer's
/// (read again).
fn patch(kept: &mut Kept, marks: &Changed) {
    for (buyer, at) in &marks.served {
        if marks.buyers.contains(buyer) {
            continue;
        }
        for row in kept.entries.values_mut().flatten() {
            if row.buyer_id == *buyer {
                Rc::make_mut(row).last_served_at = *at;
            }
        }
    }
    for ((buyer, product), counters) in &marks.counted {
        if marks.buyers.contains(buyer) {
            continue;
        }
        let rows = kept
            .entries
            .iter_mut()
            .filter(|((_, kept_product), _)| kept_product == product);
        for row in rows.flat_map(|(_, rows)| rows.iter_mut()) {
            if row.buyer_id == *buyer {
                Rc::make_mut(row).caps = *counters;
            }
        }
    }
}

/// [`refresh`] after the patches: the marked buyers' rows read again, the rows of
/// (`workspace_id`, `product_id`) read when none are kept, and the copy stamped when
/// either was.
fn refresh_marked(
    conn: &Connection,
    kept: &mut Kept,
    marks: Changed,
    workspace_id: &str,
    product_id: &str,
) -> rusqlite::Result<Vec<Rc<Subscribed>>> {
    let key = (workspace_id.to_owned(), product_id.to_owned());
    let mut modified = false;
    if marks.all {
        kept.clear();
    } else if !marks.buyers.is_empty() {
        // Another product's or workspace's rows that name a changed buyer are read again
        // when next asked for; this one's changed rows are read again now.
        kept.entries.retain(|other, rows| {
            other == &key || !rows.iter().any(|row| marks.buyers.contains(&row.buyer_id))
        });
        if let Some(rows) = kept.entries.get_mut(&key) {
            let mut index = 0;
            while index < rows.len() {
                if !marks.buyers.contains(&rows[index].buyer_id) {
                    index += 1;
                    continue;
                }
                // On an error nothing is kept ([`refresh`]).
                let fresh = read_one(conn, workspace_id, product_id, &rows[index].buyer_id)?;
                modified = true;
                match fresh {
                    Some(fresh) => {
                        rows[index] = Rc::new(fresh);
                        index += 1;
                    }
                    None => {
                        rows.remove(index);
                    }
                }
            }
        }
    }
    let rows = match kept.entries.get(&key) {
        Some(rows) => rows.clone(),
        None => {
            let rows = read(conn, workspace_id, product_id)?;
            kept.entries.insert(key, rows.clone());
            modified = true;
            rows
        }
    };
    if modified {
        stamp_again(conn, kept)?;
    }
    Ok(rows)
}

/// Stamps what was just read into the copy: it may hold this transaction's (or this
/// savepoint's) writes, and the new stamp is written in it, so that rolling it back shows.
/// On an error nothing is kept.
fn stamp_again(conn: &Connection, kept: &mut Kept) -> rusqlite::Result<()> {
    let stamp = kept.stamp + 1;
    let written = conn
        .prepare_kept("UPDATE temp.leadrelay_kept_subscribers SET stamp = ?1")
        .and_then(|mut statement| statement.execute([stamp]));
    if let Err(e) = written {
        kept.clear();
        return Err(e);
    }
    kept.stamp = stamp;
    Ok(())
}

/// The copy kept on this thread, for the connection whose stamp table holds `token`.
#[derive(Default)]
struct Kept {
    token: i64,
    stamp: i64,
    data_version: i64,
    /// The writer's [`crate::db::rollbacks`] when the copy was last checked.
    rollbacks: u64,
    /// The writer job, and the connection, in which the copy was last checked against the
    /// file.
    checked_in: Option<(u64, usize)>,
    /// Subscribed buyers by (workspace, product).
    entries: HashMap<(String, String), Vec<Rc<Subscribed>>>,
    /// Settings by (container, source).
    settings: HashMap<(String, String), Arc<super::SettingsRow>>,
    /// Product terms by product.
    products: HashMap<String, Arc<super::ProductTerms>>,
}

impl Kept {
    /// Drops every row kept (not the stamps).
    fn clear(&mut self) {
        self.entries.clear();
        self.settings.clear();
        self.products.clear();
    }
}

/// The buyers whose rows changed through the connection of `token` since they were last
/// read again; `all` when the set of rows itself may have changed. Beside them, the new
/// values of changes that carry them, the latest of each: a buyer's `last_served_at`, and
/// a buyer's cap counters for a product. A buyer that is also marked is read again, which
/// reads them too.
#[derive(Default)]
struct Changed {
    token: i64,
    all: bool,
    buyers: HashSet<crate::ids::BuyerId>,
    served: HashMap<crate::ids::BuyerId, Option<i64>>,
    counted: HashMap<(crate::ids::BuyerId, String), Counters>,
}

impl Changed {
    fn for_token(token: i64) -> Changed {
        Changed {
            token,
            ..Changed::default()
        }
    }

    /// The marks, leaving none (for the same token).
    fn take(&mut self) -> Changed {
        std::mem::replace(self, Changed::for_token(self.token))
    }

    /// Marks the buyers whose new values are carried, instead of carrying them: for a
    /// copy whose connection's rollbacks are not counted, read again from the file.
    fn carried_to_marks(&mut self) {
        let served = self.served.drain().map(|(buyer, _)| buyer);
        let counted = self.counted.drain().map(|((buyer, _), _)| buyer);
        self.buyers.extend(served.chain(counted));
    }
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept::default());
    static CHANGED: RefCell<Changed> = RefCell::new(Changed::default());
}

/// Tokens tell apart the connections that install the triggers (0 is none).
static NEXT_TOKEN: AtomicI64 = AtomicI64::new(1);

/// The name of the SQL function the triggers call with a buyer's id, or NULL for all.
const CHANGED_FUNCTION: &str = "leadrelay_subscribers_changed";
/// The SQL function the triggers call with a buyer's id and its new `last_served_at`.
const SERVED_FUNCTION: &str = "leadrelay_subscribers_served";
/// The SQL function the triggers call with a `cap_usage` row's buyer, product and
/// counters ([`caps::COUNTER_COLUMNS`]' order) after it was written.
const COUNTED_FUNCTION: &str = "leadrelay_subscribers_counted";

/// What the triggers' function does for the connection of `token`: marks `buyer` (NULL: all).
fn mark(token: i64, buyer: Option<crate::ids::BuyerId>) {
    CHANGED.with(|changed| {
        let mut changed = changed.borrow_mut();
        // Another connection's writes on this thread: what is kept here sees them once
        // committed (`data_version`).
        if changed.token != token {
            return;
        }
        match buyer {
            Some(buyer) => {
                changed.buyers.insert(buyer);
            }
            None => changed.all = true,
        }
    });
}

/// What the triggers' served function does for the connection of `token`: buyer `buyer`'s
/// `last_served_at` is now `at`.
fn served(token: i64, buyer: crate::ids::BuyerId, at: Option<i64>) {
    CHANGED.with(|changed| {
        let mut changed = changed.borrow_mut();
        if changed.token == token {
            changed.served.insert(buyer, at);
        }
    });
}

/// What the triggers' counted function does for the connection of `token`: buyer
/// `buyer`'s cap counters for product `product` are now `counters`.
fn counted(token: i64, buyer: crate::ids::BuyerId, product: String, counters: Counters) {
    CHANGED.with(|changed| {
        let mut changed = changed.borrow_mut();
        if changed.token == token {
            changed.counted.insert((buyer, product), counters);
        }
    });
}

/// The connection's (token, stamp); `None` when it has no stamp table (not installed yet,
/// or its installation was rolled back).
fn stamp_of(conn: &Connection) -> rusqlite::Result<Option<(i64, i64)>> {
    // Asked of the schema SQLite holds in memory, not by a statement: this runs for every
    // routed lead.
    if !conn.table_exists(Some(c"temp"), c"leadrelay_kept_subscribers")? {
        return Ok(None);
    }
    conn.prepare_kept("SELECT token, stamp FROM temp.leadrelay_kept_subscribers")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
}

/// The stamp table and the triggers, which call [`CHANGED_FUNCTION`] with the buyer whose
/// row changed, or NULL when the rows themselves may have (a subscription, a buyer's id or
/// workspace) or the kept settings or product terms may have (any update or deletion of a
/// container, workspace, source or product; a new one is not kept before it is read). A new
/// buyer has no subscription yet: its first one marks all. A change of a buyer's
/// `last_served_at` calls [`SERVED_FUNCTION`] with the new value, and every written
/// `cap_usage` row [`COUNTED_FUNCTION`] with its counters. The buyers' update trigger names
/// the columns [`select_sql`] reads of `buyers` but `last_served_at` (and the id and
/// workspace, which the moved trigger watches): a column the join comes to read must be
/// added to it (`every_buyer_column_the_join_reads_is_followed` fails until it is).
const INSTALL: &str = "
    DROP TABLE IF EXISTS temp.leadrelay_kept_subscribers;
    CREATE TEMP TABLE leadrelay_kept_subscribers (token INTEGER NOT NULL, stamp INTEGER NOT NULL);
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_subscriptions_insert;
    CREATE TEMP TRIGGER leadrelay_kept_subscriptions_insert AFTER INSERT ON subscriptions
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_subscriptions_update;
    CREATE TEMP TRIGGER leadrelay_kept_subscriptions_update AFTER UPDATE ON subscriptions
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_subscriptions_delete;
    CREATE TEMP TRIGGER leadrelay_kept_subscriptions_delete AFTER DELETE ON subscriptions
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_buyers_moved;
    CREATE TEMP TRIGGER leadrelay_kept_buyers_moved AFTER UPDATE OF id, workspace_id ON buyers
    WHEN OLD.id IS NOT NEW.id OR OLD.workspace_id IS NOT NEW.workspace_id
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_buyers_update;
    CREATE TEMP TRIGGER leadrelay_kept_buyers_update
    AFTER UPDATE OF status, plan, balance_cents, held_cents, credit_limit_cents, created_at
    ON buyers
    WHEN OLD.id IS NEW.id AND OLD.workspace_id IS NEW.workspace_id
    BEGIN SELECT leadrelay_subscribers_changed(NEW.id); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_buyers_served;
    CREATE TEMP TRIGGER leadrelay_kept_buyers_served AFTER UPDATE OF last_served_at ON buyers
    BEGIN
        SELECT leadrelay_subscribers_served(NEW.id, NEW.last_served_at);
    END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_buyers_delete;
    CREATE TEMP TRIGGER leadrelay_kept_buyers_delete AFTER DELETE ON buyers
    BEGIN SELECT leadrelay_subscribers_changed(OLD.id); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_health_insert;
    CREATE TEMP TRIGGER leadrelay_kept_health_insert AFTER INSERT ON buyer_health
    BEGIN SELECT leadrelay_subscribers_changed(NEW.buyer_id); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_health_update;
    CREATE TEMP TRIGGER leadrelay_kept_health_update AFTER UPDATE ON buyer_health
    WHEN OLD.state IS NOT NEW.state OR OLD.buyer_id IS NOT NEW.buyer_id
    BEGIN
        SELECT leadrelay_subscribers_changed(OLD.buyer_id),
               CASE WHEN NEW.buyer_id IS NOT OLD.buyer_id
                    THEN leadrelay_subscribers_changed(NEW.buyer_id) END;
    END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_health_delete;
    CREATE TEMP TRIGGER leadrelay_kept_health_delete AFTER DELETE ON buyer_health
    BEGIN SELECT leadrelay_subscribers_changed(OLD.buyer_id); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_caps_insert;
    CREATE TEMP TRIGGER leadrelay_kept_caps_insert AFTER INSERT ON cap_usage
    BEGIN
        SELECT leadrelay_subscribers_counted(NEW.buyer_id, NEW.product_id, NEW.day_start,
            NEW.day_count, NEW.day_held, NEW.month_start, NEW.month_count, NEW.month_held);
    END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_caps_update;
    CREATE TEMP TRIGGER leadrelay_kept_caps_update AFTER UPDATE ON cap_usage
    BEGIN
        SELECT leadrelay_subscribers_counted(NEW.buyer_id, NEW.product_id, NEW.day_start,
            NEW.day_count, NEW.day_held, NEW.month_start, NEW.month_count, NEW.month_held);
    END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_caps_moved;
    CREATE TEMP TRIGGER leadrelay_kept_caps_moved AFTER UPDATE OF buyer_id, product_id ON cap_usage
    WHEN NEW.buyer_id IS NOT OLD.buyer_id OR NEW.product_id IS NOT OLD.product_id
    BEGIN
        SELECT leadrelay_subscribers_changed(OLD.buyer_id),
               leadrelay_subscribers_changed(NEW.buyer_id);
    END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_caps_delete;
    CREATE TEMP TRIGGER leadrelay_kept_caps_delete AFTER DELETE ON cap_usage
    BEGIN SELECT leadrelay_subscribers_changed(OLD.buyer_id); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_containers_update;
    CREATE TEMP TRIGGER leadrelay_kept_containers_update AFTER UPDATE ON containers
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_containers_delete;
    CREATE TEMP TRIGGER leadrelay_kept_containers_delete AFTER DELETE ON containers
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_workspaces_update;
    CREATE TEMP TRIGGER leadrelay_kept_workspaces_update AFTER UPDATE ON workspaces
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_workspaces_delete;
    CREATE TEMP TRIGGER leadrelay_kept_workspaces_delete AFTER DELETE ON workspaces
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_sources_update;
    CREATE TEMP TRIGGER leadrelay_kept_sources_update AFTER UPDATE ON sources
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_sources_delete;
    CREATE TEMP TRIGGER leadrelay_kept_sources_delete AFTER DELETE ON sources
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_products_update;
    CREATE TEMP TRIGGER leadrelay_kept_products_update AFTER UPDATE ON products
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
    DROP TRIGGER IF EXISTS temp.leadrelay_kept_products_delete;
    CREATE TEMP TRIGGER leadrelay_kept_products_delete AFTER DELETE ON products
    BEGIN SELECT leadrelay_subscribers_changed(NULL); END;
";

/// Creates the stamp table and the triggers on `conn` with a new token, and the function
/// they call, which marks for that token; returns the (token, stamp).
fn install(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
    conn.create_scalar_function(
        CHANGED_FUNCTION,
        1,
        FunctionFlags::SQLITE_UTF8,
        move |ctx| {
            mark(token, ctx.get(0)?);
            Ok(0_i64)
        },
    )?;
    conn.create_scalar_function(SERVED_FUNCTION, 2, FunctionFlags::SQLITE_UTF8, move |ctx| {
        served(token, ctx.get(0)?, ctx.get(1)?);
        Ok(0_i64)
    })?;
    conn.create_scalar_function(
        COUNTED_FUNCTION,
        8,
        FunctionFlags::SQLITE_UTF8,
        move |ctx| {
            let counters = Counters::from_values(|n| ctx.get(2 + n))?;
            counted(token, ctx.get(0)?, ctx.get(1)?, counters);
            Ok(0_i64)
        },
    )?;
    conn.execute_batch(INSTALL)?;
    conn.execute(
        "INSERT INTO temp.leadrelay_kept_subscribers (token, stamp) VALUES (?1, 0)",
        [token],
    )?;
    Ok((token, 0))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{BuyerFixture, add_buyer, database};
    use super::*;

    fn balances(rows: &[Rc<Subscribed>]) -> Vec<(String, i64)> {
        rows.iter()
            .map(|row| (row.buyer_id.to_string(), row.balance_cents))
            .collect()
    }

    fn kept_balances(conn: &Connection) -> Vec<(String, i64)> {
        balances(&kept(conn, "ws", "solar").unwrap())
    }

    fn fresh_balances(conn: &Connection) -> Vec<(String, i64)> {
        balances(&read(conn, "ws", "solar").unwrap())
    }

    #[test]
    fn filters_are_parsed_once_per_stored_text_and_an_edit_is_read_anew() {
        let before = r#"[{"field":"postalCode","op":"prefix","values":["80"]}]"#;
        let after = r#"[{"field":"postalCode","op":"prefix","values":["10"]}]"#;
        let first = parsed_filters(before).unwrap();
        assert!(Arc::ptr_eq(&first, &parsed_filters(before).unwrap()));
        let edited = parsed_filters(after).unwrap();
        assert_eq!(edited[0].values, ["10"]);
        assert_eq!(first[0].values, ["80"]);
        assert!(parsed_filters("[{").is_err());
        assert!(
            parsed_filters("[{").is_err(),
            "an unreadable text is never cached"
        );
    }

    #[test]
    fn the_kept_rows_follow_every_write_of_the_connection() {
        let conn = database();
        add_buyer(&conn, "a", &BuyerFixture::default());
        add_buyer(&conn, "b", &BuyerFixture::default());
        assert_eq!(kept_balances(&conn), fresh_balances(&conn));
        conn.execute_batch("UPDATE buyers SET balance_cents = 700 WHERE id = 'b'")
            .unwrap();
        assert_eq!(kept_balances(&conn), [("a".into(), 0), ("b".into(), 700)]);
        conn.execute_batch(
            "UPDATE buyers SET status = 'paused' WHERE id = 'a';
             INSERT INTO buyer_health (buyer_id, state) VALUES ('b', 'unhealthy');",
        )
        .unwrap();
        let rows = kept(&conn, "ws", "solar").unwrap();
        assert!(rows[0].paused && !rows[1].paused);
        assert!(rows[1].unhealthy && !rows[0].unhealthy);
        assert_eq!(rows, read(&conn, "ws", "solar").unwrap());
        conn.execute_batch("DELETE FROM subscriptions WHERE buyer_id = 'a'")
            .unwrap();
        assert_eq!(kept_balances(&conn), [("b".into(), 700)]);
        add_buyer(&conn, "c", &BuyerFixture::default());
        assert_eq!(kept_balances(&conn), fresh_balances(&conn));
        assert_eq!(kept_balances(&conn).len(), 2);
        conn.execute_batch(
            "UPDATE buyer_health SET state = 'healthy' WHERE buyer_id = 'b';
             INSERT INTO cap_usage (buyer_id, product_id, day_start, day_count, month_start)
                 VALUES ('c', 'solar', 0, 3, 0);",
        )
        .unwrap();
        assert_eq!(
            kept(&conn, "ws", "solar").unwrap(),
            read(&conn, "ws", "solar").unwrap()
        );
        conn.execute_batch("UPDATE cap_usage SET day_count = 4 WHERE buyer_id = 'c'")
            .unwrap();
        assert_eq!(
            kept(&conn, "ws", "solar").unwrap(),
            read(&conn, "ws", "solar").unwrap()
        );
        kept(&conn, "ws", "heat").unwrap();
        conn.execute_batch(
            "UPDATE cap_usage SET buyer_id = 'b', day_count = 5 WHERE buyer_id = 'c';
             UPDATE cap_usage SET product_id = 'heat' WHERE buyer_id = 'b';",
        )
        .unwrap();
        assert_eq!(
            kept(&conn, "ws", "solar").unwrap(),
            read(&conn, "ws", "solar").unwrap(),
            "counters moved to another buyer, then to another product"
        );
        conn.execute_batch("UPDATE buyers SET workspace_id = 'other' WHERE id = 'c'")
            .unwrap();
        assert_eq!(
            kept_balances(&conn),
            [("b".into(), 700)],
            "moved to another workspace"
        );
    }

    #[test]
    fn a_rolled_back_savepoint_leaves_nothing_kept_ahead_of_the_file() {
        let conn = database();
        add_buyer(&conn, "a", &BuyerFixture::default());
        conn.execute_batch("BEGIN").unwrap();
        // Installed inside a savepoint that is rolled back: installed again afterwards.
        conn.execute_batch("SAVEPOINT job").unwrap();
        assert_eq!(kept_balances(&conn), [("a".into(), 0)]);
        conn.execute_batch("ROLLBACK TO job; RELEASE job").unwrap();
        assert_eq!(kept_balances(&conn), [("a".into(), 0)]);
        conn.execute_batch("SAVEPOINT job").unwrap();
        conn.execute_batch("UPDATE buyers SET balance_cents = 900 WHERE id = 'a'")
            .unwrap();
        assert_eq!(kept_balances(&conn), [("a".into(), 900)]);
        conn.execute_batch("ROLLBACK TO job; RELEASE job").unwrap();
        assert_eq!(kept_balances(&conn), [("a".into(), 0)], "rolled back");
        conn.execute_batch("UPDATE buyers SET balance_cents = 300 WHERE id = 'a'")
            .unwrap();
        assert_eq!(kept_balances(&conn), [("a".into(), 300)]);
        conn.execute_batch("ROLLBACK").unwrap();
        assert_eq!(
            kept_balances(&conn),
            [("a".into(), 0)],
            "transaction rolled back"
        );
    }

    thread_local! {
        /// The text counted in the statements run on this thread's traced connection, and
        /// how many of them had it ([`count_statements`]).
        static COUNTED: std::cell::Cell<(&'static str, u32)> =
            const { std::cell::Cell::new(("", 0)) };
    }

    fn count_statements(event: rusqlite::trace::TraceEvent<'_>) {
        if let rusqlite::trace::TraceEvent::Stmt(_, sql) = event {
            let (text, count) = COUNTED.get();
            if sql.contains(text) {
                COUNTED.set((text, count + 1));
            }
        }
    }

    /// [`kept`]'s rows of `product` in `ws`, and how many times it ran the join (for all
    /// rows or for one buyer's) to answer.
    fn kept_counting_joins(conn: &Connection, product: &str) -> (Vec<Rc<Subscribed>>, u32) {
        COUNTED.set(("FROM subscriptions s JOIN buyers b", 0));
        conn.trace_v2(
            rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT,
            Some(count_statements),
        );
        let rows = kept(conn, "ws", product).unwrap();
        conn.trace_v2(rusqlite::trace::TraceEventCodes::empty(), None);
        (rows, COUNTED.get().1)
    }

    /// Whether the kept rows equal those read fresh, how many times the join ran, and buyer
    /// `a`'s served time and day counters (count, held).
    type FoundInJob = (bool, u32, Option<i64>, (i64, i64));

    /// What a writer job that runs `sql` and then asks for the kept rows of `product` finds
    /// ([`FoundInJob`]); `fail` fails the job after its writes.
    fn job_on_kept(
        db: &crate::db::Db,
        sql: &'static str,
        product: &'static str,
        fail: bool,
    ) -> Result<FoundInJob, crate::db::DbError> {
        db.write_blocking(move |conn| {
            conn.execute_batch(sql)?;
            if fail {
                return Err(crate::db::DbError::GroupFailed {
                    why: "the job fails after its writes".into(),
                    fault: None,
                });
            }
            let (rows, joins) = kept_counting_joins(conn, product);
            let a = rows
                .iter()
                .find(|row| row.buyer_id.as_str() == "a")
                .unwrap();
            let found = (a.last_served_at, (a.caps.day_count, a.caps.day_held));
            Ok((rows == read(conn, "ws", product)?, joins, found.0, found.1))
        })
    }

    /// Each in a job of its own, as single leads are stored: the values a job's writes
    /// carry are written into the kept rows at the next job's read.
    #[test]
    fn a_served_time_and_cap_counters_are_written_into_the_kept_rows_without_reading_them_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::db::Db::open(dir.path().join("kept.db")).unwrap();
        db.write_blocking(|conn| {
            crate::autodelivery::testing::rows(conn);
            add_buyer(conn, "a", &BuyerFixture::default());
            add_buyer(conn, "b", &BuyerFixture::default());
            conn.execute_batch(
                "INSERT INTO subscriptions (buyer_id, product_id, price_cents, created_at)
                     VALUES ('a', 'heat', 100, 0)",
            )?;
            Ok::<_, crate::db::DbError>(())
        })
        .unwrap();
        // Kept for both products the buyer is subscribed to.
        assert_eq!(
            job_on_kept(&db, "", "heat", false).unwrap().1,
            1,
            "read once"
        );
        assert_eq!(
            job_on_kept(&db, "", "solar", false).unwrap().1,
            1,
            "read once"
        );
        // As a delivery writes them: the served time, then the counters, new and again.
        let found = job_on_kept(
            &db,
            "UPDATE buyers SET last_served_at = 42 WHERE id = 'a';
             INSERT INTO cap_usage (buyer_id, product_id, day_start, day_count, month_start,
                 month_count) VALUES ('a', 'solar', 10, 1, 5, 1);",
            "solar",
            false,
        );
        assert_eq!(
            found.unwrap(),
            (true, 0, Some(42), (1, 0)),
            "nothing read again"
        );
        job_on_kept(
            &db,
            "UPDATE buyers SET last_served_at = 43 WHERE id = 'a';
             UPDATE cap_usage SET day_count = day_count + 1, day_held = 2, month_count = 2
                 WHERE buyer_id = 'a' AND product_id = 'solar';",
            "heat",
            false,
        )
        .unwrap();
        let found = job_on_kept(&db, "", "solar", false);
        assert_eq!(
            found.unwrap(),
            (true, 0, Some(43), (2, 2)),
            "carried a job further"
        );
        let found = job_on_kept(&db, "", "heat", false);
        assert_eq!(
            found.unwrap(),
            (true, 0, Some(43), (0, 0)),
            "the served time in the buyer's other product too, not its counters"
        );
        // A job that fails after its writes: the writer rolls them back, and the next job
        // reads the rows from the file.
        let failed = job_on_kept(
            &db,
            "UPDATE buyers SET last_served_at = 44 WHERE id = 'a';
             UPDATE cap_usage SET day_count = 9 WHERE buyer_id = 'a';",
            "solar",
            true,
        );
        assert!(failed.is_err());
        let found = job_on_kept(&db, "", "solar", false).unwrap();
        assert_eq!((found.0, found.2, found.3), (true, Some(43), (2, 2)));
        db.close();
    }

    /// Every column of `buyers` that the join reads is followed when it alone changes: the
    /// buyers' update trigger names them (all but `last_served_at`, which carries its value).
    #[test]
    fn every_buyer_column_the_join_reads_is_followed() {
        let changes = [
            ("status", "'paused'"),
            ("plan", "'prepaid'"),
            ("balance_cents", "500"),
            ("held_cents", "30"),
            ("credit_limit_cents", "700"),
            ("last_served_at", "99"),
            ("created_at", "11"),
        ];
        let sql = select_sql(false);
        let mut read_columns: Vec<&str> = sql
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .filter_map(|word| word.strip_prefix("b."))
            .filter(|column| !["id", "workspace_id"].contains(column))
            .collect();
        read_columns.sort_unstable();
        read_columns.dedup();
        let mut changed: Vec<&str> = changes.iter().map(|(column, _)| *column).collect();
        changed.sort_unstable();
        assert_eq!(
            read_columns, changed,
            "a value for each column the join reads"
        );
        let conn = database();
        add_buyer(&conn, "a", &BuyerFixture::default());
        for (column, value) in changes {
            kept(&conn, "ws", "solar").unwrap();
            conn.execute_batch(&format!(
                "UPDATE buyers SET {column} = {value} WHERE id = 'a'"
            ))
            .unwrap();
            assert_eq!(
                kept(&conn, "ws", "solar").unwrap(),
                read(&conn, "ws", "solar").unwrap(),
                "{column} changed"
            );
        }
    }

    #[test]
    fn carried_values_a_rollback_undid_are_not_kept() {
        let conn = database();
        add_buyer(&conn, "a", &BuyerFixture::default());
        let served = |conn: &Connection| kept(conn, "ws", "solar").unwrap()[0].last_served_at;
        conn.execute_batch("BEGIN").unwrap();
        assert_eq!(served(&conn), None);
        // Carried and not yet written into the copy when rolled back.
        conn.execute_batch("SAVEPOINT job; UPDATE buyers SET last_served_at = 5 WHERE id = 'a'")
            .unwrap();
        conn.execute_batch("ROLLBACK TO job; RELEASE job").unwrap();
        assert_eq!(served(&conn), None);
        // Written into the copy, then rolled back.
        conn.execute_batch(
            "SAVEPOINT job;
             UPDATE buyers SET last_served_at = 6 WHERE id = 'a';
             INSERT INTO cap_usage (buyer_id, product_id, day_start, day_count, month_start)
                 VALUES ('a', 'solar', 0, 3, 0);",
        )
        .unwrap();
        assert_eq!(served(&conn), Some(6));
        assert_eq!(kept(&conn, "ws", "solar").unwrap()[0].caps.day_count, 3);
        conn.execute_batch("ROLLBACK TO job; RELEASE job").unwrap();
        assert_eq!(
            kept(&conn, "ws", "solar").unwrap(),
            read(&conn, "ws", "solar").unwrap()
        );
        assert_eq!(served(&conn), None);
        // A statement that fails after the trigger carried its value.
        let failed = conn
            .execute_batch("UPDATE buyers SET last_served_at = 7, plan = 'none' WHERE id = 'a'");
        assert!(failed.is_err(), "the plan's CHECK fails the statement");
        assert_eq!(served(&conn), None);
        conn.execute_batch("UPDATE buyers SET last_served_at = 8 WHERE id = 'a'")
            .unwrap();
        assert_eq!(served(&conn), Some(8));
        conn.execute_batch("ROLLBACK").unwrap();
        assert_eq!(served(&conn), None, "transaction rolled back");
    }

    fn kept_threshold(conn: &Connection) -> i64 {
        kept_settings(conn, "web", &"src".into())
            .unwrap()
            .expect("the fixture's container")
            .threshold
    }

    fn kept_default_cost(conn: &Connection) -> Option<i64> {
        kept_product_terms(conn, "solar")
            .unwrap()
            .expect("the fixture's product")
            .default_cost_cents
    }

    #[test]
    fn kept_settings_and_product_terms_follow_every_write_of_the_connection_and_its_rollbacks() {
        let conn = database();
        add_buyer(&conn, "a", &BuyerFixture::default());
        let threshold = kept_threshold(&conn);
        assert_eq!(kept_default_cost(&conn), None);
        assert!(Arc::ptr_eq(
            &kept_settings(&conn, "web", &"src".into()).unwrap().unwrap(),
            &kept_settings(&conn, "web", &"src".into()).unwrap().unwrap(),
        ));
        conn.execute_batch("UPDATE containers SET score_threshold = 77 WHERE id = 'web'")
            .unwrap();
        assert_eq!(kept_threshold(&conn), 77);
        // Each kept before the write that must drop it.
        assert_eq!(kept_default_cost(&conn), None);
        conn.execute_batch(
            "UPDATE products SET default_supplier_cost_cents = 250 WHERE id = 'solar'",
        )
        .unwrap();
        assert_eq!(kept_default_cost(&conn), Some(250));
        let kept = |conn: &Connection| {
            kept_settings(conn, "web", &"src".into())
                .unwrap()
                .unwrap()
                .source_cost_cents
        };
        assert_eq!(kept(&conn), None);
        conn.execute_batch("UPDATE sources SET supplier_cost_cents = 120 WHERE id = 'src'")
            .unwrap();
        assert_eq!(kept(&conn), Some(120));
        let zone = |conn: &Connection| {
            kept_settings(conn, "web", &"src".into())
                .unwrap()
                .unwrap()
                .tz
                .iana_name()
                .map(str::to_owned)
        };
        assert_ne!(zone(&conn).as_deref(), Some("Europe/Berlin"));
        conn.execute_batch("UPDATE workspaces SET timezone = 'Europe/Berlin' WHERE id = 'ws'")
            .unwrap();
        assert_eq!(zone(&conn).as_deref(), Some("Europe/Berlin"));

        conn.execute_batch("BEGIN; SAVEPOINT job;").unwrap();
        conn.execute_batch(
            "UPDATE containers SET score_threshold = 12 WHERE id = 'web';
             UPDATE products SET default_supplier_cost_cents = 9 WHERE id = 'solar';",
        )
        .unwrap();
        assert_eq!(
            (kept_threshold(&conn), kept_default_cost(&conn)),
            (12, Some(9))
        );
        conn.execute_batch("ROLLBACK TO job; RELEASE job").unwrap();
        assert_eq!(
            (kept_threshold(&conn), kept_default_cost(&conn)),
            (77, Some(250)),
            "the savepoint rolled back"
        );
        conn.execute_batch("COMMIT").unwrap();
        // A transaction that reads only what it changed, each kind on its own: what it
        // keeps must not outlive its rollback.
        conn.execute_batch("BEGIN; UPDATE containers SET score_threshold = 13 WHERE id = 'web';")
            .unwrap();
        assert_eq!(kept_threshold(&conn), 13);
        conn.execute_batch("ROLLBACK").unwrap();
        assert_eq!(kept_threshold(&conn), 77, "the transaction rolled back");
        conn.execute_batch(
            "BEGIN; UPDATE products SET default_supplier_cost_cents = 1 WHERE id = 'solar';",
        )
        .unwrap();
        assert_eq!(kept_default_cost(&conn), Some(1));
        conn.execute_batch("ROLLBACK").unwrap();
        assert_eq!(
            kept_default_cost(&conn),
            Some(250),
            "the transaction rolled back"
        );
        assert_ne!(threshold, 77);
        assert_eq!(kept_balances(&conn), fresh_balances(&conn));
    }

    #[test]
    fn another_connections_commit_drops_what_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kept.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        crate::db::apply_migrations(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'W', 0);
             INSERT INTO products (id, workspace_id, slug, name, created_at)
                 VALUES ('solar', 'ws', 'solar', 'Solar', 0);",
        )
        .unwrap();
        add_buyer(&conn, "a", &BuyerFixture::default());
        assert_eq!(kept_balances(&conn), [("a".into(), 0)]);
        let cli = Connection::open(&path).unwrap();
        cli.execute_batch("UPDATE buyers SET balance_cents = 50 WHERE id = 'a'")
            .unwrap();
        assert_eq!(kept_balances(&conn), [("a".into(), 50)]);
        assert_eq!(kept_default_cost(&conn), None);
        cli.execute_batch(
            "UPDATE products SET default_supplier_cost_cents = 75 WHERE id = 'solar'",
        )
        .unwrap();
        assert_eq!(kept_default_cost(&conn), Some(75));
    }

    /// Checked once per writer job: what another connection commits between two jobs is
    /// seen by the second, and within one job the connection's own writes are.
    #[test]
    fn the_writer_checks_the_kept_copy_once_per_job_and_sees_commits_between_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kept.db");
        let db = crate::db::Db::open(&path).unwrap();
        db.write_blocking(|conn| {
            crate::autodelivery::testing::rows(conn);
            add_buyer(conn, "a", &BuyerFixture::default());
            Ok::<_, crate::db::DbError>(())
        })
        .unwrap();
        let job = |sql: &'static str| {
            db.write_blocking(move |conn| {
                COUNTED.set(("data_version", 0));
                conn.trace_v2(
                    rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT,
                    Some(count_statements),
                );
                let first = (kept_threshold(conn), kept_balances(conn));
                conn.execute_batch(sql)?;
                let then = (kept_threshold(conn), kept_balances(conn));
                conn.trace_v2(rusqlite::trace::TraceEventCodes::empty(), None);
                assert_eq!(COUNTED.get().1, 1, "four kept reads, one check");
                Ok::<_, crate::db::DbError>((first, then))
            })
            .unwrap()
        };
        let (_, then) = job("UPDATE buyers SET balance_cents = 5 WHERE id = 'a'");
        assert_eq!(then.1, [("a".into(), 5)], "the job's own write");
        let cli = Connection::open(&path).unwrap();
        cli.execute_batch(
            "UPDATE containers SET score_threshold = 61 WHERE id = 'web';
             UPDATE buyers SET balance_cents = 40 WHERE id = 'a';",
        )
        .unwrap();
        let (first, then) = job("UPDATE containers SET score_threshold = 62 WHERE id = 'web'");
        assert_eq!(
            first,
            (61, vec![("a".into(), 40)]),
            "committed between the jobs"
        );
        assert_eq!(then.0, 62, "the job's own write");
        db.close();
    }
}
