//! `uexec mcp --daemon --http ADDR`: the streamable HTTP face runs here, and every MCP
//! session it serves is a connection to the daemon, where the sessions live (`uexec ls`
//! sees them) and outlive this process.
//!
//! Why at the transport, not as a handler: rmcp's session manager already routes an HTTP
//! session's messages (a response to the POST of its request, progress by its token, the
//! rest to the GET stream), and the daemon already serves MCP per connection. So each HTTP
//! session's JSON-RPC messages are copied to its daemon connection and back unread: the
//! client's `initialize` reaches the daemon as the client sent it, and whatever the daemon
//! says (results, progress, `resources/updated`, `list_changed`, logging) reaches the
//! client. A handler here would restate every method and lag behind each new one.
//!
//! 1. A client's `initialize` makes an rmcp session ([`LocalSessionManager`]). Its worker's
//!    transport, where the session's messages come out, is kept here; rmcp's handler of the
//!    session is given a [`Lease`] instead, which tells it the session started and, later,
//!    that it ended ([`Lease`] says why rmcp needs one).
//! 2. The `initialize` request carries the HTTP request's [`Principal`]: the owner is
//!    `--owner` (else `mcp:` and the working directory), and for a bearer token that owner,
//!    `#` and the token's principal (a fingerprint), so two tokens never share sessions.
//! 3. The daemon is connected with this process's hello (started if none runs), and the
//!    relay ([`relay`]) copies messages both ways until either side ends.
//! 4. DELETE, or the session's idle expiry, ends the worker: the relay ends and closes the
//!    daemon connection, and the daemon keeps the sessions, as with stdio `--daemon`. The
//!    daemon gone, the relay ends the session: the client's next request is answered 404
//!    and a client initializes again, which starts a new daemon.
//!
//! The 2026-07-28 protocol has no sessions (each request stands alone), so its requests
//! are refused as an unsupported version: a client that tries it first falls back to
//! `initialize`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::request::Parts;
use futures::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ErrorData, GetExtensions as _, ProtocolVersion, ServerConfig,
    ServerJsonRpcMessage,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::{Transport, WorkerTransport};
use rmcp::{RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;
use uexec_protocol::daemon::Hello;

use super::client::{connect, LocalHello as _};
use super::relay;
use crate::serve::{serve_http, McpError};
use crate::stores::Principal;
use crate::McpOptions;

/// Where and as whom the HTTP sessions are served.
#[derive(Debug, Clone)]
pub struct DaemonLink {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The owner of requests without a token; a token's owner is this and its principal.
    pub owner: String,
}

/// Serves streamable HTTP (`args.http`, its tokens, hosts, origins and TLS) until a signal;
/// each session runs in the daemon of `link`.
pub async fn serve(args: McpOptions, link: DaemonLink) -> Result<(), McpError> {
    let Some(addr) = args.http else {
        return Err(McpError::Settings(
            "serving the daemon over HTTP needs --http ADDR".to_owned(),
        ));
    };
    let hello =
        Hello::here(link.owner.clone(), args.hello_settings()?).map_err(McpError::WorkingDir)?;
    let sessions = Arc::new(DaemonSessions {
        inner: LocalSessionManager::default(),
        link,
        hello,
        open: Mutex::default(),
    });
    // A request dropped by its client is cancelled in the daemon too (`crate::dropped`).
    let sessions = Arc::new(crate::dropped::CancelDropped::new(sessions));
    serve_http(&args, addr, || Ok(SessionsOnly), sessions).await
}

/// The owner of a request of `principal` (none: no token) when the base owner is `base`.
fn owner_of(base: &str, principal: Option<&Principal>) -> String {
    match principal {
        Some(p) => format!("{base}#{}", p.0),
        None => base.to_owned(),
    }
}

/// rmcp's sessions, each relayed to a daemon connection of its own.
struct DaemonSessions {
    inner: LocalSessionManager,
    link: DaemonLink,
    /// This process's hello (its directory, environment and settings); each connection's
    /// names its owner.
    hello: Hello,
    open: Mutex<HashMap<SessionId, OpenSession>>,
}

/// A session of [`DaemonSessions`].
struct OpenSession {
    /// Where the session's messages come out, until its `initialize` connects the daemon.
    worker: Option<WorkerTransport<LocalSessionWorker>>,
    /// Cancelled when the session ends, whichever side ends it.
    ended: CancellationToken,
}

impl DaemonSessions {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, OpenSession>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends session `id`: its relay and its rmcp handler stop.
    fn end(&self, id: &SessionId) {
        if let Some(session) = self.open().remove(id) {
            session.ended.cancel();
        }
    }
}

impl SessionManager for DaemonSessions {
    type Error = LocalSessionManagerError;
    type Transport = Lease;

    async fn create_session(&self) -> Result<(SessionId, Lease), Self::Error> {
        let (id, worker) = self.inner.create_session().await?;
        let ended = CancellationToken::new();
        self.open().insert(
            id.clone(),
            OpenSession {
                worker: Some(worker),
                ended: ended.clone(),
            },
        );
        Ok((id, Lease::new(ended)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let taken = self
            .open()
            .get_mut(id)
            .and_then(|s| Some((s.worker.take()?, s.ended.clone())));
        let Some((worker, ended)) = taken else {
            return Err(LocalSessionManagerError::SessionNotFound(id.clone()));
        };
        let (request_id, principal) = match &message {
            ClientJsonRpcMessage::Request(req) => (
                Some(req.id.clone()),
                req.request
                    .extensions()
                    .get::<Parts>()
                    .and_then(|parts| parts.extensions.get::<Principal>())
                    .cloned(),
            ),
            _ => (None, None),
        };
        let hello = Hello {
            owner: owner_of(&self.link.owner, principal.as_ref()),
            ..self.hello.clone()
        };
        match connect(&self.link.socket, &hello, true, &[]).await {
            Ok(connected) => {
                tracing::debug!(session = %id, owner = %hello.owner, "HTTP session relayed to the daemon");
                tokio::spawn(relay::run(worker, connected, ended));
            }
            Err(e) => {
                let why = format!("uexec mcp --daemon: {e:#}");
                tracing::warn!(session = %id, "{why}");
                self.end(id);
                let _ = self.inner.close_session(id).await;
                return Ok(ServerJsonRpcMessage::error(
                    ErrorData::internal_error(why, None),
                    request_id,
                ));
            }
        }
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.end(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}

/// What rmcp serves its handler of a session on, in place of the session's transport (which
/// the relay has): rmcp runs one handler per session and ends the session when the handler
/// ends. The lease says `initialize` and `initialized` (answered by [`SessionsOnly`], the
/// answer dropped), then nothing until the session ends, when it closes.
pub struct Lease {
    opening: std::vec::IntoIter<ClientJsonRpcMessage>,
    ended: CancellationToken,
}

impl Lease {
    fn new(ended: CancellationToken) -> Self {
        let opening = [
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": ProtocolVersion::LATEST_WITH_INITIALIZE,
                "capabilities": {},
                "clientInfo": {"name": "uexec-http-session", "version": env!("CARGO_PKG_VERSION")},
            }}),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ];
        let opening: Vec<ClientJsonRpcMessage> = opening
            .into_iter()
            .filter_map(|m| serde_json::from_value(m).ok())
            .collect();
        Self {
            opening: opening.into_iter(),
            ended,
        }
    }
}

impl Transport<RoleServer> for Lease {
    type Error = std::io::Error;

    fn send(
        &mut self,
        _item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(Ok(()))
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        if let Some(next) = self.opening.next() {
            return Some(next);
        }
        self.ended.cancelled().await;
        None
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The handler rmcp makes per session and per request without one: the session's is told
/// only that its [`Lease`] began; a request of the 2026-07-28 protocol (no session) is
/// refused as a version this face does not serve.
struct SessionsOnly;

impl ServerHandler for SessionsOnly {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::default()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_is_an_owner_of_its_own_and_no_token_the_base_owner() {
        let alpha = Principal::of_token("alpha");
        let beta = Principal::of_token("beta");
        let a = owner_of("mcp:/w", Some(&alpha));
        assert_ne!(a, owner_of("mcp:/w", Some(&beta)));
        assert_eq!(a, owner_of("mcp:/w", Some(&Principal::of_token("alpha"))));
        assert!(
            a.starts_with("mcp:/w#token-") && !a.contains("alpha"),
            "{a}"
        );
        assert_eq!(owner_of("mcp:/w", None), "mcp:/w");
    }

    #[test]
    fn the_lease_opens_with_the_handshake_then_waits_for_the_end() {
        let ended = CancellationToken::new();
        let mut lease = Lease::new(ended.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let first = lease.receive().await.expect("initialize");
            assert!(
                serde_json::to_string(&first)
                    .expect("json")
                    .contains("\"initialize\""),
                "{first:?}"
            );
            let second = lease.receive().await.expect("initialized");
            assert!(serde_json::to_string(&second)
                .expect("json")
                .contains("notifications/initialized"));
            ended.cancel();
            assert!(lease.receive().await.is_none());
        });
    }
}
