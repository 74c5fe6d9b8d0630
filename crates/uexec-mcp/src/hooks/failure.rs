//! PostToolUseFailure: the hooks of an `exec_command` that failed as a tool call (refused by
//! the rules, a hook or a person; a spawn that failed; bad input), as Claude Code runs them
//! for a tool that failed: the event names the call's id, its input and the error. A command
//! that ran and exited non-zero is no failure of the tool: its hooks are PostToolUse's.
//! What they say reaches the model in the result, as a PostToolUse hook's would.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::post::run_all;
use super::{HookCommand, TOOL_NAMES};

const EVENT: &str = "PostToolUseFailure";

/// One call's PostToolUseFailure hooks.
pub(super) struct Failure {
    pub hooks: Vec<HookCommand>,
    pub input: Value,
    pub call_id: String,
    pub dir: PathBuf,
}

impl Failure {
    /// Runs the hooks on `error` (the tool's error text), each with its timeout; what they
    /// said for the model, and every trouble logged.
    pub(super) async fn fire(&self, error: &str) -> Vec<String> {
        let event = json!({
            "session_id": self.call_id,
            "hook_event_name": EVENT,
            "tool_name": TOOL_NAMES[0],
            "tool_input": self.input,
            "tool_use_id": self.call_id,
            "error": error,
            "is_interrupt": false,
            "cwd": self.dir,
        });
        run_all(EVENT, &self.hooks, &event, &self.dir, &self.call_id).await
    }
}
