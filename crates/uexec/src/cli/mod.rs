//! The CLI for people: short verbs over the daemon, `--json` on everything that prints,
//! errors on stderr, and exit codes that mean something:
//!
//! - `run`, `wait` and `attach` exit with the command's own code (124 after their
//!   `--timeout`; `run` 130 after Ctrl-C); `run -d` 0 once it started; `run` 4 when it left
//!   the command running unasked (Ctrl-\, a window without `-d` or whose `--until-*` was not
//!   met), and `rm` 4 when a session still runs;
//! - 0 for success otherwise; 2 for bad usage (clap, a bad value the daemon refused);
//! - 3 when the session does not exist (any more), or `daemon --status` finds no daemon;
//! - 5 when `kill` finds the session had already exited;
//! - 125 when uexec itself failed (the daemon unreachable or refusing).
//!
//! Errors speak the CLI's words ([`cli_words`]): sessions, flags and verbs, never the
//! tools' names and fields the verbs call underneath.
//!
//! `uexec --help` says the same (the engine's `CLI_AFTER_HELP`), with the units of flags.
//!
//! Nothing is coloured, so `NO_COLOR` has nothing to turn off.
//!
//! One file per verb, each with its clap arguments, its parsing and its work: `run`, `ls`,
//! `logs`, `send`, `poll`, `wait`, `kill`, `pause` (and `resume`), `keep`, `rm`, `prune`, `metrics`,
//! `attach`, `policy check` (which needs no daemon). What they share (the exit codes,
//! [`Failure`], one tool call, the wait conditions) is in `common`, the connection to the
//! daemon in [`conn`]. A verb file uses those two only, never another verb file; this file
//! names the verbs for the engine's dispatch and the front.

mod approvals;
pub mod attach;
mod audit;
mod common;
pub mod conn;
mod daemon_status;
pub mod doctor;
pub mod duration;
mod keep;
mod kill;
mod logs;
mod ls;
mod metrics;
mod pause;
mod policy;
mod poll;
mod prune;
mod rm;
mod run;
mod send;
mod table;
mod wait;

pub use approvals::{approvals, approve, deny, ApprovalsArgs, ApproveArgs, DenyArgs};
pub use audit::{audit, AuditArgs};
pub use common::{
    cli_words, parse_session_name, parse_session_ref, Failure, SessionRef, UntilArgs, EXIT_ENDED,
    EXIT_NO_SESSION, EXIT_STILL_RUNNING, EXIT_UEXEC,
};
pub use daemon_status::daemon_status;
pub use keep::{keep, KeepArgs};
pub use kill::{kill, KillArgs};
pub use logs::{logs, LogsArgs, Since};
pub use ls::{ls, LsArgs};
pub use metrics::metrics;
pub use pause::{pause, PauseArgs};
pub use policy::{policy, PolicyCheckArgs, PolicyCommand};
pub use poll::{poll, PollArgs};
pub use prune::{prune, PruneArgs};
pub use rm::{rm, RmArgs};
pub use run::follow::{catch_signals, follow, leave_at_spawn, Joined};
pub use run::{
    finish_run, parse_assignment, plain_run, run, run_call_args, run_hello, Mode, RunArgs,
    RUN_YIELD_DEFAULT_MS, RUN_YIELD_MAX_MS, RUN_YIELD_MIN_MS,
};
pub use send::{send, SendArgs};
pub use wait::{wait, WaitArgs};
