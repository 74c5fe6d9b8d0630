//! `uexec daemon`'s flags, converted into [`uexec_mcp::daemon::DaemonOptions`].

use std::path::PathBuf;

use uexec_mcp::daemon::{DaemonOptions, DEFAULT_IDLE_TIMEOUT_S};

use super::limits::LimitArgs;
use super::TranscriptArgs;

/// Arguments of `uexec daemon`.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonArgs {
    /// The socket to listen on (default: $XDG_RUNTIME_DIR/uexec/daemon.sock, else
    /// /run/user/<uid>/uexec/daemon.sock when logind made /run/user/<uid>, else
    /// <temp dir>/uexec-<uid>/daemon.sock). Its directory must be this user's, mode 0700.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Exit after this many seconds with no running session and no client (a session that
    /// ended keeps no daemon alive); 0 never exits.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_IDLE_TIMEOUT_S)]
    pub idle_timeout: u64,
    /// Stop the running daemon (SIGTERM: its sessions are killed) and wait for it to go.
    #[arg(long)]
    pub stop: bool,
    /// Say whether a daemon runs, without starting one: its pid, version and build, uptime
    /// (seconds), socket, log file and the live sessions of each owner. Exit 0 when one
    /// runs, 3 when none does, 125 when it cannot be asked.
    #[arg(long, conflicts_with = "stop")]
    pub status: bool,
    /// With --status: one JSON object instead of text.
    #[arg(long, requires = "status")]
    pub json: bool,
    #[command(flatten)]
    pub transcripts: TranscriptArgs,
    #[command(flatten, next_help_heading = "Limits")]
    pub limits: LimitArgs,
    /// Judge every client's commands by these rules (repeatable; Codex `.rules` or Claude
    /// Code settings JSON, as `uexec mcp --rules`). A client's own --rules add to them: the
    /// strictest decision wins. Read once, at start: a file that does not parse stops it,
    /// naming the file, line and column.
    #[arg(help_heading = "Rules", long, value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// The decision for a command these rules do not match: allow (default), prompt or
    /// forbidden.
    #[arg(help_heading = "Rules", long, value_name = "DECISION", value_parser = |s: &str| s.parse::<uexec_core::policy::rules::Decision>(), requires = "rules")]
    pub unmatched: Option<uexec_core::policy::rules::Decision>,
    /// The most sessions a person runs at once (1 or more): past it `uexec run` is refused,
    /// saying so; a person's running sessions are never pruned (an agent's store keeps
    /// Codex's 64, pruning the least recently used).
    #[arg(long, value_name = "N", default_value_t = uexec_mcp::daemon::DEFAULT_PERSON_SESSIONS, value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..), |n| n as usize))]
    pub person_sessions: usize,
}

impl From<DaemonArgs> for DaemonOptions {
    fn from(args: DaemonArgs) -> Self {
        Self {
            // The engine hands the sandbox over (`engine::confinement`).
            confinement: None,
            socket: args.socket,
            idle_timeout: args.idle_timeout,
            stop: args.stop,
            transcripts: args.transcripts.into(),
            // The engine hands its `--log-file` over.
            log_file: None,
            limits: args.limits.into(),
            rules: args.rules,
            unmatched: args.unmatched,
            person_sessions: args.person_sessions,
        }
    }
}
