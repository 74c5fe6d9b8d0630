//! `uexec pause SESSION` and `uexec resume SESSION`: freeze a running session and every
//! process it started (`pause_session`, the kernel's cgroup freezer), and thaw it
//! (`resume_session`). Each returns once the kernel says it is done; `uexec ls` shows the
//! session `paused` in between. One file for the pair: the same argument, call and answer,
//! told apart by which way they go.

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, parse_session_ref, print_json, Failure, SessionRef};
use super::conn::{Conn, Target};

/// `uexec pause` and `uexec resume`.
#[derive(Debug, Clone, clap::Args)]
pub struct PauseArgs {
    /// The session: its id or name.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref)]
    pub session: SessionRef,
    /// Print the answer as JSON: {session_id, paused}.
    #[arg(long)]
    pub json: bool,
}

/// Pauses (`frozen`) or resumes the session.
pub async fn pause(target: &Target, args: PauseArgs, frozen: bool) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(args.session.no_daemon());
    }
    let id = args.session.resolve(&mut conn).await?;
    let tool = if frozen {
        "pause_session"
    } else {
        "resume_session"
    };
    call(&mut conn, tool, json!({"session_id": id})).await?;
    if args.json {
        print_json(&json!({"session_id": id, "paused": frozen}));
    } else if frozen {
        println!("Session {id} paused");
    } else {
        println!("Session {id} resumed");
    }
    Ok(ExitCode::SUCCESS)
}
