//! Hooks (`--hooks FILE`, issue 39 §3): Claude Code's (and Codex's) `PreToolUse`,
//! `PermissionRequest`, `PostToolUse` and `PostToolUseFailure` command
//! hooks around `exec_command`, run by this face (core runs no process of its own: it asks
//! the [`PreSpawn`](uexec_core::spawn::PreSpawn) seam a call brings, and publishes the End
//! of each session once).
//!
//! 1. [`file`] reads the files at start: a bad one stops uexec naming file, line, column.
//! 2. A call of `exec_command` makes a [`CallHooks`] ([`call`]): its PreToolUse hooks are the
//!    door's pre-spawn stage ([`pre`]): after the rules, before a person;
//!    A command held for a person asks its PermissionRequest hooks first ([`permission`]):
//!    they may allow or deny for the person;
//! 3. its PostToolUse hooks ([`post`]) wait for the End of the call's own session on the
//!    store's event stream, subscribed before the spawn: the End is published once per
//!    session, when its process exits, whoever polls it or not. A command that ended in its
//!    window has them run before the call answers (what they say is in the result); one
//!    still running has them run at its exit, in this process (the daemon's, through it),
//!    whether or not the client is still there.
//! 4. a call that failed as a tool (refused, a spawn that failed, bad input) runs its
//!    PostToolUseFailure hooks ([`failure`]) with the error, before it answers;
//! 5. Every hook runs with its `timeout` ([`run`]); one that hangs, crashes or prints bad
//!    JSON is said in the result and the log, and the call goes on.

mod call;
mod failure;
mod file;
mod permission;
mod post;
mod pre;
mod run;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use call::CallHooks;
pub use file::DEFAULT_HOOK_TIMEOUT_MS;

/// The names a matcher is tried on: uexec's tool, Claude Code's shell (a hook written for
/// `Bash` guards uexec's commands too) and the name Claude Code gives uexec's tool.
pub const TOOL_NAMES: [&str; 3] = ["exec_command", "Bash", "mcp__uexec__exec_command"];

/// The hooks of every `--hooks` file, in order.
#[derive(Debug, Default)]
pub struct Hooks {
    pre: Vec<Group>,
    post: Vec<Group>,
    failure: Vec<Group>,
    permission: Vec<Group>,
}

/// A matcher and the hooks it runs.
#[derive(Debug)]
struct Group {
    matcher: Matcher,
    hooks: Vec<HookCommand>,
}

/// One command hook.
#[derive(Debug, Clone)]
pub(crate) struct HookCommand {
    /// Run by `sh -c`, the event as JSON on its stdin.
    pub command: String,
    pub timeout: Duration,
}

/// A tool-name matcher, as Claude Code reads one: empty or `*` matches every tool, names
/// (`Bash|exec_command`) match exactly, anything else is a regex found in the name.
#[derive(Debug)]
enum Matcher {
    All,
    Names(Vec<String>),
    Regex(regex::Regex),
}

impl Matcher {
    fn parse(text: &str) -> Result<Self, regex::Error> {
        if text.is_empty() || text == "*" {
            Ok(Self::All)
        } else if text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
        {
            Ok(Self::Names(text.split('|').map(str::to_owned).collect()))
        } else {
            regex::Regex::new(text).map(Self::Regex)
        }
    }

    fn matches(&self, tool: &str) -> bool {
        match self {
            Self::All => true,
            Self::Names(names) => names.iter().any(|n| n == tool),
            Self::Regex(re) => re.is_match(tool),
        }
    }
}

/// Which hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    PreToolUse,
    PostToolUse,
    PostToolUseFailure,
    PermissionRequest,
}

impl Hooks {
    /// Reads `files` in order (none: `None`, no hooks); what they hold that uexec ignores
    /// is said once in the log.
    pub fn load(files: &[PathBuf]) -> Result<Option<Arc<Self>>, String> {
        if files.is_empty() {
            return Ok(None);
        }
        let mut hooks = Self::default();
        for path in files {
            let read = file::read(path).map_err(|e| format!("--hooks: {e}"))?;
            if !read.ignored.is_empty() {
                tracing::warn!(
                    "--hooks {}: uexec runs PreToolUse, PermissionRequest, PostToolUse and PostToolUseFailure hooks only; it ignores {}",
                    path.display(),
                    read.ignored.join(", ")
                );
            }
            hooks.pre.extend(read.pre);
            hooks.post.extend(read.post);
            hooks.failure.extend(read.failure);
            hooks.permission.extend(read.permission);
        }
        Ok(Some(Arc::new(hooks)))
    }

    /// The hooks of `event` whose matcher matches uexec's exec_command, each once.
    pub(crate) fn matching(&self, event: Event) -> Vec<HookCommand> {
        let groups = match event {
            Event::PreToolUse => &self.pre,
            Event::PostToolUse => &self.post,
            Event::PostToolUseFailure => &self.failure,
            Event::PermissionRequest => &self.permission,
        };
        let mut found: Vec<HookCommand> = Vec::new();
        for group in groups {
            if TOOL_NAMES.iter().any(|t| group.matcher.matches(t)) {
                for hook in &group.hooks {
                    // Claude Code runs an identical command once.
                    if !found.iter().any(|h| h.command == hook.command) {
                        found.push(hook.clone());
                    }
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matcher_for_bash_or_exec_command_or_every_tool_matches_uexecs_tool() {
        for m in [
            "Bash",
            "exec_command",
            "Edit|Bash",
            "",
            "*",
            "mcp__.*",
            "Ba.h",
        ] {
            let matcher = Matcher::parse(m).expect("parsed");
            assert!(TOOL_NAMES.iter().any(|t| matcher.matches(t)), "{m}");
        }
        for m in ["Edit|Write", "Read", "mcp__github__.*", "Bas"] {
            let matcher = Matcher::parse(m).expect("parsed");
            assert!(!TOOL_NAMES.iter().any(|t| matcher.matches(t)), "{m}");
        }
    }
}
