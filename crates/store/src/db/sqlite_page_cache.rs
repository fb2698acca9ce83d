//! SQLite's own page cache, wrapped so that a commit does not scan the whole cache for
//! pages past the end of the file when there are none.
//!
//! Why: when a b-tree page splits, SQLite puts the new sibling pages in ascending page
//! order by swapping their numbers, parking one page for a moment under the number of the
//! file's lock page (1 GiB / page size + 1, a page SQLite never uses). Its cache remembers
//! the highest number it has seen, and at every commit the pager asks the cache to drop
//! the pages past the end of the file: a remembered number far past the end makes the cache
//! walk its whole hash table, one slot per cached page, although no page is there. The
//! writer's cache holds 16,000 pages (64 MiB), so on a file under 1 GiB every commit after a
//! split paid a walk of 16,000 slots and their pages: 22% of the writer's time for single
//! leads on a file of a million leads (`perf record` during `bench/big_file.sh`'s big run).
//!
//! The wrapper keeps, per cache, an upper bound of the page numbers it holds, not counting
//! a page that is parked under the lock page's number (which the swap moves away again),
//! and passes a truncation on only when a page at or past its limit may be cached. Every
//! other call goes straight to SQLite's cache.
//!
//! Like [`super::sqlite_memory`], SQLite takes this only before its first connection, so
//! only the binary installs it, first thing in `main` ([`configure`]).

use std::ffi::{c_int, c_uint, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::ffi;

/// SQLite's lock byte: the file's byte 2^30, whose page is never a database page.
const PENDING_BYTE: u32 = 0x4000_0000;

/// What is known of the page numbers one cache holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyBound {
    /// The number of the lock page for this cache's page size.
    parking: u32,
    /// No page other than a parked one has a number above this.
    highest: u32,
    /// A page is parked under `parking`.
    parked: bool,
}

impl KeyBound {
    fn new(page_size: u32) -> KeyBound {
        KeyBound {
            parking: PENDING_BYTE / page_size.max(1) + 1,
            highest: 0,
            parked: false,
        }
    }

    /// A page was returned for `key` (found or made).
    fn fetched(&mut self, key: u32) {
        self.highest = self.highest.max(key);
    }

    /// A page's number changed from `old` to `new`; says whether it was parked.
    fn rekeyed(&mut self, old: u32, new: u32) -> bool {
        if old == self.parking {
            self.parked = false;
        }
        if new == self.parking {
            self.parked = true;
        } else {
            self.highest = self.highest.max(new);
        }
        self.parked
    }

    /// Whether a page numbered `limit` or higher may be cached, so a truncation at `limit`
    /// has something to drop. Records the truncation when it does.
    fn truncate(&mut self, limit: u32) -> bool {
        let parked_beyond = self.parked && self.parking >= limit;
        if self.highest < limit && !parked_beyond {
            return false;
        }
        self.highest = self.highest.min(limit.saturating_sub(1));
        if self.parking >= limit {
            self.parked = false;
        }
        true
    }
}

/// One cache as SQLite sees it: SQLite's own cache and what is known of its keys.
struct Cache {
    inner: *mut ffi::sqlite3_pcache,
    keys: KeyBound,
}

/// SQLite's default cache methods, read once before the wrapper is installed.
struct SqliteMethods(ffi::sqlite3_pcache_methods2);

// SAFETY: the methods are plain function pointers and SQLite's own argument for them, which
// SQLite itself shares between threads; nothing here writes them after `configure`.
unsafe impl Sync for SqliteMethods {}
// SAFETY: as above.
unsafe impl Send for SqliteMethods {}

static DEFAULT: OnceLock<SqliteMethods> = OnceLock::new();

/// Truncations not passed on, and pages parked under the lock page's number, since the
/// process started: what the wrapper's test reads.
static SKIPPED: AtomicU64 = AtomicU64::new(0);
static PARKED: AtomicU64 = AtomicU64::new(0);

/// How many times a page was parked under the lock page's number (a swap of page numbers).
pub fn pages_parked() -> u64 {
    PARKED.load(Ordering::Relaxed)
}

/// How many truncations found nothing to drop and were not passed on to SQLite's cache.
pub fn truncations_skipped() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}

fn default() -> &'static ffi::sqlite3_pcache_methods2 {
    // Only installed methods call this, and they are installed after DEFAULT is set.
    &DEFAULT
        .get()
        .expect("the default page cache is read before the wrapper is installed")
        .0
}

/// # Safety
/// `cache` is a pointer this module's `x_create` returned and `x_destroy` has not freed.
unsafe fn cache<'a>(cache: *mut ffi::sqlite3_pcache) -> &'a mut Cache {
    // SAFETY: the caller's contract; SQLite calls one cache's methods from the one
    // connection that owns it, never two at once.
    unsafe { &mut *cache.cast::<Cache>() }
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    let methods = default();
    match methods.xInit {
        // SAFETY: SQLite's own init with its own argument.
        Some(init) => unsafe { init(methods.pArg) },
        None => ffi::SQLITE_OK,
    }
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {
    let methods = default();
    if let Some(shutdown) = methods.xShutdown {
        // SAFETY: SQLite's own shutdown with its own argument.
        unsafe { shutdown(methods.pArg) }
    }
}

unsafe extern "C" fn x_create(
    page_size: c_int,
    extra: c_int,
    purgeable: c_int,
) -> *mut ffi::sqlite3_pcache {
    let Some(create) = default().xCreate else {
        return std::ptr::null_mut();
    };
    // SAFETY: SQLite's own create with SQLite's arguments.
    let inner = unsafe { create(page_size, extra, purgeable) };
    if inner.is_null() {
        return inner;
    }
    let keys = KeyBound::new(u32::try_from(page_size).unwrap_or(1));
    Box::into_raw(Box::new(Cache { inner, keys })).cast()
}

unsafe extern "C" fn x_cachesize(p: *mut ffi::sqlite3_pcache, pages: c_int) {
    // SAFETY: `p` is live (SQLite's contract for every method but create).
    let cache = unsafe { cache(p) };
    if let Some(cachesize) = default().xCachesize {
        // SAFETY: SQLite's own method on its own cache.
        unsafe { cachesize(cache.inner, pages) }
    }
}

unsafe extern "C" fn x_pagecount(p: *mut ffi::sqlite3_pcache) -> c_int {
    // SAFETY: as in x_cachesize.
    let cache = unsafe { cache(p) };
    match default().xPagecount {
        // SAFETY: SQLite's own method on its own cache.
        Some(pagecount) => unsafe { pagecount(cache.inner) },
        None => 0,
    }
}

unsafe extern "C" fn x_fetch(
    p: *mut ffi::sqlite3_pcache,
    key: c_uint,
    create: c_int,
) -> *mut ffi::sqlite3_pcache_page {
    // SAFETY: as in x_cachesize.
    let cache = unsafe { cache(p) };
    let Some(fetch) = default().xFetch else {
        return std::ptr::null_mut();
    };
    // SAFETY: SQLite's own method on its own cache.
    let page = unsafe { fetch(cache.inner, key, create) };
    if !page.is_null() {
        cache.keys.fetched(key);
    }
    page
}

unsafe extern "C" fn x_unpin(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    discard: c_int,
) {
    // SAFETY: as in x_cachesize.
    let cache = unsafe { cache(p) };
    if let Some(unpin) = default().xUnpin {
        // SAFETY: SQLite's own method on its own cache and page.
        unsafe { unpin(cache.inner, page, discard) }
    }
}

unsafe extern "C" fn x_rekey(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    old: c_uint,
    new: c_uint,
) {
    // SAFETY: as in x_cachesize.
    let cache = unsafe { cache(p) };
    if let Some(rekey) = default().xRekey {
        // SAFETY: SQLite's own method on its own cache and page.
        unsafe { rekey(cache.inner, page, old, new) }
    }
    if cache.keys.rekeyed(old, new) {
        PARKED.fetch_add(1, Ordering::Relaxed);
    }
}

unsafe extern "C" fn x_truncate(p: *mut ffi::sqlite3_pcache, limit: c_uint) {
    // SAFETY: as in x_cachesize.
    let cache = unsafe { cache(p) };
    if !cache.keys.truncate(limit) {
        SKIPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if let Some(truncate) = default().xTruncate {
        // SAFETY: SQLite's own method on its own cache.
        unsafe { truncate(cache.inner, limit) }
    }
}

unsafe extern "C" fn x_destroy(p: *mut ffi::sqlite3_pcache) {
    // SAFETY: `p` came from x_create, and SQLite destroys a cache once, as its last call.
    let cache = unsafe { Box::from_raw(p.cast::<Cache>()) };
    if let Some(destroy) = default().xDestroy {
        // SAFETY: SQLite's own method on its own cache.
        unsafe { destroy(cache.inner) }
    }
}

unsafe extern "C" fn x_shrink(p: *mut ffi::sqlite3_pcache) {
    // SAFETY: as in x_cachesize.
    let cache = unsafe { cache(p) };
    if let Some(shrink) = default().xShrink {
        // SAFETY: SQLite's own method on its own cache.
        unsafe { shrink(cache.inner) }
    }
}

/// Wraps SQLite's page cache as the module says. Call it before anything opens a
/// connection, while the process has one thread; returns whether SQLite took it (it refuses
/// once initialised, and then keeps its own cache as it is, which also works).
pub fn configure() -> bool {
    if DEFAULT.get().is_some() {
        return false;
    }
    // SAFETY: the methods struct is plain data that zeroed is a valid (empty) value of.
    let mut methods: ffi::sqlite3_pcache_methods2 = unsafe { std::mem::zeroed() };
    // SAFETY: SQLITE_CONFIG_GETPCACHE2 writes SQLite's current methods into the struct
    // pointed to; the caller is the only thread (see the module).
    let read = unsafe {
        ffi::sqlite3_config(
            ffi::SQLITE_CONFIG_GETPCACHE2,
            &mut methods as *mut ffi::sqlite3_pcache_methods2,
        )
    };
    if read != ffi::SQLITE_OK
        || methods.xFetch.is_none()
        || DEFAULT.set(SqliteMethods(methods)).is_err()
    {
        return false;
    }
    let wrapper = ffi::sqlite3_pcache_methods2 {
        iVersion: 1,
        pArg: std::ptr::null_mut(),
        xInit: Some(x_init),
        xShutdown: Some(x_shutdown),
        xCreate: Some(x_create),
        xCachesize: Some(x_cachesize),
        xPagecount: Some(x_pagecount),
        xFetch: Some(x_fetch),
        xUnpin: Some(x_unpin),
        xRekey: Some(x_rekey),
        xTruncate: Some(x_truncate),
        xDestroy: Some(x_destroy),
        xShrink: Some(x_shrink),
    };
    // SAFETY: SQLITE_CONFIG_PCACHE2 copies the struct; every method keeps the contract of
    // the one it wraps, whose cache it passes on. Same single-thread condition.
    let installed = unsafe {
        ffi::sqlite3_config(
            ffi::SQLITE_CONFIG_PCACHE2,
            &wrapper as *const ffi::sqlite3_pcache_methods2,
        )
    };
    installed == ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARKING: u32 = PENDING_BYTE / 4096 + 1;

    #[test]
    fn the_lock_page_is_where_sqlite_parks_a_page_for_its_page_size() {
        assert_eq!(KeyBound::new(4096).parking, 262_145);
        assert_eq!(KeyBound::new(65_536).parking, 16_385);
        assert_eq!(KeyBound::new(512).parking, 2_097_153);
    }

    #[test]
    fn a_commit_after_a_swap_of_page_numbers_has_nothing_to_drop() {
        let mut keys = KeyBound::new(4096);
        for page in 1..=3_000 {
            keys.fetched(page);
        }
        // balance_nonroot's swap of pages 40 and 12: 40 parked, 12 -> 40, parked -> 12.
        assert!(keys.rekeyed(40, PARKING));
        keys.rekeyed(12, 40);
        assert!(!keys.rekeyed(PARKING, 12));
        // The commit drops what is past the end of a 3,000-page file: nothing.
        assert!(!keys.truncate(3_001));
        assert_eq!(keys.highest, 3_000);
    }

    #[test]
    fn a_page_past_the_limit_or_still_parked_is_dropped() {
        let mut keys = KeyBound::new(4096);
        keys.fetched(10);
        keys.fetched(25);
        // A rolled-back savepoint shrinks the file to 20 pages: 25 must go.
        assert!(keys.truncate(21));
        assert_eq!(keys.highest, 20);
        assert!(!keys.truncate(21));
        // A page still parked (no swap back) lies past any limit below it.
        keys.rekeyed(10, PARKING);
        assert!(keys.truncate(21));
        assert!(!keys.parked);
        // Clearing the cache (limit 1) always passes on unless it is known empty.
        keys.fetched(1);
        assert!(keys.truncate(1));
        assert!(!keys.truncate(1));
        // A page moved to a high number raises the bound.
        keys.fetched(5);
        keys.rekeyed(5, 900);
        assert!(keys.truncate(500));
    }

    #[test]
    fn a_fetch_of_the_lock_page_itself_counts_as_any_page() {
        // SQLite's cache makes an entry before the pager refuses the lock page and drops
        // it; a drop does not say which page, so the bound keeps it.
        let mut keys = KeyBound::new(4096);
        keys.fetched(PARKING);
        assert!(keys.truncate(100));
    }
}
