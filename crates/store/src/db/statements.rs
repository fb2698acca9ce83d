//! Statements the writer keeps prepared for its connection, found by the address of their
//! SQL text ([`PrepareKept::prepare_kept`]).
//!
//! rusqlite's statement cache (`prepare_cached`) finds a statement by its text: every take
//! hashes the text, compares it and copies it into a new shared string, and every return
//! hashes it again, about 1,600 instructions for a statement of a few hundred characters.
//! The writer runs some fifteen statements for an auto-delivered lead and six for a plain
//! one, one job at a time. The SQL the writer runs is `'static` text, so its address and
//! length name it: a lookup is one hash of two integers. Per lead, in the writer (callgrind,
//! BENCHMARKS.md "Plain ingest"): 415,600 instructions of an auto-delivered lead's job
//! against 433,100, 73,900 per single lead against 79,700.
//!
//! [`Kept`] lives on the writer thread's stack for as long as it serves jobs, beside (and
//! dropped before) the connection its statements belong to; [`Kept::serve`] makes it
//! reachable from `prepare_kept` on that thread for that time. A statement is taken out of
//! the table while in use and put back, bindings cleared, when its handle is dropped (as
//! rusqlite's cache does), so a statement used again while in use is prepared anew and the
//! spare one finalised. On any other connection or thread `prepare_kept` is
//! `prepare_cached`.

use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::ptr::NonNull;

use foldhash::HashMap;
use rusqlite::{
    AndThenRows, CachedStatement, Connection, MappedRows, Params, PrepFlags, Row, Rows, Statement,
};

/// A statement's key: the address and length of its `'static` SQL text. The same text may
/// have two keys (two copies of a literal), never one key two texts.
type Key = (usize, usize);

/// The writer's prepared statements for `conn`, by [`Key`].
pub(super) struct Kept<'conn> {
    conn: &'conn Connection,
    statements: RefCell<HashMap<Key, Statement<'conn>>>,
}

thread_local! {
    /// The [`Kept`] of the writer serving on this thread, while [`Kept::serve`] runs.
    static SERVING: Cell<Option<NonNull<Kept<'static>>>> = const { Cell::new(None) };
}

impl<'conn> Kept<'conn> {
    pub(super) fn new(conn: &'conn Connection) -> Kept<'conn> {
        Kept {
            conn,
            statements: RefCell::new(HashMap::default()),
        }
    }

    /// Runs `serve` with these statements reachable from [`PrepareKept::prepare_kept`] on
    /// this thread, as they were before once it returns or unwinds.
    ///
    /// # Safety
    ///
    /// No [`KeptStatement`] that `prepare_kept` hands out inside `serve` may outlive it:
    /// each refers to `self`. The writer lends its connection to `serve` alone and keeps
    /// nothing of what `serve` made.
    pub(super) unsafe fn serve<R>(&self, serve: impl FnOnce() -> R) -> R {
        struct Restore(Option<NonNull<Kept<'static>>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                SERVING.with(|serving| serving.set(self.0));
            }
        }
        let _restore =
            Restore(SERVING.with(|serving| {
                serving.replace(Some(NonNull::from(self).cast::<Kept<'static>>()))
            }));
        serve()
    }
}

/// `prepare_cached` that, on the writer's own connection, keeps the statement by its text's
/// address instead of looking it up by the text.
pub trait PrepareKept {
    /// The prepared statement of `sql`, kept for the next use. The writer never drops what it
    /// keeps: `sql` is a literal, a constant or a `LazyLock` built once, never text made per
    /// call (leaked to be `'static`), which would grow its table without end.
    fn prepare_kept(&self, sql: &'static str) -> rusqlite::Result<KeptStatement<'_>>;
}

impl PrepareKept for Connection {
    fn prepare_kept(&self, sql: &'static str) -> rusqlite::Result<KeptStatement<'_>> {
        // SAFETY: the pointer is set only while `Kept::serve` runs on this thread, and its
        // `Kept` outlives that call; the handle made here does not outlive it (`serve`'s
        // contract).
        let serving = SERVING.with(Cell::get).map(|kept| unsafe { kept.as_ref() });
        let Some(home) = serving.filter(|kept| std::ptr::eq(kept.conn, self)) else {
            return Ok(KeptStatement(Handle::Cached(self.prepare_cached(sql)?)));
        };
        let key = (sql.as_ptr() as usize, sql.len());
        let taken = home.statements.borrow_mut().remove(&key);
        let statement = match taken {
            Some(statement) => statement,
            None => self.prepare_with_flags(sql, PrepFlags::SQLITE_PREPARE_PERSISTENT)?,
        };
        Ok(KeptStatement(Handle::Kept {
            statement: Some(statement),
            key,
            home,
        }))
    }
}

/// A statement from [`PrepareKept::prepare_kept`], put back when dropped.
///
/// It lends no `&mut Statement`, through which another connection's statement could be
/// swapped in and kept past that connection's end; the running methods are forwarded:
///
/// ```compile_fail,E0596
/// use leadrelay_store::db::PrepareKept;
/// let conn = rusqlite::Connection::open_in_memory().unwrap();
/// let mut kept = conn.prepare_kept("SELECT 1").unwrap();
/// let _: &mut rusqlite::Statement = &mut *kept;
/// ```
pub struct KeptStatement<'c>(Handle<'c>);

enum Handle<'c> {
    Kept {
        /// `None` only while being put back.
        statement: Option<Statement<'c>>,
        key: Key,
        home: &'c Kept<'static>,
    },
    Cached(CachedStatement<'c>),
}

impl KeptStatement<'_> {
    /// Whether the statement is the writer's kept one rather than from the connection's cache.
    #[cfg(test)]
    pub(super) fn is_kept(&self) -> bool {
        matches!(self.0, Handle::Kept { .. })
    }
}

/// The statement's running methods, forwarded: a handle gives no `&mut Statement`, which
/// could swap another connection's statement into the writer's table.
impl<'c> KeptStatement<'c> {
    fn statement(&mut self) -> &mut Statement<'c> {
        match &mut self.0 {
            Handle::Kept { statement, .. } => statement.as_mut().expect("held until dropped"),
            Handle::Cached(cached) => cached,
        }
    }

    /// [`Statement::execute`].
    pub fn execute<P: Params>(&mut self, params: P) -> rusqlite::Result<usize> {
        self.statement().execute(params)
    }

    /// [`Statement::insert`].
    pub fn insert<P: Params>(&mut self, params: P) -> rusqlite::Result<i64> {
        self.statement().insert(params)
    }

    /// [`Statement::exists`].
    pub fn exists<P: Params>(&mut self, params: P) -> rusqlite::Result<bool> {
        self.statement().exists(params)
    }

    /// [`Statement::query`].
    pub fn query<P: Params>(&mut self, params: P) -> rusqlite::Result<Rows<'_>> {
        self.statement().query(params)
    }

    /// [`Statement::query_row`].
    pub fn query_row<T, P, F>(&mut self, params: P, f: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        self.statement().query_row(params, f)
    }

    /// [`Statement::query_map`].
    pub fn query_map<T, P, F>(&mut self, params: P, f: F) -> rusqlite::Result<MappedRows<'_, F>>
    where
        P: Params,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T>,
    {
        self.statement().query_map(params, f)
    }

    /// [`Statement::query_and_then`].
    pub fn query_and_then<T, E, P, F>(
        &mut self,
        params: P,
        f: F,
    ) -> rusqlite::Result<AndThenRows<'_, F>>
    where
        P: Params,
        E: From<rusqlite::Error>,
        F: FnMut(&Row<'_>) -> Result<T, E>,
    {
        self.statement().query_and_then(params, f)
    }
}

impl<'c> Deref for KeptStatement<'c> {
    type Target = Statement<'c>;

    fn deref(&self) -> &Statement<'c> {
        match &self.0 {
            Handle::Kept { statement, .. } => statement.as_ref().expect("held until dropped"),
            Handle::Cached(cached) => cached,
        }
    }
}

impl Drop for KeptStatement<'_> {
    fn drop(&mut self) {
        let Handle::Kept {
            statement,
            key,
            home,
        } = &mut self.0
        else {
            return;
        };
        let Some(mut statement) = statement.take() else {
            return;
        };
        statement.clear_bindings();
        // SAFETY: the statement belongs to `home.conn` (checked when it was handed out),
        // which outlives `home`, and `home` drops the statements it holds before it goes.
        let statement: Statement<'static> = unsafe { std::mem::transmute(statement) };
        let spare = {
            let mut statements = home.statements.borrow_mut();
            match statements.entry(*key) {
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(statement);
                    None
                }
                // Prepared again while this one was in use: one is enough.
                std::collections::hash_map::Entry::Occupied(_) => Some(statement),
            }
        };
        drop(spare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELECT: &str = "SELECT ?1 + 1";

    /// The statements SQLite holds for `conn`, not yet finalised.
    fn prepared_statements(conn: &Connection) -> i64 {
        let mut count = 0;
        // SAFETY: walks the connection's own list of statements on its thread, without
        // touching them.
        unsafe {
            let mut statement =
                rusqlite::ffi::sqlite3_next_stmt(conn.handle(), std::ptr::null_mut());
            while !statement.is_null() {
                count += 1;
                statement = rusqlite::ffi::sqlite3_next_stmt(conn.handle(), statement);
            }
        }
        count
    }

    #[test]
    fn the_writer_prepares_a_statement_once_and_finds_it_by_its_text_s_address() {
        let conn = Connection::open_in_memory().unwrap();
        conn.set_prepared_statement_cache_capacity(0);
        let kept = Kept::new(&conn);
        // SAFETY: every handle is dropped inside.
        unsafe {
            kept.serve(|| {
                for n in 0..3 {
                    let value: i64 = conn
                        .prepare_kept(SELECT)
                        .unwrap()
                        .query_row([n], |row| row.get(0))
                        .unwrap();
                    assert_eq!(value, n + 1);
                }
                assert_eq!(prepared_statements(&conn), 1, "prepared once, kept");
                assert_eq!(kept.statements.borrow().len(), 1);
                // In use twice at once: a second is prepared, and the spare finalised.
                let first = conn.prepare_kept(SELECT).unwrap();
                let second = conn.prepare_kept(SELECT).unwrap();
                assert_eq!(prepared_statements(&conn), 2);
                drop(first);
                drop(second);
                assert_eq!(prepared_statements(&conn), 1);
            })
        };
        // Outside `serve` the connection's own cache answers (capacity 0: none kept there).
        let value: i64 = conn
            .prepare_kept(SELECT)
            .unwrap()
            .query_row([41], |row| row.get(0))
            .unwrap();
        assert_eq!(value, 42);
        assert_eq!(kept.statements.borrow().len(), 1);
    }

    #[test]
    fn another_connection_on_the_writer_s_thread_uses_its_own_cache() {
        let writer = Connection::open_in_memory().unwrap();
        let other = Connection::open_in_memory().unwrap();
        let kept = Kept::new(&writer);
        // SAFETY: every handle is dropped inside.
        unsafe {
            kept.serve(|| {
                let value: i64 = other
                    .prepare_kept(SELECT)
                    .unwrap()
                    .query_row([1], |row| row.get(0))
                    .unwrap();
                assert_eq!(value, 2);
            })
        };
        assert!(kept.statements.borrow().is_empty());
    }

    #[test]
    fn a_kept_statement_comes_back_with_its_bindings_cleared() {
        let conn = Connection::open_in_memory().unwrap();
        let kept = Kept::new(&conn);
        // SAFETY: every handle is dropped inside.
        unsafe {
            kept.serve(|| {
                let mut statement = conn.prepare_kept(SELECT).unwrap();
                statement.statement().raw_bind_parameter(1, 5).unwrap();
                drop(statement);
                let mut statement = conn.prepare_kept(SELECT).unwrap();
                // Nothing bound: NULL + 1.
                let value: Option<i64> = statement
                    .statement()
                    .raw_query()
                    .next()
                    .unwrap()
                    .unwrap()
                    .get(0)
                    .unwrap();
                assert_eq!(value, None);
            })
        };
    }
}
