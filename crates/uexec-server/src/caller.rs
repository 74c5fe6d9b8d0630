//! What a request handler sees of the connection it answers: the shared server, the
//! connection's id and outbound queue, where it is in the handshake, and its answers still
//! waiting.
//!
//! Why a module of its own: the connection dispatches to the handlers, and the handlers read
//! and move the handshake phase. With this state here, the connection owns a [`Caller`] and
//! hands it to [`handlers::dispatch`](crate::handlers::dispatch); the handlers name the caller,
//! never the connection.

use std::future::Future;
use std::sync::Arc;

use tokio::task::JoinSet;
use uexec_protocol::RpcError;

use crate::config::MAX_PENDING_ANSWERS;
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

/// The connection as its request handlers see it.
pub struct Caller {
    pub server: Arc<ExecServer>,
    pub id: ConnectionId,
    pub outbound: Outbound,
    pub phase: Phase,
    /// Answers sent from tasks (long polls, queued stdin writes).
    pending: JoinSet<()>,
}

impl Caller {
    pub fn new(server: Arc<ExecServer>, outbound: Outbound) -> Self {
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
    pub fn room_to_wait(&mut self) -> Result<(), RpcError> {
        self.reap();
        if self.pending.len() >= MAX_PENDING_ANSWERS {
            return Err(RpcError::internal(format!(
                "{MAX_PENDING_ANSWERS} requests of this connection are already waiting for \
                 their answers; send this one again once some are answered"
            )));
        }
        Ok(())
    }

    /// Sends the answer `text` resolves to once it is ready; later requests go on meanwhile.
    pub fn answer_later(&mut self, text: impl Future<Output = String> + Send + 'static) {
        let outbound = self.outbound.clone();
        self.pending.spawn(async move {
            let text = text.await;
            outbound.send_text(text).await;
        });
    }

    /// Forgets the answers already sent.
    pub fn reap(&mut self) {
        while self.pending.try_join_next().is_some() {}
    }

    /// Drops the answers still waiting.
    pub fn abort_pending(&mut self) {
        self.pending.abort_all();
    }
}
