//! `uexec serve`'s flags: the clap twin of [`uexec_server::ServeOptions`]. The library takes
//! plain options; the flags, their help, defaults and parsers live here, in the binary.

use uexec_server::ServeOptions;

use super::limits::LimitArgs;
use super::net::ListenerArgs;

/// Arguments of `uexec serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Where to listen: `ws://IP:PORT` (`wss://IP:PORT` with --tls-cert; port 0 picks one;
    /// the bound URL is printed as the first line on stdout) or `stdio` (newline-delimited
    /// JSON on stdin/stdout; stdin EOF stops the server and its processes).
    #[arg(long, default_value = "ws://127.0.0.1:0")]
    pub listen: String,

    /// Bearer token WebSocket clients must send (`Authorization: Bearer TOKEN`). Required to
    /// listen on anything but a loopback address. Without one, only this server's own user
    /// may connect (over loopback). Visible in `ps`: prefer --token-file.
    #[arg(long, env = "UEXEC_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Read the bearer token from this file (its first line; keep it mode 0600); wins over
    /// --token and UEXEC_TOKEN.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub listener: ListenerArgs,

    /// Run every `-lc` login of bash or sh as a real login shell, reading the profile each
    /// time, instead of from a snapshot of what the profile set up (environment, functions,
    /// aliases, options), taken once and rebuilt when a profile file changes.
    #[arg(long)]
    pub no_shell_snapshot: bool,

    #[command(flatten, next_help_heading = "Limits")]
    pub limits: LimitArgs,

    /// Judge every `process/start` by these rules (repeatable; Codex `.rules` or Claude Code
    /// settings JSON, as `uexec mcp --rules`): a refused start is a JSON-RPC error naming the
    /// rule and its justification (`data.kind = "refused"`), and nothing starts. No person
    /// can be asked on this wire: a `prompt` decision refuses too, saying so.
    #[arg(help_heading = "Rules", long, value_name = "FILE")]
    pub rules: Vec<std::path::PathBuf>,
    /// The decision for a start no rule matches: allow (default), prompt or forbidden.
    #[arg(help_heading = "Rules", long, value_name = "DECISION", value_parser = |s: &str| s.parse::<uexec_core::policy::rules::Decision>(), requires = "rules")]
    pub unmatched: Option<uexec_core::policy::rules::Decision>,
    /// Where the rules judge: `text` (default: each start's argv or script, before it
    /// starts) or `exec` (also every exec of every process a start leads to: `cmd=git; $cmd
    /// push`, `eval`, `make`, `sh -c` are judged by what they really run; a forbidden exec
    /// fails with EACCES, which the process's own shell reports, and a `prompt` is refused,
    /// no person being there to ask; each judged exec is in `uexec audit`). Linux, seccomp
    /// user notification (5.0+); where it is missing, the text alone, said at start. A
    /// policy that tells a model no, not a wall: the sandbox is the wall.
    #[arg(help_heading = "Rules", long, value_name = "text|exec", value_parser = super::mcp::parse_rules_at, requires = "rules")]
    pub rules_at: Option<uexec_core::policy::exec_rules::RulesAt>,
}

impl From<ServeArgs> for ServeOptions {
    fn from(args: ServeArgs) -> Self {
        let decisions = uexec_mcp::audit::AuditFile::of_this_user()
            .map(|file| file.for_owner(format!("serve:{}", args.listen)));
        Self {
            listen: args.listen,
            token: args.token,
            token_file: args.token_file,
            listener: args.listener.into(),
            shell_snapshot: !args.no_shell_snapshot,
            limits: args.limits.into(),
            rules: args.rules,
            unmatched: args.unmatched,
            rules_at: args.rules_at.unwrap_or_default(),
            // The engine hands the launcher over, when the rules judge at exec.
            confinement: None,
            decisions,
        }
    }
}
