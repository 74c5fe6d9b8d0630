//! `uexec rm ID...`: forgets ended sessions (`remove_session`), their transcripts with
//! them, as `docker rm` does; a running one only with `--force`, which kills it.
//!
//! Each session is removed in turn; one that cannot be is said on stderr and the others
//! are still removed.

use std::process::ExitCode;

use serde_json::json;

use super::common::{call, parse_session_ref, print_json, Failure, SessionRef, EXIT_STILL_RUNNING};
use super::conn::{Conn, Target};

/// `uexec rm`.
#[derive(Debug, Clone, clap::Args)]
pub struct RmArgs {
    /// The sessions (ended ones: `uexec ls -a` lists them), by id or name.
    #[arg(required = true, value_name = "SESSION", value_parser = parse_session_ref)]
    pub ids: Vec<SessionRef>,
    /// Remove running sessions too: each is killed first, with every process it started.
    #[arg(short, long)]
    pub force: bool,
    /// Print what was removed as JSON ({removed: [ids], errors: [{session, error}]}).
    #[arg(long)]
    pub json: bool,
}

pub async fn rm(target: &Target, args: RmArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    let mut removed = Vec::new();
    let mut errors = Vec::new();
    let mut first_failure: Option<u8> = None;
    for session in &args.ids {
        let done = if conn.daemon_may_run() {
            remove(&mut conn, session, args.force).await
        } else {
            Err(session.no_daemon())
        };
        match done {
            Ok(id) => {
                if !args.json {
                    println!("Session {id} removed");
                }
                removed.push(id);
            }
            Err(mut f) => {
                if f.code == EXIT_STILL_RUNNING {
                    f.message = format!("session {session} is still running: `uexec kill {session}` stops it, or `uexec rm --force {session}` kills and removes it");
                }
                if !args.json {
                    eprintln!("uexec: {}", f.message);
                }
                errors.push(json!({"session": session.to_string(), "error": f.message}));
                first_failure.get_or_insert(f.code);
            }
        }
    }
    if args.json {
        print_json(&json!({"removed": removed, "errors": errors}));
    }
    Ok(first_failure.map_or(ExitCode::SUCCESS, ExitCode::from))
}

/// Removes one session; its id.
async fn remove(conn: &mut Conn, session: &SessionRef, force: bool) -> Result<i32, Failure> {
    let id = session.resolve(conn).await?;
    call(
        conn,
        "remove_session",
        json!({"session_id": id, "force": force}),
    )
    .await?;
    Ok(id)
}
