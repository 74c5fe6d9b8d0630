//! Wire types of the Codex exec-server dialect, shared by every uexec face that speaks it: the
//! server (`uexec serve`) and the client (`uexec-client`, the engine's remote backend). Every
//! type here both serializes and deserializes, so either side can use it.
//!
//! # Architecture invariants
//! - Types only: no I/O, no task, no process. It depends on serde, base64, bytes and
//!   thiserror, never on the engine, the network crate or a face.
//! - Both ways: what one side writes, the other reads with the same type.
//! - A peer's frame is never built into a `serde_json::Value`: members stay raw until read
//!   into their typed params, whose lists are length-capped ([`bounded`]). No `unsafe`.
//!
//! The dialect is JSON-RPC 2.0 *without* the `"jsonrpc"` field, one message per WebSocket
//! frame (or per line on stdio):
//!
//! 1. request      `{"id": 1, "method": "process/start", "params": {...}}` (ids are integers or
//!    strings);
//! 2. response     `{"id": 1, "result": {...}}` or `{"id": 1, "error": {"code", "message",
//!    "data"?}}`; a message that cannot be read at all is answered with `id: -1`;
//! 3. notification `{"method": "process/output", "params": {...}}`.
//!
//! A session starts with `initialize` (answered with a session id) and the `initialized`
//! notification; then `process/start|read|write|signal|terminate` and `environment/info`.
//! Process events (`process/output`, `process/exited`, `process/closed`) share one `seq`
//! counter per process, starting at 1; `closed` is always the last.
//!
//! Modules: [`jsonrpc`] (envelopes, ids, error codes, parsing), [`bounded`] (length-capped
//! lists in params), [`limits`] (message and frame sizes), [`method`] (method names),
//! [`session`] (`initialize`, `environment/info`), [`process`] (the `process/*` requests),
//! [`events`] (the notifications), [`chunk`] (base64 byte chunks), [`file_uri`] (`file://`
//! working directories). Beside the dialect, [`daemon`] is the wire of uexec's per-user
//! daemon (its hello, reply and attach frames), which its clients share with it.

#![forbid(unsafe_code)]

pub mod bounded;
pub mod chunk;
#[cfg(unix)]
pub mod daemon;
pub mod events;
#[cfg(unix)]
pub mod file_uri;
pub mod jsonrpc;
pub mod limits;
pub mod method;
pub mod process;
pub mod session;

pub use chunk::ByteChunk;
pub use events::{ClosedNotification, ExitedNotification, OutputNotification};
pub use jsonrpc::{ErrorCode, Incoming, ParseError, RequestId, RpcError};
pub use method::Method;
pub use process::{
    EnvPolicy, EnvPolicyInherit, OutputStream, ProcessChunk, ReadParams, ReadResult, SignalName,
    SignalParams, SignalResult, StartParams, StartResult, TerminateParams, TerminateResult,
    WriteParams, WriteResult, WriteStatus,
};
pub use session::{EnvironmentInfo, InitializeParams, InitializeResult, ShellInfo};
