//! PreToolUse: the door's pre-spawn stage for one `exec_command` call. Every matching hook
//! runs (at once, as Claude Code runs them) and their answers add up: a deny of any wins,
//! then an ask; an `updatedInput` (the last one given) rewrites the call's arguments, which
//! the door plans and the rules judge again.
//!
//! A hook's answer, as Claude Code reads it: exit 2 blocks, its stderr the reason; exit 0
//! with JSON on stdout may say `hookSpecificOutput.permissionDecision` (`allow`, `deny`,
//! `ask`, with `permissionDecisionReason`) and `updatedInput`, or the older top-level
//! `decision` (`approve`, `block`) and `continue: false`. Anything else it does is trouble
//! ([`super::run::trouble`]): said, and the call goes on. A decision uexec does not know
//! refuses, never allows.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use uexec_core::policy::rules::Decision;
use uexec_core::spawn::{Pending, PreSpawn, PreSpawnAnswer};

use super::run::{run, trouble, Ran};
use super::{HookCommand, TOOL_NAMES};
use crate::tools::exec_command;
use crate::tools::parse::Dialect;

/// Keys of Claude Code's `Bash` input, which a hook written for it may send back.
const BASH_ONLY_KEYS: [&str; 5] = [
    "command",
    "description",
    "timeout",
    "run_in_background",
    "dangerouslyDisableSandbox",
];

/// One call's PreToolUse hooks.
pub(super) struct PreToolUse {
    pub hooks: Vec<HookCommand>,
    /// The call's arguments as the model sent them.
    pub arguments: Map<String, Value>,
    pub call_id: String,
    pub dialect: Dialect,
    /// Where hooks run (the connection's directory).
    pub dir: PathBuf,
    /// What went wrong with a hook, for the call's result.
    pub notes: Arc<Mutex<Vec<String>>>,
}

/// One hook's answer.
struct Said {
    decision: Option<Decision>,
    reason: Option<String>,
    updated: Option<Map<String, Value>>,
}

impl PreSpawn for PreToolUse {
    fn before(&self, pending: Pending) -> BoxFuture<'_, PreSpawnAnswer> {
        Box::pin(async move {
            let event = serde_json::json!({
                "session_id": self.call_id,
                "hook_event_name": "PreToolUse",
                "tool_name": TOOL_NAMES[0],
                "tool_input": tool_input(&self.arguments),
                "tool_use_id": self.call_id,
                "cwd": pending.cwd,
                "permission_mode": "default",
            });
            let runs = self.hooks.iter().map(|h| run(h, &event, &self.dir));
            let ran = futures::future::join_all(runs).await;
            let mut answer = PreSpawnAnswer::default();
            let mut rewrite = None;
            for (hook, ran) in self.hooks.iter().zip(ran) {
                if let Some(trouble) = trouble("PreToolUse", hook, &ran) {
                    self.note(trouble);
                    continue;
                }
                let said = match said(&ran) {
                    Ok(said) => said,
                    Err(bad) => {
                        let e = format!("PreToolUse hook {:?}: {bad}", hook.command);
                        if bad.refuses {
                            answer.stricter(Decision::Forbidden, Some(bad.why), &hook.command);
                        } else {
                            self.note(format!("{e}; ignored, the call went on"));
                        }
                        continue;
                    }
                };
                if let Some(decision) = said.decision {
                    answer.stricter(decision, said.reason, &hook.command);
                }
                rewrite = said.updated.or(rewrite);
            }
            if let Some(update) = rewrite {
                match self.rewritten(update) {
                    Ok(req) => answer.updated = Some(req),
                    Err(e) => answer.stricter(
                        Decision::Forbidden,
                        Some(format!("its updatedInput is not a valid exec_command: {e}")),
                        "updatedInput",
                    ),
                }
            }
            answer
        })
    }
}

/// What a hook printed that cannot be its answer; `refuses`: what it meant cannot be done
/// safely (a decision uexec does not know).
struct Bad {
    why: String,
    refuses: bool,
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// A hook's answer from how it ended and what it printed.
fn said(ran: &Ran) -> Result<Said, Bad> {
    let nothing = Said {
        decision: None,
        reason: None,
        updated: None,
    };
    let Ran::Exited {
        code: Some(code),
        stdout,
        stderr,
    } = ran
    else {
        return Ok(nothing);
    };
    if *code == 2 {
        let reason = match stderr.trim() {
            "" => "it exited 2".to_owned(),
            text => text.to_owned(),
        };
        return Ok(Said {
            decision: Some(Decision::Forbidden),
            reason: Some(reason),
            updated: None,
        });
    }
    let text = stdout.trim();
    if !text.starts_with('{') {
        // Plain text on stdout is for the transcript, as in Claude Code: no answer.
        return Ok(nothing);
    }
    let json: Value = serde_json::from_str(text).map_err(|e| Bad {
        why: format!("printed bad JSON ({e})"),
        refuses: false,
    })?;
    let specific = json.get("hookSpecificOutput");
    let field = |name: &str| {
        specific
            .and_then(|s| s.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let mut decision = match field("permissionDecision").as_deref() {
        None => None,
        Some("allow") => Some(Decision::Allow),
        Some("ask") => Some(Decision::Prompt),
        Some("deny") => Some(Decision::Forbidden),
        Some(other) => {
            return Err(Bad {
                why: format!("permissionDecision {other:?} is not allow, deny or ask: refused"),
                refuses: true,
            })
        }
    };
    let mut reason = field("permissionDecisionReason");
    // The older top-level form.
    match json.get("decision").and_then(Value::as_str) {
        Some("block") => decision = Some(Decision::Forbidden),
        Some("approve") if decision.is_none() => decision = Some(Decision::Allow),
        _ => {}
    }
    if reason.is_none() {
        reason = json
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    if json.get("continue") == Some(&Value::Bool(false)) {
        decision = Some(Decision::Forbidden);
        reason = json
            .get("stopReason")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(reason);
    }
    let updated = match specific.and_then(|s| s.get("updatedInput")) {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map.clone()),
        Some(_) => {
            return Err(Bad {
                why: "updatedInput is not an object: refused".into(),
                refuses: true,
            })
        }
    };
    Ok(Said {
        decision,
        reason,
        updated,
    })
}

impl PreToolUse {
    fn note(&self, note: String) {
        tracing::warn!("{note}");
        self.notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(note);
    }

    /// The call's arguments with `update` over them (Claude Code's `command` as `cmd`; its
    /// other Bash keys dropped; the environment stays the call's), as a request.
    fn rewritten(&self, update: Map<String, Value>) -> Result<uexec_core::ExecRequest, String> {
        let mut arguments = self.arguments.clone();
        for (key, value) in update {
            match key.as_str() {
                "command" => {
                    arguments.insert("cmd".into(), value);
                }
                "environment_id" => {}
                k if BASH_ONLY_KEYS.contains(&k) => {}
                _ => {
                    arguments.insert(key, value);
                }
            }
        }
        let mut req =
            exec_command::request(Some(&arguments), self.dialect).map_err(|e| e.to_string())?;
        req.call_id = Some(self.call_id.clone());
        Ok(req)
    }
}

/// The call's arguments as a hook reads them: with `command` beside `cmd`, as Claude Code's
/// `Bash` input has it, so a hook written for `Bash` reads uexec's commands too.
pub(super) fn tool_input(arguments: &Map<String, Value>) -> Value {
    let mut input = arguments.clone();
    if let Some(cmd) = arguments.get("cmd") {
        input
            .entry("command".to_owned())
            .or_insert_with(|| cmd.clone());
    }
    Value::Object(input)
}

trait Stricter {
    fn stricter(&mut self, decision: Decision, reason: Option<String>, by: &str);
}

impl Stricter for PreSpawnAnswer {
    /// Takes `decision` when it is stricter than what was said so far.
    fn stricter(&mut self, decision: Decision, reason: Option<String>, by: &str) {
        if self.decision.is_some_and(|d| d >= decision) {
            return;
        }
        self.decision = Some(decision);
        self.reason = reason;
        self.by = format!("PreToolUse hook {by:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran::Exited {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn exit_2_blocks_with_its_stderr() {
        let said = said(&exited(2, "", "no rm here\n")).ok().expect("said");
        assert_eq!(said.decision, Some(Decision::Forbidden));
        assert_eq!(said.reason.as_deref(), Some("no rm here"));
    }

    #[test]
    fn json_decisions_are_read_and_an_unknown_one_refuses() {
        let out = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"why"}}"#;
        let said = said(&exited(0, out, "")).ok().expect("said");
        assert_eq!(said.decision, Some(Decision::Prompt));
        assert_eq!(said.reason.as_deref(), Some("why"));
        let out = r#"{"hookSpecificOutput":{"permissionDecision":"maybe"}}"#;
        let Err(bad) = super::said(&exited(0, out, "")) else {
            panic!("refused");
        };
        assert!(bad.refuses);
        let Err(bad) = super::said(&exited(0, "{not json", "")) else {
            panic!("bad json");
        };
        assert!(!bad.refuses && bad.why.contains("bad JSON"));
        assert!(super::said(&exited(0, "all good", ""))
            .ok()
            .expect("text")
            .decision
            .is_none());
    }

    #[test]
    fn a_deny_outranks_an_ask_and_an_allow() {
        let mut answer = PreSpawnAnswer::default();
        answer.stricter(Decision::Allow, None, "a");
        answer.stricter(Decision::Forbidden, Some("no".into()), "b");
        answer.stricter(Decision::Prompt, None, "c");
        assert_eq!(answer.decision, Some(Decision::Forbidden));
        assert!(answer.by.contains("\"b\""));
    }
}
