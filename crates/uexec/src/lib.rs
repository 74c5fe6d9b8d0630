//! The CLI verbs of `uexec`, shared by its two executables: `uexec-engine` (every face:
//! `mcp`, `serve`, `daemon` and the CLI) and `uexec`, the small front that people and
//! agents call (it makes a plain `uexec run` itself and hands everything else to the
//! engine beside it).
//!
//! # Architecture invariants
//! - The binary is the composition root: it alone sees every crate. It builds the sandbox
//!   (`uexec_sandbox::Sandbox`) and hands it to the faces, owns every flag (clap, in
//!   `args/`) and anyhow, and decides between serving and relaying (`mcp --daemon`).
//! - A verb is a file (`cli/`); verbs share only `cli/common.rs` and the connection
//!   (`cli/conn.rs`), never each other.
//! - The CLI is a client of the daemon: it holds no session, and speaks to it through the
//!   MCP face's tools and the daemon's wire, as any client would.

#![forbid(unsafe_code)]

pub mod cli;
