//! One HTTP session's messages, copied to its daemon connection and back (see
//! [`super::http`]): JSON lines on the socket, rmcp's messages on the session's side.
//!
//! Four loops run at once, so that neither direction waits for the other (a big answer
//! coming down while a request goes up cannot lock both):
//! 1. up: what the session's worker hands out is queued for the writer;
//! 2. the writer writes it to the daemon, a line each;
//! 3. the reader reads the daemon's lines, each a message;
//! 4. down: each is handed to the worker in the order it came (progress before the
//!    result it precedes).
//!
//! The first to end ends the relay: the worker gone (DELETE, idle expiry), the daemon gone
//! (EOF, a write that fails), or the session ended from outside. The daemon connection is
//! then closed (the daemon keeps the sessions) and so is the worker (the client's next
//! request is answered 404).

use std::future::Future;
use std::pin::Pin;

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionWorker;
use rmcp::transport::{Transport, WorkerTransport};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::Connected;

/// Longest line read from the daemon: a message bigger than this ends the session.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Messages read from the daemon and not yet handed to the worker.
const DOWN_QUEUE: usize = 16;

type Delivery = Pin<Box<dyn Future<Output = bool> + Send>>;

/// Relays `worker` and `daemon` until either ends or `ended` is cancelled; cancels `ended`.
pub(super) async fn run(
    mut worker: WorkerTransport<LocalSessionWorker>,
    daemon: Connected,
    ended: CancellationToken,
) {
    let (read, mut write) = daemon.stream.into_split();
    let mut read = BufReader::new(std::io::Cursor::new(daemon.after).chain(read));
    // Unbounded: the loop that fills them must never wait, or a full one could stop the
    // other direction. What bounds them is the worker's own queues (the client's requests)
    // and `DOWN_QUEUE` (the daemon's messages).
    let (up_tx, mut up_rx) = mpsc::unbounded_channel::<ClientJsonRpcMessage>();
    let (down_tx, mut down_rx) = mpsc::channel::<ServerJsonRpcMessage>(DOWN_QUEUE);
    let (deliver_tx, mut deliver_rx) = mpsc::unbounded_channel::<Delivery>();
    let pump = async {
        loop {
            tokio::select! {
                up = worker.receive() => match up {
                    Some(message) => {
                        if up_tx.send(message).is_err() {
                            return "the daemon connection failed";
                        }
                    }
                    None => return "the HTTP session ended",
                },
                down = down_rx.recv() => match down {
                    Some(message) => {
                        // Made here (it needs the worker), awaited in order by `deliver`.
                        let send = worker.send(message);
                        let delivery: Delivery = Box::pin(async move { send.await.is_ok() });
                        if deliver_tx.send(delivery).is_err() {
                            return "the HTTP session ended";
                        }
                    }
                    None => return "the daemon closed the connection",
                },
            }
        }
    };
    let writer = async {
        while let Some(message) = up_rx.recv().await {
            let Ok(mut line) = serde_json::to_vec(&message) else {
                continue;
            };
            line.push(b'\n');
            if write.write_all(&line).await.is_err() {
                break;
            }
        }
        "the daemon connection failed"
    };
    let reader = async {
        let mut line = Vec::new();
        loop {
            line.clear();
            let limit = (MAX_MESSAGE_BYTES + 1) as u64;
            match (&mut read).take(limit).read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return "the daemon closed the connection",
                Ok(_) if line.last() != Some(&b'\n') => {
                    return "the daemon sent a message over 64 MiB, or a partial one"
                }
                Ok(_) => {}
            }
            match serde_json::from_slice::<ServerJsonRpcMessage>(&line) {
                Ok(message) => {
                    if down_tx.send(message).await.is_err() {
                        return "the HTTP session ended";
                    }
                }
                // The daemon is rmcp too: what it sends parses. A line that does not is
                // dropped, as rmcp's own transport drops one.
                Err(e) => tracing::warn!("a message of the daemon that does not parse: {e}"),
            }
        }
    };
    let deliver = async {
        while let Some(delivery) = deliver_rx.recv().await {
            if !delivery.await {
                break;
            }
        }
        "the HTTP session ended"
    };
    let why = tokio::select! {
        why = pump => why,
        why = writer => why,
        why = reader => why,
        why = deliver => why,
        () = ended.cancelled() => "the HTTP session ended",
    };
    tracing::debug!("HTTP session relay ended: {why}; the daemon keeps its sessions");
    ended.cancel();
    let _ = worker.close().await;
}
