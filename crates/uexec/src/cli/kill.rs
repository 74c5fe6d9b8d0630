//! `uexec kill ID`: ends a session (`terminate_session`) and says so.

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, no_daemon_for, print_json, Failure};
use super::conn::{Conn, Target};

/// `uexec kill`.
#[derive(Debug, Clone, clap::Args)]
pub struct KillArgs {
    /// The session.
    pub id: i32,
    /// Print the answer as JSON ({session_id, terminated}).
    #[arg(long)]
    pub json: bool,
}

pub async fn kill(target: &Target, args: KillArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(no_daemon_for(args.id));
    }
    let result = call(
        &mut conn,
        "terminate_session",
        json!({"session_id": args.id}),
    )
    .await?;
    if args.json {
        print_json(&json!({"session_id": args.id, "terminated": true}));
    } else {
        println!("{}", result.text);
    }
    Ok(ExitCode::SUCCESS)
}
