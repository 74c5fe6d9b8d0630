//! `uexec kill SESSION...`: ends sessions (`terminate_session`: SIGKILL to the group, the
//! session forgotten at once) and says so; `--signal` only sends that signal
//! (`signal_session`), and the session ends, if it does, as any exit; `--all` does it to
//! every running session (of `--owner`).
//!
//! Each session is done in turn; one that cannot be is said on stderr and the others are
//! still done. One that had already exited (`await_exit` says so, with its code, for any
//! session `uexec ls -a` lists) is left as it is, and said so, with [`EXIT_ENDED`].

use std::process::ExitCode;

use serde_json::{json, Value};
use uexec_core::backend::Signal;

use super::common::{call, parse_session_ref, print_json, Failure, SessionRef, EXIT_ENDED};
use super::conn::{Conn, Target};

/// `uexec kill`.
#[derive(Debug, Clone, clap::Args)]
pub struct KillArgs {
    /// The sessions: ids or names.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref, required_unless_present = "all", conflicts_with = "all")]
    pub ids: Vec<SessionRef>,
    /// Every running session (of every owner, unless --owner).
    #[arg(long)]
    pub all: bool,
    /// With --all: only this owner's sessions (an MCP client's --owner, or @person).
    #[arg(long, value_name = "OWNER")]
    pub owner: Option<String>,
    /// Send only this signal to each session's process group: HUP, INT, QUIT, KILL, USR1,
    /// USR2 or TERM (SIGTERM, term and 15 too). The session ends, if it does, as any exit
    /// (`uexec ls` shows its code). Default: kill it and every process it started; it
    /// leaves `uexec ls` at once (`uexec ls -a` shows it, exited 137, until `uexec rm`).
    #[arg(short, long, value_name = "SIGNAL", value_parser = parse_signal)]
    pub signal: Option<Signal>,
    /// Print the answer as JSON: {session_id, terminated} or {session_id, signal} for one
    /// session; {sessions: [...], errors: [{session, error}]} for several or --all.
    #[arg(long)]
    pub json: bool,
}

fn parse_signal(s: &str) -> Result<Signal, String> {
    Signal::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Signal::ALL.iter().map(|s| s.name()).collect();
        format!("not a signal uexec sends; one of {}", names.join(", "))
    })
}

pub async fn kill(target: &Target, args: KillArgs) -> Result<ExitCode, Failure> {
    if args.owner.is_some() && !args.all {
        return Err(Failure {
            code: 2,
            message: "--owner picks among --all: give --all too, or the sessions".to_owned(),
        });
    }
    let mut conn = Conn::open(target, Vec::new())?;
    let sessions = if args.all {
        running(&mut conn, args.owner.as_deref()).await?
    } else {
        args.ids.clone()
    };
    if args.all && sessions.is_empty() {
        if args.json {
            print_json(&json!({"sessions": [], "errors": []}));
        } else {
            println!("no running sessions");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut done = Vec::new();
    let mut errors = Vec::new();
    let mut first_failure: Option<u8> = None;
    for session in &sessions {
        match kill_one(&mut conn, session, args.signal).await {
            Ok((text, answer)) => {
                if !args.json {
                    println!("{text}");
                }
                done.push(answer);
            }
            Err(f) => {
                if !args.json {
                    eprintln!("uexec: {}", f.message);
                }
                errors.push(json!({"session": session.to_string(), "error": f.message}));
                first_failure.get_or_insert(f.code);
            }
        }
    }
    if args.json {
        match (args.all || sessions.len() > 1, done.as_slice()) {
            (false, [one]) => print_json(one),
            _ => print_json(&json!({"sessions": done, "errors": errors})),
        }
    }
    Ok(first_failure.map_or(ExitCode::SUCCESS, ExitCode::from))
}

/// Ends (or signals) one session: what to print, and its JSON (said here, not the tool's
/// text, which may carry the person's exit notices of other sessions).
async fn kill_one(
    conn: &mut Conn,
    session: &SessionRef,
    signal: Option<Signal>,
) -> Result<(String, Value), Failure> {
    if !conn.daemon_may_run() {
        return Err(session.no_daemon());
    }
    let id = session.resolve(conn).await?;
    let before = call(
        conn,
        "await_exit",
        json!({"session_id": id, "yield_time_ms": 0}),
    )
    .await?;
    if before.structured["exited"] == true {
        let how = match before.structured["exit_code"].as_i64() {
            Some(code) => format!("with code {code}"),
            None => "without a code".to_owned(),
        };
        return Err(Failure {
            code: EXIT_ENDED,
            message: format!("session {id} had already exited {how}: nothing to kill"),
        });
    }
    Ok(match signal {
        None => {
            call(conn, "terminate_session", json!({"session_id": id})).await?;
            (
                format!("Session {id} terminated"),
                json!({"session_id": id, "terminated": true}),
            )
        }
        Some(signal) => {
            call(
                conn,
                "signal_session",
                json!({"session_id": id, "signal": signal.name()}),
            )
            .await?;
            (
                format!("Sent SIG{} to session {id}", signal.name()),
                json!({"session_id": id, "signal": signal.name()}),
            )
        }
    })
}

/// Every running session (of `owner`), oldest first.
async fn running(conn: &mut Conn, owner: Option<&str>) -> Result<Vec<SessionRef>, Failure> {
    if !conn.daemon_may_run() {
        return Ok(Vec::new());
    }
    let listed = call(conn, "list_sessions", json!({})).await?;
    Ok(listed.structured["sessions"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|s| s["state"] != "exited")
                .filter(|s| owner.is_none_or(|o| s["owner"] == o))
                .filter_map(|s| s["session_id"].as_i64())
                .filter_map(|id| i32::try_from(id).ok().map(SessionRef::Id))
                .collect()
        })
        .unwrap_or_default())
}
