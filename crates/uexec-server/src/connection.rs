//! One client connection, whatever the transport: the handshake and request dispatch.
//!
//! Per frame:
//! 1. parse it; a frame that is not a message is answered with id `-1` / `-32600` and the
//!    connection goes on;
//! 2. a request's method is looked up first (unknown: `-32601`, even before `initialize`),
//!    then its params are decoded (`-32602`), then the handshake phase is checked
//!    (`-32600`), as Codex does;
//! 3. requests are handled in arrival order; the ones that may wait (a `process/read` long
//!    poll, a stdin write behind a full pipe) are answered from a task of the connection, so
//!    they never hold up later requests (at most `MAX_PENDING_ANSWERS` at a time: more are
//!    refused at once). Nothing on this path waits for a process; the only wait is for room
//!    in the connection's own outbound queue, i.e. for the peer to read (a peer that reads
//!    nothing for `idle_timeout` is dropped by the WebSocket writer, which frees this path);
//! 4. the `initialized` notification completes the handshake; other notifications and
//!    responses from the client are ignored (Codex drops the connection; ignoring is kinder).
//!
//! When the transport ends, [`Connection::finish`] detaches the session (it may be resumed)
//! and aborts the connection's pending answers.
//!
//! What the handlers see of the connection is its `Caller` (`caller.rs`): the connection
//! names the handlers, the handlers name only the caller.

use std::sync::Arc;

use uexec_protocol::jsonrpc::{self, encode_error, MALFORMED_MESSAGE_ID};
use uexec_protocol::{Incoming, Method, RequestId};

use crate::caller::{Caller, Phase};
use crate::config::OUTBOUND_QUEUE_MESSAGES;
use crate::handlers::{self, reply::Reply};
use crate::outbound::Outbound;
use crate::server::ExecServer;
use crate::session::Session;

impl ExecServer {
    /// A new connection, and the queue its transport must drain to the peer.
    pub fn connect(self: &Arc<Self>) -> (Connection, tokio::sync::mpsc::Receiver<String>) {
        let (outbound, rx) = Outbound::channel(OUTBOUND_QUEUE_MESSAGES);
        let connection = Connection {
            caller: Caller::new(self.clone(), outbound),
        };
        (connection, rx)
    }
}

/// The server side of one connection.
pub struct Connection {
    caller: Caller,
}

impl Connection {
    /// The session, once `initialize` succeeded.
    pub fn session(&self) -> Option<&Arc<Session>> {
        self.caller.session()
    }

    /// Handles one frame (a WebSocket message or a stdio line).
    pub async fn handle_frame(&mut self, frame: &[u8]) {
        self.caller.reap();
        match jsonrpc::parse(frame) {
            Err(e) => {
                tracing::debug!("malformed message: {e}");
                let text = encode_error(&MALFORMED_MESSAGE_ID, &e.to_rpc_error());
                self.caller.outbound.send_text(text).await;
            }
            Ok(Incoming::Request { id, method, params }) => {
                let reply = handlers::dispatch(&mut self.caller, &id, &method, params).await;
                self.send_reply(&id, reply).await;
            }
            Ok(Incoming::Notification { method, .. }) => self.on_notification(&method),
            Ok(Incoming::Response { id, .. }) => {
                tracing::debug!(%id, "ignoring a response from the client");
            }
        }
    }

    /// Answers a frame the transport could not even read as a message (e.g. too large).
    pub async fn reject_frame(&mut self, why: &str) {
        let error = uexec_protocol::RpcError::invalid_request(why.to_string());
        self.caller
            .outbound
            .send_text(encode_error(&MALFORMED_MESSAGE_ID, &error))
            .await;
    }

    async fn send_reply(&mut self, id: &RequestId, reply: Reply) {
        match reply {
            Reply::Now(text) => {
                self.caller.outbound.send_text(text).await;
            }
            Reply::NowThenOpen(text, gate) => {
                self.caller.outbound.send_text(text).await;
                drop(gate);
            }
            Reply::Later(answer) => {
                tracing::trace!(%id, "answering later");
                self.caller.answer_later(answer);
            }
        }
    }

    fn on_notification(&mut self, method: &str) {
        if method == Method::Initialized.as_str() {
            if let Phase::Initializing(session) = &self.caller.phase {
                self.caller.phase = Phase::Ready(session.clone());
                return;
            }
        }
        tracing::debug!(method, "ignoring an unexpected notification");
    }

    /// Ends the connection: detaches its session and drops pending answers.
    pub fn finish(mut self) {
        self.caller.abort_pending();
        if let Some(session) = self.session().cloned() {
            self.caller.server.registry.detach(&session, self.caller.id);
        }
    }
}
