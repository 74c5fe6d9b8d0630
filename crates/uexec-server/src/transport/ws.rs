//! `--listen ws://IP:PORT`: the WebSocket listener (axum, as Codex's own server, behind the
//! hardened accept loop of [`uexec_net`]: TLS, connection cap, header-read timeout).
//!
//! HTTP side, matching Codex 0.171:
//! 1. `GET /readyz` is `200` (no auth: it is a health check); `GET /metrics` is the
//!    figures as Prometheus text, with the same checks as an upgrade (beyond Codex);
//! 2. `GET /` with an `Origin` header is `403`, whatever the origin: browsers send one, and no
//!    web page may drive a process server on localhost; with a configured token, a missing
//!    or wrong `Authorization: Bearer` is `401`; without one, a peer that is not a loopback
//!    socket of the server's own user is `403` (see [`uexec_net`]); a `GET /` that is not an
//!    upgrade is `400`; other paths `404`, other methods `405`;
//! 3. an upgraded socket becomes one [`Connection`](crate::connection::Connection).
//!
//! Per socket, two tasks:
//! - the reader feeds text and binary messages to the connection (a message over
//!   `max_message_bytes` ends the socket: the WebSocket layer cannot skip it); a peer silent
//!   for `idle_timeout` (not even a pong) is considered gone;
//! - the writer drains the connection's queue and pings every `ping_interval`; a peer that
//!   accepts no bytes for `idle_timeout` is gone too (its end frees a reader stuck on a full
//!   queue); when the reader ends, the writer completes the close handshake and stops.
//!
//! However the socket ends, the connection is finished: its session is detached and can be
//! resumed until it expires.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::sync::oneshot;
use uexec_net::{authorize, HttpListener, ListenerOptions, Peer};

use crate::server::ExecServer;

/// Most messages written between two flushes.
const BURST_MESSAGES: usize = 64;
/// How long the writer may take to complete the close handshake.
const CLOSE_TIMEOUT_MS: u64 = 2_000;

/// A bound WebSocket listener, not yet serving.
#[derive(Debug)]
pub struct WsListener {
    http: HttpListener,
}

impl WsListener {
    /// Binds `addr` (port 0 picks a free port), plain text, default limits.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        Self::bind_with(addr, ListenerOptions::default()).await
    }

    /// Binds `addr` with these options (TLS, limits).
    pub async fn bind_with(addr: SocketAddr, options: ListenerOptions) -> std::io::Result<Self> {
        Ok(Self {
            http: HttpListener::bind(addr, options).await?,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }

    /// The URL clients connect to (`ws://127.0.0.1:PORT`, `wss://[::1]:PORT`).
    pub fn url(&self) -> String {
        let scheme = if self.http.is_tls() { "wss" } else { "ws" };
        format!("{scheme}://{}", self.local_addr())
    }

    /// Serves until the process ends. With `token`, it is required as a bearer token;
    /// without, only loopback peers of this process's own user get in.
    pub async fn serve(self, server: Arc<ExecServer>, token: Option<String>) {
        let state = WsState {
            server,
            tokens: Arc::new(token.into_iter().collect()),
        };
        let app = Router::new()
            .route("/", get(upgrade))
            .route("/readyz", get(|| async { StatusCode::OK }))
            .route("/metrics", get(metrics))
            .with_state(state);
        self.http.serve(app, std::future::pending()).await;
    }
}

#[derive(Clone)]
struct WsState {
    server: Arc<ExecServer>,
    tokens: Arc<Vec<String>>,
}

async fn upgrade(
    State(state): State<WsState>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    if headers.contains_key(header::ORIGIN) {
        return StatusCode::FORBIDDEN.into_response();
    }
    if let Err(refusal) = authorize(&state.tokens, &headers, peer.as_ref().map(|p| &p.0)).await {
        return refusal.into_response();
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    let config = state.server.config();
    ws.max_message_size(config.max_message_bytes)
        .max_frame_size(config.max_frame_bytes.min(config.max_message_bytes))
        .on_upgrade(move |socket| run_socket(state.server, socket))
}

/// `GET /metrics`: the figures as Prometheus text, to a client the upgrade would let in
/// (its token, or this user over loopback), never to a web page (an `Origin` is `403`).
async fn metrics(
    State(state): State<WsState>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
) -> Response {
    if headers.contains_key(header::ORIGIN) {
        return StatusCode::FORBIDDEN.into_response();
    }
    if let Err(refusal) = authorize(&state.tokens, &headers, peer.as_ref().map(|p| &p.0)).await {
        return refusal.into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.server.metrics_text(),
    )
        .into_response()
}

async fn run_socket(server: Arc<ExecServer>, socket: WebSocket) {
    let config = server.config().clone();
    let (mut sink, mut stream) = socket.split();
    let (mut conn, mut queue) = server.connect();
    let (stop_tx, mut stop) = oneshot::channel::<()>();

    let mut writer = tokio::spawn(async move {
        let start = tokio::time::Instant::now() + config.ping_interval;
        let mut ping = tokio::time::interval_at(start, config.ping_interval);
        loop {
            tokio::select! {
                text = queue.recv() => {
                    let Some(text) = text else { break };
                    // A peer that takes nothing for `idle_timeout` is as gone as a silent one.
                    let burst = write_burst(&mut sink, &mut queue, text);
                    match tokio::time::timeout(config.idle_timeout, burst).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            tracing::debug!("websocket write failed: {e}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!("websocket peer took nothing for {:?}", config.idle_timeout);
                            return;
                        }
                    }
                }
                _ = ping.tick() => {
                    if let Err(e) = sink.send(Message::Ping(Bytes::new())).await {
                        tracing::debug!("websocket ping failed: {e}");
                        return;
                    }
                }
                _ = &mut stop => break,
            }
        }
        let _ = tokio::time::timeout(Duration::from_millis(CLOSE_TIMEOUT_MS), sink.close()).await;
    });

    loop {
        let next = tokio::select! {
            next = tokio::time::timeout(config.idle_timeout, stream.next()) => next,
            _ = &mut writer => break,
        };
        match next {
            Ok(Some(Ok(Message::Text(text)))) => conn.handle_frame(text.as_bytes()).await,
            Ok(Some(Ok(Message::Binary(bytes)))) => conn.handle_frame(&bytes).await,
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) => {
                tracing::debug!("websocket closed by the peer");
                break;
            }
            Ok(Some(Err(e))) => {
                tracing::debug!("websocket read failed: {e}");
                break;
            }
            Err(_) => {
                tracing::debug!(
                    "websocket peer silent for {:?}; dropping it",
                    config.idle_timeout
                );
                break;
            }
        }
    }
    conn.finish();
    let _ = stop_tx.send(());
    if !writer.is_finished() {
        let _ =
            tokio::time::timeout(Duration::from_millis(CLOSE_TIMEOUT_MS + 500), &mut writer).await;
        writer.abort();
    }
}

/// Writes `first` and whatever else is already queued (up to [`BURST_MESSAGES`]), then
/// flushes once: a flood of output costs one syscall per burst, not one per message.
async fn write_burst<S>(
    sink: &mut S,
    queue: &mut tokio::sync::mpsc::Receiver<String>,
    first: String,
) -> Result<(), axum::Error>
where
    S: futures::Sink<Message, Error = axum::Error> + Unpin,
{
    sink.feed(Message::Text(first.into())).await?;
    for _ in 1..BURST_MESSAGES {
        match queue.try_recv() {
            Ok(text) => sink.feed(Message::Text(text.into())).await?,
            Err(_) => break,
        }
    }
    sink.flush().await
}
