//! PermissionRequest: hooks that answer for the person when the door holds a command (a
//! `prompt` rule, or a PreToolUse hook's `ask`), before anyone is asked. Claude Code and
//! Codex both name the event and read the same answer: exit 2 denies, its stderr the reason;
//! exit 0 with `hookSpecificOutput.decision.behavior` `allow` or `deny` (with `message`)
//! decides. A hook that says nothing, or is trouble (said in the log), leaves the question
//! to the person, as before: a hook never allows by failing.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use uexec_core::spawn::{Answer, Approver, Question};

use super::run::{run, trouble, Ran};
use super::{HookCommand, TOOL_NAMES};

const EVENT: &str = "PermissionRequest";

/// One call's PermissionRequest hooks, in front of whom the call would ask.
pub(super) struct PermissionRequest {
    pub hooks: Vec<HookCommand>,
    pub input: Value,
    pub call_id: String,
    pub dir: PathBuf,
    /// Whom to ask when no hook decides (`None`: no one can be asked).
    pub person: Option<Arc<dyn Approver>>,
    /// Who answered the last question, for the record.
    pub answered_by: Mutex<Option<String>>,
    /// What went wrong with a hook, for the call's result.
    pub notes: Arc<Mutex<Vec<String>>>,
}

impl PermissionRequest {
    fn by(&self, who: String) {
        *self
            .answered_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(who);
    }
}

impl Approver for PermissionRequest {
    fn who(&self) -> String {
        let said = self
            .answered_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        said.or_else(|| self.person.as_ref().map(|p| p.who()))
            .unwrap_or_else(|| "no one".to_owned())
    }

    fn ask(&self, question: Question) -> BoxFuture<'_, Answer> {
        Box::pin(async move {
            let event = json!({
                "session_id": self.call_id,
                "hook_event_name": EVENT,
                "tool_name": TOOL_NAMES[0],
                "tool_input": self.input,
                "tool_use_id": self.call_id,
                "cwd": self.dir,
                "reason": question.verdict.explain(),
            });
            let runs = self.hooks.iter().map(|h| run(h, &event, &self.dir));
            let ran = futures::future::join_all(runs).await;
            let mut allowed_by = None;
            for (hook, ran) in self.hooks.iter().zip(ran) {
                if let Some(trouble) = trouble(EVENT, hook, &ran) {
                    tracing::warn!(call_id = %self.call_id, "{trouble}");
                    self.notes
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(trouble);
                    continue;
                }
                let who = format!("{EVENT} hook {:?}", hook.command);
                match decided(&ran) {
                    // A deny of any hook wins.
                    Some(Err(reason)) => {
                        self.by(who);
                        return Answer::No { reason };
                    }
                    Some(Ok(())) => {
                        allowed_by.get_or_insert(who);
                    }
                    None => {}
                }
            }
            if let Some(who) = allowed_by {
                self.by(who);
                return Answer::Yes;
            }
            match &self.person {
                Some(person) => {
                    let answer = person.ask(question).await;
                    self.by(person.who());
                    answer
                }
                None => Answer::Unanswered {
                    why: "no person can be asked here, and no PermissionRequest hook decided"
                        .to_owned(),
                },
            }
        })
    }
}

/// A hook's decision: `Ok` allow, `Err(reason)` deny, `None` none.
fn decided(ran: &Ran) -> Option<Result<(), Option<String>>> {
    let Ran::Exited {
        code: Some(code),
        stdout,
        stderr,
    } = ran
    else {
        return None;
    };
    if *code == 2 {
        let reason = stderr.trim();
        return Some(Err((!reason.is_empty()).then(|| reason.to_owned())));
    }
    if *code != 0 {
        return None;
    }
    let json: Map<String, Value> = serde_json::from_str(stdout.trim()).ok()?;
    let decision = json.get("hookSpecificOutput")?.get("decision")?;
    let message = decision
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match decision.get("behavior").and_then(Value::as_str) {
        Some("allow") => Some(Ok(())),
        Some("deny") => Some(Err(message)),
        // A behaviour uexec does not know refuses, never allows.
        Some(other) => Some(Err(Some(format!(
            "the hook answered {other:?}, which is neither allow nor deny"
        )))),
        None => None,
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
    fn a_hook_allows_denies_or_leaves_it_to_the_person() {
        let allow = r#"{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}"#;
        let deny = r#"{"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "not on main"}}}"#;
        assert_eq!(decided(&exited(0, allow, "")), Some(Ok(())));
        assert_eq!(
            decided(&exited(0, deny, "")),
            Some(Err(Some("not on main".into())))
        );
        assert_eq!(
            decided(&exited(2, "", "no\n")),
            Some(Err(Some("no".into())))
        );
        assert_eq!(decided(&exited(0, "", "")), None);
        assert_eq!(decided(&exited(0, "{}", "")), None);
        assert_eq!(
            decided(&exited(1, allow, "")),
            None,
            "exit 1 decides nothing"
        );
        let odd = r#"{"hookSpecificOutput": {"decision": {"behavior": "maybe"}}}"#;
        assert!(matches!(decided(&exited(0, odd, "")), Some(Err(_))));
        assert_eq!(decided(&Ran::TimedOut), None);
    }
}
