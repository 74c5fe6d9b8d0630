//! Every session of the server, by id: opening, resuming, detaching and expiring them.
//!
//! 1. `initialize` without `resumeSessionId` opens a session attached to the connection.
//! 2. When the connection ends, [`Registry::detach`] marks its session detached and starts a
//!    timer of `detached_session_ttl`.
//! 3. `initialize {resumeSessionId}` re-attaches a detached session ([`ResumeError`] when it
//!    is unknown, or still attached to a live connection: the old connection may not have
//!    been noticed as gone yet, and the client retries).
//! 4. When the timer fires and the session is still detached in the same generation, the
//!    session ends: removed, its processes killed.
//! 5. [`Registry::shutdown`] ends every session (server exit, stdio EOF).
//!
//! Lock order: the registry's map, then a session's attachment, then its processes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::lock;
use crate::outbound::Outbound;
use crate::session::{Attachment, ConnectionId, Session};

/// Why a session cannot be resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("unknown session id {0}")]
    Unknown(String),
    #[error("session {0} is already attached to another connection")]
    Attached(String),
}

/// The sessions of one server.
#[derive(Debug)]
pub struct Registry {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    detached_ttl: Duration,
    generations: AtomicU64,
    connections: AtomicU64,
}

impl Registry {
    pub fn new(detached_ttl: Duration) -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            detached_ttl,
            generations: AtomicU64::new(1),
            connections: AtomicU64::new(1),
        }
    }

    /// A fresh id for a new connection.
    pub fn next_connection_id(&self) -> ConnectionId {
        self.connections.fetch_add(1, Ordering::Relaxed)
    }

    /// Opens a new session attached to `connection`.
    pub fn open(&self, connection: ConnectionId, outbound: Outbound) -> Arc<Session> {
        let id = uuid::Uuid::new_v4().to_string();
        let session = Arc::new(Session::new(id.clone(), connection, outbound));
        lock(&self.sessions).insert(id, session.clone());
        session
    }

    /// Re-attaches a detached session to `connection`.
    pub fn resume(
        &self,
        session_id: &str,
        connection: ConnectionId,
        outbound: Outbound,
    ) -> Result<Arc<Session>, ResumeError> {
        let sessions = lock(&self.sessions);
        let session = sessions
            .get(session_id)
            .ok_or_else(|| ResumeError::Unknown(session_id.to_string()))?;
        match session.attachment() {
            Attachment::Detached { .. } => {}
            Attachment::Attached { outbound: old, .. } if old.is_closed() => {
                // The old connection's writer is gone; its reader just has not noticed yet.
            }
            Attachment::Attached { .. } => {
                return Err(ResumeError::Attached(session_id.to_string()));
            }
            Attachment::Ended => return Err(ResumeError::Unknown(session_id.to_string())),
        }
        session.set_attachment(Attachment::Attached {
            connection,
            outbound,
        });
        Ok(session.clone())
    }

    /// Detaches `session` from `connection` (if still attached to it) and starts its expiry.
    pub fn detach(self: &Arc<Self>, session: &Arc<Session>, connection: ConnectionId) {
        let generation = {
            let _sessions = lock(&self.sessions);
            match session.attachment() {
                Attachment::Attached { connection: c, .. } if c == connection => {}
                _ => return,
            }
            let generation = self.generations.fetch_add(1, Ordering::Relaxed);
            session.set_attachment(Attachment::Detached { generation });
            generation
        };
        let registry = Arc::downgrade(self);
        let session_id = session.id().to_string();
        let ttl = self.detached_ttl;
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            if let Some(registry) = registry.upgrade() {
                registry.expire(&session_id, generation);
            }
        });
    }

    fn expire(&self, session_id: &str, generation: u64) {
        let session = {
            let mut sessions = lock(&self.sessions);
            match sessions.get(session_id).map(|s| s.attachment()) {
                Some(Attachment::Detached { generation: g }) if g == generation => {}
                _ => return,
            }
            sessions.remove(session_id)
        };
        if let Some(session) = session {
            tracing::debug!(session = session_id, "detached session expired");
            Self::end(&session);
        }
    }

    fn end(session: &Session) {
        session.set_attachment(Attachment::Ended);
        session.kill_all();
    }

    /// Ends every session, killing all processes.
    pub fn shutdown(&self) {
        let sessions: Vec<Arc<Session>> = lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for session in sessions {
            Self::end(&session);
        }
    }

    /// Every session's processes as the figures count them: running or exited (and
    /// retained), with the CPU time and memory of the running ones.
    pub fn now(&self) -> uexec_core::metrics::Now {
        let mut now = uexec_core::metrics::Now::default();
        for session in lock(&self.sessions).values() {
            session.count_into(&mut now);
        }
        now
    }

    /// Number of live sessions (attached or detached).
    pub fn session_count(&self) -> usize {
        lock(&self.sessions).len()
    }
}
