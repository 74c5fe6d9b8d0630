//! `uexec approvals`, `uexec approve ID [--always]`, `uexec deny ID [--reason TEXT]`: the
//! commands the command rules (`--rules`) hold for a person's yes, when the agent's client
//! cannot ask the person itself (no form elicitation: a headless agent), and the answer.
//! The held call waits (`--approval-timeout`, 10m by default), then is refused saying so.

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, print_json, Failure, EXIT_NO_SESSION};
use super::conn::{Conn, Target};

/// `uexec approvals`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApprovalsArgs {
    /// Print them as JSON: {approvals: [{id, owner, command, cwd, why, since}]}.
    #[arg(long)]
    pub json: bool,
}

/// `uexec approve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApproveArgs {
    /// The held command's id (`uexec approvals`).
    #[arg(value_name = "ID")]
    pub id: u64,
    /// Also run, without asking, the commands that start the same way, for the rest of the
    /// asking agent's connection (never wider than the prefix asked about; never for a
    /// prefix that runs anything, such as `bash -c` or `sudo`).
    #[arg(long)]
    pub always: bool,
}

/// `uexec deny`.
#[derive(Debug, Clone, clap::Args)]
pub struct DenyArgs {
    /// The held command's id (`uexec approvals`).
    #[arg(value_name = "ID")]
    pub id: u64,
    /// Why, for the agent: its refusal says it.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

/// Lists what waits.
pub async fn approvals(target: &Target, args: ApprovalsArgs) -> Result<ExitCode, Failure> {
    let mut conn = open(target)?;
    let result = call(&mut conn, "list_approvals", json!({})).await?;
    if args.json {
        print_json(&result.structured);
    } else {
        println!("{}", result.text.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a held command.
pub async fn approve(target: &Target, args: ApproveArgs) -> Result<ExitCode, Failure> {
    answer(
        target,
        json!({"id": args.id, "approve": true, "always": args.always}),
    )
    .await
}

/// Refuses a held command.
pub async fn deny(target: &Target, args: DenyArgs) -> Result<ExitCode, Failure> {
    let mut arguments = json!({"id": args.id, "approve": false});
    if let Some(reason) = args.reason {
        arguments["reason"] = json!(reason);
    }
    answer(target, arguments).await
}

async fn answer(target: &Target, arguments: serde_json::Value) -> Result<ExitCode, Failure> {
    let mut conn = open(target)?;
    let result = call(&mut conn, "answer_approval", arguments)
        .await
        .map_err(|mut f| {
            if f.message.contains("no command waits for approval") {
                f.code = EXIT_NO_SESSION;
            }
            f
        })?;
    println!("{}", result.text.trim_end());
    Ok(ExitCode::SUCCESS)
}

/// The daemon, if one runs: held commands live only there.
fn open(target: &Target) -> Result<Conn, Failure> {
    let conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(Failure {
            code: EXIT_NO_SESSION,
            message: "no uexec daemon runs, so no command waits for approval".to_owned(),
        });
    }
    Ok(conn)
}
