//! `uexec mcp`'s flags, their help, defaults and value parsers, converted into
//! [`uexec_mcp::McpOptions`] and the [`Place`] of its sessions: in this process, or in the
//! daemon (the relay's [`relay::Target`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use super::limits::LimitArgs;
use super::net::ListenerArgs;
use uexec_core::policy::{AllowEntry, Fallback, Network, OnDenial, Profile};
use uexec_mcp::McpOptions;
use uexec_protocol::daemon::Linger;

use super::TranscriptArgs;
use crate::relay;

/// Arguments of `uexec mcp`, grouped in `--help` by what they set (docs/src/mcp.md lists them
/// under the same headings, and a test holds the two together).
#[derive(Debug, Clone, clap::Args)]
pub struct McpArgs {
    /// Offer only Codex's two tools (exec_command, write_stdin); hide list_sessions,
    /// terminate_session and wait.
    #[arg(help_heading = "Faces", long)]
    pub codex_tools_only: bool,
    /// Offer exactly Codex's tools, argument for argument and byte for byte, for clients
    /// written against Codex's own exec_command: no `until`, `timeout_ms`, `stdin: "pipe"`,
    /// `eof`, `strip_ansi`, `collapse_cr`, `sandbox` or `network`; results in Codex's text,
    /// with its structured form (--structured), and no exit notices. By default uexec's
    /// own arguments are offered on top of Codex's, and results say why they returned.
    #[arg(help_heading = "Faces", long, env = "UEXEC_CODEX_COMPAT", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub codex_compat: bool,
    /// Add each result's facts as JSON (`structuredContent`, and an outputSchema to every
    /// tool) beside its text. Off by default: a client that shows the JSON when there is
    /// some (Claude Code, Codex) then shows the model the text, as a terminal shows it.
    /// Always on with --codex-compat.
    #[arg(help_heading = "Faces", long)]
    pub structured: bool,
    /// Never answer a call with an MCP task, whatever the client declares. By default a
    /// client that declares the tasks extension gets one for `wait` (and for an
    /// `exec_command` that asks with `background: true`) when it is still waiting at the
    /// end of its window, and is told when it ends; for clients that mishandle tasks (the
    /// MCP Inspector CLI 2.12 shows a bare task and never polls it).
    #[arg(help_heading = "Faces", long)]
    pub no_tasks: bool,
    /// Kept for configurations written before uexec's own arguments became the default:
    /// `--extended` changes nothing; `--extended=false` (or UEXEC_EXTENDED=0) is
    /// --codex-compat.
    #[arg(long, hide = true, env = "UEXEC_EXTENDED", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", conflicts_with = "codex_compat")]
    pub extended: Option<bool>,
    /// Let write_stdin type into password prompts (a terminal reading with echo off). By
    /// default the model is refused there and told to ask the person.
    #[arg(help_heading = "Faces", long)]
    pub allow_secret_input: bool,
    /// Remove terminal escape sequences from returned output unless a call says otherwise
    /// (`strip_ansi`; off by default, as Codex).
    #[arg(help_heading = "Output", long)]
    pub strip_ansi: bool,
    /// Render carriage returns as a terminal would (progress bars collapse to their last
    /// state) unless a call says otherwise (`collapse_cr`; off by default, as Codex).
    #[arg(help_heading = "Output", long)]
    pub collapse_cr: bool,
    /// Cap on max_output_tokens (default 10000).
    #[arg(help_heading = "Output", long, value_name = "TOKENS")]
    pub max_output_tokens: Option<u64>,
    /// Keep the sessions in this user's uexec daemon, where people see them (`uexec ls`,
    /// `uexec logs`, `uexec attach`): the default over stdio. The daemon is started if none
    /// runs. Commands get this process's working directory, environment, settings,
    /// environments (--environment...) and sandbox policy (--sandbox, --network...), as
    /// in-process: each connection's are the defaults of the commands it starts. Its
    /// sessions end when this client goes away (after --linger), unless a person keeps one
    /// (`uexec keep`). Without --daemon, a daemon that cannot be reached (none can start,
    /// another build runs) makes this server keep its sessions itself, saying why on
    /// stderr; with --daemon it is an error. --daemon=false (or UEXEC_DAEMON=0) is
    /// --in-process. Not with the Transcripts flags: the daemon keeps its own (`uexec
    /// daemon --help`). With --http (whose default is --in-process): HTTP is served here and
    /// each MCP session it serves runs in the daemon, each bearer token as an owner of its
    /// own.
    #[arg(help_heading = "Daemon", long, env = "UEXEC_DAEMON", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true")]
    pub daemon: Option<bool>,
    /// Keep the sessions in this process, as a plain `uexec mcp` did before the daemon was
    /// the default: they die with it, and `uexec ls` does not see them. The default with
    /// --http, and with a Transcripts flag (which configures this process's transcripts).
    #[arg(help_heading = "Daemon", long, conflicts_with = "daemon")]
    pub in_process: bool,
    /// How long this client's running sessions outlive it in the daemon: SECONDS after its
    /// last connection (of the same owner) closed, unless a new one came meanwhile; 0 (the
    /// default) ends them when it goes away, as in-process; `forever` leaves them running
    /// until they exit or a person ends them. A person's `uexec keep SESSION` keeps one
    /// anyway. Sessions that exited stay listed, to be reported.
    #[arg(help_heading = "Daemon", long, value_name = "SECONDS|forever", value_parser = parse_linger)]
    pub linger: Option<Linger>,
    /// In the daemon: whose sessions these are. One owner sees (lists, polls, kills) only
    /// its own sessions; a restarted agent with the same owner finds them again, when they
    /// outlived it (--linger) (default: `mcp:` and the working directory). Over --http with
    /// tokens, each token's owner is this, `#` and a fingerprint of the token (never the
    /// token). Not empty, and not `@...`: those are people's (`@person`, whose powers reach
    /// every owner's sessions).
    #[arg(help_heading = "Daemon", long, value_name = "NAME", value_parser = parse_owner)]
    pub owner: Option<String>,
    /// The daemon's socket (default: $XDG_RUNTIME_DIR/uexec/daemon.sock, else
    /// /run/user/<uid>/uexec/daemon.sock when logind made /run/user/<uid>, as an agent's
    /// client may not pass XDG_RUNTIME_DIR on, else a per-user directory under the temp dir).
    #[arg(help_heading = "Daemon", long, value_name = "PATH")]
    pub daemon_socket: Option<PathBuf>,
    /// Serve streamable HTTP on ADDR (e.g. 127.0.0.1:8765) at the path /mcp instead of
    /// stdio (https:// with --tls-cert). Loopback addresses only, unless a bearer token is
    /// set; without a token, only this server's own user may connect. With --daemon, the
    /// sessions live in the daemon and outlive this server.
    #[arg(help_heading = "HTTP", long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Bearer token HTTP clients must send (`Authorization: Bearer TOKEN`); required to
    /// listen on a non-loopback address. Repeatable (or comma-separated in UEXEC_TOKEN):
    /// each token is a client with sessions of its own that no other token can see.
    /// Visible in `ps`: prefer --token-file.
    #[arg(
        help_heading = "HTTP",
        long = "token",
        value_name = "TOKEN",
        env = "UEXEC_TOKEN",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub tokens: Vec<String>,
    /// Read a bearer token from this file (its first line; keep it mode 0600). Repeatable,
    /// like --token.
    #[arg(help_heading = "HTTP", long = "token-file", value_name = "PATH")]
    pub token_files: Vec<PathBuf>,
    #[command(flatten, next_help_heading = "HTTP")]
    pub listener: ListenerArgs,
    /// Extra Host header value accepted over HTTP (repeatable); loopback names are always
    /// accepted.
    #[arg(help_heading = "HTTP", long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// A web page's origin admitted over HTTP (repeatable): scheme://host[:port], the port
    /// a number or `*` (default: the scheme's), e.g. `https://app.example.com` or
    /// `http://localhost:*`. A request with any other Origin header is refused (403).
    #[arg(help_heading = "HTTP", long = "allow-origin", value_name = "ORIGIN", value_parser = parse_origin)]
    pub allow_origins: Vec<String>,
    /// Default shell for commands (default: $SHELL, else /bin/bash, else /bin/sh).
    #[arg(help_heading = "Commands", long, value_name = "PATH")]
    pub shell: Option<String>,
    /// Run every login: true command as a real login shell, reading the profile each time,
    /// instead of from a snapshot of what the profile set up (environment, functions,
    /// aliases, options), taken once and rebuilt when a profile file changes. With
    /// --daemon, for this connection's commands.
    #[arg(help_heading = "Commands", long)]
    pub no_shell_snapshot: bool,
    /// Pass this variable to commands even though its name looks secret. Commands never
    /// see variables whose names contain KEY, SECRET, TOKEN, PASSWORD, PASSWD, CREDENTIAL,
    /// PRIVATE or COOKIE, or end in _PAT or _AUTH (any case), unless kept. Repeatable.
    #[arg(help_heading = "Commands", long = "env-keep", value_name = "NAME")]
    pub env_keep: Vec<String>,
    /// Set NAME=VALUE for every command (wins over the forced defaults). Repeatable.
    #[arg(help_heading = "Commands", long = "env-set", value_name = "NAME=VALUE", value_parser = parse_assignment)]
    pub env_set: Vec<(String, String)>,
    /// Do not pass this variable to commands. Repeatable.
    #[arg(help_heading = "Commands", long = "env-drop", value_name = "NAME")]
    pub env_drop: Vec<String>,
    #[command(flatten, next_help_heading = "Transcripts")]
    pub transcripts: TranscriptArgs,
    /// Offer another place to run commands: an exec server (`uexec serve` or
    /// `codex exec-server`) at a ws:// or wss:// URL, chosen per call with exec_command's
    /// `environment_id: NAME`. Dialled at start-up in the background: a server that cannot
    /// be reached is logged, fails only its own sessions (naming NAME and URL), and is
    /// dialled again at its next command. Repeatable. With --daemon, for this connection's
    /// commands (another connection of the same owner names its own).
    #[arg(help_heading = "Environments", long = "environment", value_name = "NAME=URL", value_parser = parse_assignment)]
    pub environments: Vec<(String, String)>,
    /// Also offer the environments of this file, in the format of Codex's environments.toml
    /// (`[[environments]]` with `id` and `url`), reloaded when it changes. Its servers are
    /// dialled when needed: a pod that is down does not stop the others. With --daemon the
    /// daemon reads it, and follows its changes, while this connection lasts.
    #[arg(
        help_heading = "Environments",
        long = "environments",
        value_name = "FILE"
    )]
    pub environments_file: Option<PathBuf>,
    /// Bearer token sent to the exec servers of --environment and --environments (unless
    /// one has its own token). Visible in `ps`: prefer --remote-token-file. With --daemon it
    /// goes to the daemon in the hello, over this user's own socket, and is never logged.
    #[arg(
        help_heading = "Environments",
        long,
        value_name = "TOKEN",
        env = "UEXEC_REMOTE_TOKEN",
        hide_env_values = true
    )]
    pub remote_token: Option<String>,
    /// Read the bearer token for the --environment(s) exec servers from this file (wins over
    /// --remote-token and UEXEC_REMOTE_TOKEN). Read here, with --daemon too (which is sent
    /// the token, as --remote-token).
    #[arg(help_heading = "Environments", long, value_name = "PATH")]
    pub remote_token_file: Option<PathBuf>,
    /// Read the bearer token of environment NAME (an --environment, or an entry of the
    /// --environments file) from PATH; wins over the file's auth_bearer_token and
    /// --remote-token. Repeatable, one per environment. Read here, with --daemon too.
    #[arg(help_heading = "Environments", long = "environment-token-file", value_name = "NAME=PATH", value_parser = parse_assignment)]
    pub environment_token_files: Vec<(String, String)>,
    /// Also trust the certificates of this PEM file for wss:// environments (the system
    /// roots are always trusted): as CAs, and each as a server's own certificate when the
    /// server presents exactly it (a self-signed one), if its subjectAltName names the host.
    /// Checked here, with --daemon too (whose dials then read it).
    #[arg(help_heading = "Environments", long, value_name = "FILE")]
    pub remote_ca: Option<PathBuf>,
    /// Sandbox profile of commands: read-only (writes only to a private tmp),
    /// workspace-write (also this server's working directory and each --writable-root,
    /// wherever a command runs, but never .git nor uexec's own files) or danger-full-access
    /// (the default: no restriction). A ceiling: a call's `sandbox` argument (not with
    /// --codex-compat) may only narrow it. Linux: Landlock, seccomp, user/pid/mount namespaces; see
    /// `uexec doctor`.
    #[arg(help_heading = "Sandbox", long, value_name = "PROFILE", value_parser = parse_profile)]
    pub sandbox: Option<Profile>,
    /// Network of commands: "off" (only a loopback of their own; IPv4/IPv6 sockets fail)
    /// or "on" (the default). A ceiling: a call's `network` argument (not with
    /// --codex-compat) may only narrow it (on, then an allowlist, then off).
    #[arg(help_heading = "Sandbox", long, value_name = "off|on", value_parser = parse_network)]
    pub network: Option<Network>,
    /// Let commands reach only these hosts, through a proxy uexec runs at 127.0.0.1:3128
    /// inside (HTTP and SOCKS5; HTTP_PROXY and friends are set); any other host is refused
    /// and fails the session, naming the host. HOST, *.DOMAIN (its subdomains), or either
    /// with :PORT. Repeatable. A ceiling: a call may name only hosts this list allows.
    #[arg(help_heading = "Sandbox", long = "network-allow", value_name = "HOST[:PORT]", value_parser = parse_allow_entry, conflicts_with = "network")]
    pub network_allow: Vec<AllowEntry>,
    /// Also writable under workspace-write, besides this server's working directory (an
    /// existing directory). Repeatable.
    #[arg(help_heading = "Sandbox", long = "writable-root", value_name = "PATH", value_parser = parse_writable_root)]
    pub writable_roots: Vec<PathBuf>,
    /// When a sandbox layer is missing on this machine: "refuse" to run the command (the
    /// default) or run it "best-effort" with the layers that work (results say which).
    #[arg(help_heading = "Sandbox", long, value_name = "refuse|best-effort", value_parser = parse_fallback)]
    pub sandbox_fallback: Option<Fallback>,
    /// What a request to a host off the allowlist (--network-allow, or a call's
    /// {"allow": [...]}) does besides being refused: "terminate" the command (the default;
    /// the result is an error naming the host) or "record" it and let the command run on
    /// (its next result says denied: true and names the host; the End is failed).
    #[arg(help_heading = "Sandbox", long, value_name = "terminate|record", value_parser = parse_on_denial)]
    pub network_denial: Option<OnDenial>,
    #[command(flatten, next_help_heading = "Limits")]
    pub limits: LimitArgs,
    /// Judge every command by these rules before it runs (repeatable): a Codex `.rules`
    /// file (`prefix_rule(pattern=[...], decision="allow"|"prompt"|"forbidden",
    /// justification=...)`) or a Claude Code settings JSON (`permissions.allow` / `ask` /
    /// `deny`, `Bash(...)` entries). Each simple command of a script is judged (chains,
    /// pipes, `bash -c` strings split; `timeout`, `env`, `nohup`... looked through); the
    /// strictest decision wins. `forbidden`: refused, the model told which rule and why;
    /// `prompt`: the person is asked (MCP form elicitation), and no answer is a refusal.
    /// Test a policy with `uexec policy check`. Without --rules every command runs.
    #[arg(help_heading = "Rules", long, value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// The decision for a command no rule matches, and for one that cannot be judged by its
    /// text (`eval`, `$(...)` as a command): allow (the default), prompt or forbidden.
    #[arg(help_heading = "Rules", long, value_name = "DECISION", value_parser = parse_decision, requires = "rules")]
    pub unmatched: Option<uexec_core::policy::rules::Decision>,
    /// Where the rules judge: text (the default: each script's text, before it runs) or
    /// exec (the text, and every exec of every process the command starts, at any depth:
    /// `$(echo git) push`, `eval`, `make`, `sh -c` are judged by what they really run; a
    /// forbidden exec fails with EACCES, which the command sees, and the result names the
    /// rule; a prompt holds the exec while the person is asked). Linux, seccomp user
    /// notification (5.0+); where it is missing, the text alone, said at start and in
    /// `uexec doctor`. A policy that tells a model no, not a wall: the sandbox is the wall.
    #[arg(help_heading = "Rules", long, value_name = "text|exec", value_parser = parse_rules_at, requires = "rules")]
    pub rules_at: Option<uexec_core::policy::exec_rules::RulesAt>,
    /// How long a command held for a person's yes waits for the answer: 500ms, 10s, 5m, 1h
    /// (a bare number is seconds; default 10m). No answer by then is a refusal that says so.
    #[arg(help_heading = "Rules", long, value_name = "DURATION", value_parser = super::duration::seconds)]
    pub approval_timeout: Option<std::time::Duration>,
    /// Run hooks around exec_command (repeatable), in Claude Code's hooks JSON (a
    /// settings.json is fine: its `hooks` key is read): `PreToolUse` runs after the rules,
    /// before a person is asked (exit 2 blocks and the model reads its stderr; JSON
    /// `permissionDecision` allow / deny / ask, `updatedInput` rewrites the call, which the
    /// rules judge again); `PostToolUse` runs once per exec_command, at its return or, for a
    /// command that outlives its window, at its exit without a poll (its `tool_response`
    /// has the exit code, duration, output tail and transcript path); `PermissionRequest`
    /// answers for the person about a held command before anyone is asked (exit 2 or
    /// `decision.behavior: deny` refuses, `allow` runs); `PostToolUseFailure` runs for a call
    /// that failed as a tool (refused, not started). Codex names the same events. A matcher
    /// is a regex on the tool name, tried on `exec_command` and `Bash`: a hook written for
    /// Claude Code's Bash guards uexec's commands too. `timeout` per hook in seconds (default 60);
    /// a hook that hangs, crashes or prints bad JSON is said in the result and the call
    /// goes on. A bad file, or an unknown event, stops uexec at start.
    #[arg(help_heading = "Rules", long, value_name = "FILE")]
    pub hooks: Vec<PathBuf>,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse()
}

fn parse_network(s: &str) -> Result<Network, String> {
    s.parse()
}

fn parse_allow_entry(s: &str) -> Result<AllowEntry, String> {
    AllowEntry::parse(s)
}

fn parse_fallback(s: &str) -> Result<Fallback, String> {
    s.parse()
}

fn parse_on_denial(s: &str) -> Result<OnDenial, String> {
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

/// The Transcripts flags, which `--daemon` does not take.
const TRANSCRIPT_FLAGS: [&str; 4] = [
    "--transcripts-dir",
    "--no-transcripts",
    "--transcript-max-bytes",
    "--transcripts-total-max-bytes",
];

/// Where `uexec mcp` keeps its sessions.
#[derive(Debug, Clone)]
pub enum Place {
    /// In this process (`--in-process`, and the default of `--http` and of the Transcripts
    /// flags).
    InProcess,
    /// In the user's daemon; `asked`: `--daemon` was given (a daemon that cannot be
    /// reached is then an error, not a reason to serve in-process).
    Daemon { target: relay::Target, asked: bool },
}

/// `--linger`: seconds, or `forever`.
/// clap's reading of `--owner`: an agent's name, never empty nor a person's (`@...`).
fn parse_owner(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("an owner needs a name (e.g. mcp:app-a)".to_owned());
    }
    if s.starts_with('@') {
        return Err(format!(
            "{s:?}: names starting with @ are people's (@person may reach every owner's \
             sessions); give an agent's name (e.g. mcp:app-a)"
        ));
    }
    Ok(s.to_owned())
}

fn parse_linger(s: &str) -> Result<Linger, String> {
    if s == "forever" {
        return Ok(Linger::Forever);
    }
    s.parse::<u64>()
        .map(Linger::Seconds)
        .map_err(|_| format!("{s:?} is neither a number of seconds (0, 30, 600) nor `forever`"))
}

impl McpArgs {
    /// The Transcripts flag given, if any (the first).
    fn transcript_flag(&self) -> Option<&'static str> {
        let t = &self.transcripts;
        let given = [
            t.transcripts_dir.is_some(),
            t.no_transcripts,
            t.transcript_max_bytes.is_some(),
            t.transcripts_total_max_bytes.is_some(),
        ];
        TRANSCRIPT_FLAGS
            .iter()
            .zip(given)
            .find_map(|(flag, given)| given.then_some(*flag))
    }

    /// Where the sessions are kept: `--in-process` or `--daemon` if given, else in-process
    /// with `--http` (a server of its own, which also serves the sessionless 2026-07-28
    /// protocol) or a Transcripts flag (this process's transcripts), else the daemon.
    pub fn in_daemon(&self) -> bool {
        match (self.in_process, self.daemon) {
            (true, _) | (false, Some(false)) => false,
            (false, Some(true)) => true,
            (false, None) => self.http.is_none() && self.transcript_flag().is_none(),
        }
    }

    /// What clap cannot say of a conflict: why. With `--daemon` the Transcripts flags
    /// would change nothing (the daemon's transcripts are its own), so they are refused
    /// rather than ignored, naming both flags and where to set them instead; the daemon's
    /// own flags are refused when the sessions stay in this process, saying why they do.
    pub fn conflict(&self) -> Option<String> {
        if self.daemon == Some(true) {
            let flag = self.transcript_flag()?;
            return Some(format!(
                "the argument '{flag}' cannot be used with '--daemon' (or UEXEC_DAEMON): the \
                 daemon keeps the transcripts of its sessions, configured on `uexec daemon` \
                 (its --transcripts-dir, --no-transcripts, --transcript-max-bytes and \
                 --transcripts-total-max-bytes)"
            ));
        }
        if self.in_daemon() {
            return None;
        }
        let daemon_flag = [
            (self.linger.is_some(), "--linger"),
            (self.owner.is_some(), "--owner"),
            (self.daemon_socket.is_some(), "--daemon-socket"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))?;
        let (why, remedy) = if self.in_process {
            ("--in-process".to_owned(), "drop one of the two")
        } else if self.daemon == Some(false) {
            (
                "--daemon=false (or UEXEC_DAEMON=0)".to_owned(),
                "drop one of the two",
            )
        } else if self.http.is_some() {
            (
                "--http without --daemon".to_owned(),
                "add --daemon, or drop it",
            )
        } else {
            (
                format!("'{}'", self.transcript_flag().unwrap_or_default()),
                "drop one of the two (the daemon's transcripts are set on `uexec daemon`)",
            )
        };
        Some(format!(
            "the argument '{daemon_flag}' is for sessions kept in the daemon, and with {why} \
             this server keeps its sessions itself: {remedy}"
        ))
    }

    /// The options of `uexec mcp`, and where its sessions are kept.
    pub fn into_options(self) -> (McpOptions, Place) {
        let codex = self.codex_compat || self.extended == Some(false);
        let place = if self.in_daemon() {
            Place::Daemon {
                target: relay::Target {
                    socket: self.daemon_socket.clone(),
                    owner: self.owner.clone(),
                },
                asked: self.daemon == Some(true),
            }
        } else {
            Place::InProcess
        };
        let options = McpOptions {
            // The engine hands the sandbox over (`engine::confinement`).
            confinement: None,
            http: self.http,
            tokens: self.tokens,
            token_files: self.token_files,
            listener: self.listener.into(),
            allow_hosts: self.allow_hosts,
            allow_origins: self.allow_origins,
            codex_tools_only: self.codex_tools_only,
            extended: !codex,
            structured: self.structured || codex,
            no_tasks: self.no_tasks,
            approval_timeout: self
                .approval_timeout
                .unwrap_or(uexec_mcp::approve::DEFAULT_APPROVAL_TIMEOUT),
            rules: self.rules,
            unmatched: self.unmatched,
            rules_at: self.rules_at,
            hooks: self.hooks,
            strip_ansi: self.strip_ansi,
            collapse_cr: self.collapse_cr,
            allow_secret_input: self.allow_secret_input,
            transcripts: self.transcripts.into(),
            shell: self.shell,
            no_shell_snapshot: self.no_shell_snapshot,
            max_output_tokens: self.max_output_tokens,
            env_keep: self.env_keep,
            env_set: self.env_set,
            env_drop: self.env_drop,
            environments: self.environments,
            environments_file: self.environments_file,
            remote_token: self.remote_token,
            remote_token_file: self.remote_token_file,
            environment_token_files: self.environment_token_files,
            remote_ca: self.remote_ca,
            sandbox: self.sandbox,
            network: self.network,
            network_allow: self.network_allow,
            writable_roots: self.writable_roots,
            sandbox_fallback: self.sandbox_fallback,
            network_denial: self.network_denial,
            limits: self.limits.into(),
            linger: self.linger.unwrap_or_default(),
        };
        (options, place)
    }
}

/// `--allow-origin`: `scheme://host[:port|:*]`, with the scheme's port when none is given.
fn parse_origin(s: &str) -> Result<String, String> {
    let bad = || {
        format!("{s:?} is not an origin: give scheme://host[:port], e.g. https://app.example.com or http://localhost:*")
    };
    let (scheme, rest) = s.split_once("://").ok_or_else(bad)?;
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return Err(bad()),
    };
    if rest.is_empty()
        || rest.contains(['/', '?', '#', '@'])
        || rest.chars().any(char::is_whitespace)
    {
        return Err(bad());
    }
    // The port follows the last colon outside an IPv6 literal's brackets.
    let (host, port) = match rest.rfind(':').filter(|at| !rest[*at..].contains(']')) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    if host.is_empty() {
        return Err(bad());
    }
    match port {
        None => Ok(format!("{scheme}://{host}:{default_port}")),
        Some("*") => Ok(s.to_owned()),
        Some(p) if p.parse::<u16>().is_ok_and(|p| p > 0) => Ok(s.to_owned()),
        Some(_) => Err(bad()),
    }
}

/// `--rules-at`'s value: text or exec.
pub(super) fn parse_rules_at(
    text: &str,
) -> Result<uexec_core::policy::exec_rules::RulesAt, String> {
    uexec_core::policy::exec_rules::RulesAt::parse(text)
        .ok_or_else(|| format!("{text:?} is neither text nor exec"))
}

/// `--unmatched`'s value: allow, prompt or forbidden.
fn parse_decision(text: &str) -> Result<uexec_core::policy::rules::Decision, String> {
    text.parse()
}

#[cfg(test)]
mod origin_tests {
    use super::parse_origin;

    #[test]
    fn origins_are_read_with_their_port() {
        assert_eq!(
            parse_origin("https://app.example.com").as_deref(),
            Ok("https://app.example.com:443")
        );
        assert_eq!(
            parse_origin("http://localhost:*").as_deref(),
            Ok("http://localhost:*")
        );
        assert_eq!(
            parse_origin("http://[::1]:8080").as_deref(),
            Ok("http://[::1]:8080")
        );
        assert_eq!(
            parse_origin("http://[::1]").as_deref(),
            Ok("http://[::1]:80")
        );
        for bad in [
            "app.example.com",
            "ftp://x",
            "https://",
            "https://x/path",
            "https://x:0",
            "https://x:http",
            "https://:80",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }
}
