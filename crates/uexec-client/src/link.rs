//! One WebSocket connection to an exec server: requests matched to their responses by id,
//! notifications handed on, keepalive. A link never reconnects; its owner
//! (`remote_session.rs`) makes a new one.
//!
//! 1. [`Link::dial`]: a `ws://` URL, or `wss://` (rustls, trusting the system roots plus the
//!    configured CA file), `Authorization: Bearer` when a token is given, TCP_NODELAY,
//!    the wire's message and frame limits (`uexec_protocol::limits`: 64 MiB and 16 MiB, as
//!    both servers use);
//! 2. two tasks own the socket's halves, so a large answer being read never waits for a
//!    write and the other way round: the *writer* drains an unbounded queue (a client sends
//!    little) and pings every `ping_interval`; the *reader* parses frames, completes the
//!    pending request a response answers and hands notifications to the
//!    [`NotificationSink`] (pongs to the server's pings go out as tungstenite reads);
//! 3. the first failure (a read or write error, a close, `idle_timeout` without a frame)
//!    marks the link down with its reason: every pending request fails with it and
//!    [`Link::down`] resolves, so the owner can reconnect.
//!
//! Dropping a link sends a close frame after whatever is queued (a `process/terminate` sent
//! just before the drop still goes out).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::header::{HeaderValue, AUTHORIZATION};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::Connector;
use uexec_net::tls::ClientTrust;
use uexec_protocol::jsonrpc::{self, encode_notification, encode_request, RawJson};
use uexec_protocol::limits::{MAX_FRAME_BYTES, MAX_MESSAGE_BYTES};
use uexec_protocol::{Incoming, RequestId, RpcError};

use crate::error::ClientError;
use crate::lock;

/// Where a link delivers the server's notifications.
pub(crate) trait NotificationSink: Send + Sync + 'static {
    fn notification(&self, method: &str, params: Option<RawJson>);
}

/// Timers of a link.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkTimers {
    pub connect_timeout: Duration,
    pub ping_interval: Duration,
    pub idle_timeout: Duration,
}

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallError {
    /// The server answered with an error.
    Rpc(RpcError),
    /// The link is down (the reason).
    Down(String),
    /// No answer within the timeout.
    Timeout(Duration),
}

type Pending = Mutex<HashMap<i64, oneshot::Sender<Result<RawJson, RpcError>>>>;

struct Shared {
    pending: Pending,
    next_id: AtomicI64,
    /// `Some(reason)` once the link is down; the first reason wins.
    down: watch::Sender<Option<String>>,
}

impl Shared {
    fn fail(&self, reason: String) {
        let first = self.down.send_if_modified(|down| {
            if down.is_some() {
                return false;
            }
            *down = Some(reason);
            true
        });
        if first {
            // Dropping the senders fails every waiting request with the reason set above.
            lock(&self.pending).clear();
        }
    }

    fn down_reason(&self) -> Option<String> {
        self.down.borrow().clone()
    }
}

/// One open connection.
pub(crate) struct Link {
    url: String,
    out: mpsc::UnboundedSender<Message>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("url", &self.url)
            .field("down", &self.shared.down_reason())
            .finish_non_exhaustive()
    }
}

impl Link {
    /// Opens a WebSocket to `url` and starts its reader and writer.
    pub async fn dial(
        url: &str,
        token: Option<&str>,
        trust: &ClientTrust,
        timers: LinkTimers,
        sink: Weak<dyn NotificationSink>,
    ) -> Result<Self, ClientError> {
        let invalid = |reason: String| ClientError::InvalidUrl {
            url: url.to_string(),
            reason,
        };
        let mut request = url
            .into_client_request()
            .map_err(|e| invalid(e.to_string()))?;
        let connector = match request.uri().scheme_str() {
            Some("ws") => Connector::Plain,
            Some("wss") => {
                Connector::Rustls(trust.client_config().map_err(|e| invalid(e.to_string()))?)
            }
            _ => {
                return Err(invalid(
                    "expected ws://HOST:PORT or wss://HOST:PORT".to_string(),
                ))
            }
        };
        if let Some(token) = token {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| invalid("the token is not a valid header value".to_string()))?;
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        let connect = tokio_tungstenite::connect_async_tls_with_config(
            request,
            Some(
                WebSocketConfig::default()
                    .max_message_size(Some(MAX_MESSAGE_BYTES))
                    .max_frame_size(Some(MAX_FRAME_BYTES)),
            ),
            true,
            Some(connector),
        );
        let connect_error = |reason: String| ClientError::Connect {
            url: url.to_string(),
            reason,
        };
        let (ws, _response) = tokio::time::timeout(timers.connect_timeout, connect)
            .await
            .map_err(|_| {
                connect_error(format!(
                    "no WebSocket handshake within {} ms",
                    timers.connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| connect_error(dial_failure(&e, trust)))?;
        let (sink_half, stream_half) = ws.split();
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            down: watch::channel(None).0,
        });
        let (out, out_rx) = mpsc::unbounded_channel();
        tokio::spawn(write_loop(sink_half, out_rx, shared.clone(), timers));
        tokio::spawn(read_loop(stream_half, shared.clone(), sink, timers));
        Ok(Self {
            url: url.to_string(),
            out,
            shared,
        })
    }

    /// Like [`Link::down`], without keeping the link alive while waiting.
    pub fn down_watch(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let mut rx = self.shared.down.subscribe();
        async move {
            match rx.wait_for(Option::is_some).await {
                Ok(reason) => reason.clone().unwrap_or_default(),
                Err(_) => "the connection ended".to_string(),
            }
        }
    }

    pub fn is_down(&self) -> bool {
        self.shared.down_reason().is_some()
    }

    /// Sends a request and waits for its result (at most `timeout`, when given). Dropping the
    /// future forgets the request; a late answer is ignored.
    pub async fn request<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
    ) -> Result<RawJson, CallError> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let text = encode_request(&RequestId::Integer(id), method, params)
            .map_err(|e| CallError::Rpc(RpcError::invalid_params(e.to_string())))?;
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.pending).insert(id, tx);
        let _forget = Forget {
            shared: &self.shared,
            id,
        };
        // `fail` sets the reason before it clears the table: either it cleared this entry,
        // or the reason is visible here.
        if let Some(reason) = self.shared.down_reason() {
            return Err(CallError::Down(reason));
        }
        if self.out.send(Message::Text(text.into())).is_err() {
            return Err(CallError::Down(self.down_reason()));
        }
        let answer = match timeout {
            Some(limit) => tokio::time::timeout(limit, rx)
                .await
                .map_err(|_| CallError::Timeout(limit))?,
            None => rx.await,
        };
        match answer {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(CallError::Rpc(error)),
            Err(_) => Err(CallError::Down(self.down_reason())),
        }
    }

    /// Sends a request whose answer nobody waits for (it is ignored when it comes).
    pub fn send_and_forget<P: Serialize>(&self, method: &str, params: &P) -> bool {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        match encode_request(&RequestId::Integer(id), method, params) {
            Ok(text) => !self.is_down() && self.out.send(Message::Text(text.into())).is_ok(),
            Err(_) => false,
        }
    }

    /// Sends a notification.
    pub fn notify<P: Serialize>(&self, method: &str, params: &P) -> bool {
        match encode_notification(method, params) {
            Ok(text) => self.out.send(Message::Text(text.into())).is_ok(),
            Err(_) => false,
        }
    }

    fn down_reason(&self) -> String {
        self.shared
            .down_reason()
            .unwrap_or_else(|| "the connection ended".to_string())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.out.send(Message::Close(None));
    }
}

/// Why a WebSocket could not be opened, in words: a refused certificate as
/// `certificate not trusted: REASON` with what to do (`uexec_net::tls`), an I/O error
/// without tungstenite's `IO error: ` in front.
fn dial_failure(error: &WsError, trust: &ClientTrust) -> String {
    if let Some(tls) = uexec_net::tls::rustls_error(error) {
        return trust.explain(tls);
    }
    match error {
        WsError::Io(io) => io.to_string(),
        WsError::Http(response) => format!("the server answered HTTP {}", response.status()),
        other => other.to_string(),
    }
}

/// Removes a request from the pending table when its caller stops waiting.
struct Forget<'a> {
    shared: &'a Shared,
    id: i64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.shared.pending).remove(&self.id);
    }
}

async fn write_loop<S>(
    mut sink: S,
    mut out: mpsc::UnboundedReceiver<Message>,
    shared: Arc<Shared>,
    timers: LinkTimers,
) where
    S: futures::Sink<Message, Error = tokio_tungstenite::tungstenite::Error> + Unpin,
{
    let mut down = shared.down.subscribe();
    let mut ping = tokio::time::interval(timers.ping_interval);
    ping.tick().await;
    loop {
        let message = tokio::select! {
            message = out.recv() => match message {
                Some(message) => message,
                None => Message::Close(None),
            },
            _ = ping.tick() => Message::Ping(Vec::new().into()),
            _ = down.wait_for(Option::is_some) => break,
        };
        let closing = matches!(message, Message::Close(_));
        if let Err(e) = sink.send(message).await {
            shared.fail(format!("writing to the socket failed: {e}"));
            break;
        }
        if closing {
            // Whatever the reader gets now is the end of the close handshake.
            break;
        }
    }
}

async fn read_loop<S>(
    mut stream: S,
    shared: Arc<Shared>,
    sink: Weak<dyn NotificationSink>,
    timers: LinkTimers,
) where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let reason = loop {
        let frame = match tokio::time::timeout(timers.idle_timeout, stream.next()).await {
            Err(_) => {
                break format!(
                    "no frame from the server in {} ms",
                    timers.idle_timeout.as_millis()
                )
            }
            Ok(None) => break "the server closed the connection".to_string(),
            Ok(Some(Err(e))) => break format!("reading from the socket failed: {e}"),
            Ok(Some(Ok(frame))) => frame,
        };
        match frame {
            Message::Text(text) => dispatch(text.as_bytes(), &shared, &sink),
            Message::Binary(bytes) => dispatch(&bytes, &shared, &sink),
            Message::Close(frame) => {
                break match frame {
                    Some(f) if !f.reason.is_empty() => {
                        format!("the server closed the connection ({})", f.reason)
                    }
                    _ => "the server closed the connection".to_string(),
                }
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    };
    tracing::debug!(%reason, "exec-server link down");
    shared.fail(reason);
}

fn dispatch(frame: &[u8], shared: &Shared, sink: &Weak<dyn NotificationSink>) {
    match jsonrpc::parse(frame) {
        Ok(Incoming::Response {
            id: RequestId::Integer(id),
            outcome,
        }) => {
            if let Some(waiter) = lock(&shared.pending).remove(&id) {
                let _ = waiter.send(outcome);
            }
        }
        Ok(Incoming::Notification { method, params }) => {
            if let Some(sink) = sink.upgrade() {
                sink.notification(&method, params);
            }
        }
        Ok(Incoming::Response { id, .. }) => {
            tracing::debug!(%id, "ignoring a response to a request this client never sent");
        }
        Ok(Incoming::Request { method, .. }) => {
            tracing::debug!(method, "ignoring a request from the server");
        }
        Err(e) => tracing::debug!("ignoring a frame that is not a message: {e}"),
    }
}
