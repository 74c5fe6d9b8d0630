//! uexec's command rules: a person's rules files read as their agent reads them, and a
//! script judged part by part, as its shell would run it.
//!
//! 1. [`Rules::load`] reads each file: a Codex `.rules` file (Starlark, `codex`) or a
//!    Claude Code settings JSON (`claude`), told apart by extension, then by content;
//!    anything it cannot mean is a [`LoadError`] naming the file, line and column.
//! 2. [`CommandRules::judge`] (the seam core declares, implemented by [`Rules`]) parses
//!    the script with tree-sitter's bash grammar (`split`), resolves each simple command
//!    through its wrappers and `bash -c` strings (`wrappers`), and decides each part by
//!    the strictest rule that matches it (`rule`), or the `unmatched` decision when none
//!    does.
//! 3. [`Check::to_codex_json`] renders a judgement in the shape of `codex execpolicy check`.
//!
//! This crate never knows MCP, JSON-RPC, processes, sessions or terminals: it reads files
//! and strings and returns values. It runs nothing, and what calls it decides what a verdict
//! does (the front door in `uexec_core::spawn`).
#![forbid(unsafe_code)]

mod check;
mod claude;
mod codex;
mod error;
mod judge;
mod rule;
mod split;

pub use check::{codex_json, Check};
pub use error::{Format, LoadError};
pub use judge::Rules;
pub use uexec_core::policy::rules::{CommandRules, Decision, Part, RuleMatch, Verdict};

/// The rules `--rules FILE... [--unmatched DECISION]` name, as every face reads its flags:
/// none without files (every command runs); `unmatched` defaults to allow. What the files
/// ignore is in [`Rules::warnings`], for the caller's log.
pub fn from_flags(
    files: &[std::path::PathBuf],
    unmatched: Option<Decision>,
) -> Result<Option<Rules>, LoadError> {
    if files.is_empty() {
        return Ok(None);
    }
    Rules::load(files, unmatched.unwrap_or(Decision::Allow)).map(Some)
}
