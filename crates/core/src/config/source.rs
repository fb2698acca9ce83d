//! Sources: where partners post leads. Each belongs to one channel or lead table and has an
//! ingest secret (stored hashed, with the previous one during a rotation's overlap), an
//! optional supplier and cost, a duplicate rule and a partner-native mapping (draft and
//! published). A source takes leads while it is enabled and not archived
//! ([`Source::takes_leads`]).

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::container::{self, ContainerKind};
use super::rotation::{Rotation, StoredSecret};
use super::{ConfigError, check_name, choose, ensure_live, insert_error};
use crate::db::stored::stored_enum;
use crate::ids::{SourceId, SupplierId};

/// The fields a duplicate rule may compare.
pub const DEDUPE_FIELDS: &[&str] = &["email", "phone"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DedupeScope {
    /// The source's own channel or lead table.
    Container,
    Workspace,
}

stored_enum! {
    /// What a duplicate match does to the new lead.
    pub enum DedupeAction as "duplicate action" {
        Review = "review",
        Reject = "reject",
    }
}

stored_enum! {
    /// How much the ingest answer tells the partner who sent the lead (DESIGN.md section 5,
    /// amended): `summary` hides buyers, prices, transactions, the score and other leads'
    /// ids; `full` is the whole trace, for the operator's own forms.
    pub enum ResultDetail as "result detail" {
        Summary = "summary",
        Full = "full",
    }
}

stored_enum! {
    /// `sources.dedupe_scope` as stored: the container's kind by name, or the workspace.
    pub(crate) enum StoredScope as "duplicate scope" {
        Channel = "channel",
        Table = "table",
        Workspace = "workspace",
    }
}

#[derive(Debug, Clone)]
pub struct DedupeRule {
    /// Empty: no duplicate rule.
    pub fields: Vec<String>,
    pub scope: DedupeScope,
    pub action: DedupeAction,
    pub window_days: i64,
}

#[derive(Debug, Clone)]
pub struct Source {
    pub id: SourceId,
    pub container_id: String,
    pub container_kind: ContainerKind,
    pub workspace_id: String,
    pub name: String,
    pub secret: StoredSecret,
    pub supplier_id: Option<SupplierId>,
    pub supplier_cost_cents: Option<i64>,
    /// A ping's payout as a share of the winning price, in hundredths of a percent
    /// (`--revenue-share`, DESIGN.md section 14); `None`: the supplier cost.
    pub revenue_share_bp: Option<i64>,
    pub dedupe: DedupeRule,
    pub mapping_draft: Option<String>,
    pub mapping_draft_at: Option<i64>,
    pub mapping_published: Option<String>,
    pub mapping_published_at: Option<i64>,
    pub mapping_version: i64,
    /// What its ingest answers show (`lead show` always shows everything).
    pub result_detail: ResultDetail,
    pub enabled: bool,
    pub created_at: i64,
    pub archived_at: Option<i64>,
}

impl Source {
    /// Whether the ingest path takes leads: enabled and not archived. Otherwise it answers
    /// 404, as for an unknown source.
    pub fn takes_leads(&self) -> bool {
        self.enabled && self.archived_at.is_none()
    }

    /// The ingest path of SPEC.md section 4.2 or 4.3 for this source.
    pub fn webhook_path(&self) -> String {
        webhook_path(self.container_kind, &self.container_id, &self.id)
    }

    /// The source as shown to the operator. Never includes a secret or its hash.
    pub fn view(&self) -> SourceView<'_> {
        let now = crate::clock::now_ms();
        let scope = match self.dedupe.scope {
            DedupeScope::Container => self.container_kind.as_str(),
            DedupeScope::Workspace => "workspace",
        };
        let container = Some(self.container_id.as_str());
        let (channel_id, table_id) = match self.container_kind {
            ContainerKind::Channel => (container, None),
            ContainerKind::Table => (None, container),
        };
        SourceView {
            id: &self.id,
            channel_id,
            table_id,
            workspace_id: &self.workspace_id,
            name: &self.name,
            has_secret: self.secret.is_set(),
            previous_secret_valid_until: self
                .secret
                .previous_valid_until(now)
                .map(crate::clock::iso),
            supplier_id: self.supplier_id.as_ref(),
            supplier_cost: self.supplier_cost_cents.map(crate::money::as_f64),
            revenue_share: self.revenue_share_bp.map(crate::money::as_f64),
            dedupe: DedupeView {
                fields: &self.dedupe.fields,
                scope,
                action: self.dedupe.action.as_str(),
                window_days: self.dedupe.window_days,
            },
            mapping: MappingSummary {
                version: self.mapping_version,
                has_draft: self.mapping_draft.is_some(),
                published: self.mapping_published.is_some(),
            },
            result_detail: self.result_detail.as_str(),
            enabled: self.enabled,
            webhook_path: self.webhook_path(),
            created_at: crate::clock::iso(self.created_at),
            archived_at: self.archived_at.map(crate::clock::iso),
        }
    }

    /// [`Source::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// The source as `source show --json` shows it: its container under the key of the
/// container's kind (`channelId` or `tableId`, the other left out), never a secret.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceView<'a> {
    id: &'a SourceId,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table_id: Option<&'a str>,
    workspace_id: &'a str,
    name: &'a str,
    has_secret: bool,
    previous_secret_valid_until: Option<String>,
    supplier_id: Option<&'a SupplierId>,
    supplier_cost: Option<f64>,
    revenue_share: Option<f64>,
    dedupe: DedupeView<'a>,
    mapping: MappingSummary,
    result_detail: &'static str,
    enabled: bool,
    webhook_path: String,
    created_at: String,
    archived_at: Option<String>,
}

/// The source's duplicate rule.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DedupeView<'a> {
    fields: &'a [String],
    scope: &'static str,
    action: &'static str,
    window_days: i64,
}

/// Whether the source has a mapping draft and a published mapping.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MappingSummary {
    version: i64,
    has_draft: bool,
    published: bool,
}

pub fn webhook_path(kind: ContainerKind, container_id: &str, source_id: &SourceId) -> String {
    match kind {
        ContainerKind::Channel => {
            format!("/api/webhooks/channels/{container_id}/sources/{source_id}/leads")
        }
        ContainerKind::Table => {
            format!("/api/webhooks/lead-tables/{container_id}/sources/{source_id}/leads")
        }
    }
}

pub struct NewSource<'a> {
    pub id: Option<&'a str>,
    pub container_id: &'a str,
    pub container_kind: ContainerKind,
    pub name: &'a str,
    /// `None`: no secret. `Some(None)`: generate one. `Some(Some(s))`: use `s`.
    pub secret: Option<Option<&'a str>>,
    pub supplier_id: Option<&'a SupplierId>,
    pub supplier_cost_cents: Option<i64>,
    /// Hundredths of a percent, 0 to 10000.
    pub revenue_share_bp: Option<i64>,
    /// `None` means the default (email, phone); an empty list turns the rule off.
    pub dedupe_fields: Option<Vec<String>>,
    /// "channel", "table" or "workspace"; `None` means the source's container.
    pub dedupe_scope: Option<&'a str>,
    pub dedupe_action: DedupeAction,
    pub dedupe_window_days: i64,
    /// `None`: the default, `summary`.
    pub result_detail: Option<ResultDetail>,
}

/// An `update`: only the fields given change. `Some(None)` clears an optional field.
#[derive(Debug, Default)]
pub struct SourceChanges {
    pub name: Option<String>,
    pub supplier_id: Option<Option<SupplierId>>,
    pub supplier_cost_cents: Option<Option<i64>>,
    pub revenue_share_bp: Option<Option<i64>>,
    /// An empty list turns the rule off.
    pub dedupe_fields: Option<Vec<String>>,
    /// "channel", "table" or "workspace".
    pub dedupe_scope: Option<String>,
    pub dedupe_action: Option<DedupeAction>,
    pub dedupe_window_days: Option<i64>,
    pub result_detail: Option<ResultDetail>,
}

/// A created source and its secret in clear, which is shown once and never stored.
pub struct CreatedSource {
    pub source: Source,
    pub secret: Option<String>,
}

const COLUMNS: &str = "s.id, s.container_id, c.kind, c.workspace_id, s.name, s.secret_hash, \
    s.supplier_id, s.supplier_cost_cents, s.dedupe_fields, s.dedupe_scope, s.dedupe_action, \
    s.dedupe_window_days, s.mapping_draft, s.mapping_draft_at, s.mapping_published, \
    s.mapping_published_at, s.mapping_version, s.enabled, s.created_at, s.archived_at, \
    s.previous_secret_hash, s.previous_secret_valid_until, s.result_detail, s.revenue_share_bp";

fn from_row(row: &Row) -> rusqlite::Result<Source> {
    let fields: String = row.get(8)?;
    let scope: StoredScope = row.get(9)?;
    Ok(Source {
        id: row.get(0)?,
        container_id: row.get(1)?,
        container_kind: row.get(2)?,
        workspace_id: row.get(3)?,
        name: row.get(4)?,
        secret: StoredSecret::from_columns(row.get(5)?, row.get(20)?, row.get(21)?),
        supplier_id: row.get(6)?,
        supplier_cost_cents: row.get(7)?,
        revenue_share_bp: row.get(23)?,
        dedupe: DedupeRule {
            fields: fields
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect(),
            scope: match scope {
                StoredScope::Workspace => DedupeScope::Workspace,
                StoredScope::Channel | StoredScope::Table => DedupeScope::Container,
            },
            action: row.get(10)?,
            window_days: row.get(11)?,
        },
        mapping_draft: row.get(12)?,
        mapping_draft_at: row.get(13)?,
        mapping_published: row.get(14)?,
        mapping_published_at: row.get(15)?,
        mapping_version: row.get(16)?,
        result_detail: row.get(22)?,
        enabled: row.get(17)?,
        created_at: row.get(18)?,
        archived_at: row.get(19)?,
    })
}

/// Checks a list of duplicate-rule fields; `["none"]` means no rule.
pub fn parse_dedupe_fields(text: &str) -> Result<Vec<String>, String> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut fields = Vec::new();
    for field in text.split(',').map(str::trim) {
        if !DEDUPE_FIELDS.contains(&field) {
            return Err(format!(
                "unknown duplicate field '{field}': use email, phone, both, or none"
            ));
        }
        if !fields.iter().any(|f| f == field) {
            fields.push(field.to_string());
        }
    }
    Ok(fields)
}

/// The duplicate scope named `text` for a source of a `kind` container.
fn scope_of(text: Option<&str>, kind: ContainerKind) -> Result<DedupeScope, ConfigError> {
    match text {
        None => Ok(DedupeScope::Container),
        Some("workspace") => Ok(DedupeScope::Workspace),
        Some(s) if s == kind.as_str() => Ok(DedupeScope::Container),
        Some(s) => Err(ConfigError::Invalid(format!(
            "duplicate scope '{s}' does not fit a source of a {}: use {} or workspace",
            kind.as_str(),
            kind.as_str()
        ))),
    }
}

fn scope_text(scope: DedupeScope, kind: ContainerKind) -> &'static str {
    match scope {
        DedupeScope::Container => kind.as_str(),
        DedupeScope::Workspace => "workspace",
    }
}

/// Checks that `supplier` is a live supplier of `workspace_id`.
fn check_supplier(
    conn: &Connection,
    supplier: &SupplierId,
    workspace_id: &str,
) -> Result<(), ConfigError> {
    match super::supplier::find(conn, supplier)? {
        Some(found) if found.workspace_id == workspace_id => {
            ensure_live("supplier", supplier.as_str(), found.archived_at)
        }
        _ => Err(ConfigError::NotFound {
            kind: "supplier",
            id: supplier.to_string(),
        }),
    }
}

fn check_window(days: i64) -> Result<(), ConfigError> {
    if days < 0 {
        return Err(ConfigError::Invalid(
            "duplicate window must not be negative".into(),
        ));
    }
    Ok(())
}

pub fn create(conn: &Connection, new: &NewSource) -> Result<CreatedSource, ConfigError> {
    let id: SourceId = choose(new.id)?;
    check_name(new.name)?;
    let container = container::get(conn, new.container_id, new.container_kind)?;
    ensure_live(
        container.kind.as_str(),
        &container.id,
        container.archived_at,
    )?;
    let scope = scope_of(new.dedupe_scope, container.kind)?;
    if let Some(supplier) = new.supplier_id {
        check_supplier(conn, supplier, &container.workspace_id)?;
    }
    check_window(new.dedupe_window_days)?;
    if let Some(cost) = new.supplier_cost_cents {
        super::check_not_negative("supplier cost", cost)?;
    }
    check_revenue_share(new.revenue_share_bp)?;
    let secret = match new.secret {
        None => None,
        Some(given) => Some(super::new_secret(given, "lrs_")?),
    };
    let fields = new
        .dedupe_fields
        .clone()
        .unwrap_or_else(|| DEDUPE_FIELDS.iter().map(|f| f.to_string()).collect());
    let scope_text = scope_text(scope, container.kind);
    conn.execute(
        "INSERT INTO sources (id, container_id, name, secret_hash, supplier_id,
            supplier_cost_cents, dedupe_fields, dedupe_scope, dedupe_action, dedupe_window_days,
            created_at, result_detail, revenue_share_bp)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            id,
            container.id,
            new.name,
            secret.as_deref().map(crate::secrets::hash),
            new.supplier_id,
            new.supplier_cost_cents,
            fields.join(","),
            scope_text,
            new.dedupe_action.as_str(),
            new.dedupe_window_days,
            crate::clock::now_ms(),
            new.result_detail.unwrap_or(ResultDetail::Summary),
            new.revenue_share_bp,
        ],
    )
    .map_err(|e| insert_error(e, "source", id.as_str()))?;
    Ok(CreatedSource {
        source: get(conn, &id)?,
        secret,
    })
}

/// Cached statement: ingest looks a source up on every request.
pub fn find(conn: &Connection, id: &SourceId) -> rusqlite::Result<Option<Source>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM sources s JOIN containers c ON c.id = s.container_id
         WHERE s.id = ?1"
    ))?
    .query_row([id], from_row)
    .optional()
}

pub fn get(conn: &Connection, id: &SourceId) -> Result<Source, ConfigError> {
    find(conn, id)?.ok_or_else(|| ConfigError::NotFound {
        kind: "source",
        id: id.to_string(),
    })
}

/// Sources in creation order, of one container when given; archived ones only with `all`.
pub fn list(
    conn: &Connection,
    container_id: Option<&str>,
    all: bool,
) -> Result<Vec<Source>, ConfigError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM sources s JOIN containers c ON c.id = s.container_id
         WHERE (?1 IS NULL OR s.container_id = ?1) AND (?2 OR s.archived_at IS NULL)
         ORDER BY s.created_at, s.id"
    ))?;
    let rows = stmt.query_map(params![container_id, all], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A source that may change: it exists and is not archived.
fn get_live(conn: &Connection, id: &SourceId) -> Result<Source, ConfigError> {
    let source = get(conn, id)?;
    ensure_live("source", id.as_str(), source.archived_at)?;
    Ok(source)
}

/// Changes the given fields of source `id`; ingest applies them from the next request on.
pub fn update(
    conn: &Connection,
    id: &SourceId,
    changes: &SourceChanges,
) -> Result<Source, ConfigError> {
    let mut source = get_live(conn, id)?;
    if let Some(name) = &changes.name {
        check_name(name)?;
        source.name = name.clone();
    }
    if let Some(supplier) = &changes.supplier_id {
        if let Some(supplier) = supplier {
            check_supplier(conn, supplier, &source.workspace_id)?;
        }
        source.supplier_id = supplier.clone();
    }
    if let Some(cost) = changes.supplier_cost_cents {
        if let Some(cents) = cost {
            super::check_not_negative("supplier cost", cents)?;
        }
        source.supplier_cost_cents = cost;
    }
    if let Some(share) = changes.revenue_share_bp {
        check_revenue_share(share)?;
        source.revenue_share_bp = share;
    }
    if let Some(fields) = &changes.dedupe_fields {
        source.dedupe.fields = fields.clone();
    }
    if let Some(scope) = &changes.dedupe_scope {
        source.dedupe.scope = scope_of(Some(scope), source.container_kind)?;
    }
    if let Some(action) = changes.dedupe_action {
        source.dedupe.action = action;
    }
    if let Some(days) = changes.dedupe_window_days {
        check_window(days)?;
        source.dedupe.window_days = days;
    }
    if let Some(detail) = changes.result_detail {
        source.result_detail = detail;
    }
    conn.execute(
        "UPDATE sources SET name = ?2, supplier_id = ?3, supplier_cost_cents = ?4,
            dedupe_fields = ?5, dedupe_scope = ?6, dedupe_action = ?7, dedupe_window_days = ?8,
            result_detail = ?9, revenue_share_bp = ?10
         WHERE id = ?1",
        params![
            source.id,
            source.name,
            source.supplier_id,
            source.supplier_cost_cents,
            source.dedupe.fields.join(","),
            scope_text(source.dedupe.scope, source.container_kind),
            source.dedupe.action.as_str(),
            source.dedupe.window_days,
            source.result_detail,
            source.revenue_share_bp,
        ],
    )?;
    get(conn, id)
}

/// A revenue share is 0% to 100%.
fn check_revenue_share(share_bp: Option<i64>) -> Result<(), ConfigError> {
    match share_bp {
        Some(bp) if !(0..=10_000).contains(&bp) => Err(ConfigError::Invalid(format!(
            "revenue share must be 0 to 100 (percent), not {}",
            crate::money::display(bp)
        ))),
        _ => Ok(()),
    }
}

/// A rotated secret: the record after the rotation, the new secret in clear (shown once)
/// and until when the old one is still accepted.
pub struct Rotated<T> {
    pub record: T,
    pub secret: String,
    pub old_valid_until: Option<i64>,
}

/// Replaces the source's secret with `given` or a new random one; the old one stays
/// accepted for `overlap` (none: cut off at once).
pub fn rotate_secret(
    conn: &Connection,
    id: &SourceId,
    given: Option<&str>,
    overlap: std::time::Duration,
) -> Result<Rotated<Source>, ConfigError> {
    let source = get_live(conn, id)?;
    let secret = super::new_secret(given, "lrs_")?;
    let rotation = Rotation::of(source.secret.current, overlap, crate::clock::now_ms());
    conn.execute(
        "UPDATE sources SET secret_hash = ?2, previous_secret_hash = ?3,
            previous_secret_valid_until = ?4
         WHERE id = ?1",
        params![
            id,
            crate::secrets::hash(&secret),
            rotation.previous_value(),
            rotation.previous_until()
        ],
    )?;
    Ok(Rotated {
        record: get(conn, id)?,
        secret,
        old_valid_until: rotation.old_valid_until,
    })
}

/// Enables or disables a source: a disabled one's ingest path answers 404 from the next
/// request on.
pub fn set_enabled(conn: &Connection, id: &SourceId, enabled: bool) -> Result<Source, ConfigError> {
    get_live(conn, id)?;
    conn.execute(
        "UPDATE sources SET enabled = ?2 WHERE id = ?1",
        params![id, enabled],
    )?;
    get(conn, id)
}

/// The supplier of source `id`, who is paid the supplier cost of its leads; `None` when it
/// has none (or there is no such source).
pub(crate) fn supplier_of(
    conn: &Connection,
    id: &SourceId,
) -> rusqlite::Result<Option<SupplierId>> {
    Ok(conn
        .prepare_kept("SELECT supplier_id FROM sources WHERE id = ?1")?
        .query_row([id], |row| row.get(0))
        .optional()?
        .flatten())
}

/// Makes a new shared link token for source `id`'s posting instructions (DESIGN.md section
/// 21), replacing any earlier one; the token is returned once and only its hash is stored.
pub fn share_docs(conn: &Connection, id: &SourceId) -> Result<String, ConfigError> {
    get_live(conn, id)?;
    let token = crate::secrets::generate("");
    conn.execute(
        "INSERT INTO source_doc_shares (source_id, token_hash, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (source_id) DO UPDATE SET token_hash = excluded.token_hash,
             created_at = excluded.created_at",
        params![id, crate::secrets::hash(&token), crate::clock::now_ms()],
    )?;
    Ok(token)
}

/// Ends source `id`'s shared link; whether there was one.
pub fn unshare_docs(conn: &Connection, id: &SourceId) -> Result<bool, ConfigError> {
    get(conn, id)?;
    Ok(conn.execute("DELETE FROM source_doc_shares WHERE source_id = ?1", [id])? > 0)
}

/// Whether source `id` has a shared link.
pub fn docs_shared(conn: &Connection, id: &SourceId) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM source_doc_shares WHERE source_id = ?1)",
        [id],
        |row| row.get(0),
    )
}

/// The source whose shared link has `token`, while the link stands and the source is not
/// archived. Found by the token's hash (an index probe), decided by the constant-time
/// comparison, as everywhere a secret is checked.
pub fn shared_source(conn: &Connection, token: &str) -> rusqlite::Result<Option<SourceId>> {
    let found: Option<(SourceId, String)> = conn
        .prepare_kept(
            "SELECT d.source_id, d.token_hash FROM source_doc_shares d
             JOIN sources s ON s.id = d.source_id
             WHERE d.token_hash = ?1 AND s.archived_at IS NULL",
        )?
        .query_row([crate::secrets::hash(token)], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    Ok(found.and_then(|(source_id, stored)| {
        crate::secrets::verify(token, &stored).then_some(source_id)
    }))
}
