//! The CLI verbs of `uexec`, shared by its two executables: `uexec-engine` (every face:
//! `mcp`, `serve`, `daemon` and the CLI) and `uexec`, the small front that people and
//! agents call (it makes a plain `uexec run` itself and hands everything else to the
//! engine beside it).

#![forbid(unsafe_code)]

pub mod cli;
