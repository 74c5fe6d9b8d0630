//! The sending half of one connection: a bounded queue of encoded messages that the
//! transport's writer drains.
//!
//! Messages are encoded by whoever produces them (a request handler, a process's pump), so
//! JSON and base64 work spreads over tasks instead of piling up in the writer. The queue is
//! bounded: when the peer reads slowly, producers wait (see `process/pump.rs`).

use serde::Serialize;
use tokio::sync::mpsc;
use uexec_protocol::jsonrpc::encode_notification;
use uexec_protocol::Method;

/// A cheap handle for queueing messages to one connection.
#[derive(Debug, Clone)]
pub struct Outbound {
    tx: mpsc::Sender<String>,
}

impl Outbound {
    /// A queue holding up to `capacity` messages, and its receiving end for the writer.
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Self { tx }, rx)
    }

    /// Queues one encoded message; `false` once the connection is gone.
    pub async fn send_text(&self, text: String) -> bool {
        self.tx.send(text).await.is_ok()
    }

    /// Queues a notification.
    pub async fn notify<T: Serialize>(&self, method: Method, params: &T) {
        match encode_notification(method.as_str(), params) {
            Ok(text) => {
                self.send_text(text).await;
            }
            Err(e) => tracing::warn!("dropping an unencodable {method} notification: {e}"),
        }
    }

    /// Whether the connection's writer has gone away.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
