//! SQLite's memory: from the process's Rust allocator (mimalloc in the binary) instead of
//! glibc's `malloc`, and without SQLite's memory statistics.
//!
//! Why: the writer runs every job in a `SAVEPOINT`, and with `temp_store=MEMORY` SQLite
//! copies each page a job first changes into an in-memory journal made of 1 KiB chunks,
//! several allocations per page, all freed when the job ends. glibc serves those past its
//! small per-thread cache from an arena under a lock: 8% of the writer's time for an
//! auto-delivered lead went to glibc's `malloc` and `free` called by SQLite (BENCHMARKS.md,
//! "Auto-delivery at ingest speed, session 6"). With its statistics on (the default),
//! SQLite also takes a global mutex around every allocation and free to keep counts
//! nothing here reads (`sqlite3_memory_used`): another 2%.
//!
//! SQLite keeps the allocator it was initialised with for the life of the process, and
//! `sqlite3_config` is not safe against a concurrent first connection in another thread,
//! so only the binary switches, first thing in `main` while it has one thread
//! ([`configure`]). Tests and examples keep SQLite's defaults.

use std::alloc::Layout;
use std::ffi::{c_int, c_void};

use rusqlite::ffi;

/// Every block starts with this many bytes holding the size SQLite asked for (SQLite asks
/// a block's size back, `xSize`); 16 keeps the block 16-byte aligned, more than the 8
/// SQLite needs.
const HEADER: usize = 16;
const ALIGN: usize = 16;

/// The layout of a block holding `size` bytes for SQLite after the header; `None` for a size
/// SQLite must get NULL for (zero or negative) or that no layout can hold.
fn layout(size: c_int) -> Option<Layout> {
    let size = usize::try_from(size).ok().filter(|&n| n > 0)?;
    Layout::from_size_align(size.checked_add(HEADER)?, ALIGN).ok()
}

unsafe extern "C" fn x_malloc(size: c_int) -> *mut c_void {
    let Some(layout) = layout(size) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a non-zero size; the header is written inside the block,
    // which is aligned for a usize.
    unsafe {
        let block = std::alloc::alloc(layout);
        if block.is_null() {
            return std::ptr::null_mut();
        }
        block.cast::<usize>().write(layout.size() - HEADER);
        block.add(HEADER).cast()
    }
}

/// The start of the block and its layout, for a pointer `x_malloc` or `x_realloc` gave.
///
/// # Safety
/// `p` must be a live pointer returned by `x_malloc` or `x_realloc`.
unsafe fn block_of(p: *mut c_void) -> (*mut u8, Layout) {
    // SAFETY: the caller's promise: the header sits HEADER bytes before `p`, holding the
    // size that made a valid layout when the block was allocated.
    unsafe {
        let block = p.cast::<u8>().sub(HEADER);
        let size = block.cast::<usize>().read();
        (
            block,
            Layout::from_size_align_unchecked(size + HEADER, ALIGN),
        )
    }
}

unsafe extern "C" fn x_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: SQLite frees only what its allocator gave it, once.
    unsafe {
        let (block, layout) = block_of(p);
        std::alloc::dealloc(block, layout);
    }
}

unsafe extern "C" fn x_realloc(p: *mut c_void, size: c_int) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as x_malloc.
        return unsafe { x_malloc(size) };
    }
    let Some(new) = layout(size) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `p` came from this allocator (SQLite's contract); the new size is non-zero and
    // valid for the same alignment; on failure the old block is left as it was.
    unsafe {
        let (block, old) = block_of(p);
        let moved = std::alloc::realloc(block, old, new.size());
        if moved.is_null() {
            return std::ptr::null_mut();
        }
        moved.cast::<usize>().write(new.size() - HEADER);
        moved.add(HEADER).cast()
    }
}

unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: SQLite asks only the size of a live block of this allocator.
    let (_, layout) = unsafe { block_of(p) };
    c_int::try_from(layout.size() - HEADER).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn x_roundup(size: c_int) -> c_int {
    // SQLite never asks for more than SQLITE_MAX_ALLOCATION_SIZE, well below c_int::MAX - 7.
    size.saturating_add(7) & !7
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

/// Makes SQLite allocate through the Rust global allocator, without memory statistics.
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
    // functions above keep its contract (8-byte aligned blocks, xSize of a live block,
    // xRealloc of SQLite's own blocks). The caller is the only thread (see the module).
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
            assert_eq!(x_size(p), 40);
            std::ptr::write_bytes(p.cast::<u8>(), 0xAB, 40);
            let q = x_realloc(p, 5000);
            assert_eq!(x_size(q), 5000);
            assert_eq!(*q.cast::<u8>().add(39), 0xAB);
            let r = x_realloc(q, 16);
            assert_eq!(x_size(r), 16);
            assert_eq!(*r.cast::<u8>().add(15), 0xAB);
            x_free(r);
            x_free(std::ptr::null_mut());
            assert!(x_malloc(0).is_null());
            assert!(x_malloc(-1).is_null());
            assert_eq!(x_roundup(1), 8);
            assert_eq!(x_roundup(1024), 1024);
        }
    }
}
