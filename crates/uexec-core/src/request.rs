//! What callers ask of a store, and what it tells them about its sessions.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::output::until::Until;
use crate::output::HygieneRequest;

/// Arguments of `exec_command` (SPEC §2). `None` means "the default".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRequest {
    /// Shell command; required, non-empty.
    pub cmd: String,
    /// Working directory; relative paths join the store's cwd; `""` means absent.
    pub workdir: Option<String>,
    /// Shell binary; default `$SHELL`, else `/bin/bash`, else `/bin/sh`.
    pub shell: Option<String>,
    /// `-lc` (default) or `-c`.
    pub login: Option<bool>,
    /// A PTY instead of pipes (default false).
    pub tty: Option<bool>,
    /// Observation window; clamped to 250..=30000 ms.
    pub yield_time_ms: Option<i64>,
    /// Token budget of the snapshot body; negative is an error.
    pub max_output_tokens: Option<i64>,
    /// Id of the call in the face's terms; one is made up when absent.
    pub call_id: Option<String>,
    /// Run in this named environment (see `SessionStore::with_environments`) instead of
    /// the default backend.
    pub environment_id: Option<String>,
    /// End the window early when this holds (see [`crate::output::until`]).
    pub until: Option<Until>,
    /// Hard completion timeout: SIGTERM to the group at the deadline, SIGKILL after
    /// [`crate::limits::TIMEOUT_KILL_GRACE_MS`]; reported as exit code
    /// [`crate::limits::TIMEOUT_EXIT_CODE`].
    pub timeout_ms: Option<i64>,
    /// Pipe mode: stdin is a pipe that `write_stdin` writes and `eof` closes, instead of
    /// `/dev/null`.
    pub pipe_stdin: bool,
    /// Pipe mode: stdout and stderr share one pipe, as on a terminal, so their lines keep the
    /// program's order (a local process only; a remote one keeps its two streams).
    pub one_stream: bool,
    /// Output hygiene for this call and the session's later calls (default: the store's).
    pub hygiene: HygieneRequest,
    /// Sandbox profile (default: the store's; see [`crate::policy`]).
    pub sandbox: Option<crate::policy::Profile>,
    /// Network policy (default: the store's).
    pub network: Option<crate::policy::Network>,
    /// Limits of the session's processes together (`memory_max`, `pids_max`; default: the
    /// store's, which these may only lower).
    pub limits: crate::policy::Limits,
    /// A name people may use instead of the id ([`check_session_name`]; unique among the
    /// store's running sessions).
    pub name: Option<String>,
}

/// Most characters of a session's name.
pub const MAX_SESSION_NAME_CHARS: usize = 32;

/// A session name: 1 to [`MAX_SESSION_NAME_CHARS`] characters of `A-Z a-z 0-9 . _ -`, not
/// starting with `-` (it would read as a flag) and not all digits (it would read as an id).
pub fn check_session_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().count() > MAX_SESSION_NAME_CHARS {
        return Err(format!(
            "{name:?}: a name has 1 to {MAX_SESSION_NAME_CHARS} characters"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b))
    {
        return Err(format!(
            "{name:?}: a name has only letters, digits, '.', '_' and '-'"
        ));
    }
    if name.starts_with('-') {
        return Err(format!("{name:?}: a name does not start with '-'"));
    }
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{name:?}: a name is not all digits (that is a session id)"
        ));
    }
    Ok(())
}

/// Arguments of `write_stdin` (SPEC §3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteRequest {
    pub session_id: i32,
    /// Bytes to write; empty polls.
    pub chars: String,
    /// Observation window; an empty poll clamps to 5000..=300000 ms, a write to 250..=30000.
    pub yield_time_ms: Option<i64>,
    pub max_output_tokens: Option<i64>,
    /// End the window early when this holds (see [`crate::output::until`]).
    pub until: Option<Until>,
    /// Close the session's piped stdin after writing `chars`.
    pub eof: bool,
    pub hygiene: HygieneRequest,
}

/// Arguments of `wait`: several sessions, one window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitRequest {
    pub session_ids: Vec<i32>,
    /// Return when every session (not the first) exits or meets `until`.
    pub all: bool,
    /// Applies to each session; without it, only exits end the wait early.
    pub until: Option<Until>,
    /// The window; default 30 s, clamped to 250..=300000 ms.
    pub yield_time_ms: Option<i64>,
    pub max_output_tokens: Option<i64>,
}

/// Arguments of `read_output`: a page of a session's transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOutputRequest {
    /// The session (live, or among the last ones gone); or give `transcript`.
    pub session_id: Option<i32>,
    /// A transcript directory a result named (for sessions whose id was never seen): one
    /// of this store's sessions only.
    pub transcript: Option<PathBuf>,
    /// Session offset to start at (default: the first byte kept).
    pub offset: Option<i64>,
    /// Most bytes to return (default 16 KiB, at most 256 KiB).
    pub limit: Option<i64>,
    /// Only lines matching this regex (scanning at most 64 MiB from `offset`).
    pub grep: Option<String>,
    /// Only the last N lines (1..=10000); not with `offset` or `grep`.
    pub tail_lines: Option<i64>,
}

/// A page of a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPage {
    pub session_id: Option<i32>,
    pub transcript: PathBuf,
    /// Session offset of the first byte read.
    pub offset: u64,
    /// Where the next page starts.
    pub next_offset: u64,
    /// Bytes in the transcript: what the session printed so far, unless `stop` says the
    /// transcript stopped there.
    pub total: u64,
    /// Bytes before this offset rotated away.
    pub first_kept: u64,
    /// Where and why the transcript stopped, if it did: bytes from there on are lost.
    pub stop: Option<crate::transcript::TranscriptStop>,
    /// The text (lossy UTF-8); with `grep`, matching lines prefixed `OFFSET:`.
    pub text: String,
    /// `grep`: how many lines matched.
    pub matches: Option<u64>,
}

/// A session as `list_sessions` shows it (a live one, or an ended one for people).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub session_id: i32,
    /// The command as given (`cmd`).
    pub command: String,
    /// The name it was given, if any.
    pub name: Option<String>,
    pub cwd: PathBuf,
    pub tty: bool,
    pub running_time: Duration,
    /// Whether the process has exited (its exit not yet reported to a caller).
    pub exited: bool,
    /// OS pid, for people (never an address).
    pub pid: Option<u32>,
    /// The last line of output (escape sequences removed), for people.
    pub last_line: String,
    /// Where its transcript is, if it has one.
    pub transcript: Option<PathBuf>,
    /// When it started (wall clock).
    pub started: SystemTime,
    /// How and when it ended, once it has.
    pub end: Option<SessionEnd>,
    /// Its exit was reported (to its owner, or it was terminated or pruned): it is gone from
    /// the store, and listed only among the ended ([`crate::SessionStore::list_ended`]).
    pub reported: bool,
    /// What its processes used (so far, or in all once ended), where its backend counts:
    /// a session without a cgroup has none.
    pub usage: Option<crate::usage::Usage>,
    /// Frozen by a pause ([`crate::SessionStore::pause`]) until resumed.
    pub paused: bool,
    /// Kept by a person ([`crate::SessionStore::keep`]): it outlives its owner's clients.
    pub kept: bool,
    /// Bytes it printed so far (all of them, read or not).
    pub output_bytes: u64,
    /// What it waits for from a person, while it runs (`None`: nothing known).
    pub waiting: Option<Waiting>,
}

/// What a running session waits for from a person, for `uexec ls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// A terminal reading with echo off: a password only a person types.
    Password,
    /// Quiet, reading its input: a question, a prompt.
    Input,
    /// A command held for a person's yes (set by the approval stage, not by a session).
    Approval,
}

impl Waiting {
    /// The word in `list_sessions`' `waiting` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Password => "password",
            Self::Input => "input",
            Self::Approval => "approval",
        }
    }
}

/// Why uexec itself ended a session (it did not end on its own, nor by its owner's call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The store was full and pruned it (SPEC §6).
    Pruned,
    /// Its owner's clients went away (the daemon's linger ran out).
    ClientGone,
    /// Someone else than its owner ended it, as its exit notice says: e.g. `a person (uexec
    /// kill)`.
    By(String),
}

impl Stopped {
    /// A word for `list_sessions`' `stopped` field.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Pruned => "pruned",
            Self::ClientGone => "client_gone",
            Self::By(_) => "by",
        }
    }
}

/// How a session ended, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd {
    /// When the process was first known gone (wall clock).
    pub at: SystemTime,
    /// Its exit code (`128 + N` for signal N), when known.
    pub exit_code: Option<i32>,
    /// Why it failed, when a monitor or its backend failed it.
    pub failure: Option<String>,
    /// Why uexec ended it, when uexec did.
    pub stopped: Option<Stopped>,
}
