//! The pre-spawn seam: what a face's hooks (Claude Code's `PreToolUse`) say of a command
//! before it runs. Core runs no hook of its own: a face implements [`PreSpawn`] (the MCP
//! face runs the hook commands) and a call brings it, since the hooks are told the call's
//! own input. The door asks it after the rules and before a person:
//!
//! 1. the rules judged the script; `forbidden` ended it there, whatever a hook would say;
//! 2. the hooks answer: a decision ([`Decision`]: allow, ask as `prompt`, deny as
//!    `forbidden`), why, and maybe a rewritten request (`updatedInput`);
//! 3. a rewritten request is planned again and judged by the rules again: the command that
//!    runs is the one the rules judged;
//! 4. the stricter of the rules and the hooks decides: a hook's deny refuses, its ask goes
//!    to the person as a rule's `prompt` would, and its allow never skips a person's yes
//!    that the rules asked for.

use std::path::PathBuf;

use futures::future::BoxFuture;

use crate::policy::rules::{Decision, Part, RuleMatch, Verdict};
use crate::request::ExecRequest;

/// What the hooks are told of a command about to run.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The script as the model wrote it.
    pub command: String,
    pub cwd: PathBuf,
    /// The rules' verdict so far.
    pub verdict: Verdict,
}

/// What the hooks said, all of them together.
#[derive(Debug, Clone, Default)]
pub struct PreSpawnAnswer {
    /// `None`: nothing (the rules decide).
    pub decision: Option<Decision>,
    /// Why, as the model reads it (a hook's stderr, its `permissionDecisionReason`).
    pub reason: Option<String>,
    /// Who said it, as the model reads it: `PreToolUse hook "check.sh"`.
    pub by: String,
    /// The request rewritten (`updatedInput`): it runs instead.
    pub updated: Option<ExecRequest>,
}

/// The seam: hooks consulted before a command runs (see the module doc).
pub trait PreSpawn: Send + Sync {
    fn before(&self, pending: Pending) -> BoxFuture<'_, PreSpawnAnswer>;
}

impl PreSpawnAnswer {
    /// The explanation of a refusal by a hook.
    pub(super) fn denial(&self) -> String {
        match &self.reason {
            Some(why) => format!("denied by {}: {why}", self.by),
            None => format!("denied by {}", self.by),
        }
    }

    /// A verdict holding `command` for a person, naming the hook as its rule.
    pub(super) fn held(&self, command: &str) -> Verdict {
        let rule = RuleMatch {
            source: self.by.clone(),
            matched_prefix: Vec::new(),
            decision: Decision::Prompt,
            justification: self.reason.clone(),
        };
        Verdict {
            decision: Decision::Prompt,
            parts: vec![Part {
                argv: vec![command.to_owned()],
                opaque: false,
                decision: Decision::Prompt,
                rule: Some(rule),
            }],
        }
    }
}
