//! The owner task of one process: the only writer of its `ProcessState`. It sits beside the
//! process room, not in it: it tells the process's session, and the session's table holds
//! the processes, so the room itself never names a session.
//!
//! It turns what the backend reports into the wire's event stream:
//! 1. wait until the `process/start` answer is queued, so a client never sees events of a
//!    process it has not been told about;
//! 2. for each backend read, split it into pieces of at most `OUTPUT_CHUNK_MAX_BYTES`, give
//!    each the next seq, retain it and push `process/output` (output first when both output
//!    and exit are ready, so the common case reads naturally; order across kinds is not
//!    promised, seq is);
//! 3. on the exit, take a seq and push `process/exited`;
//! 4. once the exit is known, what the process left running (a background job, a
//!    daemonised server) gets `TRAILING_OUTPUT_GRACE_MS` to close the output, then is
//!    killed (its cgroup, else its process group), as on the MCP faces (SPEC §6): a job
//!    that held the output open would otherwise keep the process from closing while the
//!    client stays;
//! 5. when the output channel closed *and* the exit is known, push `process/closed` (last);
//! 6. keep the closed entry readable for the retention period, then remove it from its
//!    session.
//!
//! Notifications go to whichever connection the session is attached to *at that moment*;
//! while detached they are dropped (the output stays readable through `process/read`).
//! Sending waits when the connection's queue is full, which stalls this task, then the
//! backend's readers, then the process's pipe: a slow client slows the process rather than
//! growing memory.

use std::sync::Arc;
use std::time::Duration;
use uexec_core::metrics::{ExitCause, Metrics};

use tokio::sync::{mpsc, oneshot};
use uexec_core::backend::{ExitReport, OutputChunk, Stream};
use uexec_core::limits::TRAILING_OUTPUT_GRACE_MS;
use uexec_protocol::{
    ClosedNotification, ExitedNotification, Method, OutputNotification, OutputStream,
};

use crate::process::retention::split_chunk;
use crate::process::state::ExitInfo;
use crate::process::ProcessHandle;
use crate::session::Session;

/// What the pump consumes.
pub struct PumpInputs {
    pub output: mpsc::Receiver<OutputChunk>,
    pub exit: oneshot::Receiver<ExitReport>,
    /// Fires (or is dropped) once the `process/start` answer is queued.
    pub gate: oneshot::Receiver<()>,
}

/// Pump settings.
#[derive(Debug, Clone, Copy)]
pub struct PumpConfig {
    pub chunk_max_bytes: usize,
    pub retention: Duration,
}

/// Runs the pump of `handle` to the end (see the module docs).
pub async fn run(
    handle: ProcessHandle,
    session: Arc<Session>,
    inputs: PumpInputs,
    config: PumpConfig,
    metrics: Arc<Metrics>,
) {
    let PumpInputs {
        mut output,
        mut exit,
        gate,
    } = inputs;
    let _ = gate.await;
    let mut output_open = true;
    let mut exit_pending = true;
    // Step 4: armed at the exit, fired once.
    let leftovers = tokio::time::sleep(Duration::MAX);
    tokio::pin!(leftovers);
    let mut leftovers_armed = false;
    while output_open || exit_pending {
        tokio::select! {
            biased;
            () = &mut leftovers, if leftovers_armed => {
                leftovers_armed = false;
                handle.kill_leftovers();
            }
            chunk = output.recv(), if output_open => match chunk {
                Some(chunk) => {
                    metrics.output(chunk.bytes.len());
                    emit_output(&handle, &session, chunk, config.chunk_max_bytes).await
                }
                None => output_open = false,
            },
            report = &mut exit, if exit_pending => {
                exit_pending = false;
                let exit = exit_info(report);
                let cause = ExitCause::of(Some(exit.code), exit.failure.is_some(), false);
                metrics.ended(cause, handle.usage().as_ref());
                emit_exit(&handle, &session, exit).await;
                let grace = Duration::from_millis(TRAILING_OUTPUT_GRACE_MS);
                leftovers.as_mut().reset(tokio::time::Instant::now() + grace);
                leftovers_armed = output_open;
            }
        }
    }
    let mut closed_seq = None;
    handle.update(|s| closed_seq = s.record_closed());
    if let Some(seq) = closed_seq {
        let note = ClosedNotification {
            process_id: handle.id().to_string(),
            seq,
        };
        session.notify(Method::ProcessClosed, &note).await;
    }
    // Whatever is left once the output closed (a job that closed its copy of the pipe).
    handle.kill_leftovers();
    tokio::time::sleep(config.retention).await;
    session.remove_process(&handle);
}

fn exit_info(report: Result<ExitReport, oneshot::error::RecvError>) -> ExitInfo {
    match report {
        Ok(report) => ExitInfo {
            code: report.exit_code.unwrap_or(-1),
            failure: report.failure,
        },
        Err(_) => ExitInfo {
            code: -1,
            failure: Some("the backend lost track of the process's exit".to_string()),
        },
    }
}

async fn emit_output(
    handle: &ProcessHandle,
    session: &Session,
    chunk: OutputChunk,
    max_bytes: usize,
) {
    let stream = wire_stream(chunk.stream);
    for piece in split_chunk(chunk.bytes, max_bytes) {
        let mut seq = 0;
        handle.update(|s| seq = s.record_output(stream, piece.clone()));
        session
            .push_with(|| OutputNotification::encode(handle.id(), seq, stream, &piece))
            .await;
    }
}

async fn emit_exit(handle: &ProcessHandle, session: &Session, exit: ExitInfo) {
    let code = exit.code;
    let mut seq = None;
    handle.update(|s| seq = s.record_exit(exit));
    if let Some(seq) = seq {
        let note = ExitedNotification {
            process_id: handle.id().to_string(),
            seq,
            exit_code: code,
            sandbox_denied: false,
        };
        session.notify(Method::ProcessExited, &note).await;
    }
}

fn wire_stream(stream: Stream) -> OutputStream {
    match stream {
        Stream::Stdout => OutputStream::Stdout,
        Stream::Stderr => OutputStream::Stderr,
        Stream::Pty => OutputStream::Pty,
    }
}
