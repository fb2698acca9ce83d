//! Fixtures for unit tests on a real, migrated database file: the configuration rows most
//! tests start from (workspace `ws`, channel `web`, source `src`, plain buyers), each made
//! through the owning module's own `create`. Compiled for tests only.

use rusqlite::Connection;

use super::buyer::{self, NewBuyer, Plan};
use super::container::{self, ContainerKind, DeliveryMode, NewContainer};
use super::source::{self, DedupeAction, NewSource};
use super::workspace::{self, NewWorkspace};

/// A migrated database file in a fresh temp dir (kept while the `TempDir` lives), opened as
/// a plain connection so a test can run one statement at a time.
pub fn migrated() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().expect("a temp dir can be made");
    let path = dir.path().join("test.db");
    crate::db::Db::open(&path)
        .expect("the database opens")
        .close();
    let conn = Connection::open(&path).expect("the file opens");
    (dir, conn)
}

/// Workspace `ws` in `timezone`.
pub fn workspace(conn: &Connection, timezone: &str) {
    workspace::create(
        conn,
        &NewWorkspace {
            id: Some("ws"),
            name: "W",
            timezone,
            retention: None,
        },
    )
    .expect("the workspace is new");
}

/// How [`channel`] makes channel `web`.
pub struct Channel {
    pub auto_delivery: bool,
    pub mode: DeliveryMode,
    pub max_buyers: i64,
    pub score_threshold: i64,
}

/// Channel `web` of `ws` with source `src` (no secret; `supplier_cost_cents` per lead).
pub fn channel(conn: &Connection, channel: Channel, supplier_cost_cents: Option<i64>) {
    container::create(
        conn,
        &NewContainer {
            id: Some("web"),
            workspace_id: "ws",
            kind: ContainerKind::Channel,
            name: "Web",
            auto_delivery: Some(channel.auto_delivery),
            delivery_mode: channel.mode,
            max_buyers: channel.max_buyers,
            score_threshold: channel.score_threshold,
            ping_ttl_ms: None,
            waterfall: None,
            waterfall_max: None,
        },
    )
    .expect("the channel is new");
    source::create(
        conn,
        &NewSource {
            id: Some("src"),
            container_id: "web",
            container_kind: ContainerKind::Channel,
            name: "Src",
            secret: None,
            supplier_id: None,
            supplier_cost_cents,
            revenue_share_bp: None,
            dedupe_fields: None,
            dedupe_scope: None,
            dedupe_action: DedupeAction::Review,
            dedupe_window_days: 30,
            result_detail: None,
        },
    )
    .expect("the source is new");
}

/// Buyer `id` of `ws`: postpaid without credit, no capabilities, a webhook nobody answers.
pub fn buyer(conn: &Connection, id: &str) {
    buyer::create(
        conn,
        &NewBuyer {
            id: Some(id),
            workspace_id: "ws",
            name: id,
            webhook_url: "http://127.0.0.1:9/hook",
            secret: None,
            signing_secret: None,
            capabilities: Vec::new(),
            cancellation_window_secs: 0,
            auto_payout_pending: false,
            plan: Plan::Postpaid,
            credit_limit_cents: 0,
            return_cap_bp: None,
            return_review: buyer::ReturnReview::Auto,
        },
    )
    .expect("the buyer is new");
}
