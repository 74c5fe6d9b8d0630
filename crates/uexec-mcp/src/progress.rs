//! Progress notifications: output that arrives during a call's window goes to the client as
//! `notifications/progress` when the call carries a progress token.
//!
//! 1. Before the call starts, subscribe to the store's events (nothing can be missed).
//! 2. Forward each output delta of the call's session: `progress` is the running byte count,
//!    `message` the text of the chunk.
//! 3. When the call is done, forward what is already queued, then stop: every notification
//!    goes out before the call's result.

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use rmcp::RoleServer;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uexec_core::{Event, EventKind, EventStream};

/// Which events belong to the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallTarget {
    /// `exec_command`: the session it starts, known by the call id.
    Call(String),
    /// `write_stdin`: an existing session.
    Session(i32),
}

impl CallTarget {
    fn matches(&self, event: &Event) -> bool {
        match self {
            CallTarget::Call(call_id) => event.call_id == *call_id,
            CallTarget::Session(id) => event.session_id == *id,
        }
    }
}

/// A running forwarder; [`ProgressForwarder::finish`] flushes and stops it.
pub struct ProgressForwarder {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl ProgressForwarder {
    pub fn start(
        events: EventStream,
        target: CallTarget,
        token: ProgressToken,
        peer: Peer<RoleServer>,
    ) -> Self {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(forward(events, target, token, peer, stopped));
        Self { stop, task }
    }

    pub async fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

async fn forward(
    mut events: EventStream,
    target: CallTarget,
    token: ProgressToken,
    peer: Peer<RoleServer>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut bytes = 0usize;
    loop {
        let event = tokio::select! {
            biased;
            event = events.recv() => match event {
                Some(e) => e,
                None => return,
            },
            _ = &mut stopped => {
                while let Ok(e) = events.try_recv() {
                    send(&peer, &token, &target, &e, &mut bytes).await;
                }
                return;
            }
        };
        send(&peer, &token, &target, &event, &mut bytes).await;
    }
}

async fn send(
    peer: &Peer<RoleServer>,
    token: &ProgressToken,
    target: &CallTarget,
    event: &Event,
    bytes: &mut usize,
) {
    if !target.matches(event) {
        return;
    }
    if let EventKind::OutputDelta { chunk } = &event.kind {
        *bytes += chunk.len();
        let param = ProgressNotificationParam::new(token.clone(), *bytes as f64)
            .with_message(String::from_utf8_lossy(chunk).into_owned());
        if let Err(e) = peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not delivered");
        }
    }
}
