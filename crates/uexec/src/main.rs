//! `uexec`: one binary, several faces over one engine.

mod last_will;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "uexec",
    version,
    about = "Run shell commands for AI agents: start, observe, poll, type into and stop long-running commands without orphans or lost output."
)]
struct Cli {
    /// Write logs to this file instead of stderr (the level comes from UEXEC_LOG, e.g.
    /// `UEXEC_LOG=debug`; default `warn`). Logs never go to stdout.
    #[arg(long, global = true, value_name = "PATH")]
    log_file: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the MCP tools (exec_command, write_stdin, list_sessions, terminate_session)
    /// over stdio, or over streamable HTTP with --http.
    #[command(after_help = "Examples:
  uexec mcp                                     stdio, for Codex, Claude Code, Cursor...
  claude mcp add uexec -- /path/to/uexec mcp    register it with Claude Code
  uexec mcp --http 127.0.0.1:8765               streamable HTTP at http://127.0.0.1:8765/mcp
  uexec mcp --environment box=ws://box:9000     also run commands on an exec server (environment_id: \"box\")

Every session is killed when the client goes away (stdin EOF), on SIGTERM/SIGINT, and, through
a watchdog, even when uexec itself is killed.")]
    Mcp(uexec_mcp::McpArgs),
    /// Serve the exec server wire dialect (Codex-compatible) over WebSocket or stdio.
    #[command(after_help = "Examples:
  uexec serve                                          ws://127.0.0.1:<free port>, printed on stdout
  uexec serve --listen ws://0.0.0.0:9000 --token T     reachable from other hosts (token required)
  uexec serve --listen stdio                           newline-delimited JSON on stdin/stdout
  CODEX_EXEC_SERVER_URL=ws://host:9000 codex           let Codex run its commands here")]
    Serve(uexec_server::ServeArgs),
}

fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some(last_will::SUBCOMMAND) {
        last_will::run();
        return Ok(());
    }
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("UEXEC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match &cli.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| anyhow::anyhow!("cannot open the log file {}: {e}", path.display()))?;
            logs.with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init();
        }
        None => logs.with_writer(std::io::stderr).init(),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    last_will::install();
    runtime.block_on(async move {
        match cli.command {
            Command::Mcp(args) => uexec_mcp::run(args).await,
            Command::Serve(args) => uexec_server::serve(args).await,
        }
    })
}
