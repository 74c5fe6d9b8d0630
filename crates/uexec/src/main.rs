//! `uexec`: one binary, several faces over one engine.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "uexec",
    version,
    about = "Run shell commands for AI agents: start, observe, poll, type into and stop long-running commands without orphans or lost output."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the MCP tools (exec_command, write_stdin, list_sessions, terminate_session)
    /// over stdio, or over streamable HTTP with --http.
    Mcp(uexec_mcp::McpArgs),
    /// Serve the exec server wire dialect (Codex-compatible) over WebSocket or stdio.
    Serve(uexec_server::ServeArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("UEXEC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Mcp(args) => uexec_mcp::run(args).await,
            Command::Serve(args) => uexec_server::serve(args).await,
        }
    })
}
