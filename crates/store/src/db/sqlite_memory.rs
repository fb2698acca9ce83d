//! SQLite's memory: from mimalloc (the process's allocator in the binary) instead of glibc's
//! `malloc`, and without SQLite's memory statistics.
//!
//! Why: the writer runs most jobs in a `SAVEPOINT` (and multi-row statements in a statement
//! journal), and with `temp_store=MEMORY` SQLite copies each page a job first changes into an
//! in-memory journal made of 1 KiB chunks, several allocations per page, all freed when the
//! job ends. glibc serves those past its small per-thread cache from an arena under a lock:
//! 8% of the writer's time for an auto-delivered lead went to glibc's `malloc` and `free`
//! called by SQLite (perf of the writer during `bench/autodelivery.sh`'s auto-delivery load).
//! With its statistics on (the default), SQLite also takes a global mutex around every
//! allocation and free to keep counts nothing here reads (`sqlite3_memory_used`): another 2%.
//!
//! SQLite keeps the allocator it was initialised with for the life of the process, and
//! `sqlite3_config` is not safe against a concurrent first connection in another thread,
//! so only the binary switches, first thing in `main` while it has one thread
//! ([`configure`]). Tests and examples keep SQLite's defaults.

use std::ffi::{c_int, c_void};

use libmimalloc_sys::{mi_free, mi_malloc, mi_realloc, mi_usable_size};
use rusqlite::ffi;

// mimalloc's own C API rather than Rust's allocator interface: that passes an alignment, and
// mimalloc serves an aligned request over 1 KiB on its slow path (over-allocation, then the
// block's interior pointer marked on its page), which is every chunk of the savepoint journal
// (SQLite asks for exactly 1 KiB, and a header to remember the size made it 1,040 bytes) and
// every cached page: 3.8% of the writer's instructions for an auto-delivered lead (callgrind of
// `serve` during `bench/autodelivery.sh`'s auto-delivery load). mimalloc's blocks are 16-byte
// aligned and know their size, so no header is needed either.

/// The size to ask mimalloc for, for SQLite's `size`; `None` for a size SQLite must get NULL
/// for (zero or negative).
fn request(size: c_int) -> Option<usize> {
    usize::try_from(size).ok().filter(|&n| n > 0)
}

unsafe extern "C" fn x_malloc(size: c_int) -> *mut c_void {
    match request(size) {
        // SAFETY: a plain allocation of a non-zero size.
        Some(size) => unsafe { mi_malloc(size) },
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn x_free(p: *mut c_void) {
    // SAFETY: SQLite frees only what this allocator gave it, once; mi_free takes NULL.
    unsafe { mi_free(p) }
}

unsafe extern "C" fn x_realloc(p: *mut c_void, size: c_int) -> *mut c_void {
    let Some(size) = request(size) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `p` is NULL or came from this allocator (SQLite's contract); on failure
    // mi_realloc leaves the old block as it was.
    unsafe { mi_realloc(p, size) }
}

unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: SQLite asks only the size of a live block of this allocator. The usable size
    // is at least what was asked for, which is what SQLite requires of xSize.
    let size = unsafe { mi_usable_size(p) };
    c_int::try_from(size).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn x_roundup(size: c_int) -> c_int {
    // SQLite never asks for more than SQLITE_MAX_ALLOCATION_SIZE, well below c_int::MAX - 7.
    size.saturating_add(7) & !7
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

/// Makes SQLite allocate from mimalloc, without memory statistics.
/// Call it before anything opens a connection, while the process has one thread; returns
/// whether SQLite took both (it refuses once initialised, and then keeps its defaults,
/// which also work).
pub fn configure() -> bool {
    let methods = ffi::sqlite3_mem_methods {
        xMalloc: Some(x_malloc),
        xFree: Some(x_free),
        xRealloc: Some(x_realloc),
        xSize: Some(x_size),
        xRoundup: Some(x_roundup),
        xInit: Some(x_init),
        xShutdown: Some(x_shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: SQLITE_CONFIG_MALLOC takes a pointer to the methods, which SQLite copies; the
    // functions above keep its contract (8-byte aligned blocks, xSize of a live block at
    // least the size asked for, xRealloc of SQLite's own blocks). The caller is the only
    // thread (see the module).
    let allocator = unsafe {
        ffi::sqlite3_config(
            ffi::SQLITE_CONFIG_MALLOC,
            &methods as *const ffi::sqlite3_mem_methods,
        )
    };
    // SAFETY: SQLITE_CONFIG_MEMSTATUS takes one int; same single-thread condition.
    let statistics = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int) };
    allocator == ffi::SQLITE_OK && statistics == ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_size_alignment_and_content_through_realloc() {
        // SAFETY: the allocator's functions called directly, as SQLite would.
        unsafe {
            let p = x_malloc(40);
            assert!(!p.is_null());
            assert_eq!(p as usize % 8, 0);
            // At least what was asked for: mimalloc's size class.
            assert!((40..64).contains(&x_size(p)), "{}", x_size(p));
            std::ptr::write_bytes(p.cast::<u8>(), 0xAB, 40);
            let q = x_realloc(p, 5000);
            assert!(x_size(q) >= 5000);
            assert_eq!(q as usize % 8, 0);
            assert_eq!(*q.cast::<u8>().add(39), 0xAB);
            let r = x_realloc(q, 16);
            assert!(x_size(r) >= 16);
            assert_eq!(*r.cast::<u8>().add(15), 0xAB);
            // SQLite's journal chunk, the size that went the slow way with a header.
            let chunk = x_malloc(1024);
            assert_eq!(chunk as usize % 8, 0);
            assert!(x_size(chunk) >= 1024);
            x_free(chunk);
            x_free(r);
            x_free(std::ptr::null_mut());
            assert!(x_malloc(0).is_null());
            assert!(x_malloc(-1).is_null());
            assert_eq!(x_roundup(1), 8);
            assert_eq!(x_roundup(1024), 1024);
        }
    }
}
