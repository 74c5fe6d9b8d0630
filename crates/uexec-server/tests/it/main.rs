//! Integration tests of `uexec serve`: a real server on 127.0.0.1:0 (or over an in-memory
//! stdio pipe) and a real WebSocket client, real processes; and the engine's remote backend
//! (`uexec-client`, a dev-dependency) against that server and against the real codex
//! (`remote_backend`, `codex_interop`). The remote-backend tests stay here, beside the server
//! they run against, so both ends share one in-process `uexec serve` (`helpers`) and one
//! linked test binary.
#![cfg(unix)]
// Test helpers panic on purpose: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;
mod remote_support;

mod codex_interop;
mod handshake;
mod http;
mod keepalive;
mod lifecycle;
mod logging;
mod memory;
mod properties;
mod protocol_errors;
mod read;
mod remote_backend;
mod remote_ordering;
mod remote_spawn;
mod resume;
mod retention;
mod shell_snapshot;
mod signals;
mod stdin;
mod stdio;
mod tls;
