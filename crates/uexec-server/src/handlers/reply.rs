//! How a request is answered ([`Reply`]), and the one encoding of a handler's outcome
//! ([`answer`]), shared by the dispatch and the handlers that answer later.

use futures::future::BoxFuture;
use serde::Serialize;
use tokio::sync::oneshot;
use uexec_protocol::jsonrpc::{encode_error, encode_result};
use uexec_protocol::{RequestId, RpcError};

/// How a request is answered.
pub enum Reply {
    /// Right away, in order.
    Now(String),
    /// Right away, then `gate` is dropped (a started process's events may flow once its
    /// `process/start` answer is queued ahead of them).
    NowThenOpen(String, oneshot::Sender<()>),
    /// From a task of the connection, when ready; later requests go on meanwhile.
    Later(BoxFuture<'static, String>),
}

/// Encodes a handler's outcome as the response to `id`.
pub fn answer<T: Serialize>(id: &RequestId, outcome: Result<T, RpcError>) -> String {
    match outcome {
        Ok(result) => encode_result(id, &result).unwrap_or_else(|e| {
            encode_error(
                id,
                &RpcError::internal(format!("failed to encode the result: {e}")),
            )
        }),
        Err(error) => encode_error(id, &error),
    }
}
