//! `uexec keep SESSION`: keep an agent's session running after the agent's last client has
//! gone (`keep_session`), instead of letting it end then, after the agent's linger
//! (`uexec mcp --linger`); `--undo` lets it end with them again. `uexec ls` shows a kept
//! session as `kept`.

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, parse_session_ref, print_json, Failure, SessionRef};
use super::conn::{Conn, Target};

/// `uexec keep`.
#[derive(Debug, Clone, clap::Args)]
pub struct KeepArgs {
    /// The session: its id or name.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref)]
    pub session: SessionRef,
    /// No longer keep it: it ends with its owner's clients again.
    #[arg(long)]
    pub undo: bool,
    /// Print the answer as JSON: {session_id, kept}.
    #[arg(long)]
    pub json: bool,
}

/// Keeps the session, or (`--undo`) no longer.
pub async fn keep(target: &Target, args: KeepArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(args.session.no_daemon());
    }
    let id = args.session.resolve(&mut conn).await?;
    let kept = !args.undo;
    call(
        &mut conn,
        "keep_session",
        json!({"session_id": id, "kept": kept}),
    )
    .await?;
    if args.json {
        print_json(&json!({"session_id": id, "kept": kept}));
    } else if kept {
        println!("Session {id} kept: it runs on after its owner's clients are gone");
    } else {
        println!("Session {id} no longer kept: it ends with its owner's clients");
    }
    Ok(ExitCode::SUCCESS)
}
