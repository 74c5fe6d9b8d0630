//! A person's yes or no through the MCP client (`elicitation/create`, form mode): the
//! [`Approver`] a call brings to the front door when its client declared form elicitation.
//!
//! The form says the command, the working directory, the rule that held it and why, and
//! asks for one of three answers: run it once, run it and the commands that start the same
//! way for the rest of this connection ("always", remembered here, never wider than the
//! prefix asked about, and never for a prefix that would admit anything: a shell with `-c`,
//! `env`, `sudo`, an interpreter with `-c`/`-e`), or deny, with a reason the model reads.
//! No answer within the timeout is a refusal that says so. A client on MCP 2026-07-28 or
//! later, which a server may not send requests, gets the same form as the call's answer
//! and brings the person's in its retry ([`rounds`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, EnumSchema};
use rmcp::service::{Peer, RoleServer};
use uexec_core::policy::rules::{Decision, Verdict};
use uexec_core::spawn::{Answer, Approver, Question};

pub mod held;
pub mod rounds;

/// How long a question waits for its answer by default (`--approval-timeout`).
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);

/// The answers the form offers, as the client shows them.
const ONCE: &str = "run once";
const ALWAYS: &str = "always (this prefix, this connection)";
const DENY: &str = "deny";

/// Programs whose prefix never becomes an "always": their words run anything.
const NEVER_ALWAYS: &[&str] = &[
    "bash",
    "sh",
    "zsh",
    "dash",
    "fish",
    "ksh",
    "env",
    "sudo",
    "doas",
    "su",
    "eval",
    "exec",
    "xargs",
    "python",
    "python3",
    "node",
    "perl",
    "ruby",
    "php",
    "deno",
    "bun",
    "osascript",
    "nohup",
    "timeout",
    "nice",
    "command",
    "time",
    "busybox",
];

/// `20ms`, `90s`, `10m`: a timeout as its flag takes it.
fn shown(d: Duration) -> String {
    let ms = d.as_millis();
    if ms > 0 && ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms > 0 && ms.is_multiple_of(1_000) {
        format!("{}s", ms / 1_000)
    } else {
        format!("{ms}ms")
    }
}

/// The prefixes a person said "always" to, for one connection.
#[derive(Debug, Default, Clone)]
pub struct Always(Arc<Mutex<Vec<Vec<String>>>>);

impl Always {
    /// Every held part of `verdict` starts with a prefix said "always" to.
    fn covers(&self, verdict: &Verdict) -> bool {
        let said = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut held = verdict
            .parts
            .iter()
            .filter(|p| p.decision == Decision::Prompt)
            .peekable();
        held.peek().is_some()
            && held.all(|p| !p.opaque && said.iter().any(|prefix| p.argv.starts_with(prefix)))
    }

    /// Remembers the prefix of each held part (the rule's, else the program's name and its
    /// first word), unless it would admit anything; what it remembered.
    fn remember(&self, verdict: &Verdict) -> Vec<Vec<String>> {
        let mut added = Vec::new();
        for part in verdict
            .parts
            .iter()
            .filter(|p| p.decision == Decision::Prompt)
        {
            if let Some(prefix) = always_prefix(part) {
                added.push(prefix);
            }
        }
        let mut said = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for prefix in &added {
            if !said.contains(prefix) {
                said.push(prefix.clone());
            }
        }
        added
    }
}

/// The prefix an "always" to `part` admits: the words its rule matched, else its first two
/// words; `None` for an opaque part or one whose program runs anything.
fn always_prefix(part: &uexec_core::policy::rules::Part) -> Option<Vec<String>> {
    if part.opaque || part.argv.is_empty() {
        return None;
    }
    let program = part.argv[0].rsplit('/').next().unwrap_or_default();
    if NEVER_ALWAYS.contains(&program) {
        return None;
    }
    let prefix = match &part.rule {
        Some(rule) if !rule.matched_prefix.is_empty() => rule.matched_prefix.clone(),
        _ => part.argv.iter().take(2).cloned().collect(),
    };
    Some(prefix)
}

/// Asks the person at the other end of `peer`.
pub struct Eliciting {
    pub peer: Peer<RoleServer>,
    pub timeout: Duration,
    pub always: Always,
}

impl Approver for Eliciting {
    fn who(&self) -> String {
        "the person (the MCP client's form)".to_owned()
    }

    fn ask(&self, question: Question) -> BoxFuture<'_, Answer> {
        Box::pin(async move {
            if self.always.covers(&question.verdict) {
                return Answer::Yes;
            }
            let Some(params) = form(&question) else {
                return Answer::Unanswered {
                    why: "the question could not be put as a form".to_owned(),
                };
            };
            let asked = self
                .peer
                .create_elicitation_with_timeout(params, Some(self.timeout))
                .await;
            let reply = match asked {
                Ok(reply) => reply,
                Err(rmcp::service::ServiceError::Timeout { .. }) => {
                    return Answer::Unanswered {
                        why: format!(
                            "no answer within {} (--approval-timeout)",
                            shown(self.timeout)
                        ),
                    }
                }
                Err(e) => {
                    return Answer::Unanswered {
                        why: format!("asking the person failed: {e}"),
                    }
                }
            };
            answer(&reply, &self.always, &question.verdict)
        })
    }
}

/// The form: what would run, why it is held, and the three answers.
fn form(question: &Question) -> Option<ElicitRequestParams> {
    let choices =
        EnumSchema::builder(vec![ONCE.to_owned(), ALWAYS.to_owned(), DENY.to_owned()]).build();
    let schema = ElicitationSchema::builder()
        .required_enum_schema("answer", choices)
        .optional_string("reason")
        .build()
        .ok()?;
    let message = format!(
        "The agent wants to run, in {}:\n\n  {}\n\nIt is held for your yes: {}.\n\nAnswer \"{ONCE}\", \"{ALWAYS}\" or \"{DENY}\" (a reason, if you give one, is what the agent reads).",
        question.cwd.display(),
        question.command,
        question.verdict.explain()
    );
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}

/// The person's reply as the door's answer.
fn answer(reply: &rmcp::model::ElicitResult, always: &Always, verdict: &Verdict) -> Answer {
    let field = |name: &str| {
        reply
            .content
            .as_ref()
            .and_then(|c| c.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let reason = field("reason").filter(|r| !r.trim().is_empty());
    match reply.action {
        ElicitationAction::Accept => match field("answer").as_deref() {
            Some(ONCE) => Answer::Yes,
            Some(ALWAYS) => {
                always.remember(verdict);
                Answer::Yes
            }
            Some(DENY) => Answer::No { reason },
            other => Answer::No {
                reason: Some(format!(
                    "the answer was not one of the three offered ({other:?})"
                )),
            },
        },
        ElicitationAction::Decline => Answer::No { reason },
        ElicitationAction::Cancel => Answer::Unanswered {
            why: "the person dismissed the question".to_owned(),
        },
        _ => Answer::Unanswered {
            why: "the client answered in a way this uexec does not know".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uexec_core::policy::rules::{Part, RuleMatch};

    fn part(words: &str, decision: Decision, prefix: Option<&str>) -> Part {
        Part {
            argv: words.split(' ').map(str::to_owned).collect(),
            opaque: false,
            decision,
            rule: prefix.map(|p| RuleMatch {
                source: "t.rules:1".into(),
                matched_prefix: p.split(' ').map(str::to_owned).collect(),
                decision,
                justification: None,
            }),
        }
    }

    fn held(parts: Vec<Part>) -> Verdict {
        Verdict {
            decision: Decision::Prompt,
            parts,
        }
    }

    #[test]
    fn always_admits_the_prefix_asked_about_and_no_wider() {
        let always = Always::default();
        let asked = held(vec![
            part("git status", Decision::Allow, None),
            part(
                "npm run deploy --prod",
                Decision::Prompt,
                Some("npm run deploy"),
            ),
        ]);
        assert!(!always.covers(&asked));
        assert_eq!(
            always.remember(&asked),
            [vec!["npm".to_owned(), "run".into(), "deploy".into()]]
        );
        assert!(always.covers(&held(vec![part(
            "npm run deploy --staging",
            Decision::Prompt,
            Some("npm run deploy")
        )])));
        // Not another script of npm's.
        assert!(!always.covers(&held(vec![part("npm run release", Decision::Prompt, None)])));
    }

    #[test]
    fn always_never_admits_what_runs_anything() {
        let always = Always::default();
        for words in [
            "bash -c x",
            "env A=1 x",
            "sudo x",
            "python3 -c x",
            "/usr/bin/sh -c x",
        ] {
            let asked = held(vec![part(words, Decision::Prompt, None)]);
            assert!(always.remember(&asked).is_empty(), "{words}");
        }
        let mut opaque = part("eval $x", Decision::Prompt, None);
        opaque.opaque = true;
        assert!(always.remember(&held(vec![opaque.clone()])).is_empty());
        assert!(!always.covers(&held(vec![opaque])));
    }

    #[test]
    fn the_three_answers_and_the_rest() {
        use rmcp::model::ElicitResult;
        let asked = held(vec![part("make deploy", Decision::Prompt, None)]);
        let reply = |action, content: serde_json::Value| {
            let mut r = ElicitResult::new(action);
            r.content = Some(content);
            r
        };
        let always = Always::default();
        let accept = ElicitationAction::Accept;
        assert_eq!(
            answer(
                &reply(accept.clone(), serde_json::json!({"answer": ONCE})),
                &always,
                &asked
            ),
            Answer::Yes
        );
        assert!(!always.covers(&asked), "once is not always");
        assert_eq!(
            answer(
                &reply(
                    accept.clone(),
                    serde_json::json!({"answer": DENY, "reason": "not now"})
                ),
                &always,
                &asked
            ),
            Answer::No {
                reason: Some("not now".into())
            }
        );
        assert_eq!(
            answer(
                &reply(accept.clone(), serde_json::json!({"answer": ALWAYS})),
                &always,
                &asked
            ),
            Answer::Yes
        );
        assert!(always.covers(&asked));
        assert!(matches!(
            answer(
                &reply(ElicitationAction::Cancel, serde_json::json!({})),
                &always,
                &asked
            ),
            Answer::Unanswered { .. }
        ));
    }
}
