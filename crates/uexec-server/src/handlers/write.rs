//! `process/write`: bytes to a process's stdin (the PTY in TTY mode).
//!
//! Statuses, as in Codex: `unknownProcess` for an id the session does not hold, `starting`
//! while the spawn is under way, `stdinClosed` for a pipe-mode process without `pipeStdin`
//! (exited or not) or whose stdin is gone, else `accepted` once written. `writeId` must be
//! non-empty; a repeated one is not written again (see `process/stdin.rs`). The write is
//! queued in order right away and answered when done; a full queue (a process that does not
//! read its stdin) refuses it at once with `-32603`, `data.kind = "stdinFull"`.

use std::sync::Arc;

use futures::FutureExt;
use uexec_protocol::{RequestId, RpcError, WriteParams, WriteResult, WriteStatus};

use super::reply::{answer, Reply};
use crate::process::stdin::PendingWrite;
use crate::session::{Lookup, Session};

pub fn handle(
    id: &RequestId,
    session: &Arc<Session>,
    params: WriteParams,
) -> Result<Reply, RpcError> {
    if params.write_id.is_empty() {
        return Err(RpcError::invalid_params("writeId must not be empty"));
    }
    let now = |status| Ok(Reply::Now(answer(id, Ok(WriteResult { status }))));
    let handle = match session.lookup(&params.process_id) {
        Lookup::Running(handle) => handle,
        Lookup::Unknown => return now(WriteStatus::UnknownProcess),
        Lookup::Starting => return now(WriteStatus::Starting),
    };
    match handle.submit_write(params.write_id, params.chunk.into_bytes()) {
        PendingWrite::Done(status) => now(status),
        PendingWrite::Refused(error) => Err(error),
        pending => {
            let id = id.clone();
            Ok(Reply::Later(
                async move {
                    let outcome = pending.finish().await.map(|status| WriteResult { status });
                    answer(&id, outcome)
                }
                .boxed(),
            ))
        }
    }
}
