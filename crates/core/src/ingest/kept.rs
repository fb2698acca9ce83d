//! What ingest reads of its configuration for a request, kept between requests: the
//! source (its row and its container's) and the rules of its workspace (the suppression
//! list's key and action, the check steps with their secrets' values, the live products).
//!
//! Every ingest request names its source, and reading it (a join of `sources` and
//! `containers`, 24 columns into a [`Source`]) cost 21,000 instructions of the request's
//! 127,000 on the HTTP workers, and the workspace's rules two more pooled reads (and every
//! check step's document parsed again) (callgrind, `bench/instructions.sh single`). What is
//! kept must be what those reads would give now, whoever changed it: the CLI changes
//! sources, lists and steps from its own process. So every lookup first reads
//! `source_stamp` (one integer, migrations 31, 32 and 34), which triggers in the file move
//! on every change of a source, a container, a workspace's suppression action or key, a
//! check step or its secret, a product, or a subscription's pricing by bid, in the same
//! transaction as the change; what is kept is used only while the stamp is the one it was
//! read under. The products were a pooled read of each request that names one (most
//! leads do: the product routes them), 9% of the server's samples under single leads with
//! a product (`perf record`, BENCHMARKS.md).
//!
//! The stamp is read before the rest, each in its own implicit read transaction: what is
//! read after the stamp is at least as new as the stamp says, so a change in between only
//! makes the next lookup read again. Only sources that exist are kept (an unknown id costs
//! a read each time and takes no room); a new stamp drops everything kept.
//!
//! Ingest does not read even the stamp first ([`Kept::kept`]): that read begins a read
//! transaction on a file the writer commits to hundreds of times a second, and cost a tenth
//! of an HTTP worker's time per single lead (`perf record`, BENCHMARKS.md). It takes the
//! kept copy as it is and confirms the stamp later ([`StampCheck`]): in its writer job's
//! transaction before the job's first write, or on the read pool before it asks a buyer for
//! a bid or answers without writing. A request whose stamp moved has written nothing and
//! asked no one, and runs again on the source as read then, so every answer rests on a
//! state confirmed after the request arrived.
//!
//! Owns the kept copy; `config::source`, `suppression` and `checks::store` own the SQL of
//! what is kept, the migrations the stamp's triggers.

use crate::db::PrepareKept;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use super::IngestError;
use super::catalog::{self, Catalog};
use crate::checks::run::Step;
use crate::config::source::{self, Source};
use crate::suppression::{self, Lookup};

/// A source admitted to ingest, with the rules of its workspace.
pub struct Admission {
    /// Shared with the kept copy: a request takes it without copying its two dozen fields.
    pub source: Arc<Source>,
    pub rules: Arc<WorkspaceRules>,
    /// The stamp the source and the rules were read under.
    pub stamp: i64,
}

/// What ingest applies to every lead of a workspace before it is stored.
pub struct WorkspaceRules {
    /// The suppression list's key and action; `None` when the workspace never wrote a list.
    pub suppression: Option<Lookup>,
    /// The check steps, in name order.
    pub steps: Vec<Step>,
    /// The live products, which a lead's interests name.
    pub products: Catalog,
}

/// The sources and workspace rules read under one stamp.
#[derive(Default)]
pub struct Kept {
    kept: Mutex<Copy>,
}

#[derive(Default)]
struct Copy {
    /// The stamp what is kept was read under; `None` before the first read.
    stamp: Option<i64>,
    sources: HashMap<crate::ids::SourceId, Arc<Source>>,
    workspaces: HashMap<String, Arc<WorkspaceRules>>,
}

impl Kept {
    /// Source `id` with its workspace's rules, as they are in the file now.
    pub fn find(
        &self,
        conn: &Connection,
        id: &crate::ids::SourceId,
    ) -> Result<Option<Admission>, IngestError> {
        let stamp = stamp(conn)?;
        if let Some(admission) = self.kept(id)
            && admission.stamp == stamp
        {
            return Ok(Some(admission));
        }
        let Some(source) = source::find(conn, id)? else {
            return Ok(None);
        };
        let source = Arc::new(source);
        let rules = Arc::new(WorkspaceRules {
            suppression: suppression::lookup(conn, &source.workspace_id)?,
            steps: crate::checks::store::for_workspace(conn, &source.workspace_id)
                .map_err(|e| IngestError::Internal(e.to_string()))?,
            products: catalog::of_workspace(conn, &source.workspace_id)?,
        });
        let mut kept = self.lock();
        if kept.stamp != Some(stamp) {
            kept.sources.clear();
            kept.workspaces.clear();
            kept.stamp = Some(stamp);
        }
        kept.sources.insert(id.clone(), source.clone());
        kept.workspaces
            .insert(source.workspace_id.clone(), rules.clone());
        Ok(Some(Admission {
            source,
            rules,
            stamp,
        }))
    }

    /// Source `id` with its workspace's rules as they were kept, without reading the file:
    /// `None` when nothing is kept for it. It may be out of date; a [`StampCheck`] made
    /// from its stamp says when it is not.
    pub fn kept(&self, id: &crate::ids::SourceId) -> Option<Admission> {
        let kept = self.lock();
        let stamp = kept.stamp?;
        let source = kept.sources.get(id)?;
        let rules = kept.workspaces.get(&source.workspace_id)?;
        Some(Admission {
            source: source.clone(),
            rules: rules.clone(),
            stamp,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Copy> {
        // What is kept is whole under the lock (a clear, an insert): a panic elsewhere
        // leaves nothing half-made, so a poisoned lock's content is still right.
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The file's stamp as `conn` sees it (in its transaction, or in one of its own).
fn stamp(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_kept("SELECT generation FROM source_stamp WHERE id = 1")?
        .query_row([], |row| row.get(0))
}

/// Whether the admission a request runs on is still the file's: read for the request
/// ([`StampCheck::read_now`]), or taken from the kept copy and not yet confirmed
/// ([`StampCheck::kept`]) until a transaction that also sees the stamp confirms it.
pub struct StampCheck {
    /// The stamp a kept admission was read under; `None` when it was read for the request.
    expected: Option<i64>,
    confirmed: AtomicBool,
}

impl StampCheck {
    /// For an admission read from the file for this request: nothing to confirm.
    pub fn read_now() -> StampCheck {
        StampCheck {
            expected: None,
            confirmed: AtomicBool::new(true),
        }
    }

    /// For an admission taken from the kept copy under `stamp`.
    pub fn kept(stamp: i64) -> StampCheck {
        StampCheck {
            expected: Some(stamp),
            confirmed: AtomicBool::new(false),
        }
    }

    /// The stamp a transaction must still see, until one has: what a writer job hands to
    /// [`confirm_in`] before its first write.
    pub fn pending(&self) -> Option<i64> {
        self.expected
            .filter(|_| !self.confirmed.load(Ordering::Acquire))
    }

    /// Records that a transaction saw the stamp unchanged (one that [`confirm_in`] passed
    /// and that was not undone).
    pub fn mark_confirmed(&self) {
        self.confirmed.store(true, Ordering::Release);
    }

    /// Confirms the stamp in a read of its own, unless it is confirmed already: for a
    /// request about to answer without having written. `Err(Stale)` when it moved.
    pub fn confirm(&self, db: &crate::db::Db) -> Result<(), IngestError> {
        let Some(expected) = self.pending() else {
            return Ok(());
        };
        db.read_blocking(|conn| confirm_in(conn, Some(expected)))?;
        self.mark_confirmed();
        Ok(())
    }
}

/// `Err(Stale)` when the file's stamp, as `conn`'s transaction sees it, is no longer
/// `expected` (nothing to check when `None`): first in a writer job, so a job on a stale
/// admission fails before it writes.
pub fn confirm_in(conn: &Connection, expected: Option<i64>) -> Result<(), IngestError> {
    match expected {
        Some(expected) if stamp(conn)? != expected => Err(IngestError::Stale),
        _ => Ok(()),
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

    fn name(kept: &Kept, conn: &Connection) -> Option<String> {
        kept.find(conn, &"src".into())
            .unwrap()
            .map(|found| found.source.name.clone())
    }

    #[test]
    fn a_kept_source_is_read_again_after_any_change_by_any_connection() {
        let (_dir, server, cli) = two_connections();
        let kept = Kept::default();
        assert_eq!(name(&kept, &server).as_deref(), Some("S"));

        cli.execute_batch("UPDATE sources SET name = 'Renamed' WHERE id = 'src'")
            .unwrap();
        assert_eq!(name(&kept, &server).as_deref(), Some("Renamed"));

        cli.execute_batch("UPDATE sources SET enabled = 0 WHERE id = 'src'")
            .unwrap();
        assert!(
            !kept
                .find(&server, &"src".into())
                .unwrap()
                .unwrap()
                .source
                .enabled
        );

        cli.execute_batch("UPDATE containers SET workspace_id = 'ws', kind = 'table'")
            .unwrap();
        let source = kept.find(&server, &"src".into()).unwrap().unwrap().source;
        assert_eq!(
            source.container_kind,
            source::find(&server, &"src".into())
                .unwrap()
                .unwrap()
                .container_kind
        );

        cli.execute_batch("DELETE FROM sources WHERE id = 'src'")
            .unwrap();
        assert_eq!(name(&kept, &server), None);
        assert_eq!(
            kept.find(&server, &"unknown".into())
                .unwrap()
                .map(|found| found.source.id.clone()),
            None
        );
    }

    #[test]
    fn the_workspace_rules_follow_the_suppression_list_and_its_action() {
        use crate::config::workspace::SuppressionAction;
        let (_dir, server, cli) = two_connections();
        let kept = Kept::default();
        let rules = |kept: &Kept| kept.find(&server, &"src".into()).unwrap().unwrap().rules;
        assert!(rules(&kept).suppression.is_none());
        assert!(rules(&kept).steps.is_empty());

        cli.execute_batch(
            "INSERT INTO suppression_keys (workspace_id, hmac_key, created_at)
                 VALUES ('ws', zeroblob(32), 0)",
        )
        .unwrap();
        let action = |kept: &Kept| rules(kept).suppression.as_ref().map(|list| list.action);
        assert_eq!(action(&kept), Some(SuppressionAction::Reject));

        cli.execute_batch("UPDATE workspaces SET suppression_action = 'flag'")
            .unwrap();
        assert_eq!(action(&kept), Some(SuppressionAction::Flag));

        cli.execute_batch("DELETE FROM suppression_keys").unwrap();
        assert_eq!(action(&kept), None);
    }

    #[test]
    fn the_workspace_products_follow_every_change_of_a_product() {
        let (_dir, server, cli) = two_connections();
        let kept = Kept::default();
        let slugs = |kept: &Kept| {
            let rules = kept.find(&server, &"src".into()).unwrap().unwrap().rules;
            ["solar", "heat"].map(|slug| rules.products.by_slug(slug).map(|p| p.id.clone()))
        };
        assert_eq!(slugs(&kept), [None, None]);

        cli.execute_batch(
            "INSERT INTO products (id, workspace_id, slug, name, created_at)
                 VALUES ('p1', 'ws', 'solar', 'Solar', 0)",
        )
        .unwrap();
        assert_eq!(slugs(&kept), [Some("p1".into()), None]);

        cli.execute_batch("UPDATE products SET slug = 'heat' WHERE id = 'p1'")
            .unwrap();
        assert_eq!(slugs(&kept), [None, Some("p1".into())]);

        cli.execute_batch("UPDATE products SET archived_at = 1 WHERE id = 'p1'")
            .unwrap();
        assert_eq!(slugs(&kept), [None, None]);
    }

    #[test]
    fn the_kept_copy_is_taken_unread_and_its_stamp_confirmed_by_a_later_transaction() {
        let (_dir, server, cli) = two_connections();
        let kept = Kept::default();
        assert!(
            kept.kept(&"src".into()).is_none(),
            "nothing kept before a read"
        );
        let read = kept.find(&server, &"src".into()).unwrap().unwrap();
        let taken = kept.kept(&"src".into()).unwrap();
        assert_eq!(taken.stamp, read.stamp);
        assert!(kept.kept(&"unknown".into()).is_none());

        let check = StampCheck::kept(taken.stamp);
        assert_eq!(check.pending(), Some(taken.stamp));
        confirm_in(&server, check.pending()).expect("the stamp has not moved");
        cli.execute_batch("UPDATE sources SET name = 'Renamed' WHERE id = 'src'")
            .unwrap();
        assert!(matches!(
            confirm_in(&server, check.pending()),
            Err(IngestError::Stale)
        ));
        // What was kept is still taken as it was, until a read replaces it.
        assert_eq!(kept.kept(&"src".into()).unwrap().source.name, "S");
        assert_eq!(name(&kept, &server).as_deref(), Some("Renamed"));
        assert_eq!(kept.kept(&"src".into()).unwrap().source.name, "Renamed");

        check.mark_confirmed();
        assert_eq!(check.pending(), None, "a confirmed check asks for nothing");
        assert_eq!(StampCheck::read_now().pending(), None);
    }

    #[test]
    fn an_unchanged_stamp_answers_from_what_is_kept() {
        let (_dir, server, cli) = two_connections();
        let kept = Kept::default();
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
