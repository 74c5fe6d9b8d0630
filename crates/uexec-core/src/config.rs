//! How a store starts commands.

use std::path::PathBuf;

use crate::env::EnvPolicy;
use crate::limits::{MAX_SESSIONS, OUTPUT_TOKEN_POLICY_MAX};
use crate::output::Hygiene;
use crate::shell_snapshot::ShellSnapshots;

/// What a store does with a new session when it holds `max_sessions` (SPEC §6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WhenFull {
    /// Prune one ([`crate::prune::session_to_prune`]), running or not: Codex's limit for an
    /// agent's store. `ls -a` says `pruned`.
    #[default]
    Prune,
    /// Never end a running session to make room: an exited one still gives way, and with
    /// `max_sessions` running a new one is refused ([`crate::ExecError::Full`]), as a
    /// person's batch must not lose its work.
    Refuse,
}

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
    /// What a new session does when `max_sessions` are stored: prune one (Codex's way, an
    /// agent's store), or, for a person's, never end a running one and refuse instead.
    pub when_full: WhenFull,
    /// Output hygiene when a call does not say (both off: Codex's output, byte for byte).
    pub hygiene: Hygiene,
    /// Keep every session's output on disk (`None`: no transcripts).
    pub transcripts: Option<crate::transcript::TranscriptConfig>,
    /// Let `write_stdin` type into a password prompt (a PTY reading with echo off). Off: the
    /// model is told to ask the person instead; Ctrl-C and Ctrl-D still go through.
    pub allow_secret_input: bool,
    /// The environment commands start from, before the policy (`None`: this process's).
    /// A daemon serves each client with the client's own.
    pub base_env: Option<crate::env::Environment>,
    /// Sandbox policy and the confinement that applies it (see [`crate::policy`]).
    pub sandbox: crate::confine::SandboxConfig,
    /// Limits of each local session's cgroup: a ceiling a call's `limits` may only lower
    /// ([`crate::policy::narrow_limits`]).
    pub limits: crate::policy::Limits,
    /// Login commands from a shell snapshot instead of a profile run each time; `None` =
    /// off (every `login: true` command is a real login shell).
    pub shell_snapshots: Option<ShellSnapshots>,
    /// A terminal emulator kept per PTY session for people who attach (`None`: none kept).
    pub screens: Option<crate::session::keeper::ScreenFactory>,
    /// The environments a caller's `environment_id` names, when they are not the store's
    /// (`None`: the store's). A daemon's owner has one store, and each connection to it
    /// brings its own environments, as it brings its own directory and settings.
    pub environments: Option<crate::environments::Environments>,
    /// Where spawns, exits and output are counted for a person's tools (`None`: nowhere).
    pub metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
    /// The command rules every script is judged by before it runs (`None`: none, every
    /// script runs, as before rules existed).
    pub rules: Option<std::sync::Arc<dyn crate::policy::rules::CommandRules>>,
    /// Where the front door's decisions are written down (`None`: only counted in
    /// `metrics`); a face sets one per owner.
    pub decisions: Option<std::sync::Arc<dyn crate::policy::decisions::DecisionLog>>,
    /// Where `rules` judge: the script's text only, or every exec too (issue 40).
    pub rules_at: crate::policy::exec_rules::RulesAt,
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
            when_full: WhenFull::default(),
            hygiene: Hygiene::default(),
            transcripts: None,
            base_env: None,
            allow_secret_input: false,
            sandbox: crate::confine::SandboxConfig::default(),
            limits: crate::policy::Limits::default(),
            shell_snapshots: Some(ShellSnapshots::default()),
            screens: None,
            environments: None,
            metrics: None,
            rules: None,
            decisions: None,
            rules_at: crate::policy::exec_rules::RulesAt::Text,
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
