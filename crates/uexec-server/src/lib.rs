//! The exec-server face of uexec: `uexec serve` speaks the Codex exec-server dialect
//! (JSON-RPC without the `jsonrpc` field, see `uexec-protocol`) over WebSocket or stdio, so
//! Codex can run its commands on uexec and uexec on Codex.
//!
//! The flow of a command:
//! 1. a transport ([`transport::ws`], [`transport::stdio`]) accepts a peer and makes a
//!    [`Connection`](connection::Connection) on the shared [`ExecServer`];
//! 2. `initialize` opens (or resumes) a [`Session`](session::Session) in the
//!    [`Registry`](registry::Registry); `initialized` completes the handshake;
//! 3. `process/start` spawns through a `uexec_core` [`Backend`](uexec_core::Backend) and hands
//!    the process to its *pump* task, which numbers output, exit and close events on one seq
//!    counter, retains the newest 1 MiB of output and pushes notifications to whichever
//!    connection the session is attached to;
//! 4. `process/read|write|signal|terminate` act through a cheap
//!    [`ProcessHandle`](process::ProcessHandle); long polls and stdin writes are answered
//!    from tasks so they never block the connection;
//! 5. a dropped connection detaches its session, which lives on for 30 s for
//!    `resumeSessionId`, then its processes are killed; closed processes stay readable 30 s;
//! 6. stdin EOF (stdio), SIGINT or SIGTERM shut the server down, killing every process group.
//!
//! The other way round, the engine's backend on an exec server is `uexec-client`'s
//! `RemoteBackend`; the listener hardening both faces share is `uexec-net`.
//!
//! The face holds no process logic of its own: spawning, PTYs, process groups and reaping
//! are the backend's.

#![forbid(unsafe_code)]

mod caller;
pub mod config;
pub mod connection;
pub mod env_policy;
pub mod environment;
mod handlers;
pub mod outbound;
pub mod process;
pub mod registry;
pub mod server;
pub mod session;
pub mod transport;

use std::sync::Arc;

use anyhow::Context as _;
use uexec_core::LocalBackend;
use uexec_net::shutdown_signal;

pub use config::ServerConfig;
pub use server::ExecServer;
use transport::ws::WsListener;
use transport::ListenAddr;

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
    pub listener: uexec_net::ListenerArgs,

    /// Run every `-lc` login of bash or sh as a real login shell, reading the profile each
    /// time, instead of from a snapshot of what the profile set up (environment, functions,
    /// aliases, options), taken once and rebuilt when a profile file changes.
    #[arg(long)]
    pub no_shell_snapshot: bool,
}

/// Runs the exec server until its transport ends or SIGINT/SIGTERM arrives, then kills every
/// process it started.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let listen = ListenAddr::parse(&args.listen)?;
    let token = match &args.token_file {
        Some(path) => Some(uexec_net::secret::read_token_file("--token-file", path)?),
        None => args.token.clone().filter(|t| !t.is_empty()),
    };
    let config = ServerConfig {
        shell_snapshot: !args.no_shell_snapshot,
        ..ServerConfig::default()
    };
    let server = ExecServer::new(config, Arc::new(LocalBackend));
    let result = tokio::select! {
        result = run(server.clone(), listen, token, &args.listener) => result,
        signal = shutdown_signal() => Ok(signal?),
    };
    server.shutdown();
    result
}

async fn run(
    server: Arc<ExecServer>,
    listen: ListenAddr,
    token: Option<String>,
    listener_args: &uexec_net::ListenerArgs,
) -> anyhow::Result<()> {
    match listen {
        ListenAddr::Stdio => {
            if listener_args.tls_cert.is_some() {
                anyhow::bail!("--tls-cert and --tls-key need a wss:// --listen address, not stdio");
            }
            // On a runtime worker: spawns tie the children's parent-death signal to this thread.
            tokio::spawn(transport::stdio::serve(server))
                .await
                .context("the stdio connection panicked")?
                .context("reading stdin failed")
        }
        ListenAddr::WebSocket { addr, tls } => {
            if tls && listener_args.tls_cert.is_none() {
                anyhow::bail!(
                    "--listen wss://{addr} needs a certificate: pass --tls-cert and --tls-key"
                );
            }
            let options = listener_args.options()?;
            uexec_net::check_exposure(
                addr,
                token.is_some(),
                options.tls.is_some(),
                listener_args.insecure_plaintext,
                "--token, --token-file or UEXEC_TOKEN",
            )?;
            let listener = WsListener::bind_with(addr, options)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            announce(&listener.url())?;
            listener.serve(server, token).await;
            Ok(())
        }
    }
}

/// Prints the bound URL as the first stdout line, flushed (clients wait for it).
fn announce(url: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{url}")
        .and_then(|()| stdout.flush())
        .context("cannot write to stdout")
}
