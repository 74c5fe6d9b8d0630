//! `uexec kill ID`: ends a session (`terminate_session`) and says so.

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, parse_session_ref, print_json, Failure, SessionRef};
use super::conn::{Conn, Target};

/// `uexec kill`.
#[derive(Debug, Clone, clap::Args)]
pub struct KillArgs {
    /// The session: its id, or its name.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref)]
    pub id: SessionRef,
    /// Print the answer as JSON ({session_id, terminated}).
    #[arg(long)]
    pub json: bool,
}

pub async fn kill(target: &Target, args: KillArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(args.id.no_daemon());
    }
    let id = args.id.resolve(&mut conn).await?;
    let result = call(&mut conn, "terminate_session", json!({"session_id": id})).await?;
    if args.json {
        print_json(&json!({"session_id": id, "terminated": true}));
    } else {
        println!("{}", result.text);
    }
    Ok(ExitCode::SUCCESS)
}
