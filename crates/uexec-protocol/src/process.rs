//! The `process/*` requests: start, read (a long poll), write, signal, terminate.
//!
//! Optionality follows Codex 0.171 exactly, because a client of either server sends the same
//! JSON: `processId`, `argv`, `cwd`, `env` and `tty` are required in `process/start`;
//! `pipeStdin`, `arg0` and `envPolicy` are not. Unknown fields are ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bounded::{bounded_map, bounded_vec};
use crate::chunk::ByteChunk;

/// Params of `process/start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartParams {
    /// Client-chosen key of the process within its session (not an OS pid).
    pub process_id: String,
    #[serde(deserialize_with = "bounded_vec")]
    pub argv: Vec<String>,
    /// Working directory as a `file://` URI.
    pub cwd: String,
    /// Without `envPolicy`, the exact environment of the process; with it, an overlay.
    #[serde(deserialize_with = "bounded_map")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_policy: Option<EnvPolicy>,
    pub tty: bool,
    /// Pipe mode: keep stdin open as a pipe for `process/write` (else `/dev/null`).
    #[serde(default)]
    pub pipe_stdin: bool,
    /// `argv[0]` as the process sees it.
    #[serde(default)]
    pub arg0: Option<String>,
}

/// How to build an environment from the server's own (Codex's `shell_environment_policy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvPolicy {
    pub inherit: EnvPolicyInherit,
    /// Keep variables whose names contain `KEY`, `SECRET` or `TOKEN`.
    #[serde(default)]
    pub ignore_default_excludes: bool,
    /// Case-insensitive wildcard patterns (`*`, `?`) of names to drop.
    #[serde(default, deserialize_with = "bounded_vec")]
    pub exclude: Vec<String>,
    /// Variables to set.
    #[serde(default, deserialize_with = "bounded_map")]
    pub set: BTreeMap<String, String>,
    /// When non-empty, only names matching one of these patterns survive.
    #[serde(default, deserialize_with = "bounded_vec")]
    pub include_only: Vec<String>,
}

/// Which of the server's variables an [`EnvPolicy`] starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EnvPolicyInherit {
    All,
    /// `HOME`, `LOGNAME`, `PATH`, `SHELL`, `USER`, `USERNAME`, `TMPDIR`, `TEMP`, `TMP`.
    Core,
    None,
}

/// Result of `process/start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartResult {
    pub process_id: String,
    /// Always `"none"`: uexec runs no sandbox of its own.
    #[serde(default = "no_sandbox")]
    pub sandbox_type: String,
}

fn no_sandbox() -> String {
    "none".to_string()
}

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OutputStream {
    Stdout,
    Stderr,
    /// The merged stream of a TTY process.
    Pty,
}

impl OutputStream {
    /// The name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::Pty => "pty",
        }
    }
}

/// Params of `process/read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadParams {
    pub process_id: String,
    /// Only chunks with a greater seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
    /// Budget of chunk bytes; at least one chunk is returned regardless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Long poll: wait up to this long for news when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// One retained chunk of output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessChunk {
    pub seq: u64,
    pub stream: OutputStream,
    pub chunk: ByteChunk,
}

/// Result of `process/read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResult {
    pub chunks: Vec<ProcessChunk>,
    /// Without `maxBytes`, the process's next seq; with it, the last returned chunk's seq + 1
    /// (the process's next seq when no chunk is returned).
    pub next_seq: u64,
    pub exited: bool,
    pub exit_code: Option<i32>,
    pub closed: bool,
    pub failure: Option<String>,
    #[serde(default)]
    pub sandbox_denied: bool,
}

/// Params of `process/write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteParams {
    pub process_id: String,
    pub chunk: ByteChunk,
    /// Client-chosen, non-empty; a repeated id is not written again.
    pub write_id: String,
}

/// What became of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WriteStatus {
    Accepted,
    UnknownProcess,
    StdinClosed,
    /// The process is still being spawned.
    Starting,
}

/// Result of `process/write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteResult {
    pub status: WriteStatus,
}

/// Signals a client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SignalName {
    /// SIGINT to the process group.
    Interrupt,
    /// SIGTERM to the process group (uexec only; Codex's server knows `interrupt` alone).
    Terminate,
}

/// Params of `process/signal`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalParams {
    pub process_id: String,
    pub signal: SignalName,
}

/// Result of `process/signal`: `{}`, also for an unknown or exited process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalResult {}

/// Params of `process/terminate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminateParams {
    pub process_id: String,
}

/// Result of `process/terminate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminateResult {
    /// Whether the process was running (and has now been killed).
    pub running: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn start_params_require_what_codex_requires() {
        let full = json!({"processId": "p", "argv": ["true"], "cwd": "file:///tmp", "env": {},
                          "tty": false});
        let p: StartParams = serde_json::from_value(full.clone()).unwrap();
        assert!(!p.pipe_stdin && p.arg0.is_none() && p.env_policy.is_none());
        for key in ["processId", "argv", "cwd", "env", "tty"] {
            let mut v = full.clone();
            v.as_object_mut().unwrap().remove(key);
            let err = serde_json::from_value::<StartParams>(v).unwrap_err();
            assert!(
                err.to_string().contains(&format!("missing field `{key}`")),
                "{err}"
            );
        }
    }

    #[test]
    fn read_result_uses_camel_case() {
        let r = ReadResult {
            chunks: vec![],
            next_seq: 1,
            exited: false,
            exit_code: None,
            closed: false,
            failure: None,
            sandbox_denied: false,
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"chunks": [], "nextSeq": 1, "exited": false, "exitCode": null,
                   "closed": false, "failure": null, "sandboxDenied": false})
        );
    }

    #[test]
    fn unknown_signal_names_are_refused() {
        let err =
            serde_json::from_value::<SignalParams>(json!({"processId": "p", "signal": "kill"}))
                .unwrap_err();
        assert!(err.to_string().contains("unknown variant `kill`"), "{err}");
    }
}
