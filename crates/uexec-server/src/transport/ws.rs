//! `--listen ws://IP:PORT`: the WebSocket listener (axum, as Codex's own server).
//!
//! HTTP side, matching Codex 0.171:
//! 1. `GET /readyz` is `200` (no auth: it is a health check);
//! 2. `GET /` with an `Origin` header is `403`, whatever the origin: browsers send one, and no
//!    web page may drive a process server on localhost; with a configured token, a missing
//!    or wrong `Authorization: Bearer` is `401`; a `GET /` that is not an upgrade is `400`;
//!    other paths `404`, other methods `405`;
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
use axum::serve::ListenerExt as _;
use axum::Router;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::server::ExecServer;

/// Most messages written between two flushes.
const BURST_MESSAGES: usize = 64;
/// How long the writer may take to complete the close handshake.
const CLOSE_TIMEOUT_MS: u64 = 2_000;

/// A bound WebSocket listener, not yet serving.
#[derive(Debug)]
pub struct WsListener {
    listener: TcpListener,
    local_addr: SocketAddr,
}

impl WsListener {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        Ok(Self {
            listener,
            local_addr,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The URL clients connect to (`ws://127.0.0.1:PORT`, `ws://[::1]:PORT`).
    pub fn url(&self) -> String {
        format!("ws://{}", self.local_addr)
    }

    /// Serves until the listener fails; `token`, when set, is required as a bearer token.
    pub async fn serve(
        self,
        server: Arc<ExecServer>,
        token: Option<String>,
    ) -> std::io::Result<()> {
        let state = WsState {
            server,
            token: token.map(Arc::from),
        };
        let app = Router::new()
            .route("/", get(upgrade))
            .route("/readyz", get(|| async { StatusCode::OK }))
            .with_state(state);
        // Small messages (a response, then a notification) must not wait for delayed ACKs.
        let listener = self.listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        axum::serve(listener, app).await
    }
}

#[derive(Clone)]
struct WsState {
    server: Arc<ExecServer>,
    token: Option<Arc<str>>,
}

async fn upgrade(
    State(state): State<WsState>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    if headers.contains_key(header::ORIGIN) {
        return StatusCode::FORBIDDEN.into_response();
    }
    if let Some(token) = &state.token {
        if !bearer_matches(&headers, token) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
            )
                .into_response();
        }
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

/// Whether `Authorization: Bearer <token>` is present and right (compared in constant time).
fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(given) = value.strip_prefix("Bearer ") else {
        return false;
    };
    constant_time_eq(given.trim().as_bytes(), token.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
                    if !matches!(tokio::time::timeout(config.idle_timeout, burst).await, Ok(Ok(()))) {
                        return;
                    }
                }
                _ = ping.tick() => {
                    if sink.send(Message::Ping(Bytes::new())).await.is_err() {
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
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) => break,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_must_match_exactly() {
        let mut headers = HeaderMap::new();
        assert!(!bearer_matches(&headers, "s3cret"));
        headers.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert!(bearer_matches(&headers, "s3cret"));
        assert!(!bearer_matches(&headers, "s3cre"));
        headers.insert(header::AUTHORIZATION, "Basic s3cret".parse().unwrap());
        assert!(!bearer_matches(&headers, "s3cret"));
    }
}
