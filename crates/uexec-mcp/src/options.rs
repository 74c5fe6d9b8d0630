//! What `uexec mcp` and `uexec daemon` start with, as plain values: the binary parses its
//! flags (clap lives there) and converts them into these. Each field names the flag it comes
//! from; the flags' help says what they do.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use uexec_core::confine::Confinement;
use uexec_core::policy::{AllowEntry, Fallback, Limits, Network, OnDenial, Profile};
use uexec_core::transcript::TranscriptConfig;
use uexec_core::StoreConfig;
use uexec_net::{ListenerConfig, HEADER_READ_TIMEOUT_MS, MAX_CONNECTIONS};
use uexec_protocol::daemon::{EnvironmentSettings, Linger, SandboxSettings, Settings};

use crate::settings::limit_words;

use crate::settings;
use crate::McpError;

/// `uexec mcp` (in this process; `--daemon` is the binary's relay).
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// What confines sandboxed commands: the binary builds it (`uexec-sandbox`'s launcher)
    /// and hands it over; `None`: asking for a sandbox is an error.
    pub confinement: Option<Arc<dyn Confinement>>,
    /// `--http`: streamable HTTP on this address instead of stdio.
    pub http: Option<SocketAddr>,
    /// `--token` (and `UEXEC_TOKEN`): each is a client with sessions of its own.
    pub tokens: Vec<String>,
    /// `--token-file`: more tokens, one per file.
    pub token_files: Vec<PathBuf>,
    /// TLS and the connection limits of the HTTP listener.
    pub listener: ListenerConfig,
    /// `--allow-host`: Host headers accepted besides the loopback names.
    pub allow_hosts: Vec<String>,
    /// `--allow-origin`: web origins admitted (`scheme://host:port`, the port maybe `*`).
    pub allow_origins: Vec<String>,
    /// `--codex-tools-only`: exec_command and write_stdin alone.
    pub codex_tools_only: bool,
    /// uexec's own arguments and result lines (the default); off with `--codex-compat`:
    /// exactly Codex's tools.
    pub extended: bool,
    /// `--structured` (always with `--codex-compat`): results carry their facts as JSON
    /// (`structuredContent`), and tools an outputSchema, beside the text.
    pub structured: bool,
    /// `--no-tasks`: no call becomes an MCP task (for clients that mishandle them).
    pub no_tasks: bool,
    /// `--approval-timeout`: how long a command the rules hold waits for a person.
    pub approval_timeout: std::time::Duration,
    /// `--rules`: command rules files (Codex `.rules`, Claude Code settings JSON).
    pub rules: Vec<PathBuf>,
    /// `--unmatched`: the decision for a command no rule matches (default allow).
    pub unmatched: Option<uexec_core::policy::rules::Decision>,
    /// `--rules-at`: where the rules judge (the script's text, or every exec too).
    pub rules_at: Option<uexec_core::policy::exec_rules::RulesAt>,
    /// `--hooks`: Claude Code hooks files (PreToolUse, PostToolUse around exec_command).
    pub hooks: Vec<PathBuf>,
    /// `--strip-ansi`: the calls' default.
    pub strip_ansi: bool,
    /// `--collapse-cr`: the calls' default.
    pub collapse_cr: bool,
    /// `--allow-secret-input`: write_stdin may type into password prompts.
    pub allow_secret_input: bool,
    /// Where transcripts go.
    pub transcripts: TranscriptOptions,
    /// `--shell`: the commands' default shell.
    pub shell: Option<String>,
    /// `--no-shell-snapshot`: every login shell reads its profile.
    pub no_shell_snapshot: bool,
    /// `--max-output-tokens`: the cap on max_output_tokens.
    pub max_output_tokens: Option<u64>,
    /// `--env-keep`: secret-looking names passed on anyway.
    pub env_keep: Vec<String>,
    /// `--env-set`: NAME=VALUE for every command.
    pub env_set: Vec<(String, String)>,
    /// `--env-drop`: names never passed on.
    pub env_drop: Vec<String>,
    /// `--environment NAME=URL`: exec servers to run commands on.
    pub environments: Vec<(String, String)>,
    /// `--environments FILE`: Codex's environments file, reloaded when it changes.
    pub environments_file: Option<PathBuf>,
    /// `--remote-token` (and `UEXEC_REMOTE_TOKEN`): the environments' default token.
    pub remote_token: Option<String>,
    /// `--remote-token-file`: the same from a file (it wins).
    pub remote_token_file: Option<PathBuf>,
    /// `--environment-token-file NAME=PATH`: one environment's token.
    pub environment_token_files: Vec<(String, String)>,
    /// `--remote-ca`: certificates trusted for wss:// besides the system's.
    pub remote_ca: Option<PathBuf>,
    /// `--sandbox`: the profile ceiling.
    pub sandbox: Option<Profile>,
    /// `--network`: the network ceiling.
    pub network: Option<Network>,
    /// `--network-allow`: the hosts of an allowlist ceiling.
    pub network_allow: Vec<AllowEntry>,
    /// `--writable-root`: writable under workspace-write (existing, absolute directories).
    pub writable_roots: Vec<PathBuf>,
    /// `--sandbox-fallback`: what a missing sandbox layer does.
    pub sandbox_fallback: Option<Fallback>,
    /// `--network-denial`: what a request off the allowlist does besides being refused.
    pub network_denial: Option<OnDenial>,
    /// `--memory-max`, `--pids-max`, `--cpu-max`: the limits of each session's cgroup.
    pub limits: Limits,
    /// `--linger`: with the daemon, how long this owner's sessions outlive its last
    /// connection (in-process, they end with the process).
    pub linger: Linger,
}

impl Default for McpOptions {
    /// `uexec mcp` with no flag: stdio, uexec's arguments, results as text, no sandbox.
    fn default() -> Self {
        Self {
            confinement: None,
            http: None,
            tokens: Vec::new(),
            token_files: Vec::new(),
            listener: ListenerConfig {
                tls_cert: None,
                tls_key: None,
                insecure_plaintext: false,
                max_connections: MAX_CONNECTIONS,
                header_read_timeout: std::time::Duration::from_millis(HEADER_READ_TIMEOUT_MS),
            },
            allow_hosts: Vec::new(),
            allow_origins: Vec::new(),
            codex_tools_only: false,
            extended: true,
            structured: false,
            no_tasks: false,
            approval_timeout: crate::approve::DEFAULT_APPROVAL_TIMEOUT,
            rules: Vec::new(),
            unmatched: None,
            rules_at: None,
            hooks: Vec::new(),
            strip_ansi: false,
            collapse_cr: false,
            allow_secret_input: false,
            transcripts: TranscriptOptions::default(),
            shell: None,
            no_shell_snapshot: false,
            max_output_tokens: None,
            env_keep: Vec::new(),
            env_set: Vec::new(),
            env_drop: Vec::new(),
            environments: Vec::new(),
            environments_file: None,
            remote_token: None,
            remote_token_file: None,
            environment_token_files: Vec::new(),
            remote_ca: None,
            sandbox: None,
            network: None,
            network_allow: Vec::new(),
            writable_roots: Vec::new(),
            sandbox_fallback: None,
            network_denial: None,
            limits: Limits::default(),
            linger: Linger::default(),
        }
    }
}

impl McpOptions {
    /// The settings a store of this server gets (sent to the daemon with --daemon).
    pub fn settings(&self) -> Settings {
        Settings {
            shell: self.shell.clone(),
            max_output_tokens: self.max_output_tokens,
            env_keep: self.env_keep.clone(),
            env_set: self.env_set.clone(),
            env_drop: self.env_drop.clone(),
            strip_ansi: self.strip_ansi,
            collapse_cr: self.collapse_cr,
            deterministic_ids: std::env::var("UEXEC_DETERMINISTIC_IDS").is_ok_and(|v| v == "1"),
            extended: self.extended,
            codex_tools_only: self.codex_tools_only,
            structured: self.structured,
            no_tasks: self.no_tasks,
            approval_timeout_ms: u64::try_from(self.approval_timeout.as_millis()).ok(),
            rules: self.rules.clone(),
            unmatched: self.unmatched.map(|d| d.as_str().to_owned()),
            rules_at: self.rules_at.map(|r| r.as_str().to_owned()),
            hooks: self.hooks.clone(),
            allow_secret_input: self.allow_secret_input,
            sandbox: SandboxSettings {
                profile: self.sandbox.map(|p| p.as_str().to_owned()),
                network: self.network.as_ref().map(|n| n.as_str().to_owned()),
                network_allow: self
                    .network_allow
                    .iter()
                    .map(uexec_core::policy::show_allow_entry)
                    .collect(),
                writable_roots: self.writable_roots.clone(),
                fallback: self.sandbox_fallback.map(|f| f.as_str().to_owned()),
                on_denial: self.network_denial.map(|d| d.as_str().to_owned()),
            },
            no_shell_snapshot: self.no_shell_snapshot,
            environments: EnvironmentSettings::default(),
            limits: limit_words(&self.limits),
            linger: self.linger,
        }
    }

    /// The settings of a daemon client's hello: [`Self::settings`] and the environments,
    /// read and checked here, before any daemon is asked (an error names the flag).
    pub fn hello_settings(&self) -> Result<Settings, McpError> {
        // A bad hooks file stops this client at its start, not at the daemon's hello.
        crate::hooks::Hooks::load(&self.hooks).map_err(McpError::Settings)?;
        Ok(Settings {
            environments: crate::environments::start::read(self)?,
            ..self.settings()
        })
    }

    /// The configuration of this server's stores; an error names the flag at fault.
    pub(crate) fn store_config(&self) -> Result<StoreConfig, String> {
        let mut config = StoreConfig::from_env();
        config.sandbox.confinement = self.confinement.clone();
        settings::apply(&self.settings(), &mut config)?;
        settings::check_limits(&config.limits, "")?;
        config.transcripts = self.transcripts.config();
        config.decisions = crate::audit::AuditFile::of_this_user()
            .map(|file| file.for_owner(format!("mcp:{} (in-process)", config.cwd.display())));
        Ok(config)
    }
}

/// Where session transcripts go (`uexec mcp`, `uexec daemon`).
#[derive(Debug, Clone, Default)]
pub struct TranscriptOptions {
    /// `--transcripts-dir`: the root (default: uexec's state directory).
    pub transcripts_dir: Option<PathBuf>,
    /// `--no-transcripts`: none at all.
    pub no_transcripts: bool,
    /// `--transcript-max-bytes`: one session's cap.
    pub transcript_max_bytes: Option<u64>,
    /// `--transcripts-total-max-bytes`: every session's together.
    pub transcripts_total_max_bytes: Option<u64>,
}

/// An explicit transcripts directory that cannot hold transcripts.
#[derive(Debug, thiserror::Error)]
#[error("--transcripts-dir {}: {error}", dir.display())]
pub struct TranscriptsDirError {
    pub dir: PathBuf,
    pub error: std::io::Error,
}

impl TranscriptOptions {
    /// Where transcripts go, unless they are off or no directory can be found or made.
    pub fn config(&self) -> Option<TranscriptConfig> {
        if self.no_transcripts {
            return None;
        }
        let Some(root) = self
            .transcripts_dir
            .clone()
            .or_else(TranscriptConfig::default_root)
        else {
            tracing::warn!(
                "no transcripts: neither XDG_STATE_HOME nor HOME is set (use --transcripts-dir)"
            );
            return None;
        };
        if let Err(e) = uexec_core::transcript::prepare_root(&root) {
            tracing::warn!("no transcripts: {}: {e}", root.display());
            return None;
        }
        let mut config = TranscriptConfig::at(root);
        if let Some(max) = self.transcript_max_bytes {
            config.session_max_bytes = max;
        }
        if let Some(max) = self.transcripts_total_max_bytes {
            config.total_max_bytes = max;
        }
        Some(config)
    }

    /// Refuses an explicit directory that cannot hold transcripts (not ours, open to others).
    pub fn check(&self) -> Result<(), TranscriptsDirError> {
        if let Some(dir) = &self.transcripts_dir {
            uexec_core::transcript::prepare_root(dir).map_err(|error| TranscriptsDirError {
                dir: dir.clone(),
                error,
            })?;
        }
        Ok(())
    }
}
