//! What callers ask of a store, and what it tells them about its sessions.

use std::path::PathBuf;
use std::time::Duration;

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
}

/// A live session as `list_sessions` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub session_id: i32,
    /// The command as given (`cmd`).
    pub command: String,
    pub cwd: PathBuf,
    pub tty: bool,
    pub running_time: Duration,
    /// Whether the process has exited (its exit not yet reported to a caller).
    pub exited: bool,
    /// OS pid, for people (never an address).
    pub pid: Option<u32>,
}
