//! The notifications a server pushes for each process: `process/output`, `process/exited`,
//! `process/closed`.
//!
//! All three draw from one `seq` counter per process, starting at 1, without gaps. They may
//! arrive in any order relative to each other except that `closed` comes last: it is sent
//! once every stream hit EOF *and* the exit is known. A client keys them by `seq` and fills
//! gaps with `process/read` (output retained) after a reconnect.

use serde::{Deserialize, Serialize};

use crate::chunk::ByteChunk;
use crate::process::OutputStream;

/// `process/output`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputNotification {
    pub process_id: String,
    pub seq: u64,
    pub stream: OutputStream,
    pub chunk: ByteChunk,
}

/// `process/exited`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitedNotification {
    pub process_id: String,
    pub seq: u64,
    /// The status, or `128 + N` when killed by signal N; `-1` when unknown.
    pub exit_code: i32,
    #[serde(default)]
    pub sandbox_denied: bool,
}

/// `process/closed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClosedNotification {
    pub process_id: String,
    pub seq: u64,
}
