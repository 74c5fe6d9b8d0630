//! Writes, signals and kills for one remote process (the engine's [`ProcessControl`]).
//!
//! - `write` is `process/write` with a fresh `writeId`; after a resumed connection the same
//!   write is sent again with the same id, which the server writes at most once.
//! - `signal` is `process/signal {signal: "interrupt"}` (SIGINT to the remote group).
//! - `terminate` is `process/terminate` (SIGKILL to the remote group), sent without waiting
//!   for the answer, as the engine expects of a call that never blocks. The server's
//!   `exited` and `closed` follow.
//! - `kill_leftovers` is the same request once the process exited: `uexec serve` then kills
//!   what is left of the group (Codex 0.171 answers `running: false` and leaves it).
//!
//! At most one `process/terminate` goes out per process. Dropping the control of a process
//! whose feed has not ended sends it, as the local backend kills a process whose handle is
//! dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use uexec_core::backend::{BackendError, ProcessControl, Signal, WriteOutcome};
use uexec_protocol::{
    Method, SignalName, SignalParams, SignalResult, TerminateParams, WriteParams, WriteResult,
    WriteStatus,
};

use crate::inbox::{FeedEvent, FeedHandle};
use crate::remote_session::RemoteSession;

/// The caller's side of one remote process.
pub(crate) struct RemoteControl {
    session: Arc<RemoteSession>,
    process_id: String,
    feed: FeedHandle,
    terminate_sent: AtomicBool,
}

impl RemoteControl {
    pub fn new(session: Arc<RemoteSession>, process_id: String, feed: FeedHandle) -> Self {
        Self {
            session,
            process_id,
            feed,
            terminate_sent: AtomicBool::new(false),
        }
    }

    fn send_terminate(&self) {
        if self.terminate_sent.swap(true, Ordering::SeqCst) {
            return;
        }
        let params = TerminateParams {
            process_id: self.process_id.clone(),
        };
        self.session
            .send_and_forget(Method::ProcessTerminate.as_str(), params);
    }
}

impl ProcessControl for RemoteControl {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, Result<WriteOutcome, BackendError>> {
        Box::pin(async move {
            let params = WriteParams {
                process_id: self.process_id.clone(),
                chunk: bytes.into(),
                write_id: self.session.next_write_id(),
            };
            let result: WriteResult = self
                .session
                .call(Method::ProcessWrite.as_str(), &params, None, true)
                .await
                .map_err(|e| e.to_backend_error())?;
            match result.status {
                WriteStatus::Accepted => Ok(WriteOutcome::Accepted),
                WriteStatus::StdinClosed => Ok(WriteOutcome::StdinClosed),
                WriteStatus::UnknownProcess => {
                    self.feed.send(FeedEvent::Gone);
                    Ok(WriteOutcome::UnknownProcess)
                }
                WriteStatus::Starting => Err(BackendError::new(format!(
                    "process {} is still starting on {}",
                    self.process_id,
                    self.session.url()
                ))),
            }
        })
    }

    fn signal(&self, signal: Signal) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let signal = match signal {
                Signal::Interrupt => SignalName::Interrupt,
                Signal::Terminate => SignalName::Terminate,
                // The wire names these two alone (Codex's server knows `interrupt` only).
                other => {
                    return Err(BackendError::new(format!(
                        "an exec server is sent INT or TERM only, not {}",
                        other.name()
                    )))
                }
            };
            let params = SignalParams {
                process_id: self.process_id.clone(),
                signal,
            };
            let timeout = Some(self.session.config().request_timeout);
            let _: SignalResult = self
                .session
                .call(Method::ProcessSignal.as_str(), &params, timeout, true)
                .await
                .map_err(|e| e.to_backend_error())?;
            Ok(())
        })
    }

    fn terminate(&self) {
        if !self.feed.is_finished() {
            self.feed.send(FeedEvent::Terminating);
        }
        self.send_terminate();
    }

    fn kill_leftovers(&self) {
        self.send_terminate();
    }

    fn close_stdin(&self) -> BoxFuture<'_, Result<WriteOutcome, BackendError>> {
        Box::pin(async {
            Err(BackendError::new(
                "the exec-server protocol cannot close a remote process's stdin: eof works on local sessions (send the input's own end marker instead)",
            ))
        })
    }
}

impl Drop for RemoteControl {
    fn drop(&mut self) {
        if !self.feed.is_finished() {
            self.terminate();
        }
    }
}
