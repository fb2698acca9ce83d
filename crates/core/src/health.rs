//! The service's health (`GET /api/health`): whether the database can be read and a real
//! write can be committed, and how the outbox stands.
//!
//! Owns the checks and the `health_probe` table. A write is proven three ways, cheapest
//! first: the file system holding the database has room and is not read-only (`statvfs`);
//! a real page write committed through the writer ([`Prober`], at most once per
//! [`PROBE_INTERVAL`] however often a load balancer asks, the result cached in between);
//! and the writer's latest group transaction did not fail for the storage. An empty
//! transaction would prove none of it: it needs no space. The answer's HTTP form, and
//! whether the server is shutting down, are the HTTP layer's (`http::handlers::health`).

use crate::db::PrepareKept;
use std::time::{Duration, Instant};

use crate::db::{Db, DbError, StorageFault};
use crate::logging::Repeated;
use crate::outbox::store::Figures;

/// How often the probe writes at most; a check in between reuses its result.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// How long a probe may wait for its commit before the check says the database cannot be
/// written. The probe itself still runs when its turn comes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Less free space than this on the database's file system is a full disk: the largest
/// request body (1 MiB) could not be stored.
pub(crate) const MIN_FREE_BYTES: u64 = 1024 * 1024;

/// Why the service cannot serve now.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unhealthy {
    #[error("shutting down")]
    ShuttingDown,
    #[error("database cannot be read: {0}")]
    Unreadable(String),
    #[error("database cannot be written: {reason}")]
    Unwritable {
        reason: String,
        fault: Option<StorageFault>,
    },
}

impl Unhealthy {
    /// The storage fault behind the answer, if that is the cause.
    pub fn storage_fault(&self) -> Option<StorageFault> {
        match self {
            Unhealthy::Unwritable { fault, .. } => *fault,
            _ => None,
        }
    }

    fn unwritable(e: &DbError) -> Unhealthy {
        Unhealthy::Unwritable {
            reason: e.to_string(),
            fault: e.storage_fault(),
        }
    }
}

/// The write probe of one service and its latest result. Concurrent checks share one
/// probe: the first runs it, the others wait for it and take its result.
#[derive(Default)]
pub struct Prober {
    last: tokio::sync::Mutex<Option<Probe>>,
}

#[derive(Clone)]
struct Probe {
    at: Instant,
    result: Result<(), Unhealthy>,
}

/// Reads the outbox figures through the read pool, then checks that a write can be
/// committed: room on the file system, the probe (run or cached), the latest commit.
pub async fn check(db: &Db, prober: &Prober) -> Result<Figures, Unhealthy> {
    let figures = db
        .read(|conn| crate::outbox::store::figures(conn).map_err(DbError::from))
        .await
        .map_err(|e| Unhealthy::Unreadable(e.to_string()))?;
    check_space(db)?;
    prober.probe(db).await?;
    // A request's group may have failed after the probe (a big batch on a nearly full
    // disk); the latest commit says so until a later one succeeds.
    if let Some(last) = db.last_commit()
        && let Some(Some(fault)) = last.failed
        && fault != StorageFault::Busy
    {
        return Err(Unhealthy::Unwritable {
            reason: format!("the latest write failed ({})", fault.as_str()),
            fault: Some(fault),
        });
    }
    Ok(figures)
}

/// Room on the database's file system, and that it is not mounted read-only.
fn check_space(db: &Db) -> Result<(), Unhealthy> {
    static STATVFS_FAILED: Repeated = Repeated::new();
    match crate::db::files::space(db.path()) {
        Ok(Some(space)) if space.read_only => Err(Unhealthy::Unwritable {
            reason: "the file system holding it is read-only".into(),
            fault: Some(StorageFault::ReadOnly),
        }),
        Ok(Some(space)) if space.available_bytes < MIN_FREE_BYTES => Err(Unhealthy::Unwritable {
            reason: format!(
                "the disk is full ({} bytes free, {MIN_FREE_BYTES} needed)",
                space.available_bytes
            ),
            fault: Some(StorageFault::Full),
        }),
        Ok(_) => Ok(()),
        // The probe still tells; a file system that cannot say its free space is no
        // reason to take the service out.
        Err(e) => {
            if let Some(repeats) = STATVFS_FAILED.admit() {
                log::warn!(
                    "health: cannot read the free space of the database's disk: {e}{repeats}"
                );
            }
            Ok(())
        }
    }
}

impl Prober {
    /// The probe's result: the cached one when younger than [`PROBE_INTERVAL`], else a new
    /// probe's.
    async fn probe(&self, db: &Db) -> Result<(), Unhealthy> {
        let mut last = self.last.lock().await;
        if let Some(probe) = last.as_ref()
            && probe.at.elapsed() < PROBE_INTERVAL
        {
            return probe.result.clone();
        }
        let result = match tokio::time::timeout(PROBE_TIMEOUT, db.write(write_probe)).await {
            Ok(Ok(())) => Ok(()),
            // The writer is busy with requests: alive, and the next check probes again.
            // The requests' own failures show in the latest commit.
            Ok(Err(DbError::Overloaded)) => return Ok(()),
            Ok(Err(e)) => Err(Unhealthy::unwritable(&e)),
            Err(_) => Err(Unhealthy::Unwritable {
                reason: format!(
                    "a test write did not commit within {}",
                    crate::duration::format(PROBE_TIMEOUT)
                ),
                fault: None,
            }),
        };
        *last = Some(Probe {
            at: Instant::now(),
            result: result.clone(),
        });
        result
    }
}

/// The probe: rewrites the one row of `health_probe`, a real page write that needs room in
/// the write-ahead log and a writable file.
fn write_probe(conn: &rusqlite::Connection) -> Result<(), DbError> {
    conn.prepare_kept(
        "INSERT INTO health_probe (id, probed_at, probes) VALUES (1, ?1, 1)
         ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at, probes = probes + 1",
    )?
    .execute([crate::clock::now_ms()])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probes(db: &Db) -> i64 {
        db.read_blocking(|conn| {
            conn.query_row("SELECT probes FROM health_probe", [], |r| r.get(0))
                .map_err(DbError::from)
        })
        .expect("the probe row reads")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_probe_writes_once_per_interval_and_a_read_only_file_fails_it() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let db = Db::open(dir.path().join("health.db")).expect("the database opens");
        let prober = Prober::default();
        check(&db, &prober)
            .await
            .expect("a new database is healthy");
        assert_eq!(probes(&db), 1);
        // A polling load balancer: the result is reused within the interval.
        for _ in 0..20 {
            check(&db, &prober).await.expect("still healthy");
        }
        assert_eq!(probes(&db), 1, "one real write per interval");

        // The writer's connection can no longer write: every write now fails with a real
        // SQLITE_READONLY, which the next probe meets.
        db.write(|conn| {
            conn.pragma_update(None, "query_only", true)
                .map_err(DbError::from)
        })
        .await
        .expect("the pragma is set");
        let fresh = Prober::default();
        match check(&db, &fresh).await {
            Err(unhealthy @ Unhealthy::Unwritable { .. }) => {
                assert_eq!(unhealthy.storage_fault(), Some(StorageFault::ReadOnly));
                assert!(
                    unhealthy
                        .to_string()
                        .starts_with("database cannot be written:"),
                    "{unhealthy}"
                );
            }
            other => panic!("a read-only database is healthy: {:?}", other.err()),
        }
    }
}
