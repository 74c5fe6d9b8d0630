//! `uexec serve` as a library call: [`serve`] runs an exec server on a local backend until
//! its transport ends or SIGINT/SIGTERM arrives, then kills every process it started.
//!
//! The steps:
//! 1. parse `listen` ([`ListenAddr`]) and read the token (a token file wins over the token);
//! 2. on stdio, refuse TLS files, and serve the one connection on a runtime worker (spawns
//!    tie the children's parent-death signal to the thread);
//! 3. on WebSocket, refuse `wss://` without a certificate, read the TLS files, refuse an
//!    exposure `uexec_net::check_exposure` forbids, bind, print the bound URL as the first
//!    stdout line (clients wait for it) and serve;
//! 4. whatever ends it, shut the server down: every session ends, every process is killed.
//!
//! The options are plain data: the binary's clap definitions (`args/serve.rs`) fill them. The
//! errors name the flags, as they are the words the person typed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use uexec_core::LocalBackend;
use uexec_net::secret::TokenFileError;
use uexec_net::tls::TlsError;
use uexec_net::{shutdown_signal, ExposureError, ListenerConfig, SignalError};

use crate::config::ServerConfig;
use crate::server::ExecServer;
use crate::transport::ws::WsListener;
use crate::transport::{self, ListenAddr, ListenAddrError};

/// What `uexec serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `ws://IP:PORT`, `wss://IP:PORT` or `stdio` ([`ListenAddr`]).
    pub listen: String,
    /// Bearer token WebSocket clients must send; an empty one is none.
    pub token: Option<String>,
    /// File to read the bearer token from; wins over `token`.
    pub token_file: Option<PathBuf>,
    pub listener: ListenerConfig,
    /// Start `-lc` logins of bash or sh from a snapshot of the profile
    /// ([`ServerConfig::shell_snapshot`]).
    pub shell_snapshot: bool,
    /// `--memory-max`, `--pids-max`, `--cpu-max`: the limits of each process's cgroup
    /// ([`ServerConfig::limits`]); the binary enables their controllers at start-up.
    pub limits: uexec_core::policy::Limits,
    /// `--rules`: command rules files every `process/start` is judged by.
    pub rules: Vec<PathBuf>,
    /// `--unmatched`: the decision for a start no rule matches (default allow).
    pub unmatched: Option<uexec_core::policy::rules::Decision>,
    /// `--rules-at`: the text of each start only (default), or every exec of its processes
    /// too, where this machine can hand them over (`exec_rules::exec_support`) and
    /// `confinement` has the launcher; else the text alone (the binary says so at start).
    pub rules_at: uexec_core::policy::exec_rules::RulesAt,
    /// What gives a spawn the launcher that hands its execs over (`uexec-sandbox`'s, from
    /// the binary); needed by `--rules-at exec` only.
    pub confinement: Option<Arc<dyn uexec_core::confine::Confinement>>,
    /// Where each start's decision is written down (the binary gives this user's audit
    /// record); `None`: counted in the metrics only.
    pub decisions: Option<Arc<dyn uexec_core::spawn::DecisionLog>>,
}

/// Why `uexec serve` could not serve, or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Listen(#[from] ListenAddrError),
    #[error(transparent)]
    TokenFile(#[from] TokenFileError),
    #[error("--tls-cert and --tls-key need a wss:// --listen address, not stdio")]
    TlsOnStdio,
    #[error("--listen wss://{addr} needs a certificate: pass --tls-cert and --tls-key")]
    NoCertificate { addr: SocketAddr },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Exposure(#[from] ExposureError),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write to stdout")]
    Announce(#[source] std::io::Error),
    #[error("the stdio connection panicked")]
    StdioPanicked(#[source] tokio::task::JoinError),
    #[error("reading stdin failed")]
    Stdin(#[source] std::io::Error),
    #[error(transparent)]
    Signal(#[from] SignalError),
    #[error("--rules: {0}")]
    Rules(#[from] uexec_rules::LoadError),
}

/// Runs the exec server until its transport ends or SIGINT/SIGTERM arrives, then kills every
/// process it started.
pub async fn serve(options: ServeOptions) -> Result<(), ServeError> {
    let listen = ListenAddr::parse(&options.listen)?;
    let token = match &options.token_file {
        Some(path) => Some(uexec_net::secret::read_token_file("--token-file", path)?),
        None => options.token.clone().filter(|t| !t.is_empty()),
    };
    let config = ServerConfig {
        shell_snapshot: options.shell_snapshot,
        limits: options.limits,
        ..ServerConfig::default()
    };
    let rules = uexec_rules::from_flags(&options.rules, options.unmatched)?.map(|rules| {
        for warning in rules.warnings() {
            tracing::warn!("--rules: {warning}");
        }
        Arc::new(rules) as Arc<dyn uexec_core::policy::rules::CommandRules>
    });
    let at_exec = at_exec(&options, rules.is_some());
    let server = ExecServer::with_rules(
        config,
        Arc::new(LocalBackend),
        rules,
        options.decisions.clone(),
        at_exec,
    );
    let result = tokio::select! {
        result = run(server.clone(), listen, token, &options.listener) => result,
        signal = shutdown_signal() => Ok(signal?),
    };
    server.shutdown();
    result
}

/// The launcher that hands each process's execs over, when the rules judge at exec and
/// this machine can (the binary says at start when it cannot); `None`: the text alone.
fn at_exec(
    options: &ServeOptions,
    has_rules: bool,
) -> Option<Arc<dyn uexec_core::confine::Confinement>> {
    use uexec_core::policy::exec_rules::{exec_support, RulesAt};
    if options.rules_at != RulesAt::Exec || !has_rules || exec_support().is_err() {
        return None;
    }
    if options.confinement.is_none() {
        tracing::warn!(
            "--rules-at exec: this uexec has no launcher to hand execs over; the rules judge \
             each process/start's text only"
        );
    }
    options.confinement.clone()
}

async fn run(
    server: Arc<ExecServer>,
    listen: ListenAddr,
    token: Option<String>,
    listener: &ListenerConfig,
) -> Result<(), ServeError> {
    match listen {
        ListenAddr::Stdio => {
            if listener.tls_cert.is_some() {
                return Err(ServeError::TlsOnStdio);
            }
            // On a runtime worker: spawns tie the children's parent-death signal to this thread.
            tokio::spawn(transport::stdio::serve(server))
                .await
                .map_err(ServeError::StdioPanicked)?
                .map_err(ServeError::Stdin)
        }
        ListenAddr::WebSocket { addr, tls } => {
            if tls && listener.tls_cert.is_none() {
                return Err(ServeError::NoCertificate { addr });
            }
            let options = listener.options()?;
            uexec_net::check_exposure(
                addr,
                token.is_some(),
                options.tls.is_some(),
                listener.insecure_plaintext,
                "--token, --token-file or UEXEC_TOKEN",
            )?;
            let bound = WsListener::bind_with(addr, options)
                .await
                .map_err(|source| ServeError::Bind { addr, source })?;
            announce(&bound.url())?;
            bound.serve(server, token).await;
            Ok(())
        }
    }
}

/// Prints the bound URL as the first stdout line, flushed (clients wait for it).
fn announce(url: &str) -> Result<(), ServeError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{url}")
        .and_then(|()| stdout.flush())
        .map_err(ServeError::Announce)
}
