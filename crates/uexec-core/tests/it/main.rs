//! Integration tests of the engine with real processes (and a fake backend where a race
//! must be forced). One test binary: `cargo test -p uexec-core --test it`.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod background_jobs;
mod caller_environments;
mod ctrl_c;
mod events;
mod exec;
mod exit_reports;
mod fake_backend;
mod figures;
mod id_space;
mod inherited_fds;
mod invalid_input;
mod limits;
mod monitors;
mod screens;
mod shell_snapshot;
mod shutdown_races;
mod stdin;
mod terminate;
mod transcripts;
mod until;
mod utf8_boundaries;
