//! Running the MCP face: stdio (one store for the one client) or streamable HTTP.
//!
//! Shutdown, in every mode: stdin EOF (stdio), SIGTERM or SIGINT stop the server and shut the
//! store down, which kills every session and its process group before the process exits.
//!
//! Over HTTP the 2026-07 MCP protocol is stateless, so a store cannot hang off a transport
//! session: the server keeps one store per principal (the bearer token, or the loopback
//! user when there is none), and sessions are addressed by uexec's own ids.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{ServerHandler, ServiceExt};
use tokio_util::sync::CancellationToken;
use uexec_core::{LocalBackend, SessionStore};
use uexec_net::secret::{read_token_file, TokenFileError};
use uexec_net::tls::TlsError;
use uexec_net::{
    authorize, shutdown_signal, Access, ExposureError, HttpListener, Peer, SignalError,
};

use crate::environments;
use crate::environments::file::FileError;
use crate::error_chain::Chain;
use crate::server::{Options, UexecServer};
use crate::stores::{Principal, Stores};
use crate::wire::{self, Wire};
use crate::{McpOptions, TranscriptsDirError};

/// Why `uexec mcp` could not start or stopped; each says which flag, file or address.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error(transparent)]
    TranscriptsDir(#[from] TranscriptsDirError),
    #[error(transparent)]
    EnvironmentsFile(#[from] FileError),
    #[error(transparent)]
    TokenFile(#[from] TokenFileError),
    #[error(
        "--environment-token-file {name}={path}: there is no --environment or environments file entry named {name:?}"
    )]
    NoSuchEnvironment { name: String, path: String },
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A flag the store configuration cannot take (`--writable-root`...), named.
    #[error("{0}")]
    Settings(String),
    #[error("--tls-cert and --tls-key serve HTTPS: they need --http ADDR")]
    TlsWithoutHttp,
    #[error(transparent)]
    Exposure(#[from] ExposureError),
    #[error("cannot read the working directory (the daemon's hello carries it)")]
    WorkingDir(#[source] std::io::Error),
    #[error("MCP handshake over stdio failed")]
    Handshake(#[source] Box<rmcp::service::ServerInitializeError>),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Signal(#[from] SignalError),
}

/// Runs `uexec mcp` until its transport ends or a signal arrives; every session is killed
/// before it returns.
pub async fn run(args: McpOptions) -> Result<(), McpError> {
    args.transcripts.check()?;
    let registry = environments::start::start(&environments::start::read(&args)?)?;
    let shared = registry.environments();
    let config = args.store_config().map_err(McpError::Settings)?;
    let options = Options {
        codex_tools_only: args.codex_tools_only,
        extended: args.extended,
        structured: args.structured,
        tasks: !args.no_tasks,
        approval_timeout: args.approval_timeout,
        hooks: crate::hooks::Hooks::load(&args.hooks).map_err(McpError::Settings)?,
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
        None if args.listener.tls_cert.is_some() => Err(McpError::TlsWithoutHttp),
        None => serve_stdio(server, Wire::new(args.extended && !args.no_tasks)).await,
        Some(addr) => {
            // A request dropped by its client is cancelled, losing nothing (`dropped`).
            let sessions = Arc::new(crate::dropped::CancelDropped::new(Arc::new(
                LocalSessionManager::default(),
            )));
            serve_http(&args, addr, move || Ok(server.for_connection()), sessions).await
        }
    };
    stores.shutdown();
    result
}

async fn serve_stdio(server: UexecServer, wire: Wire) -> Result<(), McpError> {
    let (stdin, stdout) = rmcp::transport::stdio();
    // A client that closed its stdin still reads the answers to what it asked (`printf
    // REQUESTS | uexec mcp`), for at most `wire::lines::CLOSING`; its calls are cancelled
    // then. Its listen streams end at once ([`crate::hangup`]).
    let (input_ended, calls_cut) = (CancellationToken::new(), CancellationToken::new());
    let server = server.cancelled_by(calls_cut.clone(), input_ended.clone());
    let stdin = crate::hangup::Watched::new(stdin, input_ended);
    let running = tokio::select! {
        running = server.serve(wire::lines::transport(stdin, stdout, wire, calls_cut)) => running.map_err(|e| McpError::Handshake(Box::new(e)))?,
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

/// Serves streamable HTTP at `addr`: `handler` makes the handler of each session (and of each
/// request without one), `sessions` keeps the sessions. Tokens, hosts, origins and TLS are
/// `args`'s.
pub(crate) async fn serve_http<S, M>(
    args: &McpOptions,
    addr: SocketAddr,
    handler: impl Fn() -> Result<S, std::io::Error> + Send + Sync + 'static,
    sessions: Arc<M>,
) -> Result<(), McpError>
where
    S: ServerHandler + Send + 'static,
    M: SessionManager,
{
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
    let listener = HttpListener::bind(addr, options)
        .await
        .map_err(|source| McpError::Listen { addr, source })?;
    let local = listener.local_addr();
    let scheme = if listener.is_tls() { "https" } else { "http" };
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
        .with_allowed_origins(own_origins(scheme, local).chain(args.allow_origins.iter().cloned()))
        .with_cancellation_token(cancel.child_token());
    let service = StreamableHttpService::new(handler, sessions, config);
    let principals: Arc<[Principal]> = tokens.iter().map(|t| Principal::of_token(t)).collect();
    let tokens = Arc::new(tokens);
    // What rmcp's model cannot say (tools' `execution`, listen's `taskIds`): `wire::http`.
    let wire = Wire::new(args.extended && !args.no_tasks);
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| wire::http::layer(wire.clone(), req, next),
        ))
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let tokens = tokens.clone();
                let principals = principals.clone();
                async move { check_access(&tokens, &principals, req, next).await }
            },
        ));
    eprintln!("uexec mcp: serving streamable HTTP at {scheme}://{local}/mcp");
    let stop = cancel.clone();
    listener
        .serve(router, async move {
            if let Err(e) = shutdown_signal().await {
                tracing::error!("{}", Chain(&e));
            }
            stop.cancel();
        })
        .await;
    Ok(())
}

/// This server's own origins, admitted without `--allow-origin`: a page with one of them
/// was served by this very listener (it serves none), so it is no DNS-rebinding page (whose
/// origin names the attacker's host) nor another local server's (another port).
fn own_origins(scheme: &str, local: SocketAddr) -> impl Iterator<Item = String> + '_ {
    let port = local.port();
    let ip = match local.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    [
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "[::1]".to_owned(),
        ip,
    ]
    .into_iter()
    .map(move |host| format!("{scheme}://{host}:{port}"))
}

/// Lets a request through when it carries one of the tokens, or, with no token configured,
/// when it comes from this server's own user over loopback (see `uexec_net`). A
/// token's request runs as that token's [`Principal`] (`principals[i]` is `tokens[i]`'s:
/// a fingerprint, never the token itself).
async fn check_access(
    tokens: &[String],
    principals: &[Principal],
    mut req: Request,
    next: Next,
) -> Response {
    // OAuth discovery: this server has no authorization server, and says so as nothing
    // there (404), not as a refusal a client would take for a login to start (401).
    if req.uri().path().starts_with("/.well-known/") {
        return axum::http::StatusCode::NOT_FOUND.into_response();
    }
    let peer = req.extensions().get::<Peer>().cloned();
    match authorize(tokens, req.headers(), peer.as_ref()).await {
        Ok(Access::Token(index)) => {
            if let Some(principal) = principals.get(index) {
                req.extensions_mut().insert(principal.clone());
            }
        }
        Ok(Access::SameUser) => {}
        Err(refusal) => return refusal.into_response(),
    }
    next.run(req).await
}
