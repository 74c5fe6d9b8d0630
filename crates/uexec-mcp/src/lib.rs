//! The MCP face of uexec: `exec_command`, `write_stdin`, `list_sessions`, `terminate_session`,
//! `wait` and `read_output` over stdio or streamable HTTP, built on the official Rust MCP SDK,
//! and the per-user daemon that serves the same tools to many clients.
//!
//! # Architecture invariants
//! - A face: it translates. It holds no process logic; every session is the engine's
//!   (`uexec-core`), and what a tool does is one call on a `SessionStore`.
//! - No clap, no anyhow: it starts from plain options ([`McpOptions`],
//!   [`daemon::DaemonOptions`]) that the binary's flags convert into, and fails with typed
//!   errors ([`McpError`], [`daemon::DaemonError`], [`daemon::client::ClientError`]).
//! - It never knows the binary's other faces (the CLI verbs, `uexec serve`) nor decides
//!   between serving here and relaying to the daemon (`uexec mcp --daemon` is the binary's).
//! - The daemon's wire is `uexec_protocol::daemon`; this crate holds both of its ends' logic
//!   (the daemon, and the client the binary's verbs connect with), not its types.
//! - One tool, one file ([`tools`]): schema, arguments, engine call and result together.
//!
//! One store per connection over stdio; over HTTP one store per principal (see [`stores`]);
//! in the daemon, one per owner.

#![forbid(unsafe_code)]

pub mod approve;
pub mod audit;
pub mod daemon;
mod dropped;
pub mod environments;
mod error_chain;
mod hangup;
pub mod hooks;
mod options;
pub mod progress;
pub mod resources;
mod serve;
pub mod server;
mod settings;
pub mod stores;
pub mod tasks;
pub mod tools;
pub mod wire;

pub use options::{McpOptions, TranscriptOptions, TranscriptsDirError};
pub use serve::{run, McpError};
pub use server::UexecServer;
