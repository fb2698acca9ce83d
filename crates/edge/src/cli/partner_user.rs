//! `leadrelay buyer user …` and `supplier user …`: the portal's login tokens (create, list,
//! revoke).
//!
//! Owns the flags and the printing; the records and their rules are `crate::partners`'.
//! The token is printed by `create` only, once; `create` and `revoke` are recorded in the
//! audit log (`portal_user.create`, `portal_user.revoke`), never with the token.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use super::output::Output;
use crate::audit::Changes;
use crate::partners::{self, PartnerUserError, Party};

#[derive(Debug, Subcommand)]
pub enum BuyerUserCommand {
    /// Create a portal user of a buyer; prints its login token once.
    #[command(after_help = "Example:\n  leadrelay buyer user create sunco --name 'Maria (sales)'")]
    Create {
        /// The buyer's id.
        buyer: crate::ids::BuyerId,
        /// Who uses the token, as shown by `buyer user list`.
        #[arg(long)]
        name: String,
    },
    /// List a buyer's portal users (never their tokens), revoked ones included.
    #[command(after_help = "Example:\n  leadrelay buyer user list sunco --json")]
    List {
        /// The buyer's id.
        buyer: crate::ids::BuyerId,
    },
    /// Revoke a buyer's portal user: its token no longer logs in, its sessions end now.
    #[command(after_help = "Example:\n  leadrelay buyer user revoke pu_01JD3Q0C8V6Y2T9W4N5M7K1H2G")]
    Revoke {
        /// The user's id (`buyer user list`).
        user: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SupplierUserCommand {
    /// Create a portal user of a supplier; prints its login token once.
    #[command(
        after_help = "Example:\n  leadrelay supplier user create leadfarm --name 'Tom (integration)'"
    )]
    Create {
        /// The supplier's id.
        supplier: crate::ids::SupplierId,
        /// Who uses the token, as shown by `supplier user list`.
        #[arg(long)]
        name: String,
    },
    /// List a supplier's portal users (never their tokens), revoked ones included.
    #[command(after_help = "Example:\n  leadrelay supplier user list leadfarm --json")]
    List {
        /// The supplier's id.
        supplier: crate::ids::SupplierId,
    },
    /// Revoke a supplier's portal user: its token no longer logs in, its sessions end now.
    #[command(
        after_help = "Example:\n  leadrelay supplier user revoke pu_01JD3Q0C8V6Y2T9W4N5M7K1H2G"
    )]
    Revoke {
        /// The user's id (`supplier user list`).
        user: String,
    },
}

/// What a `user` command asks, whichever side.
enum Asked {
    Create { party: Party, name: String },
    List { party: Party },
    Revoke { user: String, buyer_side: bool },
}

pub(super) fn buyer(
    path: &Path,
    out: &Output,
    command: BuyerUserCommand,
) -> anyhow::Result<ExitCode> {
    run(
        path,
        out,
        match command {
            BuyerUserCommand::Create { buyer, name } => Asked::Create {
                party: Party::Buyer(buyer),
                name,
            },
            BuyerUserCommand::List { buyer } => Asked::List {
                party: Party::Buyer(buyer),
            },
            BuyerUserCommand::Revoke { user } => Asked::Revoke {
                user,
                buyer_side: true,
            },
        },
    )
}

pub(super) fn supplier(
    path: &Path,
    out: &Output,
    command: SupplierUserCommand,
) -> anyhow::Result<ExitCode> {
    run(
        path,
        out,
        match command {
            SupplierUserCommand::Create { supplier, name } => Asked::Create {
                party: Party::Supplier(supplier),
                name,
            },
            SupplierUserCommand::List { supplier } => Asked::List {
                party: Party::Supplier(supplier),
            },
            SupplierUserCommand::Revoke { user } => Asked::Revoke {
                user,
                buyer_side: false,
            },
        },
    )
}

fn run(path: &Path, out: &Output, asked: Asked) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let (actor, now) = (super::actor(), crate::clock::now_ms());
    let result: Result<(), PartnerUserError> = match asked {
        Asked::Create { party, name } => db
            .write_blocking(move |conn| {
                let created = partners::create(conn, &party, &name, now)?;
                let user = &created.user;
                let changes = Changes::new()
                    .set("name", Value::Null, user.name.as_str())
                    .set("party", Value::Null, user.party.label())
                    .set("revokedAt", Value::Null, Value::Null);
                crate::audit::record(conn, &actor, "portal_user.create", &user.id, &changes, now)?;
                Ok(created)
            })
            .map(|created| out.print(&created.to_json())),
        Asked::List { party } => db
            .read_blocking(move |conn| {
                let exists = match &party {
                    Party::Buyer(id) => crate::config::buyer::find(conn, id)?.is_some(),
                    Party::Supplier(id) => crate::config::supplier::find(conn, id)?.is_some(),
                };
                if !exists {
                    return Err(match party {
                        Party::Buyer(id) => PartnerUserError::BuyerNotFound(id),
                        Party::Supplier(id) => PartnerUserError::SupplierNotFound(id),
                    });
                }
                Ok(partners::list(conn, &party)?)
            })
            .map(|all| {
                let shown: Vec<Value> = all.iter().map(partners::PartnerUser::to_json).collect();
                out.print_list(&shown);
            }),
        Asked::Revoke { user, buyer_side } => db
            .write_blocking(move |conn| {
                crate::audited::revoke_portal_user_of(conn, &actor, &user, buyer_side, now)
            })
            .map(|revoked| out.print(&revoked.to_json())),
    };
    db.close();
    result?;
    Ok(ExitCode::SUCCESS)
}
