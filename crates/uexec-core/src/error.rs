//! Errors a caller can act on (SPEC §8). Faces prefix them with the tool's name
//! (`write_stdin failed: ...`), and add what only they know: the engine's words name no
//! tool and no flag, so a face says which of its own a person or a model would use (the MCP
//! face's `tools::render::error_text`).

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// An argument is wrong; nothing was started or changed.
    #[error("invalid arguments: {field}: {reason}")]
    InvalidArgument { field: &'static str, reason: String },
    /// No live session has this id (never issued, or its exit was already reported).
    #[error("Unknown process id {0}")]
    UnknownProcess(i32),
    /// A non-empty write to a session whose stdin is not a terminal.
    #[error("stdin is closed for this session")]
    StdinClosed { session_id: i32 },
    /// A person holds the session's input (attached to type): a caller's write is refused
    /// until they let go.
    #[error(
        "writing to session {session_id} failed: a person is typing in this session: poll it (empty chars) to see what happens, and write again once they detach"
    )]
    Leased { session_id: i32 },
    /// The session waits for a secret (a password prompt, echo off), which this caller may
    /// not type; Ctrl-C still aborts the prompt.
    #[error(
        "writing to session {session_id} failed: the session waits for a secret (a password prompt, echo off): do not type secrets; ask the person to answer it. Ctrl-C (\"\\u0003\") aborts the prompt"
    )]
    SecretPrompt { session_id: i32 },
    /// The backend could not start the process.
    #[error("Failed to create process: {0}")]
    Spawn(String),
    /// The process was failed by a policy monitor or by its backend.
    #[error("Process failed: {message}")]
    ProcessFailed { session_id: i32, message: String },
    /// Writing to the process failed for a reason other than a closed stdin.
    #[error("writing to session {session_id} failed: {message}")]
    Write { session_id: i32, message: String },
    /// A call asked for a wider sandbox or network than the server's policy; nothing ran.
    #[error(transparent)]
    Widening(#[from] crate::policy::Widening),
    /// A call's limit (`field`, e.g. `limits.memory_max`) cannot be applied: this machine
    /// cannot (`machine`), or this server did not enable its controller; nothing ran.
    #[error("invalid arguments: {field}: {reason}")]
    Limit {
        field: &'static str,
        reason: String,
        machine: bool,
    },
    /// The store was shut down (its connection or daemon is going away).
    #[error("the session store is shut down")]
    ShutDown,
    /// The backend could not deliver a signal.
    #[error("signalling session {session_id} failed: {message}")]
    Signal { session_id: i32, message: String },
    /// The backend could not freeze (or thaw) the session.
    #[error("{} session {session_id} failed: {message}", if *frozen { "pausing" } else { "resuming" })]
    Pause {
        session_id: i32,
        frozen: bool,
        message: String,
    },
    /// The command rules refused the script, or held it for a person who said no or could
    /// not be asked (`explanation`: the rule, its justification, the part of the script);
    /// nothing of it ran.
    #[error("refused: {explanation}. Nothing of the command ran")]
    Refused {
        decision: crate::policy::rules::Decision,
        explanation: String,
    },
    /// Removing a session that still runs, without forcing it.
    #[error("session {session_id} is still running")]
    StillRunning { session_id: i32 },
    /// The store holds `limit` running sessions and ends none of them to make room
    /// ([`crate::config::WhenFull::Refuse`]): nothing was started.
    #[error("{running} sessions are running, the most this store runs at once ({limit}): none is ended to make room; end one, or wait for one to end. Nothing was started")]
    Full { running: usize, limit: usize },
}

impl ExecError {
    /// An argument is wrong: `field` names it as the call does.
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field,
            reason: reason.into(),
        }
    }
}
