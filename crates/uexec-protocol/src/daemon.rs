//! The wire of uexec's per-user daemon (`uexec daemon`), spoken by its clients: `uexec mcp
//! --daemon`, the CLI verbs, `uexec attach` and the `uexec` front. Not the exec-server dialect:
//! a Unix socket of this user's, where
//! 1. the client says one JSON line, its [`Hello`]: who it is (the owner of its sessions), its
//!    working directory, its environment and the [`Settings`] of its commands;
//! 2. the daemon answers one line, a [`Reply`]: served, or refused and why;
//! 3. then the connection speaks MCP (newline-delimited JSON-RPC), or, for a hello with an
//!    [`AttachRequest`], carries a session's output down and [`AttachFrame`]s up, or, for a
//!    hello with a [`RunRequest`] (a person's foreground `uexec run`), carries [`RunFrame`]s
//!    down (the new session's id, every byte it prints, how it ended) and [`AttachFrame`]s up
//!    (its stdin, Ctrl-C, the terminal's size).
//!
//! Versioned: the protocol name carries a number, and the daemon also checks the client's
//! uexec version and build, so a client of another build gets a clear error instead of a
//! conversation in a dialect it does not speak. Which build a process is, and how the
//! settings become a store's configuration, is the daemon's and its clients' business
//! (`uexec_mcp::daemon`): this module is the types.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Name and version of the daemon protocol.
pub const PROTOCOL: &str = "uexec-daemon/1";
/// This build's version; client and daemon must match.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Longest hello accepted (an environment can be large, not this large).
pub const MAX_HELLO_BYTES: usize = 4 << 20;
/// The owner name of people (the CLI): they see every session.
pub const PERSON: &str = "@person";

/// What a client says first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: String,
    pub version: String,
    /// Which build of that version (the executable's device, inode, size and modification
    /// time): two builds of one version may still speak differently.
    pub build: String,
    /// Whose sessions: one owner lists, polls and kills only its own.
    pub owner: String,
    /// The client's working directory: the default workdir of its commands.
    pub cwd: PathBuf,
    /// The client's environment, base64 of the raw bytes (names and values need not be
    /// UTF-8): commands start from it, as they would in the client's own process. An
    /// agent's comes without its secret-looking variables (but those of
    /// `settings.env_keep`): its commands would not get them anyway. A person's (owner
    /// [`PERSON`], the CLI) comes whole: their own commands get their environment as it
    /// is. Either goes only to a daemon the client checked is its user's.
    pub env: Vec<(String, String)>,
    pub settings: Settings,
    /// Instead of MCP: join a person's terminal to a session (`uexec attach`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachRequest>,
    /// Instead of MCP: one line of the daemon's [`Status`] after the reply, whatever the
    /// client's build (`uexec daemon --status`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub status: bool,
    /// Instead of MCP: start a command and follow it to its end (`uexec run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunRequest>,
    /// Instead of MCP: the daemon's figures as Prometheus text after the reply, whatever
    /// the client's build (`uexec metrics`); the daemon then hangs up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metrics: bool,
}

/// What a daemon says of itself (`uexec daemon --status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Status {
    pub pid: u32,
    pub version: String,
    /// Its build, as a hello says one ([`Hello::build`]).
    pub build: String,
    pub uptime_seconds: u64,
    pub socket: PathBuf,
    /// Its log file; `None`: its stderr.
    pub log_file: Option<PathBuf>,
    /// The live sessions of each owner that has any, by owner name.
    pub sessions: BTreeMap<String, usize>,
    /// The MCP connections of each agent (every owner but `@person`) that has any, by
    /// owner name: an agent with none has gone, and its sessions end after its linger.
    /// (Absent from the status of a daemon older than this field.)
    #[serde(default)]
    pub clients: BTreeMap<String, usize>,
    /// Whether it keeps its sessions' transcripts (`uexec daemon --no-transcripts` keeps
    /// none), and where (`transcripts_dir`). Absent from the status of a daemon older than
    /// these fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcripts_kept: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcripts_dir: Option<PathBuf>,
}

/// A person's foreground `uexec run`: the command, as `exec_command`'s arguments (its window
/// and wait conditions aside: the run follows the command to its end), and the person's
/// terminal size, which a `tty` run's terminal takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub arguments: serde_json::Value,
    pub rows: u16,
    pub cols: u16,
    /// `uexec run -d`: the daemon sends `Started` and follows no further; the session runs
    /// on as the person's (its end stays for whoever polls or waits).
    #[serde(default)]
    pub detach: bool,
}

/// What the daemon sends a [`RunRequest`]'s client after its [`Reply`], one JSON line each:
/// `Started` first, then `Output` and `Skipped` in the order of the bytes, and `Ended` last
/// (unless the client left first, saying so with [`AttachFrame::Detach`]: the session then
/// runs on, as the person's; or went away without a word: the session is ended).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RunFrame {
    /// The session the command runs as.
    Started { session_id: i32 },
    /// Bytes it printed (base64), in order, stdout and stderr as one stream.
    Output(String),
    /// This many bytes were not sent: the client fell more than a buffer behind the output.
    /// The transcript, when kept, has them.
    Skipped { bytes: u64 },
    /// How it ended: its exit code (None when it has none), why uexec ended it (a hard
    /// timeout, in ms), or why it failed.
    Ended {
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timed_out_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
    },
}

/// `uexec attach`: which session, whether to type into it, and the person's terminal size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachRequest {
    pub session_id: i32,
    pub write: bool,
    pub rows: u16,
    pub cols: u16,
    /// Pass another owner's output as it is: clipboard writes, titles and device strings
    /// too (by default they are dropped, as tmux does).
    #[serde(default)]
    pub raw: bool,
}

/// What an attached client sends, one JSON line each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AttachFrame {
    /// Keys typed (base64 of the bytes).
    Input(String),
    /// The person's terminal changed size: rows, cols.
    Resize(u16, u16),
    /// `uexec run`: the end of its stdin (the session's stdin pipe is closed).
    Eof,
    /// `uexec run`: Ctrl-C (SIGINT to a pipe session's process group, `^C` to a terminal).
    Interrupt,
    /// `uexec run`: the person's `uexec` was told to stop (SIGTERM, SIGHUP, a second
    /// Ctrl-C): end the session.
    Terminate,
    /// `uexec run`: the person leaves the command running (Ctrl-\); the client hangs up
    /// next. A run's client that hangs up without it is gone (killed, its terminal
    /// closed), and its command ends.
    Detach,
}

/// The store settings a client brings (`uexec mcp` flags).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub shell: Option<String>,
    pub max_output_tokens: Option<u64>,
    pub env_keep: Vec<String>,
    pub env_set: Vec<(String, String)>,
    pub env_drop: Vec<String>,
    pub strip_ansi: bool,
    pub collapse_cr: bool,
    pub deterministic_ids: bool,
    pub extended: bool,
    pub codex_tools_only: bool,
    /// Results carry `structuredContent` (and tools an outputSchema) beside their text.
    #[serde(default)]
    pub structured: bool,
    /// `--no-tasks`: no call becomes an MCP task, whatever the client declares.
    #[serde(default)]
    pub no_tasks: bool,
    /// `--approval-timeout`: how long a command the rules hold waits for the person.
    #[serde(default)]
    pub approval_timeout_ms: Option<u64>,
    /// `--rules`: the client's command rules files (the daemon reads them, as the same user).
    #[serde(default)]
    pub rules: Vec<std::path::PathBuf>,
    /// `--unmatched`: the decision for a command no rule matches (`allow`, `prompt`,
    /// `forbidden`); `None`: allow.
    #[serde(default)]
    pub unmatched: Option<String>,
    /// `--rules-at`: where the rules judge, `text` or `exec` (`None`: text; sent only when
    /// given, so that a daemon that cannot judge at exec refuses the hello, never ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules_at: Option<String>,
    /// `--hooks`: the client's hooks files (Claude Code's hooks JSON; the daemon reads them
    /// and runs the hooks, so a PostToolUse fires at a command's exit whoever is connected).
    #[serde(default)]
    pub hooks: Vec<std::path::PathBuf>,
    #[serde(default)]
    pub allow_secret_input: bool,
    /// The sandbox policy of the client's commands: a ceiling that calls may only narrow.
    #[serde(default)]
    pub sandbox: SandboxSettings,
    /// `--no-shell-snapshot`: the client's login commands read the profile each time.
    #[serde(default)]
    pub no_shell_snapshot: bool,
    /// The exec servers the client's commands may name with `environment_id`.
    #[serde(default)]
    pub environments: EnvironmentSettings,
    /// The limits of the client's sessions: ceilings under the daemon's own.
    #[serde(default)]
    pub limits: LimitSettings,
    /// `--linger`: how long the owner's running sessions outlive its last connection.
    #[serde(default)]
    pub linger: Linger,
}

/// `uexec mcp`'s limit flags (`--memory-max`, `--pids-max`, `--cpu-max`), as words.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    pub memory_max: Option<String>,
    pub pids_max: Option<String>,
    pub cpu_max: Option<String>,
}

/// How long an owner's running sessions outlive its last connection to the daemon
/// (`uexec mcp --linger`). A session a person kept (`uexec keep`) outlives it anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Linger {
    /// They are ended this many seconds after the last connection closed, unless a new
    /// one came meanwhile; 0 (the default) at once, as a store in the client's own
    /// process is shut down with it.
    Seconds(u64),
    /// They run until they exit or someone ends them.
    Forever,
}

impl Default for Linger {
    fn default() -> Self {
        Self::Seconds(0)
    }
}

/// `uexec mcp`'s environment flags (`--environment`, `--environments`, `--remote-token`,
/// `--remote-token-file`, `--environment-token-file`, `--remote-ca`), as the client read and
/// checked them: paths absolute, token files read. The tokens pass through the daemon's
/// socket, which is this user's alone (0600, and the daemon serves only this user); its
/// `Debug` shows their names, never their values, so that no log holds one.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSettings {
    /// `--environment NAME=URL`, in their order.
    pub fixed: Vec<(String, String)>,
    /// `--environments FILE`: the daemon reads it, and reads it again when it changes.
    pub file: Option<PathBuf>,
    /// Bearer tokens by environment name; `""` is every environment's default.
    pub tokens: BTreeMap<String, String>,
    /// `--remote-ca`: certificates trusted for wss:// besides the system's.
    pub ca: Option<PathBuf>,
}

impl EnvironmentSettings {
    /// Whether any environment is configured (a file may name none yet).
    pub fn any(&self) -> bool {
        !self.fixed.is_empty() || self.file.is_some()
    }
}

impl std::fmt::Debug for EnvironmentSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvironmentSettings")
            .field("fixed", &self.fixed)
            .field("file", &self.file)
            .field("tokens", &self.tokens.keys().collect::<Vec<_>>())
            .field("ca", &self.ca)
            .finish()
    }
}

/// `uexec mcp`'s sandbox flags, as words (`--sandbox`, `--network`, `--network-allow`,
/// `--writable-root`, `--sandbox-fallback`, `--network-denial`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    pub profile: Option<String>,
    pub network: Option<String>,
    pub network_allow: Vec<String>,
    pub writable_roots: Vec<PathBuf>,
    pub fallback: Option<String>,
    pub on_denial: Option<String>,
}

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    pub fn ok() -> Self {
        Self {
            ok: true,
            version: VERSION.to_owned(),
            error: None,
        }
    }

    pub fn refuse(error: impl Into<String>) -> Self {
        Self {
            ok: false,
            version: VERSION.to_owned(),
            error: Some(error.into()),
        }
    }
}

impl Hello {
    /// Why a daemon of build `build` cannot serve this client, if it cannot.
    pub fn incompatibility(&self, build: &str) -> Option<String> {
        if self.protocol != PROTOCOL {
            return Some(format!(
                "this daemon speaks {PROTOCOL}, the client {}: restart the daemon with the same uexec",
                self.protocol
            ));
        }
        if self.version != VERSION {
            return Some(format!(
                "this daemon is uexec {VERSION}, the client uexec {}: stop the daemon (it exits when idle, or kill it) so the new one starts",
                self.version
            ));
        }
        if self.build != build {
            return Some(format!(
                "this daemon runs another build of uexec {VERSION} than the client (rebuilt or reinstalled since it started): stop it with `uexec daemon --stop`, and the next client starts a new one"
            ));
        }
        if self.owner.is_empty() {
            return Some("the owner name is empty".to_owned());
        }
        None
    }

    /// The client's environment as bytes.
    pub fn environment(&self) -> Result<BTreeMap<OsString, OsString>, String> {
        let b64 = base64::engine::general_purpose::STANDARD;
        self.env
            .iter()
            .map(|(k, v)| {
                let k = b64.decode(k).map_err(|e| format!("env: {e}"))?;
                let v = b64.decode(v).map_err(|e| format!("env: {e}"))?;
                Ok((OsString::from_vec(k), OsString::from_vec(v)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build id as a daemon would compute it.
    const BUILD: &str = "2049:1234:86418352:1796284800000000000";

    #[test]
    fn a_non_utf8_environment_survives_the_trip() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let hello = Hello {
            protocol: PROTOCOL.into(),
            version: VERSION.into(),
            build: BUILD.into(),
            owner: "o".into(),
            cwd: "/".into(),
            env: vec![(b64.encode(b"K\xff"), b64.encode(b"v\xfe"))],
            settings: Settings::default(),
            attach: None,
            status: false,
            run: None,
            metrics: false,
        };
        let line = serde_json::to_string(&hello).expect("json");
        let back: Hello = serde_json::from_str(&line).expect("parse");
        let env = back.environment().expect("decoded");
        assert_eq!(
            env.get(&OsString::from_vec(b"K\xff".to_vec())),
            Some(&OsString::from_vec(b"v\xfe".to_vec()))
        );
    }

    #[test]
    fn environment_settings_never_show_a_token_in_debug() {
        let settings = EnvironmentSettings {
            fixed: vec![("box".into(), "ws://127.0.0.1:1".into())],
            tokens: [("box".to_owned(), "s3cr3t-value".to_owned())].into(),
            ..EnvironmentSettings::default()
        };
        let shown = format!("{settings:?}");
        assert!(shown.contains("\"box\""), "{shown}");
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
    }

    #[test]
    fn a_hello_without_the_newer_settings_still_parses() {
        let line = r#"{"shell":null,"max_output_tokens":null,"env_keep":[],"env_set":[],"env_drop":[],"strip_ansi":false,"collapse_cr":false,"deterministic_ids":false,"extended":true,"codex_tools_only":false}"#;
        let settings: Settings = serde_json::from_str(line).expect("parse");
        assert!(!settings.no_shell_snapshot);
        assert_eq!(settings.environments, EnvironmentSettings::default());
    }

    #[test]
    fn another_version_or_protocol_is_refused_by_name() {
        let mut hello = Hello {
            protocol: PROTOCOL.into(),
            version: "0.0.0-other".into(),
            build: BUILD.into(),
            owner: "o".into(),
            cwd: "/".into(),
            env: Vec::new(),
            settings: Settings::default(),
            attach: None,
            status: false,
            run: None,
            metrics: false,
        };
        let why = hello.incompatibility(BUILD).expect("refused");
        assert!(why.contains("the client uexec 0.0.0-other"), "{why}");
        hello.version = VERSION.into();
        hello.protocol = "uexec-daemon/99".into();
        assert!(hello
            .incompatibility(BUILD)
            .expect("refused")
            .contains("uexec-daemon/99"));
        hello.protocol = PROTOCOL.into();
        assert_eq!(hello.incompatibility(BUILD), None);
    }
}
