//! What stops a rules file from loading: always the file, and where in it.

use std::fmt;
use std::path::PathBuf;

/// Which kind of rules file a path was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Codex's `.rules` (Starlark).
    CodexRules,
    /// Claude Code's settings JSON (`permissions.allow` / `ask` / `deny`).
    ClaudeSettings,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::CodexRules => "Codex rules file",
            Format::ClaudeSettings => "Claude Code settings file",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: cannot read the rules file: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file does not parse, or says something the rules cannot mean (an unknown
    /// decision, an example its rule contradicts, a `Bash(…)` entry that is not a command).
    #[error("{}:{line}:{column}: {format}: {message}", path.display())]
    Invalid {
        path: PathBuf,
        format: Format,
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
        message: String,
    },
}
