//! `leadrelay operator …`: the console's operators (create, list, update, revoke).
//!
//! Owns the flags and the printing; the records and their rules are `crate::operators`'.
//! The token is printed by `create` only, once. Every change is written to the audit log in
//! its own job.

use std::path::Path;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use serde_json::Value;

use super::output::Output;
use crate::audit::{self, Changes};
use crate::operators::{self, OperatorError, Role};

/// A console role, as the flag takes it.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoleArg {
    Admin,
    Finance,
    Support,
    Viewer,
}

impl From<RoleArg> for Role {
    fn from(arg: RoleArg) -> Role {
        match arg {
            RoleArg::Admin => Role::Admin,
            RoleArg::Finance => Role::Finance,
            RoleArg::Support => Role::Support,
            RoleArg::Viewer => Role::Viewer,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Create an operator of the web console; prints its login token once.
    #[command(
        after_help = "Example:\n  leadrelay operator create --name 'Ana (ops)' --role finance"
    )]
    Create {
        /// Who uses the token, as shown by `operator list`.
        #[arg(long)]
        name: String,
        /// What the operator may do in the console: admin (everything), finance (decide
        /// returns), support (pause buyers, retry events) or viewer (look only).
        #[arg(long, value_enum, default_value = "admin")]
        role: RoleArg,
    },
    /// List operators (never their tokens), revoked ones included.
    #[command(after_help = "Example:\n  leadrelay operator list --json")]
    List,
    /// Change an operator's role; its open console sessions take it at their next request.
    #[command(
        after_help = "Example:\n  leadrelay operator update opr_01JD3Q0C8V6Y2T9W4N5M7K1H2G --role viewer"
    )]
    Update {
        /// The operator's id (`operator list`).
        id: String,
        /// The new role: admin, finance, support or viewer.
        #[arg(long, value_enum)]
        role: RoleArg,
    },
    /// Revoke an operator's token: it no longer logs in, and its console sessions end now.
    #[command(after_help = "Example:\n  leadrelay operator revoke opr_01JD3Q0C8V6Y2T9W4N5M7K1H2G")]
    Revoke {
        /// The operator's id (`operator list`).
        id: String,
    },
}

/// A new operator as `operator create` shows it: with its token, which exists in clear
/// only here.
#[derive(serde::Serialize)]
struct CreatedOperator<'a> {
    #[serde(flatten)]
    operator: operators::OperatorView<'a>,
    token: &'a str,
}

pub(super) fn run(path: &Path, out: &Output, command: OperatorCommand) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let now = crate::clock::now_ms();
    let actor = super::actor();
    let result: Result<(), OperatorError> = match command {
        OperatorCommand::Create { name, role } => db
            .write_blocking(move |conn| {
                let created = operators::create(conn, &name, role.into(), now)?;
                let shown = created.operator.to_json();
                let changes = audit::diff(&Value::Null, &shown).secret("token");
                audit::record(
                    conn,
                    &actor,
                    "operator.create",
                    &created.operator.id,
                    &changes,
                    now,
                )?;
                Ok(created)
            })
            .map(|created| {
                out.show(&CreatedOperator {
                    operator: created.operator.view(),
                    token: &created.token,
                });
            }),
        OperatorCommand::List => db
            .read_blocking(|conn| Ok(operators::list(conn)?))
            .map(|all| {
                let shown: Vec<Value> = all.iter().map(operators::Operator::to_json).collect();
                out.print_list(&shown);
            }),
        OperatorCommand::Update { id, role } => db
            .write_blocking(move |conn| {
                let before = operators::find(conn, &id)?
                    .ok_or_else(|| OperatorError::NotFound(id.clone()))?;
                let after = operators::set_role(conn, &id, role.into())?;
                let changes = Changes::new().set("role", before.role.as_str(), after.role.as_str());
                audit::record(conn, &actor, "operator.update", &id, &changes, now)?;
                Ok(after)
            })
            .map(|updated| out.print(&updated.to_json())),
        OperatorCommand::Revoke { id } => db
            .write_blocking(move |conn| {
                let before = operators::find(conn, &id)?
                    .ok_or_else(|| OperatorError::NotFound(id.clone()))?;
                let after = operators::revoke(conn, &id, now)?;
                audit::record_diff(
                    conn,
                    &actor,
                    "operator.revoke",
                    &id,
                    &before.to_json(),
                    &after.to_json(),
                    now,
                )?;
                Ok(after)
            })
            .map(|revoked| out.print(&revoked.to_json())),
    };
    db.close();
    result?;
    Ok(ExitCode::SUCCESS)
}
