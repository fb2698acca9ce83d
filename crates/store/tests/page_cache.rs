//! SQLite's page cache wrapped (`db::sqlite_page_cache`) under a real file. A process of its
//! own: SQLite takes the wrapper only before its first connection, so this file holds one
//! test.

use leadrelay_store::db::sqlite_page_cache;
use rusqlite::{Connection, params};

/// A key that spreads inserts over the whole index, as contact keys do.
fn scattered(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555_5555;
    x ^= x >> 29;
    let mut key = x.to_be_bytes().to_vec();
    key.extend_from_slice(&i.to_be_bytes());
    key
}

#[test]
fn commits_after_page_splits_skip_the_scan_and_the_file_stays_whole() {
    assert!(
        sqlite_page_cache::configure(),
        "installed before any connection"
    );
    assert!(!sqlite_page_cache::configure(), "only once");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.db");
    let mut conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA auto_vacuum=INCREMENTAL; PRAGMA journal_mode=WAL; PRAGMA cache_size=-65536;
         CREATE TABLE rows (id INTEGER PRIMARY KEY, key BLOB NOT NULL, body TEXT NOT NULL);
         CREATE UNIQUE INDEX rows_key ON rows (key);",
    )
    .unwrap();
    let body = "x".repeat(300);
    let before = sqlite_page_cache::truncations_skipped();
    let parked_before = sqlite_page_cache::pages_parked();
    let mut kept = 0u64;
    for group in 0..60u64 {
        let mut tx = conn.transaction().unwrap();
        for job in 0..10u64 {
            // Each job in a savepoint, as the writer runs them; every third one fails late
            // and is rolled back, giving back the pages it added at the end of the file.
            let sp = tx.savepoint().unwrap();
            let first = (group * 10 + job) * 20;
            for i in first..first + 20 {
                sp.execute(
                    "INSERT INTO rows (id, key, body) VALUES (?1, ?2, ?3)",
                    params![i as i64, scattered(i), body],
                )
                .unwrap();
            }
            if job % 3 == 2 {
                // Dropped unfinished: rolled back and released.
                drop(sp);
            } else {
                sp.commit().unwrap();
                kept += 20;
            }
        }
        tx.commit().unwrap();
    }
    // The splits of the scattered index swapped page numbers through the lock page, after
    // which SQLite's cache would walk all its slots at the next commit; the wrapper
    // passed (almost) none of the 60 commits on.
    let parked = sqlite_page_cache::pages_parked() - parked_before;
    assert!(parked >= 10, "page numbers were swapped: {parked}");
    let skipped = sqlite_page_cache::truncations_skipped() - before;
    assert!(
        skipped >= 50,
        "almost no commit had a page past the end to drop: {skipped}"
    );

    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let (count, sum): (i64, i64) = conn
        .query_row("SELECT count(*), total(length(body)) FROM rows", [], |r| {
            Ok((r.get(0)?, r.get::<_, f64>(1)? as i64))
        })
        .unwrap();
    assert_eq!(count, kept as i64);
    assert_eq!(sum, kept as i64 * 300);
    // Every kept row is found through the index, from a second connection reading the file.
    let other = Connection::open(&path).unwrap();
    let mut find = other.prepare("SELECT id FROM rows WHERE key = ?1").unwrap();
    for i in (0..12_000u64).step_by(7) {
        let kept_row = (i / 20) % 10 % 3 != 2;
        let found: Option<i64> = find.query_row([scattered(i)], |r| r.get(0)).ok();
        assert_eq!(found, kept_row.then_some(i as i64), "row {i}");
    }
}
