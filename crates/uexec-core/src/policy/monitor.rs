//! Policy monitors (SPEC §7): tasks that watch a session and may fail it or record a
//! verdict (the allowlist proxy is one). A monitor sees its session only through
//! [`Monitored`], which the session implements: the vocabulary of policy stays below the
//! engine's rooms, and a monitor never keeps its session alive.

use std::sync::Weak;

use futures::future::BoxFuture;

/// A policy monitor watches a session and may fail it, or record a verdict and let it run.
pub trait PolicyMonitor: Send + 'static {
    /// Runs until the monitor has nothing more to say. The session's End waits for it, at
    /// most `LATE_FAILURE_GRACE_MS` after the exit.
    fn watch(self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()>;
}

/// What a monitor may do to its session: the session's side of the seam.
pub trait Monitored: Send + Sync + 'static {
    /// Records `message` (unless a failure is already recorded) and terminates the process.
    fn fail_and_terminate(&self, message: String);
    /// Records `message` as a verdict and lets the process run on.
    fn record_verdict(&self, message: String);
    /// Tells the command's next result `message` (a line of its own), changing nothing else.
    fn notice(&self, message: String);
    /// Resolves once the process has exited (holding no reference to the session).
    fn exited(&self) -> BoxFuture<'static, ()>;
}

/// A monitor's hold on its session: weak, so a session no one else holds ends.
#[derive(Clone)]
pub struct MonitorHandle {
    session: Weak<dyn Monitored>,
}

impl MonitorHandle {
    pub fn new(session: Weak<dyn Monitored>) -> Self {
        Self { session }
    }

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
            s.record_verdict(message.into());
        }
    }

    /// Tells the command's next result `message`, changing nothing else: an exec refused
    /// by the rules, which the command itself saw fail.
    pub fn notice(&self, message: impl Into<String>) {
        if let Some(s) = self.session.upgrade() {
            s.notice(message.into());
        }
    }

    /// Resolves once the process has exited (at once when the session is gone).
    pub async fn exited(&self) {
        let exited = match self.session.upgrade() {
            Some(s) => s.exited(),
            None => return,
        };
        exited.await;
    }
}

impl std::fmt::Debug for MonitorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonitorHandle").finish_non_exhaustive()
    }
}
