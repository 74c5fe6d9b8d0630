//! `initialize` and `environment/info`.
//!
//! `initialize` opens a session (or resumes a detached one with `resumeSessionId`) and answers
//! with its id and the same [`EnvironmentInfo`] `environment/info` returns. Codex adds many
//! codex-specific fields to that object; uexec sends the portable ones, and a client ignores
//! what it does not know.

use serde::{Deserialize, Serialize};

/// Params of `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub client_name: String,
    /// Re-attach to a session whose connection dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_session_id: Option<String>,
}

/// Result of `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub session_id: String,
    /// Absent from old servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_info: Option<EnvironmentInfo>,
}

/// The server's execution environment (result of `environment/info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentInfo {
    pub shell: ShellInfo,
    /// The server's working directory, as a `file://` URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The user's home directory, as a `file://` URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_home_dir: Option<String>,
    /// `linux`, `macos`, ... (Rust's `std::env::consts::OS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_os: Option<String>,
    /// The temporary directory, as a `file://` URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_dir: Option<String>,
}

/// The user's shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellInfo {
    /// `bash`, `zsh`, `sh`, ...
    pub name: String,
    /// Absolute path of the shell's executable.
    pub path: String,
}
