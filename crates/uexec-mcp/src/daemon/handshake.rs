//! The first line of a daemon connection: who the client is and how its sessions run; the
//! daemon answers one line, then the connection speaks MCP (newline-delimited JSON-RPC).
//!
//! Versioned: the protocol name carries a number, and the daemon also checks the client's
//! uexec version, so a client of another build gets a clear error instead of a conversation
//! in a dialect it does not speak.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use uexec_core::env::{EnvPolicy, Environment};
use uexec_core::StoreConfig;

/// Name and version of the daemon protocol.
pub const PROTOCOL: &str = "uexec-daemon/1";
/// This build's version; client and daemon must match.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Longest hello accepted (an environment can be large, not this large).
pub const MAX_HELLO_BYTES: usize = 4 << 20;
/// The owner name of people (the CLI): they see every session.
pub const PERSON: &str = "@person";

/// This executable's identity: device, inode, size and modification time of the file the
/// process runs (a rebuild or a reinstall changes it).
pub fn build_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| build_id_of(std::path::Path::new("/proc/self/exe")))
        .clone()
}

/// The identity [`build_id`] gives in a process running `exe`: what a client that is not
/// the engine (the `uexec` front) says for the engine beside it.
pub fn build_id_of(exe: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(exe)
        .map(|m| {
            format!(
                "{}:{}:{}:{}",
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime_nsec() + m.mtime() * 1_000_000_000
            )
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// What a client says first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: String,
    pub version: String,
    /// Which build of that version (see [`build_id`]): two builds of one version may still
    /// speak differently.
    pub build: String,
    /// Whose sessions: one owner lists, polls and kills only its own.
    pub owner: String,
    /// The client's working directory: the default workdir of its commands.
    pub cwd: PathBuf,
    /// The client's environment, base64 of the raw bytes (names and values need not be
    /// UTF-8): commands start from it, as they would in the client's own process. Without
    /// its secret-looking variables (but those of `settings.env_keep`): commands would not
    /// get them anyway, and a hello must never hand a secret to whoever listens.
    pub env: Vec<(String, String)>,
    pub settings: Settings,
    /// Instead of MCP: join a person's terminal to a session (`uexec attach`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachRequest>,
}

/// `uexec attach`: which session, whether to type into it, and the person's terminal size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachRequest {
    pub session_id: i32,
    pub write: bool,
    pub rows: u16,
    pub cols: u16,
}

/// What an attached client sends, one JSON line each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AttachFrame {
    /// Keys typed (base64 of the bytes).
    Input(String),
    /// The person's terminal changed size: rows, cols.
    Resize(u16, u16),
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
    #[serde(default)]
    pub allow_secret_input: bool,
    /// The sandbox policy of the client's commands: a ceiling that calls may only narrow.
    #[serde(default)]
    pub sandbox: SandboxSettings,
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

impl SandboxSettings {
    /// These settings over `sandbox` (its launcher is the server's own and stays).
    pub fn apply(&self, sandbox: &mut uexec_core::confine::SandboxConfig) -> Result<(), String> {
        use uexec_core::policy::{AllowEntry, Network};
        let named = |flag: &str, e: String| format!("{flag}: {e}");
        if let Some(p) = &self.profile {
            sandbox.profile = p.parse().map_err(|e| named("--sandbox", e))?;
        }
        if let Some(n) = &self.network {
            sandbox.network = n.parse().map_err(|e| named("--network", e))?;
        }
        if !self.network_allow.is_empty() {
            let allow = self
                .network_allow
                .iter()
                .map(|e| AllowEntry::parse(e).map_err(|e| named("--network-allow", e)))
                .collect::<Result<Vec<_>, _>>()?;
            sandbox.network = Network::Allow(allow);
        }
        for root in &self.writable_roots {
            if !root.is_absolute() || !root.is_dir() {
                return Err(format!(
                    "--writable-root {}: not an existing directory (an absolute path)",
                    root.display()
                ));
            }
        }
        sandbox.writable_roots = self.writable_roots.clone();
        if let Some(f) = &self.fallback {
            sandbox.fallback = f.parse().map_err(|e| named("--sandbox-fallback", e))?;
        }
        if let Some(d) = &self.on_denial {
            sandbox.on_denial = d.parse().map_err(|e| named("--network-denial", e))?;
        }
        Ok(())
    }
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
    /// This process as a client: its cwd and environment.
    pub fn here(owner: String, settings: Settings) -> std::io::Result<Self> {
        Self::here_for(build_id(), owner, settings)
    }

    /// This process as a client of the engine build `build` (see [`build_id_of`]).
    pub fn here_for(build: String, owner: String, settings: Settings) -> std::io::Result<Self> {
        Ok(Self {
            protocol: PROTOCOL.to_owned(),
            version: VERSION.to_owned(),
            build,
            owner,
            cwd: std::env::current_dir()?,
            attach: None,
            env: hello_env(std::env::vars_os(), &settings.env_keep),
            settings,
        })
    }

    /// Why the daemon cannot serve this client, if it cannot.
    pub fn incompatibility(&self) -> Option<String> {
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
        if self.build != build_id() {
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
    pub fn environment(&self) -> Result<Environment, String> {
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

    /// The store configuration of this client's sessions, over the daemon's `base`.
    pub fn store_config(&self, base: &StoreConfig) -> Result<StoreConfig, String> {
        let s = &self.settings;
        let mut config = base.clone();
        config.cwd = self.cwd.clone();
        config.base_env = Some(self.environment()?);
        s.apply(&mut config)?;
        Ok(config)
    }
}

/// The `env` of a hello: `vars` as base64 pairs, without the secret-looking names that
/// commands would not get either ([`uexec_core::env::looks_secret`]), unless `keep` names
/// them (`--env-keep`).
pub fn hello_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    keep: &[String],
) -> Vec<(String, String)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let policy = EnvPolicy {
        keep: keep.to_vec(),
        ..EnvPolicy::default()
    };
    policy
        .inherited(vars)
        .into_iter()
        .map(|(k, v)| (b64.encode(k.as_bytes()), b64.encode(v.as_bytes())))
        .collect()
}

impl Settings {
    /// These settings over `config` (the same whether the store runs in the MCP server's
    /// own process or in the daemon).
    pub fn apply(&self, config: &mut StoreConfig) -> Result<(), String> {
        config.default_shell = self.shell.clone();
        if let Some(max) = self.max_output_tokens {
            config.output_token_policy_max = max;
        }
        config.env_policy = EnvPolicy {
            keep: self.env_keep.clone(),
            set: self.env_set.clone(),
            drop: self.env_drop.clone(),
        };
        config.hygiene.strip_ansi = self.strip_ansi;
        config.hygiene.collapse_cr = self.collapse_cr;
        config.deterministic_ids = self.deterministic_ids;
        config.allow_secret_input = self.allow_secret_input;
        self.sandbox.apply(&mut config.sandbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_utf8_environment_survives_the_trip() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let hello = Hello {
            protocol: PROTOCOL.into(),
            version: VERSION.into(),
            build: build_id(),
            owner: "o".into(),
            cwd: "/".into(),
            env: vec![(b64.encode(b"K\xff"), b64.encode(b"v\xfe"))],
            settings: Settings::default(),
            attach: None,
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
    fn the_hello_env_drops_secret_looking_names_unless_kept() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let vars = [
            ("PATH", "/bin"),
            ("OPENAI_API_KEY", "sk-1"),
            ("GH_TOKEN", "t"),
            ("NPM_AUTH", "a"),
            ("KEPT_SECRET", "k"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = hello_env(vars, &["KEPT_SECRET".to_owned()]);
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| String::from_utf8(b64.decode(k).expect("b64")).expect("utf-8"))
            .collect();
        assert_eq!(names, ["KEPT_SECRET", "PATH"]);
    }

    #[test]
    fn another_version_or_protocol_is_refused_by_name() {
        let mut hello = Hello {
            protocol: PROTOCOL.into(),
            version: "0.0.0-other".into(),
            build: build_id(),
            owner: "o".into(),
            cwd: "/".into(),
            env: Vec::new(),
            settings: Settings::default(),
            attach: None,
        };
        let why = hello.incompatibility().expect("refused");
        assert!(why.contains("the client uexec 0.0.0-other"), "{why}");
        hello.version = VERSION.into();
        hello.protocol = "uexec-daemon/99".into();
        assert!(hello
            .incompatibility()
            .expect("refused")
            .contains("uexec-daemon/99"));
        hello.protocol = PROTOCOL.into();
        assert_eq!(hello.incompatibility(), None);
    }
}
