//! How a store starts commands.

use std::path::PathBuf;

use crate::env::EnvPolicy;
use crate::limits::{MAX_SESSIONS, OUTPUT_TOKEN_POLICY_MAX};
use crate::shell_snapshot::ShellSnapshots;

/// How a store starts commands.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The server's cwd: the default workdir, and the base of relative ones.
    pub cwd: PathBuf,
    /// Shell when a call names none; `None` = `$SHELL`, else `/bin/bash`, else `/bin/sh`.
    pub default_shell: Option<String>,
    pub env_policy: EnvPolicy,
    /// Sequential ids from 1000 (`UEXEC_DETERMINISTIC_IDS=1`) instead of random ones.
    pub deterministic_ids: bool,
    /// Cap on `max_output_tokens`.
    pub output_token_policy_max: u64,
    pub max_sessions: usize,
    /// Login commands from a shell snapshot instead of a profile run each time; `None` =
    /// off (every `login: true` command is a real login shell).
    pub shell_snapshots: Option<ShellSnapshots>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            default_shell: None,
            env_policy: EnvPolicy::default(),
            deterministic_ids: false,
            output_token_policy_max: OUTPUT_TOKEN_POLICY_MAX,
            max_sessions: MAX_SESSIONS,
            shell_snapshots: Some(ShellSnapshots::default()),
        }
    }
}

impl StoreConfig {
    /// Defaults, with `UEXEC_DETERMINISTIC_IDS=1` honoured.
    pub fn from_env() -> Self {
        Self {
            deterministic_ids: std::env::var("UEXEC_DETERMINISTIC_IDS").is_ok_and(|v| v == "1"),
            ..Self::default()
        }
    }
}
