use super::*;

fn temp_db() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("a temp dir can be made");
    let path = dir.path().join("test.db");
    let db = Db::open(&path).expect("a new database opens");
    // A side connection, so that async tests need not block on the writer to set up.
    Connection::open(&path)
        .and_then(|c| c.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"))
        .expect("table is created");
    (dir, db)
}

fn count(db: &Db) -> i64 {
    db.read_blocking(|conn| {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .map_err(DbError::from)
    })
    .expect("count reads")
}

#[test]
fn the_writer_gathers_its_wal_writes_and_syncs_every_commit() {
    // sqlite_writes holds WAL writes until a sync: safe only if every commit syncs.
    let (_dir, db) = temp_db();
    let level: i64 = db
        .write_blocking(|c| {
            c.pragma_query_value(None, "synchronous", |r| r.get(0))
                .map_err(DbError::from)
        })
        .unwrap();
    assert!(level >= 2, "synchronous={level}");
    // Counted on the writer's thread, where its commits write.
    let joined = || {
        db.write_blocking(|_| Ok::<_, DbError>(sqlite_writes::writes_joined()))
            .unwrap()
    };
    let before = joined();
    db.write_blocking(|c| {
        c.execute("INSERT INTO t VALUES ('a', 1)", [])
            .map_err(DbError::from)
    })
    .unwrap();
    assert!(joined() > before);
    assert_eq!(count(&db), 1);
}

#[test]
fn each_writer_job_has_its_own_number_and_nothing_else_has_one() {
    let (_dir, db) = temp_db();
    assert_eq!(running_job(), None, "not a writer's thread");
    let number = || {
        db.write_blocking(|_| Ok::<_, DbError>((running_job(), running_job())))
            .unwrap()
    };
    let (first, again) = number();
    let (second, _) = number();
    assert!(first.is_some());
    assert_eq!(first, again, "one job, one number");
    assert_ne!(first, second);
    let read = db
        .read_blocking(|_| Ok::<_, DbError>(running_job()))
        .unwrap();
    assert_eq!(read, None, "a reader runs no writer job");
}

#[test]
fn the_writer_s_jobs_run_its_kept_statements_and_readers_their_cache() {
    use super::PrepareKept;
    const SQL: &str = "SELECT count(*) FROM sqlite_schema";
    let (_dir, db) = temp_db();
    let kept = || {
        db.write_blocking(|c| Ok::<_, DbError>(c.prepare_kept(SQL)?.is_kept()))
            .unwrap()
    };
    assert!(kept(), "a writer job");
    assert!(kept(), "the next one");
    let read = db
        .read_blocking(|c| Ok::<_, DbError>(c.prepare_kept(SQL)?.is_kept()))
        .unwrap();
    assert!(!read, "a reader's connection");
}

#[test]
fn sqlite_is_built_with_the_options_of_cargo_config() {
    // `.cargo/config.toml` hands libsqlite3-sys its options through LIBSQLITE3_FLAGS; a
    // renamed variable or a lost file would drop them without any other sign.
    let (_dir, db) = temp_db();
    let options: Vec<String> = db
        .read_blocking(|conn| {
            let mut stmt = conn.prepare("PRAGMA compile_options")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>().map_err(DbError::from)
        })
        .unwrap();
    assert!(
        options.iter().any(|o| o == "OMIT_SHARED_CACHE"),
        "{options:?}"
    );
    assert!(
        !options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
        "{options:?}"
    );
}

#[test]
fn new_file_is_migrated_to_the_current_version() {
    let (_dir, db) = temp_db();
    let version = db
        .read_blocking(|conn| schema_version(conn).map_err(DbError::from))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failing_job_does_not_lose_its_neighbours_writes() {
    let (_dir, db) = temp_db();
    // Submit all three before awaiting any, so they share one group most of the time; the
    // assertion holds either way, which is the point: isolation does not depend on grouping.
    let a = db.write(|c| {
        c.execute("INSERT INTO t VALUES ('a', 1)", [])
            .map_err(DbError::from)
    });
    let bad = db.write(|c| -> Result<(), DbError> {
        c.execute("INSERT INTO t VALUES ('b', 2)", [])?;
        // Duplicate key: this job fails after it wrote a row; that row must vanish.
        c.execute("INSERT INTO t VALUES ('a', 3)", [])?;
        Ok(())
    });
    let c = db.write(|c| {
        c.execute("INSERT INTO t VALUES ('c', 4)", [])
            .map_err(DbError::from)
    });
    let (a, bad, c) = tokio::join!(a, bad, c);
    assert!(a.is_ok());
    assert!(bad.is_err());
    assert!(c.is_ok());
    let keys: Vec<String> = db
        .read(|conn| -> Result<Vec<String>, DbError> {
            let mut stmt = conn.prepare("SELECT k FROM t ORDER BY k")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(keys, vec!["a", "c"]);
}

/// A job that holds the writer until [`HeldWriter::release`], so that the jobs submitted
/// meanwhile queue behind it and run as one group. Jobs are queued from the test's thread
/// (`submit` returns once a job is in the queue), so nothing depends on how soon other
/// threads get a core.
struct HeldWriter {
    release: std::sync::mpsc::Sender<()>,
    blocker: tokio::sync::oneshot::Receiver<Result<(), DbError>>,
}

impl HeldWriter {
    /// Submits the holding job and returns once the writer runs it.
    fn new(db: &Db) -> HeldWriter {
        let (started, writer_busy) = std::sync::mpsc::channel::<()>();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let blocker = db
            .inner
            .writer
            .submit(
                move |_conn| {
                    started.send(()).expect("the test waits for the writer");
                    hold.recv().expect("the test releases the writer");
                    Ok::<(), DbError>(())
                },
                writer::Admission::Always,
                None,
                Undo::Savepoint,
            )
            .unwrap();
        writer_busy.recv().unwrap();
        HeldWriter { release, blocker }
    }

    /// Lets the holding job end and waits for its answer.
    fn release(self) {
        self.release.send(()).unwrap();
        self.blocker.blocking_recv().unwrap().unwrap();
    }
}

/// A test's job for the writer.
type TestJob = Box<dyn FnOnce(&Connection) -> Result<(), DbError> + Send>;

/// Runs `jobs` (each with its undo) as one group behind a job that holds the writer, and
/// returns their answers in order.
fn one_group(db: &Db, jobs: Vec<(Undo, TestJob)>) -> Vec<Result<(), DbError>> {
    let writer = &db.inner.writer;
    let held = HeldWriter::new(db);
    let groups_before = db.writer_stats().groups;
    let replies: Vec<_> = jobs
        .into_iter()
        .map(|(undo, job)| {
            writer
                .submit(job, writer::Admission::Always, None, undo)
                .unwrap()
        })
        .collect();
    held.release();
    let answers = replies
        .into_iter()
        .map(|reply| reply.blocking_recv().unwrap())
        .collect();
    assert!(
        db.writer_stats().groups - groups_before <= 2,
        "the jobs ran as one group (or two, when one rolled back the first transaction)"
    );
    answers
}

fn insert(key: &'static str) -> TestJob {
    Box::new(move |c| {
        c.execute("INSERT INTO t VALUES (?1, 1)", [key])?;
        Ok(())
    })
}

fn keys(db: &Db) -> Vec<String> {
    db.read_blocking(|conn| -> Result<Vec<String>, DbError> {
        let mut stmt = conn.prepare("SELECT k FROM t ORDER BY k")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    })
    .unwrap()
}

#[test]
fn a_job_without_a_savepoint_that_fails_before_writing_keeps_its_group() {
    let (_dir, db) = temp_db();
    let answers = one_group(
        &db,
        vec![
            (Undo::Group, insert("a")),
            (
                Undo::Group,
                Box::new(|c| {
                    // Reads, then refuses: nothing of its own to undo.
                    c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))?;
                    Err(DbError::JobPanicked)
                }),
            ),
            (Undo::Group, insert("c")),
        ],
    );
    assert!(answers[0].is_ok(), "{answers:?}");
    assert!(
        matches!(answers[1], Err(DbError::JobPanicked)),
        "{answers:?}"
    );
    assert!(answers[2].is_ok(), "{answers:?}");
    assert_eq!(keys(&db), vec!["a", "c"]);
}

#[test]
fn a_job_without_a_savepoint_that_fails_after_writing_takes_its_transaction_with_it() {
    let (_dir, db) = temp_db();
    let answers = one_group(
        &db,
        vec![
            (Undo::Group, insert("a")),
            (Undo::Savepoint, insert("b")),
            (
                Undo::Group,
                Box::new(|c| {
                    c.execute("INSERT INTO t VALUES ('x', 1)", [])?;
                    // Duplicate key: fails after its first write.
                    c.execute("INSERT INTO t VALUES ('a', 2)", [])?;
                    Ok(())
                }),
            ),
            (Undo::Group, insert("d")),
        ],
    );
    // Its own error, not the group's.
    assert!(matches!(answers[2], Err(DbError::Sqlite(_))), "{answers:?}");
    // The earlier jobs' writes went with the transaction: they are told so, not answered Ok.
    for earlier in &answers[..2] {
        assert!(
            matches!(earlier, Err(DbError::GroupFailed { .. })),
            "{answers:?}"
        );
    }
    // The later job ran in a new transaction and committed.
    assert!(answers[3].is_ok(), "{answers:?}");
    assert_eq!(keys(&db), vec!["d"]);
}

#[test]
fn a_panicking_job_without_a_savepoint_leaves_nothing_behind() {
    let (_dir, db) = temp_db();
    let answers = one_group(
        &db,
        vec![
            (
                Undo::Group,
                Box::new(|c| {
                    c.execute("INSERT INTO t VALUES ('p', 1)", [])?;
                    panic!("job panics on purpose");
                }),
            ),
            (Undo::Group, insert("q")),
        ],
    );
    assert!(
        matches!(answers[0], Err(DbError::JobPanicked)),
        "{answers:?}"
    );
    assert!(answers[1].is_ok(), "{answers:?}");
    assert_eq!(keys(&db), vec!["q"]);
}

#[test]
fn panicking_job_is_isolated_and_the_writer_survives() {
    let (_dir, db) = temp_db();
    let result: Result<(), DbError> = db.write_blocking(|c| {
        c.execute("INSERT INTO t VALUES ('p', 1)", [])?;
        panic!("job panics on purpose");
    });
    assert!(matches!(result, Err(DbError::JobPanicked)));
    db.write_blocking(|c| {
        c.execute("INSERT INTO t VALUES ('q', 1)", [])
            .map_err(DbError::from)
    })
    .expect("the writer still works after a panic");
    assert_eq!(count(&db), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_jobs_from_many_tasks_all_commit() {
    let (_dir, db) = temp_db();
    let mut tasks = Vec::new();
    for task in 0..50 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..20 {
                db.write(move |c| {
                    c.execute(
                        "INSERT INTO t VALUES (?1, ?2)",
                        rusqlite::params![format!("{task}-{n}"), n],
                    )
                    .map_err(DbError::from)
                })
                .await
                .expect("insert commits");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(count(&db), 1000);
}

#[test]
fn jobs_queued_while_the_writer_is_busy_share_one_commit() {
    let (_dir, db) = temp_db();
    let writer = &db.inner.writer;
    // Hold the writer inside a job while 100 more jobs are queued behind it; the writer
    // must then take all of them as one group (one commit), not one by one.
    let held = HeldWriter::new(&db);
    // A fresh database: the blocker is the writer's only job so far, still running, its
    // group counted as it runs (so a caller with its answer finds its group counted).
    let before = db.writer_stats();
    assert_eq!((before.groups, before.jobs), (1, 1), "{before:?}");
    let queued: Vec<_> = (0..100)
        .map(|n: i64| {
            writer
                .submit(
                    move |c| {
                        c.execute(
                            "INSERT INTO t VALUES (?1, ?2)",
                            rusqlite::params![n.to_string(), n],
                        )
                        .map_err(DbError::from)
                    },
                    writer::Admission::Always,
                    None,
                    Undo::Savepoint,
                )
                .unwrap()
        })
        .collect();
    assert_eq!(db.writer_stats().submitted, 101);
    held.release();
    for reply in queued {
        assert_eq!(reply.blocking_recv().unwrap().unwrap(), 1);
    }
    assert_eq!(count(&db), 100);
    let after = db.writer_stats();
    assert_eq!(
        after.groups - before.groups,
        1,
        "after the blocker's group, one group for all 100 queued jobs: {after:?}"
    );
    assert_eq!(after.max_group_size, 100, "{after:?}");
}

/// Bytes of the database file (not its WAL) in `dir`.
fn file_size(dir: &tempfile::TempDir) -> u64 {
    std::fs::metadata(dir.path().join("test.db"))
        .expect("the database file is there")
        .len()
}

/// Waits until the database file holds `bytes` more than `before`, i.e. a checkpoint copied
/// the WAL into it; panics after 30 s.
fn wait_for_checkpoint(dir: &tempfile::TempDir, before: u64, bytes: u64, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while file_size(dir) < before + bytes {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the WAL was never checkpointed: {} bytes, {before} before",
            file_size(dir)
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A job that writes `pages` pages of about 4 KB into a new table `name`.
fn write_pages(c: &Connection, name: &str, pages: u32) -> rusqlite::Result<()> {
    c.execute_batch(&format!(
        "CREATE TABLE {name} (b BLOB NOT NULL);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {pages})
         INSERT INTO {name} SELECT randomblob(4000) FROM n;"
    ))
}

#[test]
fn the_wal_is_checkpointed_while_the_writer_runs_a_job() {
    let (dir, db) = temp_db();
    let before = file_size(&dir);
    // Job A writes half again as many pages as the checkpointer's mark and queues job B,
    // which then holds the writer thread until the test lets it go. All of A's pages must
    // reach the database file while B holds the writer: the checkpoint runs on a thread of
    // its own, so no job waits for it and it waits for no job. (A checkpoint on the writer
    // thread, SQLite's inside A's commit or the writer's after the answers, would have made
    // B wait for it, or would wait for B.)
    let pages = checkpoint::CHECKPOINT_FRAMES as u32 * 3 / 2;
    let (started, writer_busy) = std::sync::mpsc::channel::<()>();
    let (release, hold) = std::sync::mpsc::channel::<()>();
    let queuer = db.clone();
    let a = db.inner.writer.submit(
        move |c| {
            write_pages(c, "big", pages)?;
            let b = queuer.inner.writer.submit(
                move |_conn| {
                    started.send(()).expect("the test waits for job B");
                    hold.recv().expect("the test releases job B");
                    Ok::<(), DbError>(())
                },
                writer::Admission::Always,
                None,
                Undo::Savepoint,
            )?;
            Ok::<_, DbError>(b)
        },
        writer::Admission::Always,
        None,
        Undo::Savepoint,
    );
    let b = a.unwrap().blocking_recv().unwrap().unwrap();
    writer_busy.recv().unwrap();
    wait_for_checkpoint(
        &dir,
        before,
        u64::from(pages) * 4000,
        "while job B held the writer",
    );
    release.send(()).unwrap();
    b.blocking_recv().unwrap().unwrap();
    let stats = db.writer_stats().checkpoints;
    assert_eq!(stats.by_writer, 0, "the checkpointer's work: {stats:?}");
}

#[test]
fn the_writer_checkpoints_itself_when_the_checkpointer_falls_behind() {
    let (dir, db) = temp_db();
    // No checkpointer (as if it could not keep up): the WAL must not grow without bound.
    // Under the writer's own mark nothing is checkpointed; past it, with no job waiting,
    // the writer checkpoints after the group's answer.
    db.inner.checkpointer.stop();
    let before = file_size(&dir);
    let pages = writer::WRITER_CHECKPOINT_FRAMES as u32 * 5 / 8;
    db.write_blocking(move |c| write_pages(c, "small", pages).map_err(DbError::from))
        .unwrap();
    assert!(
        file_size(&dir) < before + 1_000_000,
        "no checkpoint under the writer's mark: {} bytes, {before} before",
        file_size(&dir)
    );
    db.write_blocking(move |c| write_pages(c, "more", pages).map_err(DbError::from))
        .unwrap();
    wait_for_checkpoint(&dir, before, u64::from(pages) * 8000, "by the writer");
    let stats = db.writer_stats().checkpoints;
    assert_eq!((stats.passes, stats.by_writer), (0, 1), "{stats:?}");
}

#[test]
fn data_is_there_after_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopen.db");
    {
        let db = Db::open(&path).unwrap();
        db.write_blocking(|c| {
            c.execute_batch("CREATE TABLE t (k TEXT); INSERT INTO t VALUES ('kept');")
                .map_err(DbError::from)
        })
        .unwrap();
        db.close();
    }
    let db = Db::open(&path).unwrap();
    let k: String = db
        .read_blocking(|c| {
            c.query_row("SELECT k FROM t", [], |r| r.get(0))
                .map_err(DbError::from)
        })
        .unwrap();
    assert_eq!(k, "kept");
}

#[test]
fn writes_after_close_fail_cleanly() {
    let (_dir, db) = temp_db();
    db.close();
    let result = db.write_blocking(|c| {
        c.execute("INSERT INTO t VALUES ('x', 1)", [])
            .map_err(DbError::from)
    });
    assert!(matches!(result, Err(DbError::WriterGone)));
}

#[cfg(unix)]
#[test]
fn new_database_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, _db) = temp_db();
    let mode = std::fs::metadata(dir.path().join("test.db"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_new_file_vacuums_incrementally_and_zeroes_what_it_deletes() {
    let (_dir, db) = temp_db();
    let (auto_vacuum, secure_delete) = db
        .read_blocking(|conn| {
            let auto: i64 = conn.pragma_query_value(None, "auto_vacuum", |r| r.get(0))?;
            let secure: i64 = conn.pragma_query_value(None, "secure_delete", |r| r.get(0))?;
            Ok::<_, DbError>((auto, secure))
        })
        .unwrap();
    assert_eq!(auto_vacuum, 2, "incremental");
    assert_eq!(secure_delete, 1, "on, not fast (2)");
    // Pages freed by a job go back to the file system from inside a writer job.
    let freed = db
        .write_blocking(|conn| {
            for n in 0..2_000 {
                conn.execute(
                    "INSERT INTO t VALUES (?1, ?2)",
                    rusqlite::params![format!("{n:0>200}"), n],
                )?;
            }
            conn.execute("DELETE FROM t", [])?;
            let before: i64 = conn.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
            // The pragma frees one page per step: run it to the end.
            let mut stmt = conn.prepare("PRAGMA incremental_vacuum(10)")?;
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
            let after: i64 = conn.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
            Ok::<_, DbError>((before, after))
        })
        .unwrap();
    assert!(freed.0 > 10, "{freed:?}");
    assert_eq!(freed.1, freed.0 - 10, "{freed:?}");
}

/// Whether `sql` compiles, on `conn`, to a program that builds a temporary b-tree.
fn builds_a_temporary_b_tree(conn: &Connection, sql: &str) -> rusqlite::Result<bool> {
    let mut explain = conn.prepare(&format!("EXPLAIN {sql}"))?;
    let mut ops = explain.query_map([], |row| row.get::<_, String>(1))?;
    ops.try_fold(false, |found, op| Ok(found || op? == "OpenEphemeral"))
}

#[test]
fn the_writer_that_ran_migration_22_writes_with_the_new_checks() {
    const UPDATE: &str = "UPDATE outbox_events SET status = 'failed' WHERE id = 'evt_x'";
    let dir = tempfile::tempdir().expect("a temp dir can be made");
    let path = dir.path().join("test.db");
    Db::open(&path).expect("a new database opens").close();
    // Back to the text before migrations 22 and 24, schema version 21.
    let conn = Connection::open(&path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "schema_version", |r| r.get(0))
        .unwrap();
    conn.execute_batch(&format!(
        "BEGIN;
         PRAGMA writable_schema = ON;
         UPDATE sqlite_schema SET sql = replace(sql,
             'CHECK (status = ''pending'' OR status = ''delivered'' OR status = ''failed''
                            OR status = ''voided'')',
             'CHECK (status IN (''pending'', ''delivered'', ''failed''))')
         WHERE name = 'outbox_events';
         PRAGMA writable_schema = RESET;
         PRAGMA schema_version = {};
         PRAGMA user_version = 21;
         COMMIT;",
        version + 1
    ))
    .unwrap();
    assert!(builds_a_temporary_b_tree(&conn, UPDATE).unwrap());
    drop(conn);

    // The writer's connection migrates the file as it opens, and then writes with it.
    let db = Db::open(&path).expect("the file opens and migrates");
    let on_writer = db
        .write_blocking(|conn| builds_a_temporary_b_tree(conn, UPDATE).map_err(DbError::from))
        .unwrap();
    assert!(!on_writer, "the writer still compiles the CHECK's IN list");
    db.close();
}
