//! The hardened accept loop of both faces' HTTP listeners.
//!
//! `axum::serve` has no timer, so hyper's header-read timeout is off: a client that sends
//! half a request holds its connection (and an fd) forever, and a few hundred of them reach
//! the fd limit, after which every `process/start` fails with EMFILE. Here:
//! 1. a semaphore caps the connections being served; one beyond the cap is answered `503`
//!    (plain text) or simply closed (TLS) at once, so it costs an fd for a moment only;
//! 2. an accept error makes the loop back off, said once in a while
//!    ([`crate::backoff`]: EMFILE/ENFILE: the fds come back as connections end; spinning on
//!    it would only burn a core);
//! 3. a TLS handshake must finish within the header-read timeout;
//! 4. hyper's HTTP/1 server, with a tokio timer, closes a connection whose request headers
//!    do not arrive within that timeout, and allows upgrades (WebSocket). An upgraded socket
//!    leaves the cap: by then it is authenticated;
//! 5. every request carries the connection's [`Peer`] in its extensions (one per
//!    connection: who it is, when a request asks, is looked up once for all of them);
//! 6. a listener that admits only its own user ([`Admit::OwnUser`]: one with no token to
//!    check, as the password page) looks the peer up before it reads a byte, and closes
//!    (plain text: after a `403`) a connection of another user or of a sandboxed command:
//!    such a peer holds a slot under the cap only while it is looked up.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tower_service::Service as _;

use crate::{LocalUser, Peer, HEADER_READ_TIMEOUT_MS, MAX_CONNECTIONS};

/// What a connection beyond the cap gets (plain text only).
const BUSY_RESPONSE: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
/// What a connection [`Admit::OwnUser`] refuses gets (plain text only).
const FORBIDDEN_RESPONSE: &[u8] = b"HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\
    content-length: 55\r\nconnection: close\r\n\r\nonly this server's own user may connect, over loopback\n";

/// Who may hold a connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Admit {
    /// Anyone: each request is checked ([`crate::authorize`]).
    #[default]
    Anyone,
    /// Only a loopback peer of this process's uid, outside every sandbox
    /// ([`LocalUser::Same`]), checked before anything is read.
    OwnUser,
}

/// How a listener serves.
#[derive(Clone)]
pub struct ListenerOptions {
    /// Serve TLS with this configuration.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Longest wait for a request's headers (and for the TLS handshake).
    pub header_read_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
    /// Who may hold a connection.
    pub admit: Admit,
}

impl Default for ListenerOptions {
    fn default() -> Self {
        Self {
            tls: None,
            header_read_timeout: Duration::from_millis(HEADER_READ_TIMEOUT_MS),
            max_connections: MAX_CONNECTIONS,
            admit: Admit::Anyone,
        }
    }
}

impl std::fmt::Debug for ListenerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerOptions")
            .field("tls", &self.tls.is_some())
            .field("header_read_timeout", &self.header_read_timeout)
            .field("max_connections", &self.max_connections)
            .field("admit", &self.admit)
            .finish()
    }
}

/// A bound TCP listener serving an axum app over HTTP/1 (optionally TLS).
#[derive(Debug)]
pub struct HttpListener {
    listener: TcpListener,
    local_addr: SocketAddr,
    options: ListenerOptions,
}

impl HttpListener {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(addr: SocketAddr, options: ListenerOptions) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        Ok(Self {
            listener,
            local_addr,
            options,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Whether connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.options.tls.is_some()
    }

    /// Serves `app` until `shutdown` resolves; connections still open then are dropped with
    /// the runtime.
    pub async fn serve(self, app: Router, shutdown: impl Future<Output = ()>) {
        let permits = Arc::new(Semaphore::new(self.options.max_connections));
        let tls = self.options.tls.clone().map(TlsAcceptor::from);
        let timeout = self.options.header_read_timeout;
        let admit = self.options.admit;
        let mut backoff = crate::backoff::AcceptBackoff::new(self.local_addr.to_string());
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = &mut shutdown => return,
            };
            let (tcp, remote) = match accepted {
                Ok(accepted) => {
                    backoff.succeeded();
                    accepted
                }
                Err(e) => {
                    let wait = backoff.failed(&e);
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = &mut shutdown => return,
                    }
                    continue;
                }
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                tracing::debug!(%remote, "connection cap reached; refusing a connection");
                if tls.is_none() {
                    let _ = tcp.try_write(BUSY_RESPONSE);
                }
                continue;
            };
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
            let peer = Peer::new(remote, tcp.local_addr().unwrap_or(self.local_addr));
            let app = app.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let _permit = permit;
                if admit == Admit::OwnUser {
                    let user = peer.user().await;
                    if user != LocalUser::Same {
                        tracing::debug!(%remote, ?user, "refused a connection: not this user's");
                        if tls.is_none() {
                            let _ = tcp.try_write(FORBIDDEN_RESPONSE);
                        }
                        return;
                    }
                }
                match tls {
                    None => serve_connection(tcp, app, peer, timeout).await,
                    Some(acceptor) => {
                        match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
                            Ok(Ok(stream)) => serve_connection(stream, app, peer, timeout).await,
                            Ok(Err(e)) => tracing::debug!(%remote, "TLS handshake failed: {e}"),
                            Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
                        }
                    }
                }
            });
        }
    }
}

async fn serve_connection<I>(io: I, app: Router, peer: Peer, header_read_timeout: Duration)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let remote = peer.remote;
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(peer.clone());
        let mut app = app.clone();
        async move { app.call(request).await }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    if let Err(e) = connection.await {
        tracing::debug!(%remote, "HTTP connection ended: {e}");
    }
}
