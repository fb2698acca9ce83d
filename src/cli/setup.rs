//! Configuration commands: init, workspace, channel, table, source, product, buyer,
//! supplier. Each opens the database, makes its change through the writer (so it is safe
//! while `serve` runs on the same file) and prints the record.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::args::*;
use super::output::Output;
use crate::autodelivery::schedule::Schedule;
use crate::config::container::{ContainerKind, DeliveryMode, NewContainer};
use crate::config::source::{DedupeAction, NewSource};
use crate::config::{ConfigError, buyer, container, product, source, supplier, workspace};
use crate::db::Db;

pub(super) fn open(path: &Path) -> anyhow::Result<Db> {
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

pub fn init(path: &Path, out: &Output) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    db.close();
    out.print(&json!({
        "database": path.display().to_string(),
        "schemaVersion": crate::db::SCHEMA_VERSION,
    }));
    Ok(ExitCode::SUCCESS)
}

pub fn workspace(path: &Path, out: &Output, command: WorkspaceCommand) -> anyhow::Result<ExitCode> {
    let WorkspaceCommand::Create { name, id, timezone } = command;
    let db = open(path)?;
    let created = write(&db, move |conn| {
        workspace::create(
            conn,
            &workspace::NewWorkspace {
                id: id.as_deref(),
                name: &name,
                timezone: &timezone,
            },
        )
    })?;
    out.print(&to_value(&created));
    Ok(ExitCode::SUCCESS)
}

pub fn container(
    path: &Path,
    out: &Output,
    kind: ContainerKind,
    command: ContainerCommand,
) -> anyhow::Result<ExitCode> {
    let ContainerCommand::Create {
        workspace,
        name,
        id,
        delivery,
    } = command;
    let db = open(path)?;
    let created = write(&db, move |conn| {
        container::create(
            conn,
            &NewContainer {
                id: id.as_deref(),
                workspace_id: &workspace,
                kind,
                name: &name,
                auto_delivery: delivery.auto_delivery,
                delivery_mode: match delivery.delivery_mode {
                    DeliveryModeArg::Exclusive => DeliveryMode::Exclusive,
                    DeliveryModeArg::Multi => DeliveryMode::Multi,
                },
                max_buyers: delivery.max_buyers,
                score_threshold: delivery.score_threshold,
            },
        )
    })?;
    out.print(&to_value(&created));
    Ok(ExitCode::SUCCESS)
}

pub fn source(path: &Path, out: &Output, command: SourceCommand) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    match command {
        SourceCommand::Create {
            channel,
            table,
            name,
            id,
            secret,
            no_secret,
            supplier,
            supplier_cost,
            dedupe_fields,
            dedupe_scope,
            dedupe_action,
            dedupe_window_days,
        } => {
            let (container_id, container_kind) = match (channel, table) {
                (Some(channel), _) => (channel, ContainerKind::Channel),
                (None, Some(table)) => (table, ContainerKind::Table),
                (None, None) => unreachable!("clap requires --channel or --table"),
            };
            let created = write(&db, move |conn| {
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
                        supplier_id: supplier.as_deref(),
                        supplier_cost_cents: supplier_cost,
                        dedupe_fields: dedupe_fields.map(|l| l.0),
                        dedupe_scope: dedupe_scope.map(|s| match s {
                            DedupeScopeArg::Channel => "channel",
                            DedupeScopeArg::Table => "table",
                            DedupeScopeArg::Workspace => "workspace",
                        }),
                        dedupe_action: match dedupe_action {
                            DedupeActionArg::Review => DedupeAction::Review,
                            DedupeActionArg::Reject => DedupeAction::Reject,
                        },
                        dedupe_window_days,
                    },
                )
            })?;
            let mut shown = created.source.to_json();
            shown["secret"] = json!(created.secret);
            out.print(&shown);
        }
        SourceCommand::RotateSecret { id, secret } => {
            let (rotated, secret) = write(&db, move |conn| {
                source::rotate_secret(conn, &id, secret.as_deref())
            })?;
            let mut shown = rotated.to_json();
            shown["secret"] = json!(secret);
            out.print(&shown);
        }
        SourceCommand::Disable { id } => {
            let disabled = write(&db, move |conn| source::disable(conn, &id))?;
            out.print(&disabled.to_json());
        }
        SourceCommand::List => {
            let sources = read(&db, source::list)?;
            let shown: Vec<Value> = sources.iter().map(source::Source::to_json).collect();
            out.print_list(&shown);
        }
        SourceCommand::Show { id } => {
            let found = read(&db, |conn| source::get(conn, &id))?;
            out.print(&found.to_json());
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn product(path: &Path, out: &Output, command: ProductCommand) -> anyhow::Result<ExitCode> {
    let ProductCommand::Create {
        workspace,
        slug,
        name,
        id,
        fields,
        supplier_cost,
    } = command;
    let db = open(path)?;
    let created = write(&db, move |conn| {
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
    })?;
    out.print(&to_value(&created));
    Ok(ExitCode::SUCCESS)
}

pub fn buyer(path: &Path, out: &Output, command: BuyerCommand) -> anyhow::Result<ExitCode> {
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
            capabilities,
            cancellation_window,
            auto_payout_pending,
            plan,
            credit_limit,
        } => {
            let created = write(&db, move |conn| {
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
                        capabilities: capabilities.0,
                        cancellation_window_secs: cancellation_window,
                        auto_payout_pending,
                        plan: match plan {
                            PlanArg::Postpaid => buyer::Plan::Postpaid,
                            PlanArg::Prepaid => buyer::Plan::Prepaid,
                        },
                        credit_limit_cents: credit_limit,
                    },
                )
            })?;
            let mut shown = created.buyer.to_json();
            shown["secret"] = json!(created.secret);
            shown["signingSecret"] = json!(created.signing_secret);
            out.print(&shown);
        }
        BuyerCommand::Subscribe {
            id,
            product,
            price,
            daily_cap,
            monthly_cap,
            priority,
            filters,
            schedules,
        } => {
            let schedule = (!schedules.is_empty()).then(|| Schedule::new(schedules).to_json());
            let subscription = write(&db, move |conn| {
                buyer::subscribe(
                    conn,
                    &buyer::NewSubscription {
                        buyer_id: &id,
                        product: &product,
                        price_cents: price,
                        daily_cap,
                        monthly_cap,
                        priority,
                        filters,
                        schedule,
                    },
                )
            })?;
            out.print(&to_value(&subscription));
        }
        BuyerCommand::Fund { id, amount } => {
            let funded = write(&db, move |conn| buyer::fund(conn, &id, amount))?;
            out.print(&funded.to_json());
        }
        BuyerCommand::Pause { id } => {
            let paused = write(&db, move |conn| buyer::set_paused(conn, &id, true))?;
            out.print(&paused.to_json());
        }
        BuyerCommand::Resume { id } => {
            let resumed = write(&db, move |conn| buyer::set_paused(conn, &id, false))?;
            out.print(&resumed.to_json());
        }
        BuyerCommand::List => {
            let buyers = read(&db, buyer::list)?;
            let shown: Vec<Value> = buyers.iter().map(buyer::Buyer::to_json).collect();
            out.print_list(&shown);
        }
        BuyerCommand::Health { id } => {
            db.close();
            return super::delivery::buyer_health(path, out, id);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn supplier(path: &Path, out: &Output, command: SupplierCommand) -> anyhow::Result<ExitCode> {
    let SupplierCommand::Create {
        workspace,
        name,
        id,
        key,
    } = command;
    let db = open(path)?;
    let (created, key) = write(&db, move |conn| {
        supplier::create(
            conn,
            &supplier::NewSupplier {
                id: id.as_deref(),
                workspace_id: &workspace,
                name: &name,
                key: key.as_deref(),
            },
        )
    })?;
    let mut shown = to_value(&created);
    shown["key"] = json!(key);
    out.print(&shown);
    Ok(ExitCode::SUCCESS)
}
