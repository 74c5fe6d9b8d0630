//! The MCP handler in-process, seen from rmcp's client over an in-memory pipe: what it leaves
//! behind when clients come and go.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod subscriptions;
