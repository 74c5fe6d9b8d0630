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

use std::sync::Arc;

use tokio::task::JoinSet;
use uexec_protocol::jsonrpc::{self, encode_error, MALFORMED_MESSAGE_ID};
use uexec_protocol::{Incoming, Method, RequestId, RpcError};

use crate::config::MAX_PENDING_ANSWERS;

use crate::handlers::{self, Reply};
use crate::outbound::Outbound;
use crate::server::ExecServer;
use crate::session::{ConnectionId, Session};

/// Where the connection is in the handshake.
#[derive(Debug, Clone)]
pub enum Phase {
    /// Waiting for `initialize`.
    New,
    /// `initialize` answered, waiting for the `initialized` notification.
    Initializing(Arc<Session>),
    Ready(Arc<Session>),
}

/// The server side of one connection.
pub struct Connection {
    pub(crate) server: Arc<ExecServer>,
    pub(crate) id: ConnectionId,
    pub(crate) outbound: Outbound,
    pub(crate) phase: Phase,
    pending: JoinSet<()>,
}

impl Connection {
    pub(crate) fn new(server: Arc<ExecServer>, outbound: Outbound) -> Self {
        let id = server.registry.next_connection_id();
        Self {
            server,
            id,
            outbound,
            phase: Phase::New,
            pending: JoinSet::new(),
        }
    }

    /// The session, once `initialize` succeeded.
    pub fn session(&self) -> Option<&Arc<Session>> {
        match &self.phase {
            Phase::New => None,
            Phase::Initializing(s) | Phase::Ready(s) => Some(s),
        }
    }

    /// Refuses a request that may wait for its answer when [`MAX_PENDING_ANSWERS`] already do.
    pub(crate) fn room_to_wait(&mut self) -> Result<(), RpcError> {
        while self.pending.try_join_next().is_some() {}
        if self.pending.len() >= MAX_PENDING_ANSWERS {
            return Err(RpcError::internal(format!(
                "{MAX_PENDING_ANSWERS} requests of this connection are already waiting for \
                 their answers; send this one again once some are answered"
            )));
        }
        Ok(())
    }

    /// Handles one frame (a WebSocket message or a stdio line).
    pub async fn handle_frame(&mut self, frame: &[u8]) {
        while self.pending.try_join_next().is_some() {}
        match jsonrpc::parse(frame) {
            Err(e) => {
                tracing::debug!("malformed message: {e}");
                let text = encode_error(&MALFORMED_MESSAGE_ID, &e.to_rpc_error());
                self.outbound.send_text(text).await;
            }
            Ok(Incoming::Request { id, method, params }) => {
                let reply = handlers::dispatch(self, &id, &method, params).await;
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
        self.outbound
            .send_text(encode_error(&MALFORMED_MESSAGE_ID, &error))
            .await;
    }

    async fn send_reply(&mut self, id: &RequestId, reply: Reply) {
        match reply {
            Reply::Now(text) => {
                self.outbound.send_text(text).await;
            }
            Reply::NowThenOpen(text, gate) => {
                self.outbound.send_text(text).await;
                drop(gate);
            }
            Reply::Later(answer) => {
                let outbound = self.outbound.clone();
                tracing::trace!(%id, "answering later");
                self.pending.spawn(async move {
                    let text = answer.await;
                    outbound.send_text(text).await;
                });
            }
        }
    }

    fn on_notification(&mut self, method: &str) {
        if method == Method::Initialized.as_str() {
            if let Phase::Initializing(session) = &self.phase {
                self.phase = Phase::Ready(session.clone());
                return;
            }
        }
        tracing::debug!(method, "ignoring an unexpected notification");
    }

    /// Ends the connection: detaches its session and drops pending answers.
    pub fn finish(mut self) {
        self.pending.abort_all();
        if let Some(session) = self.session().cloned() {
            self.server.registry.detach(&session, self.id);
        }
    }
}
