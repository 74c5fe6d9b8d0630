//! `uexec poll ID`: what a session printed since the last look (`write_stdin` with no
//! input), waiting up to the window or a wait condition; it exits with the command's code
//! once the command has exited.

use std::process::ExitCode;

use serde_json::json;

use super::common::{
    call, exit_code_of, parse_session_ref, print_json, Failure, SessionRef, UntilArgs,
};
use super::conn::{Conn, Target};
use uexec_core::limits::{MAX_EMPTY_POLL_YIELD_TIME_MS, MIN_EMPTY_POLL_YIELD_TIME_MS};

/// `uexec poll`.
#[derive(Debug, Clone, clap::Args)]
pub struct PollArgs {
    /// The session: its id, or its name.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref)]
    pub id: SessionRef,
    /// How long to wait for output (5s to 5m, default 5s; a bare number is ms; returns
    /// early at the exit).
    #[arg(long = "yield", value_name = "DURATION", default_value = "5s", value_parser = poll_yield)]
    pub yield_ms: i64,
    #[command(flatten)]
    pub until: UntilArgs,
    /// Print the result as JSON (output, exit_code or session_id, reason).
    #[arg(long)]
    pub json: bool,
}

/// `--yield`, in ms.
fn poll_yield(text: &str) -> Result<i64, String> {
    let range = MIN_EMPTY_POLL_YIELD_TIME_MS as i64..=MAX_EMPTY_POLL_YIELD_TIME_MS as i64;
    super::duration::ms_within(text, "ms", range)
}

pub async fn poll(target: &Target, args: PollArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(args.id.no_daemon());
    }
    let id = args.id.resolve(&mut conn).await?;
    let mut poll_args = json!({"session_id": id, "yield_time_ms": args.yield_ms});
    if let Some(until) = args.until.json() {
        poll_args["until"] = until;
    }
    let result = call(&mut conn, "write_stdin", poll_args).await?;
    let s = &result.structured;
    if args.json {
        print_json(s);
    } else {
        print!("{}", s["output"].as_str().unwrap_or_default());
    }
    if s.get("exit_code").is_some() {
        return Ok(ExitCode::from(exit_code_of(s["exit_code"].as_i64())));
    }
    Ok(ExitCode::SUCCESS)
}
