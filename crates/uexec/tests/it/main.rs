//! The `uexec` binary seen from real clients: rmcp's MCP client over stdio (a child
//! process) and over streamable HTTP, plus raw HTTP for the refusals.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;
mod net_support;

mod attach;
mod cgroup_figures;
mod cgroups;
mod cli;
mod cli_kill;
mod cli_logs_since;
mod cli_run;
mod cli_sessions;
mod client_gone;
mod daemon;
mod daemon_status;
mod daemon_trust;
mod front;
mod fuzz_corpus;
mod last_will;
mod man;
mod mcp_call_ids;
mod mcp_cancel;
mod mcp_daemon_default;
mod mcp_daemon_environments;
mod mcp_environments;
mod mcp_environments_file;
mod mcp_faces;
mod mcp_fewer_polls;
mod mcp_http;
mod mcp_http_daemon;
mod mcp_listen;
mod mcp_output;
mod mcp_progress;
mod mcp_protocol;
mod mcp_stdio;
mod mcp_tasks;
mod metrics;
mod net_hardening;
mod net_peer_user;
mod net_tls;
mod people_story;
mod place;
mod sandbox;
mod sandbox_attacks;
mod sandbox_ceiling;
mod sandbox_doors;
mod sandbox_fs;
mod sandbox_network;
mod sandbox_proxy;
mod sandbox_warm;
mod shell_snapshot;
mod tmux;
mod told;
mod transcripts;
