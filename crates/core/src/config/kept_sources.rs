//! Sources as ingest looks them up, kept between requests.
//!
//! Every ingest request names its source, and reading it (a join of `sources` and
//! `containers`, 24 columns into a [`Source`]) cost 21,000 instructions of the request's
//! 127,000 on the HTTP workers (callgrind, `bench/instructions.sh single`). What is kept must
//! be what that read would give now, whoever changed it: the CLI changes sources from its
//! own process. So every lookup first reads `source_stamp` (one integer, migration 31),
//! which triggers in the file move on every insert, update or delete of a source and every
//! update or delete of a container, in the same transaction as the change; a kept source is
//! used only while the stamp is the one it was read under.
//!
//! The stamp is read before the source, each in its own implicit read transaction: a source
//! read after the stamp is at least as new as the stamp says, so a change in between only
//! makes the next lookup read again. Only sources that exist are kept (an unknown id costs
//! a read each time and takes no room); a new stamp drops everything kept.
//!
//! Owns the kept copy; `source` owns the SQL of the row, the migration the stamp's triggers.

use std::collections::HashMap;
use std::sync::Mutex;

use rusqlite::Connection;

use super::source::{self, Source};

/// The sources read under one stamp.
#[derive(Default)]
pub struct KeptSources {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// The stamp the sources were read under; `None` before the first read.
    stamp: Option<i64>,
    sources: HashMap<String, Source>,
}

impl KeptSources {
    /// Source `id` as [`source::find`] would read it on `conn` now.
    pub fn find(&self, conn: &Connection, id: &str) -> rusqlite::Result<Option<Source>> {
        let stamp: i64 = conn
            .prepare_cached("SELECT generation FROM source_stamp WHERE id = 1")?
            .query_row([], |row| row.get(0))?;
        {
            let kept = self.lock();
            if kept.stamp == Some(stamp)
                && let Some(source) = kept.sources.get(id)
            {
                return Ok(Some(source.clone()));
            }
        }
        let found = source::find(conn, id)?;
        if let Some(source) = &found {
            let mut kept = self.lock();
            if kept.stamp != Some(stamp) {
                kept.sources.clear();
                kept.stamp = Some(stamp);
            }
            kept.sources.insert(id.to_string(), source.clone());
        }
        Ok(found)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // What is kept is whole under the lock (a clear, an insert): a panic elsewhere
        // leaves nothing half-made, so a poisoned lock's content is still right.
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two connections to one file, as the server's reader and the CLI's process have.
    fn two_connections() -> (tempfile::TempDir, Connection, Connection) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("kept.db");
        let mut server = Connection::open(&path).expect("the file opens");
        crate::db::apply_migrations(&mut server).expect("the schema applies");
        server
            .execute_batch(
                "INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'W', 0);
                 INSERT INTO containers (id, workspace_id, kind, name, auto_delivery, created_at)
                     VALUES ('web', 'ws', 'channel', 'Web', 0, 0);
                 INSERT INTO sources (id, container_id, name, dedupe_scope, created_at)
                     VALUES ('src', 'web', 'S', 'channel', 0);",
            )
            .expect("the fixture is written");
        let cli = Connection::open(&path).expect("the file opens again");
        (dir, server, cli)
    }

    fn name(kept: &KeptSources, conn: &Connection) -> Option<String> {
        kept.find(conn, "src").unwrap().map(|source| source.name)
    }

    #[test]
    fn a_kept_source_is_read_again_after_any_change_by_any_connection() {
        let (_dir, server, cli) = two_connections();
        let kept = KeptSources::default();
        assert_eq!(name(&kept, &server).as_deref(), Some("S"));

        cli.execute_batch("UPDATE sources SET name = 'Renamed' WHERE id = 'src'")
            .unwrap();
        assert_eq!(name(&kept, &server).as_deref(), Some("Renamed"));

        cli.execute_batch("UPDATE sources SET enabled = 0 WHERE id = 'src'")
            .unwrap();
        assert!(!kept.find(&server, "src").unwrap().unwrap().enabled);

        cli.execute_batch("UPDATE containers SET workspace_id = 'ws', kind = 'table'")
            .unwrap();
        let source = kept.find(&server, "src").unwrap().unwrap();
        assert_eq!(
            source.container_kind,
            source::find(&server, "src")
                .unwrap()
                .unwrap()
                .container_kind
        );

        cli.execute_batch("DELETE FROM sources WHERE id = 'src'")
            .unwrap();
        assert_eq!(name(&kept, &server), None);
        assert_eq!(kept.find(&server, "unknown").unwrap().map(|s| s.id), None);
    }

    #[test]
    fn an_unchanged_stamp_answers_from_what_is_kept() {
        let (_dir, server, cli) = two_connections();
        let kept = KeptSources::default();
        assert_eq!(name(&kept, &server).as_deref(), Some("S"));
        // A change the stamp does not see (its trigger dropped) shows that the second
        // lookup did not read the row: it answers what was kept.
        cli.execute_batch(
            "DROP TRIGGER source_stamp_source_update;
             UPDATE sources SET name = 'Unseen' WHERE id = 'src';",
        )
        .unwrap();
        assert_eq!(name(&kept, &server).as_deref(), Some("S"));
        cli.execute_batch("UPDATE source_stamp SET generation = generation + 1")
            .unwrap();
        assert_eq!(name(&kept, &server).as_deref(), Some("Unseen"));
    }
}
