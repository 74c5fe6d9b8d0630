//! `process/read`: retained output after `afterSeq`, paged by `maxBytes`, as a long poll of
//! up to `waitMs` (capped at [`MAX_READ_WAIT_MS`]) when there is no news yet.
//!
//! A read without a wait is answered in order; one with a wait is answered from a task, so
//! the connection keeps serving other requests meanwhile (Codex serves one request at a time
//! per connection by default, so there a long poll delays everything after it).

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use uexec_protocol::{ReadParams, RequestId, RpcError};

use super::reply::{answer, Reply};
use crate::session::{Lookup, Session};

/// Longest long poll (a bigger `waitMs` is clamped).
pub const MAX_READ_WAIT_MS: u64 = 3_600_000;

pub async fn handle(
    id: &RequestId,
    session: &Arc<Session>,
    params: ReadParams,
) -> Result<Reply, RpcError> {
    let handle = match session.lookup(&params.process_id) {
        Lookup::Running(handle) => handle,
        Lookup::Unknown => {
            return Err(RpcError::invalid_request(format!(
                "unknown process id {}",
                params.process_id
            )))
        }
        Lookup::Starting => {
            return Err(RpcError::invalid_request(format!(
                "process id {} is starting",
                params.process_id
            )))
        }
    };
    let after_seq = params.after_seq.unwrap_or(0);
    let wait_ms = params.wait_ms.unwrap_or(0).min(MAX_READ_WAIT_MS);
    if wait_ms == 0 {
        let result = handle
            .read(after_seq, params.max_bytes, Duration::ZERO)
            .await;
        return Ok(Reply::Now(answer(id, Ok(result))));
    }
    let id = id.clone();
    Ok(Reply::Later(
        async move {
            let result = handle
                .read(after_seq, params.max_bytes, Duration::from_millis(wait_ms))
                .await;
            answer(&id, Ok(result))
        }
        .boxed(),
    ))
}
