//! Running the MCP face: stdio (one store for the one client) or streamable HTTP.
//!
//! Shutdown, in every mode: stdin EOF (stdio), SIGTERM or SIGINT stop the server and shut the
//! store down, which kills every session and its process group before the process exits.
//!
//! Over HTTP the 2026-07 MCP protocol is stateless, so a store cannot hang off a transport
//! session: the server keeps one store per principal (the bearer token, or the loopback
//! user when there is none), and sessions are addressed by uexec's own ids.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use axum::extract::Request;

use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;
use uexec_client::ClientConfig;
use uexec_core::transcript::TranscriptConfig;
use uexec_core::{Backend, LocalBackend, SessionStore, StoreConfig};
use uexec_net::secret::read_token_file;
use uexec_net::tls::ClientTrust;
use uexec_net::{authorize, shutdown_signal, Access, HttpListener, ListenerArgs, Peer};
use uexec_protocol::daemon::{SandboxSettings, Settings};

use crate::environments::backend::{Endpoint, EnvironmentBackend};
use crate::environments::{self, Defaults, EnvironmentRegistry};
use crate::server::{Options, UexecServer};
use crate::settings;
use crate::stores::{Principal, Stores};

/// Arguments of `uexec mcp`.
#[derive(Debug, Clone, clap::Args)]
pub struct McpArgs {
    /// Serve streamable HTTP on ADDR (e.g. 127.0.0.1:8765) at the path /mcp instead of
    /// stdio (https:// with --tls-cert). Loopback addresses only, unless a bearer token is
    /// set; without a token, only this server's own user may connect.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Bearer token HTTP clients must send (`Authorization: Bearer TOKEN`); required to
    /// listen on a non-loopback address. Repeatable (or comma-separated in UEXEC_TOKEN):
    /// each token is a client with sessions of its own that no other token can see.
    /// Visible in `ps`: prefer --token-file.
    #[arg(
        long = "token",
        env = "UEXEC_TOKEN",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub tokens: Vec<String>,
    /// Read a bearer token from this file (its first line; keep it mode 0600). Repeatable,
    /// like --token.
    #[arg(long = "token-file", value_name = "PATH")]
    pub token_files: Vec<PathBuf>,
    #[command(flatten)]
    pub listener: ListenerArgs,
    /// Extra Host header value accepted over HTTP (repeatable); loopback names are always
    /// accepted.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Offer only Codex's two tools (exec_command, write_stdin); hide list_sessions,
    /// terminate_session and wait.
    #[arg(long)]
    pub codex_tools_only: bool,
    /// Offer uexec's own arguments on top of Codex's: `until` (return on a regex match,
    /// idle output, a prompt or the exit), `timeout_ms` (a hard timeout), `stdin: "pipe"`
    /// and `eof`, `strip_ansi` and `collapse_cr`; results then say why they returned and
    /// carry exit notices of sessions that ended unwatched. Off by default: the tools are
    /// then exactly Codex's. The `wait` tool is always offered (not with --codex-tools-only).
    #[arg(long, env = "UEXEC_EXTENDED", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub extended: bool,
    /// Remove terminal escape sequences from returned output unless a call says otherwise
    /// (`strip_ansi`; off by default, as Codex).
    #[arg(long)]
    pub strip_ansi: bool,
    /// Render carriage returns as a terminal would (progress bars collapse to their last
    /// state) unless a call says otherwise (`collapse_cr`; off by default, as Codex).
    #[arg(long)]
    pub collapse_cr: bool,
    /// Let write_stdin type into password prompts (a terminal reading with echo off). By
    /// default the model is refused there and told to ask the person.
    #[arg(long)]
    pub allow_secret_input: bool,
    #[command(flatten)]
    pub transcripts: TranscriptArgs,
    /// Run the sessions in this user's uexec daemon instead of in this process, so they
    /// outlive this MCP server and people can see them (`uexec ls`, `uexec logs`). The
    /// daemon is started if none runs. Commands get this process's working directory,
    /// environment and sandbox policy (--sandbox, --network...), as without --daemon.
    #[arg(long, env = "UEXEC_DAEMON", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value = "false",
          conflicts_with_all = ["http", "tokens", "token_files", "allow_hosts", "environments", "environments_file", "remote_token", "remote_token_file", "environment_token_files", "remote_ca",
 ])]
    pub daemon: bool,
    /// With --daemon: whose sessions these are. One owner sees (lists, polls, kills) only its
    /// own sessions; a restarted agent with the same owner finds them again (default:
    /// `mcp:` and the working directory).
    #[arg(long, value_name = "NAME", requires = "daemon")]
    pub owner: Option<String>,
    /// With --daemon: the daemon's socket (default: $XDG_RUNTIME_DIR/uexec/daemon.sock,
    /// else a per-user directory under the temp dir).
    #[arg(long, value_name = "PATH", requires = "daemon")]
    pub daemon_socket: Option<PathBuf>,
    /// Default shell for commands (default: $SHELL, else /bin/bash, else /bin/sh).
    #[arg(long, value_name = "PATH")]
    pub shell: Option<String>,
    /// Run every login: true command as a real login shell, reading the profile each time,
    /// instead of from a snapshot of what the profile set up (environment, functions,
    /// aliases, options), taken once and rebuilt when a profile file changes. Not with
    /// --daemon (the daemon keeps its own snapshots).
    #[arg(long, conflicts_with = "daemon")]
    pub no_shell_snapshot: bool,
    /// Cap on max_output_tokens (default 10000).
    #[arg(long, value_name = "TOKENS")]
    pub max_output_tokens: Option<u64>,
    /// Pass this variable to commands even though its name looks secret. Commands never
    /// see variables whose names contain KEY, SECRET, TOKEN, PASSWORD, PASSWD, CREDENTIAL,
    /// PRIVATE or COOKIE, or end in _PAT or _AUTH (any case), unless kept. Repeatable.
    #[arg(long = "env-keep", value_name = "NAME")]
    pub env_keep: Vec<String>,
    /// Set NAME=VALUE for every command (wins over the forced defaults). Repeatable.
    #[arg(long = "env-set", value_name = "NAME=VALUE", value_parser = parse_assignment)]
    pub env_set: Vec<(String, String)>,
    /// Do not pass this variable to commands. Repeatable.
    #[arg(long = "env-drop", value_name = "NAME")]
    pub env_drop: Vec<String>,
    /// Offer another place to run commands: an exec server (`uexec serve` or
    /// `codex exec-server`) at a ws:// or wss:// URL, chosen per call with exec_command's
    /// `environment_id: NAME`. Dialled at start-up in the background: a server that cannot
    /// be reached is logged, fails only its own sessions (naming NAME and URL), and is
    /// dialled again at its next command. Repeatable.
    #[arg(long = "environment", value_name = "NAME=URL", value_parser = parse_assignment)]
    pub environments: Vec<(String, String)>,
    /// Also offer the environments of this file, in the format of Codex's environments.toml
    /// (`[[environments]]` with `id` and `url`), reloaded when it changes. Its servers are
    /// dialled when needed: a pod that is down does not stop the others.
    #[arg(long = "environments", value_name = "FILE")]
    pub environments_file: Option<PathBuf>,
    /// Bearer token sent to the exec servers of --environment and --environments (unless
    /// one has its own token). Visible in `ps`: prefer --remote-token-file.
    #[arg(long, env = "UEXEC_REMOTE_TOKEN", hide_env_values = true)]
    pub remote_token: Option<String>,
    /// Read the bearer token for the --environment(s) exec servers from this file (wins over
    /// --remote-token and UEXEC_REMOTE_TOKEN).
    #[arg(long, value_name = "PATH")]
    pub remote_token_file: Option<PathBuf>,
    /// Read the bearer token of environment NAME (an --environment, or an entry of the
    /// --environments file) from PATH; wins over the file's auth_bearer_token and
    /// --remote-token. Repeatable, one per environment.
    #[arg(long = "environment-token-file", value_name = "NAME=PATH", value_parser = parse_assignment)]
    pub environment_token_files: Vec<(String, String)>,
    /// Also trust the certificates of this PEM file for wss:// environments (the system
    /// roots are always trusted): as CAs, and each as a server's own certificate when the
    /// server presents exactly it (a self-signed one), if its subjectAltName names the host.
    #[arg(long, value_name = "FILE")]
    pub remote_ca: Option<PathBuf>,
    /// Sandbox profile of commands: read-only (writes only to a private tmp),
    /// workspace-write (also this server's working directory and each --writable-root,
    /// wherever a command runs, but never .git nor uexec's own files) or danger-full-access
    /// (the default: no restriction). A ceiling: a call's `sandbox` argument (--extended)
    /// may only narrow it. Linux: Landlock, seccomp, user/pid/mount namespaces; see
    /// `uexec doctor`.
    #[arg(long, value_name = "PROFILE", value_parser = parse_profile)]
    pub sandbox: Option<uexec_core::sandbox::Profile>,
    /// Network of commands: "off" (only a loopback of their own; IPv4/IPv6 sockets fail)
    /// or "on" (the default). A ceiling: a call's `network` argument (--extended) may only
    /// narrow it (on, then an allowlist, then off).
    #[arg(long, value_name = "off|on", value_parser = parse_network)]
    pub network: Option<uexec_core::sandbox::Network>,
    /// Let commands reach only these hosts, through a proxy uexec runs at 127.0.0.1:3128
    /// inside (HTTP and SOCKS5; HTTP_PROXY and friends are set); any other host is refused
    /// and fails the session, naming the host. HOST, *.DOMAIN (its subdomains), or either
    /// with :PORT. Repeatable. A ceiling: a call may name only hosts this list allows.
    #[arg(long = "network-allow", value_name = "HOST[:PORT]", value_parser = parse_allow_entry, conflicts_with = "network")]
    pub network_allow: Vec<uexec_core::sandbox::AllowEntry>,
    /// Also writable under workspace-write, besides this server's working directory (an
    /// existing directory). Repeatable.
    #[arg(long = "writable-root", value_name = "PATH", value_parser = parse_writable_root)]
    pub writable_roots: Vec<PathBuf>,
    /// When a sandbox layer is missing on this machine: "refuse" to run the command (the
    /// default) or run it "best-effort" with the layers that work (results say which).
    #[arg(long, value_name = "refuse|best-effort", value_parser = parse_fallback)]
    pub sandbox_fallback: Option<uexec_core::sandbox::Fallback>,
    /// What a request to a host off the allowlist (--network-allow, or a call's
    /// {"allow": [...]}) does besides being refused: "terminate" the command (the default;
    /// the result is an error naming the host) or "record" it and let the command run on
    /// (its next result says denied: true and names the host; the End is failed).
    #[arg(long, value_name = "terminate|record", value_parser = parse_on_denial)]
    pub network_denial: Option<uexec_core::sandbox::OnDenial>,
}

fn parse_profile(s: &str) -> Result<uexec_core::sandbox::Profile, String> {
    s.parse()
}

fn parse_network(s: &str) -> Result<uexec_core::sandbox::Network, String> {
    s.parse()
}

fn parse_allow_entry(s: &str) -> Result<uexec_core::sandbox::AllowEntry, String> {
    uexec_core::sandbox::AllowEntry::parse(s)
}

fn parse_fallback(s: &str) -> Result<uexec_core::sandbox::Fallback, String> {
    s.parse()
}

fn parse_on_denial(s: &str) -> Result<uexec_core::sandbox::OnDenial, String> {
    s.parse()
}

fn parse_writable_root(s: &str) -> Result<PathBuf, String> {
    let path = std::path::absolute(s).map_err(|e| format!("{s}: {e}"))?;
    if !path.is_dir() {
        return Err(format!(
            "{} does not exist or is not a directory",
            path.display()
        ));
    }
    Ok(path)
}

fn parse_assignment(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {s:?}")),
    }
}

impl McpArgs {
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
            allow_secret_input: self.allow_secret_input,
            sandbox: SandboxSettings {
                profile: self.sandbox.map(|p| p.as_str().to_owned()),
                network: self.network.as_ref().map(|n| n.as_str().to_owned()),
                network_allow: self
                    .network_allow
                    .iter()
                    .map(uexec_core::sandbox::show_allow_entry)
                    .collect(),
                writable_roots: self.writable_roots.clone(),
                fallback: self.sandbox_fallback.map(|f| f.as_str().to_owned()),
                on_denial: self.network_denial.map(|d| d.as_str().to_owned()),
            },
        }
    }

    fn store_config(&self) -> anyhow::Result<StoreConfig> {
        let mut config = StoreConfig::from_env();
        // This binary is the launcher (`uexec __sandbox-exec`); one is kept started ahead
        // (`uexec_core::sandbox::warm`).
        config.sandbox.launcher = uexec_core::sandbox::Launcher::current_exe().ok();
        settings::apply(&self.settings(), &mut config).map_err(anyhow::Error::msg)?;
        if self.no_shell_snapshot {
            config.shell_snapshots = None;
        }
        config.transcripts = self.transcripts.config();
        Ok(config)
    }
}

/// Runs `uexec mcp` until its transport ends or a signal arrives; every session is killed
/// before it returns.
pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    args.transcripts.check()?;
    let mut environments: BTreeMap<String, Arc<dyn Backend>> = BTreeMap::new();
    // The file first: its ids are names --environment-token-file may give.
    let file = match &args.environments_file {
        Some(path) => Some((path.clone(), environments::file::load(path)?)),
        None => None,
    };
    let file_ids: Vec<&str> = file
        .iter()
        .flat_map(|(_, entries)| entries.iter().map(|e| e.id.as_str()))
        .collect();
    let remote_tokens = remote_tokens(&args, &file_ids)?;
    let client = ClientConfig {
        trust: ClientTrust::new(args.remote_ca.clone()),
        ..ClientConfig::default()
    };
    if args.remote_ca.is_some() {
        // A bad CA file is an error now, naming the flag, not at the first wss:// dial.
        client.trust.client_config()?;
    }
    // Dialled in the background, as the file's are: one server that is down or refuses
    // its certificate fails that environment's sessions (naming it and its URL) and is
    // dialled again at its next command; the others, and local commands, go on.
    for (name, url) in &args.environments {
        let token = remote_tokens
            .get(name)
            .cloned()
            .or_else(|| remote_tokens.get("").cloned());
        let endpoint = Endpoint {
            url: url.clone(),
            token,
            connect_timeout: None,
            client: client.clone(),
        };
        let backend = EnvironmentBackend::new(name, endpoint);
        backend.warm_up();
        environments.insert(name.clone(), backend);
    }
    let defaults = Defaults {
        tokens: remote_tokens.clone(),
        client,
    };
    let registry = EnvironmentRegistry::new(environments, file, defaults)?;
    registry.watch();
    let shared = registry.environments();
    let config = args.store_config()?;
    let options = Options {
        codex_tools_only: args.codex_tools_only,
        extended: args.extended,
        config: config.clone(),
    };
    let make_store = move || {
        SessionStore::with_shared_environments(
            Arc::new(LocalBackend),
            config.clone(),
            shared.clone(),
        )
    };
    let stores = match args.http {
        None => Stores::Single(make_store()),
        Some(_) => Stores::per_principal(make_store),
    };
    let server = UexecServer::new(
        stores.clone(),
        registry.environments(),
        registry.any_configured(),
        options,
    );
    let result = match args.http {
        None if args.listener.tls_cert.is_some() => Err(anyhow::anyhow!(
            "--tls-cert and --tls-key serve HTTPS: they need --http ADDR"
        )),
        None => serve_stdio(server).await,
        Some(addr) => serve_http(&args, addr, server).await,
    };
    stores.shutdown();
    result
}

/// The token of each environment by name; `""` is the default one (--remote-token or
/// --remote-token-file). `file_ids` are the environments file's entries.
fn remote_tokens(args: &McpArgs, file_ids: &[&str]) -> anyhow::Result<HashMap<String, String>> {
    let mut tokens = HashMap::new();
    let default = match &args.remote_token_file {
        Some(path) => Some(read_token_file("--remote-token-file", path)?),
        None => args.remote_token.clone().filter(|t| !t.is_empty()),
    };
    if let Some(token) = default {
        tokens.insert(String::new(), token);
    }
    for (name, path) in &args.environment_token_files {
        if !args.environments.iter().any(|(env, _)| env == name)
            && !file_ids.contains(&name.as_str())
        {
            anyhow::bail!(
                "--environment-token-file {name}={path}: there is no --environment or environments file entry named {name:?}"
            );
        }
        let token = read_token_file("--environment-token-file", std::path::Path::new(path))?;
        tokens.insert(name.clone(), token);
    }
    Ok(tokens)
}

async fn serve_stdio(server: UexecServer) -> anyhow::Result<()> {
    let running = tokio::select! {
        running = server.serve(rmcp::transport::stdio()) => running.context("MCP handshake over stdio failed")?,
        signal = shutdown_signal() => return Ok(signal?),
    };
    tokio::select! {
        quit = running.waiting() => {
            tracing::info!(?quit, "stdio client went away");
        }
        signal = shutdown_signal() => signal?,
    }
    Ok(())
}

async fn serve_http(args: &McpArgs, addr: SocketAddr, server: UexecServer) -> anyhow::Result<()> {
    let mut tokens: Vec<String> = args
        .tokens
        .iter()
        .filter(|t| !t.is_empty())
        .cloned()
        .collect();
    for path in &args.token_files {
        tokens.push(read_token_file("--token-file", path)?);
    }
    let options = args.listener.options()?;
    uexec_net::check_exposure(
        addr,
        !tokens.is_empty(),
        options.tls.is_some(),
        args.listener.insecure_plaintext,
        "--token, --token-file or UEXEC_TOKEN",
    )?;
    let cancel = CancellationToken::new();
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]", "::1"]
        .into_iter()
        .map(String::from)
        .collect();
    hosts.push(addr.ip().to_string());
    hosts.extend(args.allow_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .enforce_origin_validation()
        .with_cancellation_token(cancel.child_token());
    let service = StreamableHttpService::new(
        move || Ok(server.for_connection()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let tokens = Arc::new(tokens);
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let tokens = tokens.clone();
                    async move { check_access(&tokens, req, next).await }
                },
            ));
    let listener = HttpListener::bind(addr, options)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr();
    let scheme = if listener.is_tls() { "https" } else { "http" };
    eprintln!("uexec mcp: serving streamable HTTP at {scheme}://{local}/mcp");
    let stop = cancel.clone();
    listener
        .serve(router, async move {
            if let Err(e) = shutdown_signal().await {
                tracing::error!("{:#}", anyhow::Error::from(e));
            }
            stop.cancel();
        })
        .await;
    Ok(())
}

/// Lets a request through when it carries one of the tokens, or, with no token configured,
/// when it comes from this server's own user over loopback (see `uexec_net`). A
/// token's request runs as that token's [`Principal`] (its index, never the token itself).
async fn check_access(tokens: &[String], mut req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<Peer>().cloned();
    match authorize(tokens, req.headers(), peer.as_ref()).await {
        Ok(Access::Token(index)) => {
            req.extensions_mut()
                .insert(Principal(format!("token-{}", index + 1)));
        }
        Ok(Access::SameUser) => {}
        Err(refusal) => return refusal.into_response(),
    }
    next.run(req).await
}

/// Where session transcripts go (`uexec mcp`, `uexec daemon`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TranscriptArgs {
    /// Keep every session's output on disk under DIR, one directory per session (default
    /// `$XDG_STATE_HOME/uexec/sessions`, else `~/.local/state/uexec/sessions`; 0700, files
    /// 0600). The `read_output` tool pages through them.
    #[arg(long, value_name = "DIR")]
    pub transcripts_dir: Option<PathBuf>,
    /// Keep no transcripts (and offer no `read_output`).
    #[arg(long, conflicts_with = "transcripts_dir")]
    pub no_transcripts: bool,
    /// Most bytes of one session's transcript kept on disk; older bytes rotate away in
    /// quarters (default 268435456: 256 MiB).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(16384..))]
    pub transcript_max_bytes: Option<u64>,
    /// Most bytes of disk all transcripts take together (directories and blocks count: a
    /// session that printed nothing is not free); the least recently written sessions go
    /// first, never one written in the last minute (default 2147483648: 2 GiB).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(16384..))]
    pub transcripts_total_max_bytes: Option<u64>,
}

impl TranscriptArgs {
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
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(dir) = &self.transcripts_dir {
            uexec_core::transcript::prepare_root(dir)
                .map_err(|e| anyhow::anyhow!("--transcripts-dir {}: {e}", dir.display()))?;
        }
        Ok(())
    }
}
