//! How a session ends: the hard timeout, the settling of the exit (SPEC §5), the one
//! [`Outcome`] every call and the End report, and the End event itself.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Lifecycle, Outcome, Session};
use crate::backend::Signal;
use crate::events::{lock, EndStatus, EventKind};
use crate::limits::{LATE_FAILURE_GRACE_MS, TIMEOUT_KILL_GRACE_MS};

impl Session {
    /// The hard timeout (`timeout_ms`): at the deadline SIGTERM to the group, then SIGKILL
    /// after [`TIMEOUT_KILL_GRACE_MS`] if it is still running.
    pub(super) async fn enforce_timeout(self: Arc<Self>, limit: Duration) {
        let deadline = self.started_at + limit;
        self.wait_until(|s| s.exited(), |_| Some(deadline)).await;
        if self.lifecycle().exited() {
            return;
        }
        let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        self.state.send_if_modified(|s| s.timed_out(ms));
        if let Err(e) = self.control.signal(Signal::Terminate).await {
            tracing::debug!(session_id = self.id(), "timeout SIGTERM failed: {e}");
        }
        let grace = Instant::now() + Duration::from_millis(TIMEOUT_KILL_GRACE_MS);
        self.wait_until(|s| s.exited(), |_| Some(grace)).await;
        if !self.lifecycle().exited() {
            self.terminate();
        }
    }

    /// Waits until the exit can be reported (SPEC §5): the exit observed, the output drained
    /// (closed, or `drain_grace` after the exit), and every monitor settled (at most
    /// `LATE_FAILURE_GRACE_MS` after the exit); then fixes the [`Outcome`].
    pub async fn settle(&self, drain_grace: Duration) -> Outcome {
        self.wait_until(|s| s.exited(), |_| None).await;
        self.wait_until(Lifecycle::drained, |s| {
            s.exited_at().map(|at| at + drain_grace)
        })
        .await;
        let monitor_grace = Duration::from_millis(LATE_FAILURE_GRACE_MS);
        self.wait_until(Lifecycle::monitors_settled, |s| {
            s.exited_at().map(|at| at + monitor_grace)
        })
        .await;
        self.fix_outcome()
    }

    /// The outcome, fixed now from what is known unless it already was.
    fn fix_outcome(&self) -> Outcome {
        if self.state.borrow().outcome().is_none() {
            // Read before the cgroup goes (the sweep after the End removes it), and once the
            // leader is gone: what its cgroup holds then, it left running. The ending first:
            // a cgroup found empty then stays so, and its figures are final.
            let ending = self.control.ending();
            let usage = self.control.usage();
            self.state
                .send_if_modified(|l| l.fix_outcome(usage, ending));
        }
        self.state.borrow().outcome().cloned().unwrap_or_default()
    }

    /// Publishes the session's End unless it was already published; true when this call did.
    pub fn emit_end(&self) -> bool {
        let outcome = self.fix_outcome();
        let mut ended = lock(&self.ended);
        if *ended {
            return false;
        }
        *ended = true;
        let mut aggregated_output = self.aggregated_text(false);
        let mut append = |message: &str| {
            if !aggregated_output.is_empty() && !aggregated_output.ends_with('\n') {
                aggregated_output.push('\n');
            }
            aggregated_output.push_str(message);
        };
        let mut failure = outcome.failure;
        let (status, exit_code) = match &failure {
            Some(message) => {
                append(message);
                (EndStatus::Failed, Some(-1))
            }
            // Recorded verdicts: the process ran to its own end, but never as a success.
            None if !outcome.verdicts.is_empty() => {
                let message = outcome.verdicts.join("\n");
                append(&message);
                failure = Some(message);
                (EndStatus::Failed, outcome.exit_code)
            }
            None if outcome.exit_code == Some(0) => (EndStatus::Completed, outcome.exit_code),
            None => (EndStatus::Failed, outcome.exit_code),
        };
        if let Some(m) = &self.metrics {
            let cause = crate::metrics::ExitCause::of(
                exit_code,
                failure.is_some(),
                outcome.timed_out_ms.is_some(),
            );
            m.ended(cause, outcome.usage.as_ref());
        }
        self.events.publish(
            &self.info.call_id,
            self.info.id,
            EventKind::End {
                exit_code,
                status,
                aggregated_output,
                duration: self.started_at.elapsed(),
                failure,
                transcript: self.transcript_dir(),
                usage: outcome.usage,
                ending: outcome.ending,
            },
        );
        true
    }

    /// The lifecycle watcher of a stored session (SPEC §5): End once the exit is observed,
    /// the output drained, the monitors settled and the interaction lock free.
    /// True when no call reported the exit by then: nobody watched it end.
    pub async fn watch_lifecycle(self: Arc<Self>, drain_grace: Duration) -> bool {
        self.settle(drain_grace).await;
        let _interaction = self.interaction.lock().await;
        self.emit_end();
        self.control.kill_leftovers();
        !self.reported()
    }
}
