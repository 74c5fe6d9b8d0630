//! The exec-server face of uexec: `uexec serve` speaks the Codex exec-server dialect
//! (JSON-RPC without the `jsonrpc` field, see `uexec-protocol`) over WebSocket or stdio, so
//! Codex can run its commands on uexec and uexec on Codex.
//!
//! # Architecture invariants
//! - A face: it translates the dialect into calls on a `uexec_core::Backend` and holds no
//!   process logic (spawning, PTYs, process groups and reaping are the backend's).
//! - It never knows the client (`uexec-client`, a dev-dependency of its tests only), the MCP
//!   face or the binary; the wire types are `uexec-protocol`'s, the listener's hardening
//!   `uexec-net`'s.
//! - Neither clap nor anyhow: [`serve`] takes plain [`ServeOptions`] (the binary's clap
//!   definitions fill them) and fails with a typed [`ServeError`]. No `unsafe`.
//! - Nothing on a connection's request path waits for a process: answers that may wait are
//!   sent from tasks, bounded by `MAX_PENDING_ANSWERS`.
//! - The connection hands its handlers a `Caller`; no module uses a module that uses it.
//!
//! The flow of a command:
//! 1. a transport ([`transport::ws`], [`transport::stdio`]) accepts a peer and makes a
//!    [`Connection`](connection::Connection) on the shared [`ExecServer`];
//! 2. `initialize` opens (or resumes) a [`Session`](session::Session) in the
//!    [`Registry`](registry::Registry); `initialized` completes the handshake;
//! 3. `process/start` is judged by the rules (`--rules`; with `--rules-at exec`, each of
//!    its execs too: `exec_rules`), then spawns through a `uexec_core`
//!    [`Backend`](uexec_core::Backend) and hands the process to its *pump* task, which
//!    numbers output, exit and close events on one seq counter, retains the newest 1 MiB
//!    of output and pushes notifications to whichever connection the session is attached
//!    to;
//! 4. `process/read|write|signal|terminate` act through a cheap
//!    [`ProcessHandle`](process::ProcessHandle); long polls and stdin writes are answered
//!    from tasks so they never block the connection;
//! 5. a dropped connection detaches its session, which lives on for 30 s for
//!    `resumeSessionId`, then its processes are killed; closed processes stay readable 30 s;
//! 6. stdin EOF (stdio), SIGINT or SIGTERM shut the server down, killing every process group.
//!
//! The other way round, the engine's backend on an exec server is `uexec-client`'s
//! `RemoteBackend`; the listener hardening both faces share is `uexec-net`.

#![forbid(unsafe_code)]

mod caller;
pub mod config;
pub mod connection;
pub mod env_policy;
pub mod environment;
mod exec_rules;
mod handlers;
pub mod outbound;
pub mod process;
mod pump;
pub mod registry;
mod serve;
pub mod server;
pub mod session;
pub mod transport;

pub use config::ServerConfig;
pub use serve::{serve, ServeError, ServeOptions};
pub use server::ExecServer;
