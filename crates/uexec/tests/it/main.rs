//! The `uexec` binary seen from real clients: rmcp's MCP client over stdio (a child
//! process) and over streamable HTTP, plus raw HTTP for the refusals.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod fuzz_corpus;
mod last_will;

mod mcp_environments;
mod mcp_http;
mod mcp_stdio;
