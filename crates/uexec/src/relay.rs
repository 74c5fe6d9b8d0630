//! `uexec mcp` (over the daemon, its default): the MCP conversation on stdin/stdout,
//! carried to the user's daemon, which runs the sessions (and starts if none runs); with
//! `--daemon --http`, each session of the HTTP face served here
//! ([`uexec_mcp::daemon::http`]).
//!
//! Why in the binary: serving MCP in this process ([`uexec_mcp::run`]) or in the daemon is
//! the composition root's choice, and the relay only joins two streams over the daemon's
//! client ([`uexec_mcp::daemon::client`]). In the library, the MCP server called this relay
//! and the relay read the server's flags: an import circle.
//!
//! 1. The socket (`--daemon-socket`, else the default) and the owner (`--owner`, else `mcp:`
//!    and the working directory) say where and whose.
//! 2. The hello carries this process's directory, environment and settings, its environments
//!    among them (the files of their flags read and checked here, so a mistake names its
//!    flag before any daemon is asked), sent by [`connect`], which starts a daemon when none
//!    answers.
//!    A daemon that cannot be reached or refuses is [`Relayed::NoDaemon`], before anything
//!    was read from stdin: the caller may serve in-process instead. So is a default socket
//!    whose directory cannot be made or trusted (the temp dir out of inodes, with no
//!    runtime dir): no daemon could listen there.
//! 3. Bytes are copied both ways until either side ends: the client's EOF ends the
//!    conversation (the daemon ends its sessions after the linger); the daemon's EOF means
//!    it went away.
//!
//! With `--http` the library serves HTTP and connects the daemon per session (each bearer
//! token an owner of its own); this file only says where and as whom.

use std::path::PathBuf;

use anyhow::Context;
use tokio::io::AsyncWriteExt;
use uexec_mcp::daemon::client::{connect, Connected, LocalHello as _};
use uexec_mcp::daemon::http::DaemonLink;
use uexec_mcp::{McpError, McpOptions};
use uexec_protocol::daemon::Hello;

/// Where and as whom `uexec mcp --daemon` relays.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// `--daemon-socket` (default: the user's daemon socket).
    pub socket: Option<PathBuf>,
    /// `--owner` (default: `mcp:` and the working directory).
    pub owner: Option<String>,
}

/// How a relay ended.
#[derive(Debug)]
pub enum Relayed {
    /// The conversation is over.
    Done,
    /// No daemon would serve it (no directory for its socket, none could start, another
    /// build, a refusal), and why: nothing was read from stdin yet.
    NoDaemon(anyhow::Error),
}

/// Relays stdin and stdout (with `--http`, each HTTP session) to the daemon of `target`,
/// whose sessions get the settings of `options`.
pub async fn run(target: Target, options: McpOptions) -> anyhow::Result<Relayed> {
    let socket = match target.socket {
        Some(path) => path,
        None => match uexec_mcp::daemon::default_socket() {
            Ok(socket) => socket,
            Err(e) => {
                let why = anyhow::Error::new(e)
                    .context("cannot prepare the uexec daemon's socket directory");
                return Ok(Relayed::NoDaemon(why));
            }
        },
    };
    let owner = match target.owner {
        Some(owner) => owner,
        None => format!("mcp:{}", std::env::current_dir()?.display()),
    };
    if options.http.is_some() {
        let link = DaemonLink { socket, owner };
        uexec_mcp::daemon::http::serve(options, link).await?;
        return Ok(Relayed::Done);
    }
    if options.listener.tls_cert.is_some() {
        return Err(McpError::TlsWithoutHttp.into());
    }
    let hello = Hello::here(owner, options.hello_settings()?)?;
    let Connected { stream, after } = match connect(&socket, &hello, true, &[]).await {
        Ok(connected) => connected,
        Err(e) => return Ok(Relayed::NoDaemon(e.into())),
    };
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    stdout.write_all(&after).await?;
    // Until both sides end: the client's EOF ends the conversation, and the daemon's
    // answers to what came before it still come down (it hangs up once it has sent them);
    // the daemon's EOF first means it went away.
    let up = async {
        let r = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        let _ = to_daemon.shutdown().await;
        r
    };
    let down = async {
        let r = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        let _ = stdout.flush().await;
        r
    };
    tokio::pin!(up, down);
    let gone = "the uexec daemon closed the connection (it was stopped or killed); the next start brings a new one";
    tokio::select! {
        // A failed write up is the daemon gone too: stdin itself does not fail.
        r = &mut up => {
            r.context(gone)?;
            down.await.context(gone)?;
            Ok(Relayed::Done)
        }
        r = &mut down => {
            r.context(gone)?;
            anyhow::bail!(gone);
        }
    }
}
