//! Return commands (DESIGN.md section 19): `return-reason list|add|remove` (a workspace's
//! reason codes) and `transaction return list|request|approve|deny` (the review queue).
//!
//! Each opens the database and runs the domain function (`config::return_reason`,
//! `lifecycle::returns`) as one writer job or one read; the rules are theirs, so a return
//! filed here meets the same checks as one over HTTP.

use std::path::Path;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use serde_json::Value;

use super::output::Output;
use super::setup::open;
use crate::config::{ConfigError, return_reason};
use crate::lifecycle::LifecycleError;
use crate::lifecycle::returns::{self, Decision, ReturnStatus};

#[derive(Debug, Subcommand)]
pub enum ReturnReasonCommand {
    /// List a workspace's reason codes.
    #[command(after_help = "Example:\n  leadrelay return-reason list --workspace acme")]
    List {
        /// The workspace.
        #[arg(long)]
        workspace: String,
    },
    /// Add a reason code to a workspace's list.
    #[command(
        after_help = "Example:\n  leadrelay return-reason add --workspace acme --code no_answer --label 'Never answered'"
    )]
    Add {
        /// The workspace.
        #[arg(long)]
        workspace: String,
        /// The code: 1 to 40 of a-z, 0-9 and _, starting with a letter.
        #[arg(long)]
        code: String,
        /// What the code means, for people.
        #[arg(long)]
        label: String,
    },
    /// Remove a reason code (returns made with it keep it; `other` stays).
    #[command(
        after_help = "Example:\n  leadrelay return-reason remove --workspace acme --code no_answer"
    )]
    Remove {
        /// The workspace.
        #[arg(long)]
        workspace: String,
        /// The code.
        #[arg(long)]
        code: String,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ReturnStatusArg {
    Pending,
    Approved,
    Denied,
}

impl ReturnStatusArg {
    fn status(self) -> ReturnStatus {
        match self {
            ReturnStatusArg::Pending => ReturnStatus::Pending,
            ReturnStatusArg::Approved => ReturnStatus::Approved,
            ReturnStatusArg::Denied => ReturnStatus::Denied,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ReturnCommand {
    /// The review queue: returns in the order they were requested.
    #[command(after_help = "Example:\n  leadrelay transaction return list --status pending")]
    List {
        /// Only this workspace's returns.
        #[arg(long)]
        workspace: Option<String>,
        /// Only returns in this state.
        #[arg(long, value_enum)]
        status: Option<ReturnStatusArg>,
        /// At most this many returns.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=100_000))]
        limit: i64,
    },
    /// File a return for the transaction's buyer, under the buyer's rules (window, cap,
    /// review): applied at once under auto review, pending under manual.
    #[command(
        after_help = "Example:\n  leadrelay transaction return request txn_01J0000000000000000000000 --reason-code fake --note 'called: number not in service'"
    )]
    Request {
        /// The transaction's id.
        id: crate::ids::TransactionId,
        /// A reason code of the workspace's list.
        #[arg(long)]
        reason_code: String,
        /// Free text kept with the return.
        #[arg(long)]
        note: Option<String>,
    },
    /// Approve a pending return: the transaction is cancelled, a prepaid charge refunded,
    /// its cap place given back and the supplier clawback opened as for a cancellation.
    #[command(
        after_help = "Example:\n  leadrelay transaction return approve txn_01J0000000000000000000000 --note 'confirmed fake'"
    )]
    Approve {
        /// The transaction's id.
        id: crate::ids::TransactionId,
        /// Told to the buyer.
        #[arg(long)]
        note: Option<String>,
    },
    /// Deny a pending return: the transaction goes back to the state it had; the buyer
    /// cannot request it again.
    #[command(
        after_help = "Example:\n  leadrelay transaction return deny txn_01J0000000000000000000000 --note 'the lead answered on the second call'"
    )]
    Deny {
        /// The transaction's id.
        id: crate::ids::TransactionId,
        /// Why, told to the buyer.
        #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
        note: String,
    },
}

/// Who decides and files returns from the command line, in histories and the queue.
const ACTOR: &str = "operator";

pub(super) fn reason(
    path: &Path,
    out: &Output,
    command: ReturnReasonCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    let actor = super::actor();
    let result = match command {
        ReturnReasonCommand::List { workspace } => db
            .read_blocking(|conn| return_reason::list(conn, &workspace))
            .map(|reasons| {
                let items: Vec<_> = reasons.iter().map(|r| r.to_json()).collect();
                out.print_list(&items);
            }),
        ReturnReasonCommand::Add {
            workspace,
            code,
            label,
        } => db
            .write_blocking(move |conn| {
                let added = return_reason::add(conn, &workspace, &code, &label)?;
                let changes = crate::audit::Changes::new()
                    .set("code", Value::Null, code.as_str())
                    .set("label", Value::Null, label.as_str());
                let now = crate::clock::now_ms();
                crate::audit::record(conn, &actor, "return_reason.add", &workspace, &changes, now)?;
                Ok::<_, ConfigError>(added)
            })
            .map(|added| out.print(&added.to_json())),
        ReturnReasonCommand::Remove { workspace, code } => {
            let shown = code.clone();
            db.write_blocking(move |conn| {
                return_reason::remove(conn, &workspace, &code)?;
                let changes = crate::audit::Changes::new().set("code", code.as_str(), Value::Null);
                let now = crate::clock::now_ms();
                crate::audit::record(
                    conn,
                    &actor,
                    "return_reason.remove",
                    &workspace,
                    &changes,
                    now,
                )?;
                Ok::<_, ConfigError>(())
            })
            .map(|()| {
                out.show(&RemovedCode {
                    code: shown,
                    removed: true,
                })
            })
        }
    };
    db.close();
    result?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn transaction_return(
    path: &Path,
    out: &Output,
    command: ReturnCommand,
) -> anyhow::Result<ExitCode> {
    let db = open(path)?;
    let now = crate::clock::now_ms();
    let actor = super::actor();
    let result = match command {
        ReturnCommand::List {
            workspace,
            status,
            limit,
        } => {
            let filter = returns::ListFilter {
                workspace_id: workspace,
                status: status.map(ReturnStatusArg::status),
                limit,
            };
            db.read_blocking(|conn| returns::list(conn, &filter).map_err(LifecycleError::from))
                .map_err(anyhow::Error::from)
                .map(|found| {
                    let items: Vec<_> = found.iter().map(returns::Return::to_json).collect();
                    out.print_list(&items);
                })
        }
        ReturnCommand::Request {
            id,
            reason_code,
            note,
        } => db
            .write_blocking(move |conn| {
                crate::audited::request_return(
                    conn,
                    &actor,
                    ACTOR,
                    &id,
                    &reason_code,
                    note.as_deref(),
                    now,
                )
            })
            .map_err(anyhow::Error::from)
            .map(|filed| out.print(&filed.to_json())),
        ReturnCommand::Approve { id, note } => db
            .write_blocking(move |conn| {
                crate::audited::decide_return(
                    conn,
                    &actor,
                    ACTOR,
                    &id,
                    Decision::Approve,
                    note.as_deref(),
                    now,
                )
            })
            .map_err(anyhow::Error::from)
            .map(|decided| out.print(&decided.to_json())),
        ReturnCommand::Deny { id, note } => db
            .write_blocking(move |conn| {
                crate::audited::decide_return(
                    conn,
                    &actor,
                    ACTOR,
                    &id,
                    Decision::Deny,
                    Some(&note),
                    now,
                )
            })
            .map_err(anyhow::Error::from)
            .map(|decided| out.print(&decided.to_json())),
    };
    db.close();
    result?;
    Ok(ExitCode::SUCCESS)
}

/// What `return-reason remove` prints.
#[derive(serde::Serialize)]
struct RemovedCode {
    code: String,
    removed: bool,
}
