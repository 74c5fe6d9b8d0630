//! Policy monitors (SPEC §7): tasks that watch a session and may fail it or record a
//! verdict. The session counts them, and its End waits for them to settle, at most
//! `LATE_FAILURE_GRACE_MS` after the exit.

use std::sync::Weak;

use futures::future::BoxFuture;
use tokio::sync::watch;

use super::{Lifecycle, Session};

/// A policy monitor watches a session and may fail it, or record a verdict and let it run
/// (SPEC §7).
pub trait PolicyMonitor: Send + 'static {
    /// Runs until the monitor has nothing more to say. The session's End waits for it, at
    /// most `LATE_FAILURE_GRACE_MS` after the exit.
    fn watch(self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()>;
}

/// What a monitor may do to its session.
#[derive(Clone)]
pub struct MonitorHandle {
    pub(super) session: Weak<Session>,
    pub(super) state: watch::Receiver<Lifecycle>,
}

impl MonitorHandle {
    /// Records `message` (unless a failure is already recorded) and terminates the process.
    pub fn fail_and_terminate(&self, message: impl Into<String>) {
        if let Some(s) = self.session.upgrade() {
            s.fail_and_terminate(message.into());
        }
    }

    /// Records `message` as a verdict and lets the process run on: the next snapshot of the
    /// session reports it (once), and the End is failed with it, keeping the exit code.
    pub fn record_verdict(&self, message: impl Into<String>) {
        if let Some(s) = self.session.upgrade() {
            let message = message.into();
            s.state.send_if_modified(|s| s.record_verdict(message));
        }
    }

    /// Resolves once the process has exited.
    pub async fn exited(&self) {
        let mut rx = self.state.clone();
        let _ = rx.wait_for(|s| s.exited()).await.is_ok();
    }
}

impl std::fmt::Debug for MonitorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonitorHandle").finish_non_exhaustive()
    }
}
