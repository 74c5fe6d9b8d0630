//! `uexec wait ID`: waits for a session's end and exits with its code (124 after
//! `--timeout`).
//!
//! The wait is a loop of `await_exit` calls of at most [`AWAIT_EXIT_MAX_SECS`] each (the
//! longest the tool accepts), and `--timeout`'s deadline is checked between them.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use super::common::{call, exit_code_of, parse_session_ref, print_json, Failure, SessionRef};
use super::conn::{Conn, Target};

/// The longest one `await_exit` call may wait, in seconds (its `yield_time_ms` bound).
const AWAIT_EXIT_MAX_SECS: u64 = 300;

/// `uexec wait`.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// The session: its id, or its name.
    #[arg(value_name = "SESSION", value_parser = parse_session_ref)]
    pub id: SessionRef,
    /// Give up after this long (exit 124): 500ms, 10s, 5m, 1h; a bare number is SECONDS.
    /// Default: wait as long as it runs.
    #[arg(long, value_name = "DURATION", value_parser = super::duration::seconds)]
    pub timeout: Option<Duration>,
    /// Print the session's end as JSON (exit_code, exited, exit_notices).
    #[arg(long)]
    pub json: bool,
}

pub async fn wait(target: &Target, args: WaitArgs) -> Result<ExitCode, Failure> {
    let mut conn = Conn::open(target, Vec::new())?;
    if !conn.daemon_may_run() {
        return Err(args.id.no_daemon());
    }
    let id = args.id.resolve(&mut conn).await?;
    let deadline = args.timeout.map(|t| tokio::time::Instant::now() + t);
    loop {
        let chunk = match deadline {
            Some(d) => d
                .saturating_duration_since(tokio::time::Instant::now())
                .min(Duration::from_secs(AWAIT_EXIT_MAX_SECS)),
            None => Duration::from_secs(AWAIT_EXIT_MAX_SECS),
        };
        let result = call(
            &mut conn,
            "await_exit",
            json!({"session_id": id, "yield_time_ms": chunk.as_millis() as u64}),
        )
        .await?;
        let s = &result.structured;
        if s["exited"] == true {
            if args.json {
                print_json(s);
            }
            return Ok(ExitCode::from(exit_code_of(s["exit_code"].as_i64())));
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            if args.json {
                print_json(s);
            } else {
                let waited = args.timeout.unwrap_or_default().as_millis();
                eprintln!(
                    "uexec: session {} still runs after {}",
                    args.id,
                    super::duration::show(i64::try_from(waited).unwrap_or(i64::MAX))
                );
            }
            return Ok(ExitCode::from(124));
        }
    }
}
