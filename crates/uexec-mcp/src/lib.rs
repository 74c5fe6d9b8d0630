//! The MCP face of uexec: `exec_command`, `write_stdin`, `list_sessions` and
//! `terminate_session` over stdio or streamable HTTP, built on the official Rust MCP SDK.
//!
//! Faces translate; the engine (`uexec-core`) does the work. One store per connection over
//! stdio; over HTTP one store per principal (see [`http`]).

#![forbid(unsafe_code)]

pub mod daemon;
pub mod environments;
pub mod progress;
pub mod resources;
pub mod serve;
pub mod server;
pub mod settings;
pub mod stores;
pub mod tools;

pub use serve::{run, McpArgs};
pub use server::UexecServer;
