//! `leadrelay operator …`: the console's operator tokens (create, list, revoke).
//!
//! Owns the flags and the printing; the records and their rules are `crate::operators`'.
//! The token is printed by `create` only, once.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use super::output::Output;
use crate::operators::{self, OperatorError};

#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Create an operator of the web console; prints its login token once.
    #[command(after_help = "Example:\n  leadrelay operator create --name 'Ana (ops)'")]
    Create {
        /// Who uses the token, as shown by `operator list`.
        #[arg(long)]
        name: String,
    },
    /// List operators (never their tokens), revoked ones included.
    #[command(after_help = "Example:\n  leadrelay operator list --json")]
    List,
    /// Revoke an operator's token: it no longer logs in, and its console sessions end now.
    #[command(after_help = "Example:\n  leadrelay operator revoke opr_01JD3Q0C8V6Y2T9W4N5M7K1H2G")]
    Revoke {
        /// The operator's id (`operator list`).
        id: String,
    },
}

pub(super) fn run(path: &Path, out: &Output, command: OperatorCommand) -> anyhow::Result<ExitCode> {
    let db = super::setup::open(path)?;
    let now = crate::clock::now_ms();
    let result: Result<(), OperatorError> = match command {
        OperatorCommand::Create { name } => db
            .write_blocking(move |conn| operators::create(conn, &name, now))
            .map(|created| {
                let mut shown = created.operator.to_json();
                shown["token"] = json!(created.token);
                out.print(&shown);
            }),
        OperatorCommand::List => db
            .read_blocking(|conn| Ok(operators::list(conn)?))
            .map(|all| {
                let shown: Vec<Value> = all.iter().map(operators::Operator::to_json).collect();
                out.print_list(&shown);
            }),
        OperatorCommand::Revoke { id } => db
            .write_blocking(move |conn| operators::revoke(conn, &id, now))
            .map(|revoked| out.print(&revoked.to_json())),
    };
    db.close();
    result?;
    Ok(ExitCode::SUCCESS)
}
