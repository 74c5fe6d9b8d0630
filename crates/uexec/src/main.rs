//! `uexec`: one binary, several faces over one engine.

mod last_will;

use std::os::unix::fs::OpenOptionsExt as _;

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

// Parsed once and consumed at once: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the MCP tools (exec_command, write_stdin, list_sessions, terminate_session)
    /// over stdio, or over streamable HTTP with --http.
    #[command(after_help = "Examples:
  uexec mcp                                     stdio, for Codex, Claude Code, Cursor...
  claude mcp add uexec -- /path/to/uexec mcp    register it with Claude Code
  uexec mcp --http 127.0.0.1:8765               streamable HTTP at http://127.0.0.1:8765/mcp (this user only)
  uexec mcp --http 0.0.0.0:8765 --token-file TOKEN --tls-cert cert.pem --tls-key key.pem
                                                https://HOST:8765/mcp for clients with the token
  uexec mcp --environment box=wss://box:9000 --environment-token-file box=BOXTOKEN --remote-ca ca.pem
                                                also run commands on an exec server (environment_id: \"box\")

Every session is killed when the client goes away (stdin EOF), on SIGTERM/SIGINT, and, through
a watchdog, even when uexec itself is killed.")]
    Mcp(uexec_mcp::McpArgs),
    /// Serve the exec server wire dialect (Codex-compatible) over WebSocket or stdio.
    #[command(after_help = "Examples:
  uexec serve                                          ws://127.0.0.1:<free port>, printed on stdout (this user only)
  uexec serve --listen wss://0.0.0.0:9000 --token-file TOKEN --tls-cert cert.pem --tls-key key.pem
                                                       reachable from other hosts (token and TLS required)
  uexec serve --listen stdio                           newline-delimited JSON on stdin/stdout
  CODEX_EXEC_SERVER_URL=wss://host:9000 codex          let Codex run its commands here

Without a token, only this server's own user may connect (checked over loopback). A
non-loopback address needs a token, and TLS unless --insecure-plaintext is given.")]
    Serve(uexec_server::ServeArgs),
    /// Print what this machine supports of the sandbox (Landlock, user, pid, mount and
    /// network namespaces, seccomp); exit 0.
    Doctor {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> anyhow::Result<()> {
    // The sandbox launcher first: single-threaded and dumpable (its uid map is written
    // through /proc/self, which an undumpable process does not own).
    if std::env::args_os().nth(1).as_deref()
        == Some(uexec_core::sandbox::LAUNCHER_SUBCOMMAND.as_ref())
    {
        std::process::exit(uexec_core::sandbox::launcher::run(
            std::env::args_os().skip(2),
        ));
    }
    harden_process();
    if std::env::args().nth(1).as_deref() == Some(last_will::SUBCOMMAND) {
        last_will::run();
        return Ok(());
    }
    let cli = Cli::parse();
    if let Command::Doctor { json } = cli.command {
        // Before any thread exists: the probes fork and enter namespaces.
        let facilities = uexec_core::sandbox::doctor::check();
        print!("{}", uexec_core::sandbox::doctor::render(&facilities, json));
        return Ok(());
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("UEXEC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match &cli.log_file {
        Some(path) => {
            // 0600: logs name commands, paths and clients; they are for this user alone.
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
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
            Command::Doctor { .. } => Ok(()),
        }
    })
}

/// Start-up hardening, before anything else runs (the watchdog included: it holds the same
/// environment):
/// 1. undumpable: the commands we run, of the same user, can no longer read our
///    `/proc/PID/environ` (a token in UEXEC_TOKEN) or memory, nor ptrace us;
/// 2. SIGCHLD back to SIG_DFL: inherited as SIG_IGN, children would be reaped by the kernel
///    and no session could ever learn its exit status;
/// 3. the soft fd limit raised to the hard one, so sessions and connections do not meet
///    EMFILE at 1024.
///
/// Logging is not set up yet: failures go to stderr.
fn harden_process() {
    use uexec_core::sys;
    if let Err(e) = sys::set_undumpable() {
        eprintln!("uexec: warning: cannot make the process undumpable: {e}");
    }
    sys::reset_ignored_sigchld();
    if let Err(e) = sys::raise_nofile_limit() {
        eprintln!("uexec: warning: cannot raise the open-file limit: {e}");
    }
}
