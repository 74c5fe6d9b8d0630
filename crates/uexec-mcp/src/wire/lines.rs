//! The wire additions ([`super`]) on a JSON-lines face: stdio, and the daemon's socket.
//!
//! rmcp's own line transport still reads and writes (its bounds, its handling of bad lines);
//! around it:
//! - inbound, before rmcp parses a line (which would drop `taskIds`), a pump copies each
//!   line from the client through a pipe, rewriting a `subscriptions/listen` request
//!   ([`super::listen`]); a refusal is marked in its `_meta` ([`REFUSED_META`]);
//! - [`Edge`], a transport around rmcp's, answers a marked request with its error instead
//!   of handing it on, and on the way out gives the task tools their `execution` and the
//!   acknowledgment of a listen request its task ids, which it keeps until then: for at
//!   most [`MAX_PENDING`] requests, refusing one more ([`busy`]) until one is acknowledged,
//!   answered or cancelled;
//! - at the client's end, [`Edge`] tells rmcp only once every request it handed on was
//!   answered, or [`CLOSING`] later, when it cancels the calls still running (their answers
//!   say so). rmcp stops its loop at the end of the input, and then waits up to 5 s for
//!   handlers that wait on that loop: one that was sending a notification (a listen
//!   stream's acknowledgment) never hears it went, and held the exit (in-process) or the
//!   connection (the daemon: an agent's sessions end with its last connection) that long.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    ClientNotification, ClientRequest, CustomNotification, CustomResult, ErrorData, JsonRpcMessage,
    RequestId, ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{acknowledge, Listen, Wire, TASK_IDS_META};

/// The `_meta` key a refused listen request carries its error under, for [`Edge`].
pub const REFUSED_META: &str = "uexec.dev/refused";
/// The longest line the pump rewrites; a longer one passes as it is (rmcp drops it).
const MAX_LINE: u64 = 16 << 20;
/// Bytes in flight between the pump and rmcp.
const PIPE: usize = 64 << 10;
/// Listen requests with task ids whose acknowledgment has not gone out yet, at most (a
/// client's own mistakes cannot grow it): one past it is refused ([`busy`]), as forgetting
/// one would acknowledge it without the task ids it asked for.
const MAX_PENDING: usize = 64;
/// The JSON-RPC error code of a listen request refused past [`MAX_PENDING`]: a server
/// error (JSON-RPC leaves -32000 to -32099 to the implementation).
pub const BUSY_CODE: i32 = -32000;
/// How long, at most, the end of the client's input waits for the answers to its requests
/// (rmcp's own drain, which this stands in for, waits 5 s).
pub const CLOSING: Duration = Duration::from_secs(5);

/// rmcp's line transport over `read` and `write`, with the wire additions of `wire`;
/// `calls` is cancelled when the answers to a client that is done were waited for
/// [`CLOSING`].
pub fn transport<R, W>(
    read: R,
    write: W,
    wire: Wire,
    calls: CancellationToken,
) -> Edge<AsyncRwTransport<RoleServer, tokio::io::DuplexStream, W>>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (ours, theirs) = tokio::io::duplex(PIPE);
    tokio::spawn(pump(read, ours));
    Edge {
        inner: AsyncRwTransport::new(theirs, write),
        wire,
        pending: Arc::default(),
        open: Arc::default(),
        closing: None,
        calls,
    }
}

/// Copies the client's lines into the pipe, rewriting listen requests; ends at the client's
/// EOF (rmcp then reads EOF) or when rmcp is gone.
async fn pump(read: impl AsyncRead + Unpin, mut pipe: tokio::io::DuplexStream) {
    let mut read = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut read)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.ends_with(b"\n") && contains(&line, b"subscriptions/listen") {
            rewrite(&mut line);
        }
        if pipe.write_all(&line).await.is_err() {
            break;
        }
    }
    let _ = pipe.shutdown().await;
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A listen request's line, its task ids in `_meta` (or its refusal).
fn rewrite(line: &mut Vec<u8>) {
    let Ok(mut message) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let outcome = super::listen(&method, message.get_mut("params"));
    if let Listen::Refused(error) = outcome {
        let meta = message
            .get_mut("params")
            .and_then(|p| p.get_mut("_meta"))
            .and_then(Value::as_object_mut);
        match (meta, serde_json::to_value(&error)) {
            (Some(meta), Ok(error)) => {
                meta.insert(REFUSED_META.into(), error);
            }
            _ => return,
        }
    } else if outcome == Listen::Nothing {
        return;
    }
    if let Ok(mut rewritten) = serde_json::to_vec(&message) {
        rewritten.push(b'\n');
        *line = rewritten;
    }
}

/// A transport with the wire additions around `inner`.
pub struct Edge<T> {
    inner: T,
    wire: Wire,
    /// The task ids of listen requests whose acknowledgment has not gone out yet.
    pending: Arc<Mutex<HashMap<RequestId, Vec<String>>>>,
    /// The requests handed to rmcp and not answered yet.
    open: Arc<Open>,
    /// Since the client's input ended: until when its answers are waited for.
    closing: Option<Instant>,
    /// Cancelled then: the calls still running end, saying so.
    calls: CancellationToken,
}

/// Requests handed on and not answered yet; told when one is.
#[derive(Default)]
struct Open {
    ids: Mutex<HashSet<RequestId>>,
    answered: Notify,
}

impl Open {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn answered(&self, id: &RequestId) {
        if self.ids().remove(id) {
            self.answered.notify_waiters();
        }
    }

    /// Until none is open; `false` when `until` came first.
    async fn drained(&self, until: Instant) -> bool {
        loop {
            let answered = self.answered.notified();
            if self.ids().is_empty() {
                return true;
            }
            if tokio::time::timeout_at(until, answered).await.is_err() {
                return false;
            }
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Edge<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let item = outbound(&self.wire, &self.pending, item);
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = answered {
            self.open.answered(id);
            // A listen request answered before its acknowledgment (refused, failed) has none
            // to come.
            forget(&self.pending, id);
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let Some(message) = self.inner.receive().await else {
                // The client is done: rmcp hears it once what it was asked is answered.
                let until = *self.closing.get_or_insert_with(|| Instant::now() + CLOSING);
                if !self.open.drained(until).await {
                    // Cancelled, the calls answer at once: rmcp's drain sends that.
                    self.calls.cancel();
                }
                return None;
            };
            let JsonRpcMessage::Request(request) = &message else {
                // A request the client cancelled is answered by nobody.
                if let JsonRpcMessage::Notification(notification) = &message {
                    if let ClientNotification::CancelledNotification(cancelled) =
                        &notification.notification
                    {
                        if let Some(id) = &cancelled.params.request_id {
                            self.open.answered(id);
                            forget(&self.pending, id);
                        }
                    }
                }
                return Some(message);
            };
            if let ClientRequest::SubscriptionsListenRequest(listen) = &request.request {
                // Its `_meta` as it came (rmcp keeps it apart from the params).
                let meta = serde_json::to_value(listen)
                    .ok()
                    .and_then(|v| v.get("params")?.get("_meta").cloned())
                    .unwrap_or_default();
                if let Some(error) = meta.get(REFUSED_META) {
                    let error: ErrorData = serde_json::from_value(error.clone())
                        .unwrap_or_else(|e| ErrorData::invalid_params(e.to_string(), None));
                    let answer = ServerJsonRpcMessage::error(error, Some(request.id.clone()));
                    // Sent on its own: rmcp polls `receive` in a `select!` and drops it when
                    // another branch wins, so an answer awaited here (behind a notification
                    // that holds the writer) would be lost, half written.
                    tokio::spawn(self.inner.send(answer));
                    continue;
                }
                if let Some(ids) = meta.get(TASK_IDS_META) {
                    let ids = crate::tasks::listen::ids_in(ids);
                    let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                    if pending.len() >= MAX_PENDING {
                        drop(pending);
                        let answer = ServerJsonRpcMessage::error(busy(), Some(request.id.clone()));
                        // On its own, as a refusal above.
                        tokio::spawn(self.inner.send(answer));
                        continue;
                    }
                    pending.insert(request.id.clone(), ids);
                }
            }
            self.open.ids().insert(request.id.clone());
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// The error of a listen request past [`MAX_PENDING`].
fn busy() -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode(BUSY_CODE),
        format!(
            "too many subscriptions/listen requests naming task ids await their \
             acknowledgment on this connection (at most {MAX_PENDING}): this one is refused; \
             send it again once one of them is acknowledged"
        ),
        Some(serde_json::json!({"maxPending": MAX_PENDING})),
    )
}

/// Forgets the task ids of listen request `id`, if it had any.
fn forget(pending: &Mutex<HashMap<RequestId, Vec<String>>>, id: &RequestId) {
    pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(id);
}

/// A message to the client with the wire additions.
fn outbound(
    wire: &Wire,
    pending: &Mutex<HashMap<RequestId, Vec<String>>>,
    item: ServerJsonRpcMessage,
) -> ServerJsonRpcMessage {
    match item {
        JsonRpcMessage::Response(mut response) => {
            if let ServerResult::ListToolsResult(tools) = &response.result {
                if let Ok(mut value) = serde_json::to_value(tools) {
                    wire.tools(&mut value);
                    response.result = ServerResult::CustomResult(CustomResult(value));
                }
            }
            JsonRpcMessage::Response(response)
        }
        JsonRpcMessage::Notification(mut notification) => {
            if let ServerNotification::SubscriptionsAcknowledgedNotification(ack) =
                &notification.notification
            {
                if let Some(custom) = acknowledged(ack, pending) {
                    notification.notification = ServerNotification::CustomNotification(custom);
                }
            }
            JsonRpcMessage::Notification(notification)
        }
        other => other,
    }
}

/// The acknowledgment `ack`, naming the task ids its listen request asked for (when it
/// asked for some).
fn acknowledged(
    ack: &rmcp::model::SubscriptionsAcknowledgedNotification,
    pending: &Mutex<HashMap<RequestId, Vec<String>>>,
) -> Option<CustomNotification> {
    let value = serde_json::to_value(ack).ok()?;
    let mut params = value.get("params")?.clone();
    let id = params
        .get("_meta")?
        .get("io.modelcontextprotocol/subscriptionId")
        .cloned()?;
    let id: RequestId = serde_json::from_value(id).ok()?;
    let ids = pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&id)?;
    acknowledge(&mut params, &ids);
    let method = value.get("method")?.as_str()?.to_owned();
    Some(CustomNotification::new(method, Some(params)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// rmcp drops a `receive` whose answer is still being written when another branch of
    /// its loop wins: the refusal must reach the client whole all the same.
    #[tokio::test]
    async fn a_refusal_is_written_whole_though_its_receive_is_dropped() {
        let (client, server_in) = tokio::io::duplex(4096);
        // A pipe the answer does not fit in: its write waits for the client to read.
        let (server_out, client_out) = tokio::io::duplex(16);
        let mut edge = transport(
            server_in,
            server_out,
            Wire::default(),
            CancellationToken::new(),
        );
        let (_, mut to_server) = tokio::io::split(client);
        let request = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {"_meta": {}, "notifications": {"taskIds": ["t"]}}});
        to_server
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        let mut from_server = BufReader::new(client_out);
        let mut first = [0u8; 1];
        tokio::select! {
            biased;
            _ = edge.receive() => panic!("a refused request is not handed on"),
            read = from_server.read_exact(&mut first) => { read.unwrap(); }
        }
        let mut rest = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            from_server.read_line(&mut rest),
        )
        .await
        .expect("the rest of the answer")
        .unwrap();
        let answer: Value = serde_json::from_str(&format!("{}{rest}", first[0] as char))
            .unwrap_or_else(|e| panic!("{e}: {rest}"));
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["error"]["code"], -32021, "{answer}");
    }
}
