//! Configuration commands: init, workspace, channel, table, source, product, buyer,
//! supplier. Each opens the database, makes its change through the writer (so it is safe
//! while `serve` runs on the same file) and prints the record.
//!
//! Also owns opening the database for every command: only `init`, `serve` and `demo` may
//! create a missing file ([`create_or_open`]); every other command refuses one
//! ([`open`], [`NoDatabase`]), so a typo in a path never yields an empty database.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use serde_json::{Value, json};

use super::args::*;
use super::output::Output;
use crate::audit;
use crate::autodelivery::schedule::Schedule;
use crate::config::container::{ContainerKind, DeliveryMode, NewContainer};
use crate::config::retire::{self, Retired};
use crate::config::source::{DedupeAction, NewSource, Rotated};
use crate::config::subscription::{self, TermsChanges};
use crate::config::{ConfigError, buyer, container, product, source, supplier, workspace};
use crate::db::Db;

/// A command other than `init`, `serve` or `demo` was pointed at a file that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("no database at {}: pass --db or set LEADRELAY_DB (leadrelay init creates one)", .0.display())]
pub struct NoDatabase(pub PathBuf);

/// Refuses a missing database file (see [`NoDatabase`]).
pub(super) fn require_database(path: &Path) -> Result<(), NoDatabase> {
    if path.exists() {
        Ok(())
    } else {
        Err(NoDatabase(path.to_path_buf()))
    }
}

/// Opens an existing database (migrating it when this binary is newer).
pub(super) fn open(path: &Path) -> anyhow::Result<Db> {
    require_database(path)?;
    create_or_open(path)
}

/// Opens the database, creating and migrating the file when it is missing: for `init`,
/// `serve` and `demo` only.
pub(super) fn create_or_open(path: &Path) -> anyhow::Result<Db> {
    Db::open(path).with_context(|| format!("cannot open database {}", path.display()))
}

/// Runs a configuration change in the writer and returns its result.
fn write<T, F>(db: &Db, change: F) -> anyhow::Result<T>
where
    F: FnOnce(&rusqlite::Connection) -> Result<T, ConfigError> + Send + 'static,
    T: Send + 'static,
{
    let result = db.write_blocking(change);
    db.close();
    Ok(result?)
}

/// Runs a configuration change with its audit entry, in one job: `before` reads the
/// record's view before the change (`Value::Null` for a creation: [`created`]), `after` makes
/// its view from what `change` returned. The entry's object is `object`, or for a creation
/// the view's `id`; its changes are the difference of the two views (`audit::diff`: secrets
/// as "rotated").
fn audited<T, B, F, V>(
    db: &Db,
    action: &'static str,
    object: Option<String>,
    before: B,
    change: F,
    after: V,
) -> anyhow::Result<T>
where
    B: FnOnce(&rusqlite::Connection) -> Result<Value, ConfigError> + Send + 'static,
    F: FnOnce(&rusqlite::Connection) -> Result<T, ConfigError> + Send + 'static,
    V: FnOnce(&T) -> Value + Send + 'static,
    T: Send + 'static,
{
    let actor = super::actor();
    write(db, move |conn| {
        let old = before(conn)?;
        let done = change(conn)?;
        let new = after(&done);
        let object = object
            .or_else(|| new["id"].as_str().map(str::to_string))
            .unwrap_or_default();
        let now = crate::clock::now_ms();
        audit::record_diff(conn, &actor, action, &object, &old, &new, now)?;
        Ok(done)
    })
}

/// An update of record `id` with its audit entry: `get` reads the record before the change,
/// `view` shows it before and after.
fn audited_update<I, T, G, F>(
    db: &Db,
    action: &'static str,
    id: &I,
    get: G,
    change: F,
    view: fn(&T) -> Value,
) -> anyhow::Result<T>
where
    I: ?Sized + ToOwned + std::fmt::Display,
    I::Owned: Send + 'static,
    G: FnOnce(&rusqlite::Connection, &I) -> Result<T, ConfigError> + Send + 'static,
    F: FnOnce(&rusqlite::Connection) -> Result<T, ConfigError> + Send + 'static,
    T: Send + 'static,
{
    let object = id.to_owned();
    let before = move |conn: &rusqlite::Connection| {
        Ok(view(&get(conn, std::borrow::Borrow::borrow(&object))?))
    };
    audited(db, action, Some(id.to_string()), before, change, view)
}

/// A secret's rotation with its audit entry (`key` shown as "rotated", never its value).
fn audited_rotation<T, F>(
    db: &Db,
    action: &'static str,
    id: &(impl std::fmt::Display + ?Sized),
    key: &'static str,
    rotate: F,
) -> anyhow::Result<Rotated<T>>
where
    F: FnOnce(&rusqlite::Connection) -> Result<Rotated<T>, ConfigError> + Send + 'static,
    T: Send + 'static,
{
    let object = Some(id.to_string());
    let after = move |_: &Rotated<T>| with_secret(json!({}), key, true);
    audited(db, action, object, |_| Ok(Value::Null), rotate, after)
}

/// The view of a record before its creation.
fn created(_: &rusqlite::Connection) -> Result<Value, ConfigError> {
    Ok(Value::Null)
}

/// A view with a secret field `key` marked as set (its value never reaches the log).
fn with_secret(mut view: Value, key: &str, set: bool) -> Value {
    if set {
        view[key] = json!(audit::ROTATED);
    }
    view
}

/// Runs a read and returns its result.
fn read<T, F>(db: &Db, query: F) -> anyhow::Result<T>
where
    F: FnOnce(&rusqlite::Connection) -> Result<T, ConfigError>,
{
    let result = db.read_blocking(query);
    db.close();
    Ok(result?)
}

fn to_value(record: &impl serde::Serialize) -> Value {
    serde_json::to_value(record).expect("configuration records serialise")
}

fn print_list<T>(out: &Output, records: &[T], shown: impl Fn(&T) -> Value) {
    let items: Vec<Value> = records.iter().map(shown).collect();
    out.print_list(&items);
}

/// Deletes or archives record `id` and prints what happened.
fn delete(db: &Db, out: &Output, kind: retire::Kind, id: String) -> anyhow::Result<ExitCode> {
    let shown_id = id.clone();
    let actor = super::actor();
    let retired = write(db, move |conn| {
        let retired = retire::delete(conn, kind, &id)?;
        let changes = audit::Changes::new().set("state", "live", retired.as_str());
        let action = format!("{}.delete", kind.name());
        audit::record(conn, &actor, &action, &id, &changes, crate::clock::now_ms())?;
        Ok(retired)
    })?;
    out.show(&DeletedRecord {
        id: &shown_id,
        kind: kind.name(),
        outcome: retired.as_str(),
        note: match retired {
            Retired::Deleted => "deleted: nothing referenced it",
            Retired::Archived => {
                "archived: it has history, which stays readable; list --all shows it"
            }
        },
    });
    Ok(ExitCode::SUCCESS)
}

/// A rotated record with its new secret (shown once) and until when the old one is valid.
fn print_rotated(out: &Output, record: impl Serialize, new: NewSecret<'_>, until: Option<i64>) {
    out.show(&RotatedShown {
        record,
        new,
        old_valid_until: until.map(crate::clock::iso),
    });
}

/// A record as printed once after a rotation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RotatedShown<'a, V: Serialize> {
    #[serde(flatten)]
    record: V,
    #[serde(flatten)]
    new: NewSecret<'a>,
    old_valid_until: Option<String>,
}

/// A new secret under the key that names its kind.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum NewSecret<'a> {
    Secret(&'a str),
    SigningSecret(&'a str),
    Key(&'a str),
}

/// A record as printed once after its creation, with the secrets made for it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreatedShown<'a, V: Serialize> {
    #[serde(flatten)]
    record: V,
    #[serde(flatten)]
    secrets: CreatedSecrets<'a>,
}

/// The secrets of a new source (`secret`, null when it takes none), buyer (`secret`, null
/// likewise, and `signingSecret`) or supplier (`key`).
#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum CreatedSecrets<'a> {
    Source {
        secret: Option<&'a str>,
    },
    Buyer {
        secret: Option<&'a str>,
        signing_secret: &'a str,
    },
    Supplier {
        key: &'a str,
    },
}

pub(super) fn init(path: &Path, out: &Output) -> anyhow::Result<ExitCode> {
    let db = create_or_open(path)?;
    db.close();
    out.show(&Initialised {
        database: path.display().to_string(),
        schema_version: crate::db::SCHEMA_VERSION,
    });
    Ok(ExitCode::SUCCESS)
}

pub(super) fn workspace(
    path: &Path,
    out: &Output,
    command: WorkspaceCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        WorkspaceCommand::Create {
            name,
            id,
            timezone,
            retention,
            suppression_action,
        } => {
            let created = audited(
                &db,
                "workspace.create",
                None,
                created,
                move |conn| {
                    workspace::create(
                        conn,
                        &workspace::NewWorkspace {
                            id: id.as_deref(),
                            name: &name,
                            timezone: &timezone,
                            retention: retention.and_then(|r| r.0),
                            suppression_action,
                        },
                    )
                },
                to_value,
            )?;
            out.print(&to_value(&created));
        }
        WorkspaceCommand::List { all } => {
            let found = read(&db, |conn| workspace::list(conn, all))?;
            print_list(out, &found, to_value);
        }
        WorkspaceCommand::Show { id } => {
            out.print(&to_value(&read(&db, |conn| workspace::get(conn, &id))?));
        }
        WorkspaceCommand::Update {
            id,
            name,
            timezone,
            retention,
            suppression_action,
        } => {
            let changes = workspace::WorkspaceChanges {
                name,
                timezone,
                retention: retention.map(|r| r.0),
                suppression_action,
            };
            let updated = audited_update(
                &db,
                "workspace.update",
                id.clone().as_str(),
                workspace::get,
                move |conn| workspace::update(conn, &id, &changes),
                to_value,
            )?;
            out.print(&to_value(&updated));
        }
        WorkspaceCommand::Delete { id } => {
            return delete(&db, out, retire::Kind::Workspace, id);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A container's audit action: `channel.create`, `table.update`, ….
fn container_action(kind: ContainerKind, create: bool) -> &'static str {
    match (kind, create) {
        (ContainerKind::Channel, true) => "channel.create",
        (ContainerKind::Channel, false) => "channel.update",
        (ContainerKind::Table, true) => "table.create",
        (ContainerKind::Table, false) => "table.update",
    }
}

fn delivery_mode(arg: DeliveryModeArg) -> DeliveryMode {
    match arg {
        DeliveryModeArg::Exclusive => DeliveryMode::Exclusive,
        DeliveryModeArg::Multi => DeliveryMode::Multi,
    }
}

pub(super) fn container(
    path: &Path,
    out: &Output,
    kind: ContainerKind,
    command: ContainerCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        ContainerCommand::Create {
            workspace,
            name,
            id,
            delivery,
        } => {
            let action = container_action(kind, true);
            let created = audited(
                &db,
                action,
                None,
                created,
                move |conn| {
                    container::create(
                        conn,
                        &NewContainer {
                            id: id.as_deref(),
                            workspace_id: &workspace,
                            kind,
                            name: &name,
                            auto_delivery: delivery.auto_delivery,
                            delivery_mode: delivery_mode(delivery.delivery_mode),
                            max_buyers: delivery.max_buyers,
                            score_threshold: delivery.score_threshold,
                            ping_ttl_ms: delivery.ping_ttl,
                            waterfall: delivery.waterfall,
                            waterfall_max: delivery.waterfall_max,
                        },
                    )
                },
                to_value,
            )?;
            out.print(&to_value(&created));
        }
        ContainerCommand::List(ListArgs { workspace, all }) => {
            let found = read(&db, |conn| {
                container::list(conn, kind, workspace.as_deref(), all)
            })?;
            print_list(out, &found, to_value);
        }
        ContainerCommand::Show { id } => {
            out.print(&to_value(&read(&db, |conn| {
                container::get(conn, &id, kind)
            })?));
        }
        ContainerCommand::Update { id, name, delivery } => {
            let changes = container::ContainerChanges {
                name,
                auto_delivery: delivery.auto_delivery,
                delivery_mode: delivery.delivery_mode.map(delivery_mode),
                max_buyers: delivery.max_buyers,
                score_threshold: delivery.score_threshold,
                ping_ttl_ms: delivery.ping_ttl,
                waterfall: delivery.waterfall,
                waterfall_max: delivery.waterfall_max,
            };
            let updated = audited_update(
                &db,
                container_action(kind, false),
                id.clone().as_str(),
                move |conn, id| container::get(conn, id, kind),
                move |conn| container::update(conn, &id, kind, &changes),
                to_value,
            )?;
            out.print(&to_value(&updated));
        }
        ContainerCommand::Delete { id } => {
            return delete(&db, out, retire::Kind::Container(kind), id);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn dedupe_scope(arg: DedupeScopeArg) -> &'static str {
    match arg {
        DedupeScopeArg::Channel => "channel",
        DedupeScopeArg::Table => "table",
        DedupeScopeArg::Workspace => "workspace",
    }
}

fn dedupe_action(arg: DedupeActionArg) -> DedupeAction {
    match arg {
        DedupeActionArg::Review => DedupeAction::Review,
        DedupeActionArg::Reject => DedupeAction::Reject,
    }
}

fn result_detail(arg: ResultDetailArg) -> source::ResultDetail {
    match arg {
        ResultDetailArg::Summary => source::ResultDetail::Summary,
        ResultDetailArg::Full => source::ResultDetail::Full,
    }
}

pub(super) fn source(
    path: &Path,
    out: &Output,
    command: SourceCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        SourceCommand::Create {
            channel,
            table,
            name,
            id,
            secret,
            no_secret,
            settings,
            dedupe_action: action,
            dedupe_window_days,
        } => {
            let (container_id, container_kind) = match (channel, table) {
                (Some(channel), _) => (channel, ContainerKind::Channel),
                (None, Some(table)) => (table, ContainerKind::Table),
                (None, None) => unreachable!("clap requires --channel or --table"),
            };
            let created = audited(
                &db,
                "source.create",
                None,
                created,
                move |conn| {
                    source::create(
                        conn,
                        &NewSource {
                            id: id.as_deref(),
                            container_id: &container_id,
                            container_kind,
                            name: &name,
                            secret: if no_secret {
                                None
                            } else {
                                Some(secret.as_deref())
                            },
                            supplier_id: settings.supplier.as_ref().and_then(|s| s.0.as_ref()),
                            supplier_cost_cents: settings.supplier_cost.and_then(|c| c.0),
                            revenue_share_bp: settings.revenue_share.and_then(|s| s.0),
                            dedupe_fields: settings.dedupe_fields.map(|l| l.0),
                            dedupe_scope: settings.dedupe_scope.map(dedupe_scope),
                            dedupe_action: dedupe_action(action),
                            dedupe_window_days,
                            result_detail: settings.result_detail.map(result_detail),
                        },
                    )
                },
                |c| with_secret(c.source.to_json(), "secret", c.secret.is_some()),
            )?;
            out.show(&CreatedShown {
                record: created.source.view(),
                secrets: CreatedSecrets::Source {
                    secret: created.secret.as_deref(),
                },
            });
        }
        SourceCommand::List {
            channel,
            table,
            all,
        } => {
            let container_id = channel.or(table);
            let found = read(&db, |conn| source::list(conn, container_id.as_deref(), all))?;
            print_list(out, &found, source::Source::to_json);
        }
        SourceCommand::Show { id } => {
            out.print(&read(&db, |conn| source::get(conn, &id))?.to_json());
        }
        SourceCommand::Update {
            id,
            name,
            settings,
            dedupe_action: action,
            dedupe_window_days,
        } => {
            let changes = source::SourceChanges {
                name,
                supplier_id: settings.supplier.map(|s| s.0),
                supplier_cost_cents: settings.supplier_cost.map(|c| c.0),
                revenue_share_bp: settings.revenue_share.map(|s| s.0),
                dedupe_fields: settings.dedupe_fields.map(|l| l.0),
                dedupe_scope: settings.dedupe_scope.map(|s| dedupe_scope(s).to_string()),
                dedupe_action: action.map(dedupe_action),
                dedupe_window_days,
                result_detail: settings.result_detail.map(result_detail),
            };
            let updated = audited_update(
                &db,
                "source.update",
                &id.clone(),
                source::get,
                move |conn| source::update(conn, &id, &changes),
                source::Source::to_json,
            )?;
            out.print(&updated.to_json());
        }
        SourceCommand::Enable { id } => {
            let enabled = audited_update(
                &db,
                "source.enable",
                &id.clone(),
                source::get,
                move |conn| source::set_enabled(conn, &id, true),
                source::Source::to_json,
            )?;
            out.print(&enabled.to_json());
        }
        SourceCommand::Disable { id } => {
            let disabled = audited_update(
                &db,
                "source.disable",
                &id.clone(),
                source::get,
                move |conn| source::set_enabled(conn, &id, false),
                source::Source::to_json,
            )?;
            out.print(&disabled.to_json());
        }
        SourceCommand::RotateSecret { id, rotate } => {
            let Rotated {
                record,
                secret,
                old_valid_until,
            } = audited_rotation(
                &db,
                "source.rotate_secret",
                &id.clone(),
                "secret",
                move |conn| {
                    source::rotate_secret(conn, &id, rotate.secret.as_deref(), rotate.overlap)
                },
            )?;
            print_rotated(
                out,
                record.view(),
                NewSecret::Secret(&secret),
                old_valid_until,
            );
        }
        SourceCommand::Delete { id } => {
            return delete(&db, out, retire::Kind::Source, id.to_string());
        }
        SourceCommand::Docs {
            id,
            format,
            base_url,
            share,
            unshare,
            portal_url,
        } => source_docs(&db, out, id, format, &base_url, share, unshare, &portal_url)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `source docs`: the instructions, or a new shared link, or the end of the link.
#[allow(clippy::too_many_arguments)]
fn source_docs(
    db: &Db,
    out: &Output,
    id: crate::ids::SourceId,
    format: DocsFormatArg,
    base_url: &str,
    share: bool,
    unshare: bool,
    portal_url: &str,
) -> anyhow::Result<()> {
    let actor = super::actor();
    if share {
        let token = {
            let id = id.clone();
            write(db, move |conn| {
                let token = source::share_docs(conn, &id)?;
                let changes = audit::Changes::new().secret("sharedLink");
                let now = crate::clock::now_ms();
                audit::record(
                    conn,
                    &actor,
                    "source.docs_share",
                    id.as_str(),
                    &changes,
                    now,
                )?;
                Ok(token)
            })?
        };
        let url = format!("{}/docs/{token}", portal_url.trim_end_matches('/'));
        if out.is_json() {
            out.show(&SharedDocs {
                source_id: &id,
                url: &url,
                token: &token,
            });
        } else {
            println!("{url}");
        }
    } else if unshare {
        let removed = {
            let id = id.clone();
            write(db, move |conn| {
                let removed = source::unshare_docs(conn, &id)?;
                let mut changes = audit::Changes::new();
                if removed {
                    changes = changes.set("sharedLink", audit::ROTATED, Value::Null);
                }
                let now = crate::clock::now_ms();
                audit::record(
                    conn,
                    &actor,
                    "source.docs_unshare",
                    id.as_str(),
                    &changes,
                    now,
                )?;
                Ok(removed)
            })?
        };
        if out.is_json() {
            out.show(&UnsharedDocs {
                source_id: &id,
                removed,
            });
        } else if removed {
            println!("source '{id}': the shared link no longer works");
        } else {
            println!("source '{id}' had no shared link");
        }
    } else {
        let format = match format {
            DocsFormatArg::Markdown => crate::posting::Format::Markdown,
            DocsFormatArg::Html => crate::posting::Format::Html,
        };
        let document = read(db, |conn| {
            crate::posting::render(conn, &id, format, base_url)
        })?;
        if out.is_json() {
            out.show(&SourceDocs {
                source_id: &id,
                document: &document,
            });
        } else {
            print!("{document}");
        }
    }
    Ok(())
}

pub(super) fn product(
    path: &Path,
    out: &Output,
    command: ProductCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        ProductCommand::Create {
            workspace,
            slug,
            name,
            id,
            fields,
            supplier_cost,
        } => {
            let created = audited(
                &db,
                "product.create",
                None,
                created,
                move |conn| {
                    product::create(
                        conn,
                        &product::NewProduct {
                            id: id.as_deref(),
                            workspace_id: &workspace,
                            slug: &slug,
                            name: &name,
                            fields,
                            default_supplier_cost_cents: supplier_cost,
                        },
                    )
                },
                to_value,
            )?;
            out.print(&to_value(&created));
        }
        ProductCommand::List(ListArgs { workspace, all }) => {
            let found = read(&db, |conn| product::list(conn, workspace.as_deref(), all))?;
            print_list(out, &found, to_value);
        }
        ProductCommand::Show { id } => {
            out.print(&to_value(&read(&db, |conn| product::get(conn, &id))?));
        }
        ProductCommand::Update {
            id,
            slug,
            name,
            fields,
            clear_fields,
            supplier_cost,
        } => {
            let changes = product::ProductChanges {
                slug,
                name,
                fields: (clear_fields || !fields.is_empty()).then_some(fields),
                default_supplier_cost_cents: supplier_cost.map(|c| c.0),
            };
            let updated = audited_update(
                &db,
                "product.update",
                id.clone().as_str(),
                product::get,
                move |conn| product::update(conn, &id, &changes),
                to_value,
            )?;
            out.print(&to_value(&updated));
        }
        ProductCommand::Delete { id } => {
            return delete(&db, out, retire::Kind::Product, id);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads buyer `id`'s view, for an audit entry's "before".
fn buyer_view(
    id: &crate::ids::BuyerId,
) -> impl FnOnce(&rusqlite::Connection) -> Result<Value, ConfigError> + Send + 'static {
    let id = id.clone();
    move |conn| Ok(buyer::get(conn, &id)?.to_json())
}

fn plan(arg: PlanArg) -> buyer::Plan {
    match arg {
        PlanArg::Postpaid => buyer::Plan::Postpaid,
        PlanArg::Prepaid => buyer::Plan::Prepaid,
    }
}

fn schedule(windows: Vec<Window>) -> Option<Value> {
    (!windows.is_empty()).then(|| Schedule::new(windows).to_json())
}

use crate::autodelivery::schedule::Window;

pub(super) fn buyer(path: &Path, out: &Output, command: BuyerCommand) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        BuyerCommand::Create {
            workspace,
            name,
            id,
            webhook_url,
            secret,
            no_secret,
            signing_secret,
            settings,
            auto_payout_pending,
        } => {
            let created = audited(
                &db,
                "buyer.create",
                None,
                created,
                move |conn| {
                    buyer::create(
                        conn,
                        &buyer::NewBuyer {
                            id: id.as_deref(),
                            workspace_id: &workspace,
                            name: &name,
                            webhook_url: &webhook_url,
                            secret: if no_secret {
                                None
                            } else {
                                Some(secret.as_deref())
                            },
                            signing_secret: signing_secret.as_deref(),
                            capabilities: settings.capabilities.map_or_else(
                                || buyer::CAPABILITIES.iter().map(|c| c.to_string()).collect(),
                                |l| l.0,
                            ),
                            cancellation_window_secs: settings
                                .cancellation_window
                                .unwrap_or(buyer::DEFAULT_CANCELLATION_WINDOW_SECS),
                            auto_payout_pending,
                            plan: settings.plan.map_or(buyer::Plan::Postpaid, plan),
                            credit_limit_cents: settings.credit_limit.unwrap_or(0),
                            return_cap_bp: settings.return_cap.and_then(|cap| cap.0),
                            return_review: settings
                                .return_review
                                .map_or(buyer::ReturnReview::Auto, |r| r.review()),
                        },
                    )
                },
                |c| {
                    let view = with_secret(c.buyer.to_json(), "secret", c.secret.is_some());
                    with_secret(view, "signingSecret", true)
                },
            )?;
            out.show(&CreatedShown {
                record: created.buyer.view(),
                secrets: CreatedSecrets::Buyer {
                    secret: created.secret.as_deref(),
                    signing_secret: &created.signing_secret,
                },
            });
        }
        BuyerCommand::List(ListArgs { workspace, all }) => {
            let found = read(&db, |conn| buyer::list(conn, workspace.as_deref(), all))?;
            print_list(out, &found, buyer::Buyer::to_json);
        }
        BuyerCommand::Show { id } => {
            out.print(&read(&db, |conn| buyer::get(conn, &id))?.to_json());
        }
        BuyerCommand::Update {
            id,
            name,
            webhook_url,
            settings,
            auto_payout_pending,
        } => {
            let changes = buyer::BuyerChanges {
                name,
                webhook_url,
                capabilities: settings.capabilities.map(|l| l.0),
                cancellation_window_secs: settings.cancellation_window,
                auto_payout_pending,
                plan: settings.plan.map(plan),
                credit_limit_cents: settings.credit_limit,
                return_cap_bp: settings.return_cap.map(|cap| cap.0),
                return_review: settings.return_review.map(|r| r.review()),
            };
            let updated = audited(
                &db,
                "buyer.update",
                Some(id.to_string()),
                buyer_view(&id),
                move |conn| buyer::update(conn, &id, &changes),
                buyer::Buyer::to_json,
            )?;
            out.print(&updated.to_json());
        }
        BuyerCommand::Subscribe {
            id,
            product,
            pricing,
            price,
            bid_url,
            bid_timeout,
            min_price,
            max_price,
            daily_cap,
            monthly_cap,
            priority,
            filters,
            schedules,
            require_check,
        } => {
            let schedule = schedule(schedules);
            let (pricing, price) = pricing_of(
                pricing,
                price,
                BidFlags {
                    url: bid_url,
                    timeout: bid_timeout,
                    min_price,
                    max_price,
                },
            )?;
            let object = id.to_string();
            let terms = audited(
                &db,
                "subscription.subscribe",
                Some(object),
                created,
                move |conn| {
                    let subscription = subscription::subscribe(
                        conn,
                        &subscription::NewSubscription {
                            pricing,
                            buyer_id: &id,
                            product: &product,
                            price_cents: price.unwrap_or(0),
                            daily_cap,
                            monthly_cap,
                            priority,
                            filters,
                            schedule,
                            require_check,
                        },
                    )?;
                    subscription::terms_of(
                        conn,
                        &id,
                        &subscription.product_id,
                        crate::clock::now_ms(),
                    )
                },
                subscription::Terms::to_json,
            )?;
            out.print(&terms.to_json());
        }
        BuyerCommand::Terms(TermsArgs { id, set }) => match set {
            None => {
                let id = id.expect("clap requires the buyer without a subcommand");
                let all = read(&db, |conn| {
                    subscription::terms(conn, &id, crate::clock::now_ms())
                })?;
                print_list(out, &all, subscription::Terms::to_json);
            }
            Some(TermsCommand::Set {
                id,
                product,
                pricing,
                price,
                bid_url,
                bid_timeout,
                min_price,
                max_price,
                daily_cap,
                monthly_cap,
                priority,
                filters,
                clear_filters,
                schedules,
                clear_schedule,
                require_check,
                clear_require_check,
            }) => {
                let bid = BidFlags {
                    url: bid_url,
                    timeout: bid_timeout,
                    min_price,
                    max_price,
                };
                let pricing = match pricing {
                    Some(pricing) => Some(pricing_of(pricing, price, bid)?.0),
                    None if bid.given() => anyhow::bail!(
                        "--bid-url, --bid-timeout, --min-price and --max-price come with \
                         --pricing bid"
                    ),
                    None => None,
                };
                let changes = TermsChanges {
                    pricing,
                    price_cents: price,
                    daily_cap: daily_cap.map(|c| c.0),
                    monthly_cap: monthly_cap.map(|c| c.0),
                    priority,
                    filters: (clear_filters || !filters.is_empty()).then_some(filters),
                    schedule: (clear_schedule || !schedules.is_empty())
                        .then(|| schedule(schedules)),
                    require_check: if clear_require_check {
                        Some(None)
                    } else {
                        require_check.map(Some)
                    },
                };
                let (object, of) = (id.clone(), product.clone());
                let before = move |conn: &rusqlite::Connection| {
                    let now = crate::clock::now_ms();
                    Ok(subscription::terms(conn, &object, now)?
                        .iter()
                        .find(|t| t.subscription.product_id == of || t.product_slug == of)
                        .map_or(Value::Null, subscription::Terms::to_json))
                };
                let terms = audited(
                    &db,
                    "subscription.terms_set",
                    Some(id.to_string()),
                    before,
                    move |conn| {
                        let subscription = subscription::set_terms(conn, &id, &product, &changes)?;
                        subscription::terms_of(
                            conn,
                            &id,
                            &subscription.product_id,
                            crate::clock::now_ms(),
                        )
                    },
                    subscription::Terms::to_json,
                )?;
                out.print(&terms.to_json());
            }
        },
        BuyerCommand::Unsubscribe { id, product } => {
            let (buyer_id, product_name) = (id.clone(), product.clone());
            let actor = super::actor();
            write(&db, move |conn| {
                subscription::unsubscribe(conn, &buyer_id, &product_name)?;
                let changes = audit::Changes::new()
                    .set("product", product_name.as_str(), product_name.as_str())
                    .set("subscribed", true, false);
                let now = crate::clock::now_ms();
                audit::record(
                    conn,
                    &actor,
                    "subscription.unsubscribe",
                    buyer_id.as_str(),
                    &changes,
                    now,
                )?;
                Ok(())
            })?;
            out.show(&Unsubscribed {
                buyer_id: &id,
                product: &product,
                subscribed: false,
            });
        }
        BuyerCommand::Fund { id, amount } => {
            let funded = audited(
                &db,
                "ledger.fund",
                Some(id.to_string()),
                buyer_view(&id),
                move |conn| buyer::fund(conn, &id, amount),
                buyer::Buyer::to_json,
            )?;
            out.print(&funded.to_json());
        }
        BuyerCommand::Adjust { id, amount, reason } => {
            let adjusted = audited(
                &db,
                "ledger.adjust",
                Some(id.to_string()),
                buyer_view(&id),
                move |conn| buyer::adjust(conn, &id, amount, &reason),
                buyer::Buyer::to_json,
            )?;
            out.print(&adjusted.to_json());
        }
        BuyerCommand::Pause { id } => {
            let actor = super::actor();
            let paused = write(&db, move |conn| {
                let now = crate::clock::now_ms();
                crate::audited::set_buyer_paused(conn, &actor, &id, true, now)
            })?;
            out.print(&paused.to_json());
        }
        BuyerCommand::Resume { id } => {
            let actor = super::actor();
            let resumed = write(&db, move |conn| {
                let now = crate::clock::now_ms();
                crate::audited::set_buyer_paused(conn, &actor, &id, false, now)
            })?;
            out.print(&resumed.to_json());
        }
        BuyerCommand::RotateSecret { id, rotate } => {
            let Rotated {
                record,
                secret,
                old_valid_until,
            } = audited_rotation(
                &db,
                "buyer.rotate_secret",
                &id.clone(),
                "secret",
                move |conn| {
                    buyer::rotate_secret(conn, &id, rotate.secret.as_deref(), rotate.overlap)
                },
            )?;
            print_rotated(
                out,
                record.view(),
                NewSecret::Secret(&secret),
                old_valid_until,
            );
        }
        BuyerCommand::RotateSigningSecret {
            id,
            secret,
            overlap,
        } => {
            let Rotated {
                record,
                secret,
                old_valid_until,
            } = audited_rotation(
                &db,
                "buyer.rotate_signing_secret",
                &id.clone(),
                "signingSecret",
                move |conn| buyer::rotate_signing_secret(conn, &id, secret.as_deref(), overlap),
            )?;
            print_rotated(
                out,
                record.view(),
                NewSecret::SigningSecret(&secret),
                old_valid_until,
            );
        }
        BuyerCommand::Delete { id } => {
            return delete(&db, out, retire::Kind::Buyer, id.to_string());
        }
        BuyerCommand::Health { id } => {
            db.close();
            return super::delivery::buyer_health(path, out, id);
        }
        BuyerCommand::Integration(command) => {
            db.close();
            return super::integration::run(path, out, command);
        }
        BuyerCommand::User(command) => {
            db.close();
            return super::partner_user::buyer(path, out, command);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn supplier(
    path: &Path,
    out: &Output,
    command: SupplierCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        SupplierCommand::Create {
            workspace,
            name,
            id,
            key,
        } => {
            let (created, key) = audited(
                &db,
                "supplier.create",
                None,
                created,
                move |conn| {
                    supplier::create(
                        conn,
                        &supplier::NewSupplier {
                            id: id.as_deref(),
                            workspace_id: &workspace,
                            name: &name,
                            key: key.as_deref(),
                        },
                    )
                },
                |(s, _)| with_secret(s.to_json(), "key", true),
            )?;
            out.show(&CreatedShown {
                record: created.view(),
                secrets: CreatedSecrets::Supplier { key: &key },
            });
        }
        SupplierCommand::List(ListArgs { workspace, all }) => {
            let found = read(&db, |conn| supplier::list(conn, workspace.as_deref(), all))?;
            print_list(out, &found, supplier::Supplier::to_json);
        }
        SupplierCommand::Show { id } => {
            out.print(&read(&db, |conn| supplier::get(conn, &id))?.to_json());
        }
        SupplierCommand::Update { id, name } => {
            let changes = supplier::SupplierChanges { name };
            let updated = audited_update(
                &db,
                "supplier.update",
                &id.clone(),
                supplier::get,
                move |conn| supplier::update(conn, &id, &changes),
                supplier::Supplier::to_json,
            )?;
            out.print(&updated.to_json());
        }
        SupplierCommand::RotateKey { id, key, overlap } => {
            let Rotated {
                record,
                secret,
                old_valid_until,
            } = audited_rotation(
                &db,
                "supplier.rotate_key",
                &id.clone(),
                "key",
                move |conn| supplier::rotate_key(conn, &id, key.as_deref(), overlap),
            )?;
            print_rotated(out, record.view(), NewSecret::Key(&secret), old_valid_until);
        }
        SupplierCommand::Delete { id } => {
            return delete(&db, out, retire::Kind::Supplier, id.to_string());
        }
        SupplierCommand::User(command) => {
            db.close();
            return super::partner_user::supplier(path, out, command);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The bid flags of `buyer subscribe` and `buyer terms set`.
struct BidFlags {
    url: Option<String>,
    timeout: Option<i64>,
    min_price: Option<i64>,
    max_price: Option<i64>,
}

impl BidFlags {
    fn given(&self) -> bool {
        self.url.is_some()
            || self.timeout.is_some()
            || self.min_price.is_some()
            || self.max_price.is_some()
    }
}

/// The pricing the flags describe: a fixed price takes no bid flags, a bid one needs its URL
/// and takes no price (DESIGN.md section 14).
fn pricing_of(
    pricing: PricingArg,
    price: Option<i64>,
    bid: BidFlags,
) -> anyhow::Result<(subscription::Pricing, Option<i64>)> {
    match pricing {
        PricingArg::Fixed => {
            if bid.given() {
                anyhow::bail!(
                    "--bid-url, --bid-timeout, --min-price and --max-price come with --pricing bid"
                );
            }
            Ok((subscription::Pricing::Fixed, price))
        }
        PricingArg::Bid => {
            if price.is_some() {
                anyhow::bail!(
                    "--price is refused with --pricing bid: the buyer's bids are the price"
                );
            }
            let Some(url) = bid.url else {
                anyhow::bail!("--pricing bid needs --bid-url URL");
            };
            Ok((
                subscription::Pricing::Bid(subscription::BidTerms {
                    url,
                    timeout_ms: bid.timeout.unwrap_or(subscription::DEFAULT_BID_TIMEOUT_MS),
                    min_price_cents: bid.min_price,
                    max_price_cents: bid.max_price,
                }),
                None,
            ))
        }
    }
}

/// What `delete` prints: what became of the record and why.
#[derive(Serialize)]
struct DeletedRecord<'a> {
    id: &'a str,
    kind: &'static str,
    outcome: &'static str,
    note: &'static str,
}

/// What `init` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Initialised {
    database: String,
    schema_version: i64,
}

/// What `source docs --share` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SharedDocs<'a> {
    source_id: &'a crate::ids::SourceId,
    url: &'a str,
    token: &'a str,
}

/// What `source docs --unshare` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UnsharedDocs<'a> {
    source_id: &'a crate::ids::SourceId,
    removed: bool,
}

/// What `source docs --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SourceDocs<'a> {
    source_id: &'a crate::ids::SourceId,
    document: &'a str,
}

/// What `buyer unsubscribe` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Unsubscribed<'a> {
    buyer_id: &'a crate::ids::BuyerId,
    product: &'a str,
    subscribed: bool,
}
