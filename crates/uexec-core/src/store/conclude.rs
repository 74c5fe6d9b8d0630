//! The end of a call's window: the snapshot it returns (SPEC §2 step 5), and the exit
//! notices of sessions whose exit no call watched, for the owner's next result.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::SessionStore;
use crate::error::ExecError;
use crate::events::lock;
use crate::limits::{MAX_EXIT_NOTICES, POST_EXIT_CLOSE_WAIT_MS};
use crate::notice::ExitNotice;
use crate::output::snapshot::{Observed, Snapshot, Status};
use crate::output::until::Reason;
use crate::output::Hygiene;
use crate::session::Session;
use crate::transcript;

impl SessionStore {
    /// Builds the snapshot at the end of a window (SPEC §2 step 5). A running session keeps
    /// its pending output's incomplete last character for the next call. An exited one is
    /// first settled (output closed or `POST_EXIT_CLOSE_WAIT_MS`, monitors' verdicts), so the
    /// call reports exactly what the End will; then, without another await (a cancelled call
    /// loses nothing), exactly one call claims the report, drains everything and removes the
    /// entry.
    pub(super) async fn conclude(
        &self,
        session: &Arc<Session>,
        // Where the call's wall time counts from (its window's start; exec_command's spawn).
        window_start: Instant,
        max_output_tokens: u64,
        hygiene: Hygiene,
        reason: Reason,
    ) -> Result<Snapshot, ExecError> {
        // What every snapshot of this call says besides its output, and its sandbox report
        // (judged on the body as the model will read it).
        let observed = |status: Status, wall_time, output_at: u64| {
            let info = session.transcript();
            Observed {
                status,
                wall_time,
                // Whatever ended the wait, a process that is gone is what the caller acts on.
                reason: match status {
                    Status::Exited { .. } if reason == Reason::Window => Reason::Exited,
                    _ => reason,
                },
                matched: (reason == Reason::Matched)
                    .then(|| session.matched())
                    .flatten(),
                timed_out_ms: None,
                awaiting_secret: false,
                silent_pipe: false,
                transcript: session.transcript_dir(),
                output_at,
                transcript_stop: info.as_ref().and_then(|info| info.stop.clone()),
                transcript_holds: info,
                usage: None,
                ending: crate::usage::Ending::default(),
            }
        };
        let judge = |output: &str| {
            session
                .info
                .sandbox
                .as_ref()
                .map(|s| s.judge(output, session.take_new_verdicts()))
        };
        // What the transcript has of a cut is looked at after this wait, and it comes
        // before the drain: a call cancelled while it waits loses nothing.
        let transcript_wait = Duration::from_millis(transcript::RESULT_WAITS_FOR_TRANSCRIPT_MS);
        if !session.lifecycle().exited() {
            session
                .transcript_caught_up(max_output_tokens, transcript_wait)
                .await;
            let (drained, output_at) = session.drain_located(true);
            let running = Status::Running {
                session_id: session.id(),
            };
            let observed = Observed {
                awaiting_secret: session.awaiting_secret(),
                silent_pipe: !session.info.tty && session.printed() == 0,
                ..observed(running, window_start.elapsed(), output_at)
            };
            let mut snapshot =
                Snapshot::build(&drained, max_output_tokens, hygiene, observed, judge);
            snapshot.notices = session.take_new_notices();
            return Ok(snapshot);
        }
        let outcome = session
            .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
            .await;
        session
            .transcript_caught_up(max_output_tokens, transcript_wait)
            .await;
        let wall_time = window_start.elapsed();
        if !session.claim_report() {
            return Err(ExecError::UnknownProcess(session.id()));
        }
        let (drained, output_at) = session.drain_located(false);
        self.forget_reported(session);
        if let Some(message) = outcome.failure {
            return Err(ExecError::ProcessFailed {
                session_id: session.id(),
                message,
            });
        }
        let exited = Status::Exited {
            exit_code: outcome.exit_code,
        };
        let observed = Observed {
            timed_out_ms: outcome.timed_out_ms,
            usage: outcome.usage,
            ending: outcome.ending,
            ..observed(exited, wall_time, output_at)
        };
        let mut snapshot = Snapshot::build(&drained, max_output_tokens, hygiene, observed, judge);
        snapshot.notices = session.take_new_notices();
        Ok(snapshot)
    }

    /// A session whose exit was just reported (its report claimed): no notice says it again,
    /// its entry goes (its transcript is remembered) and what it left running is killed.
    pub(super) fn forget_reported(&self, session: &Arc<Session>) {
        {
            let mut inner = lock(&self.inner);
            inner.notices.retain(|n| n.session_id != session.id());
            let same = inner
                .sessions
                .get(&session.id())
                .is_some_and(|e| Arc::ptr_eq(&e.session, session));
            if same {
                inner.forget(session);
            } else {
                inner.remember_gone(session);
            }
        }
        session.control().kill_leftovers();
    }

    /// Exits that no call watched, each once: the owner's next result of any kind carries
    /// them (oldest first).
    pub fn take_exit_notices(&self) -> Vec<ExitNotice> {
        lock(&self.inner).notices.drain(..).collect()
    }

    pub(super) fn push_exit_notice(&self, session: &Arc<Session>) {
        let state = session.lifecycle();
        let (Some(exited_at), Some(outcome)) = (state.exited_at(), state.outcome().cloned()) else {
            return;
        };
        let mut inner = lock(&self.inner);
        // Terminated or pruned sessions are gone on purpose: nothing to announce.
        let stored = inner
            .sessions
            .get(&session.id())
            .is_some_and(|e| Arc::ptr_eq(&e.session, session));
        if !stored || session.reported() {
            return;
        }
        if inner.notices.len() >= MAX_EXIT_NOTICES {
            inner.notices.pop_front();
        }
        inner.notices.push_back(ExitNotice {
            session_id: session.id(),
            command: session.info.command.clone(),
            exit_code: outcome.exit_code,
            failure: outcome.failure,
            timed_out_ms: outcome.timed_out_ms,
            stopped_by: None,
            exited_at,
            ending: outcome.ending,
        });
    }
}
