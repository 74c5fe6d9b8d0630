//! A person's yes or no for a client on MCP 2026-07-28 or later, where a server may not send
//! the client a request: the held call is answered with the question itself (an
//! `InputRequiredResult` carrying the same form as [`super::Eliciting`]'s), the client shows
//! it, and its retry of the same call brings the person's answer, which the door takes as
//! it would the form's (SEP-2322's rounds).
//!
//! The `requestState` the client echoes is untrusted: it is only a random handle to what
//! stays here (the command asked about, where, and a digest of the call's arguments), for
//! `--approval-timeout` at most and for [`MAX_PENDING`] questions at most. A retry must be
//! the same call (same tool, same arguments, the same command judged); one whose handle is
//! unknown, expired or already answered is refused, saying so, and nothing runs.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitResult, InputRequest, InputRequests,
    InputRequiredResult,
};
use sha2::{Digest, Sha256};
use uexec_core::spawn::{Answer, Approver, Question};

use super::{answer, form, Always};

/// At most this many questions wait for their retry at once (beyond, a held call is
/// refused, saying so).
pub const MAX_PENDING: usize = 32;

/// The key of the form among the input requests (and of its answer among the responses).
pub const KEY: &str = "uexec_approval";

/// The questions sent back to clients and not yet answered, by handle: shared by every
/// connection of a server (over HTTP, each call of this protocol is a connection of its
/// own).
#[derive(Debug, Clone, Default)]
pub struct Rounds(Arc<Mutex<HashMap<String, Round>>>);

/// One question sent back: what it was about.
#[derive(Debug)]
struct Round {
    /// The digest of the call: its tool and arguments.
    call: [u8; 32],
    command: String,
    cwd: PathBuf,
    until: Instant,
}

impl Rounds {
    /// Keeps `round` under a new random handle; `Err` when too many wait already.
    fn open(&self, round: Round) -> Result<String, String> {
        let handle = random_handle().map_err(|e| format!("no randomness for the question: {e}"))?;
        let mut open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        open.retain(|_, r| r.until > now);
        if open.len() >= MAX_PENDING {
            return Err(format!(
                "{MAX_PENDING} questions already wait for their answers"
            ));
        }
        open.insert(handle.clone(), round);
        Ok(handle)
    }

    /// The round `handle` names, taken (a handle answers once), if it has not expired.
    fn take(&self, handle: &str) -> Option<Round> {
        let mut open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        open.remove(handle).filter(|r| r.until > Instant::now())
    }

    /// How many questions wait.
    pub fn pending(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// 16 random bytes from the kernel, in hex.
fn random_handle() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The digest of a call: its tool and its arguments.
fn digest(request: &CallToolRequestParams) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(request.name.as_bytes());
    hash.update([0]);
    hash.update(serde_json::to_vec(&request.arguments).unwrap_or_default());
    hash.finalize().into()
}

/// A retry: the round it answers, and the client's reply to the form (if it sent one).
struct Retry {
    round: Round,
    reply: Option<ElicitResult>,
}

/// The approver of one call of a client that takes its questions as input-required rounds.
pub struct Rounding {
    rounds: Rounds,
    timeout: Duration,
    always: Always,
    call: [u8; 32],
    retry: Mutex<Option<Retry>>,
    /// The question this call sends back, when it asked one.
    asked: Mutex<Option<InputRequiredResult>>,
}

impl Rounding {
    /// The approver of `request`: a first call, or the retry its `requestState` says, whose
    /// answer it brings. `Err`: a retry that answers no question held here, or another
    /// call's (the refusal, nothing ran).
    pub fn for_call(
        rounds: &Rounds,
        request: &CallToolRequestParams,
        timeout: Duration,
        always: Always,
    ) -> Result<Self, String> {
        let call = digest(request);
        let retry = match &request.request_state {
            None => None,
            Some(handle) => {
                let round = rounds.take(handle).ok_or_else(|| {
                    "refused: the answer this call brings is to a question uexec does not hold (unknown requestState, already answered, or older than --approval-timeout); nothing ran: call again to be asked anew".to_owned()
                })?;
                if round.call != call {
                    return Err("refused: this retry is not the call the person was asked about (its tool or arguments differ); nothing ran".to_owned());
                }
                let reply = request
                    .input_responses
                    .as_ref()
                    .and_then(|r| r.get(KEY))
                    .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
                Some(Retry { round, reply })
            }
        };
        Ok(Self {
            rounds: rounds.clone(),
            timeout,
            always,
            call,
            retry: Mutex::new(retry),
            asked: Mutex::new(None),
        })
    }

    /// The question to send back instead of this call's result, if it asked one.
    pub fn question(&self) -> Option<InputRequiredResult> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Sends the question back: kept here under a handle, put in [`Self::question`].
    fn send_back(&self, question: &Question) -> Answer {
        let Some(params) = form(question) else {
            return Answer::Unanswered {
                why: "the question could not be put as a form".to_owned(),
            };
        };
        let round = Round {
            call: self.call,
            command: question.command.clone(),
            cwd: question.cwd.clone(),
            until: Instant::now() + self.timeout,
        };
        let handle = match self.rounds.open(round) {
            Ok(handle) => handle,
            Err(why) => return Answer::Unanswered { why },
        };
        let requests = InputRequests::from([(
            KEY.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        )]);
        *self.asked.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(InputRequiredResult::new(Some(requests), Some(handle)));
        Answer::Later {
            why: "the question went back to the client's form".to_owned(),
        }
    }
}

impl Approver for Rounding {
    fn who(&self) -> String {
        "the person (the MCP client's form)".to_owned()
    }

    fn ask(&self, question: Question) -> BoxFuture<'_, Answer> {
        Box::pin(async move {
            let retry = self
                .retry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let Some(Retry { round, reply }) = retry else {
                if self.always.covers(&question.verdict) {
                    return Answer::Yes;
                }
                return self.send_back(&question);
            };
            if round.command != question.command || round.cwd != question.cwd {
                return Answer::Unanswered {
                    why:
                        "the command judged on the retry is not the one the person was asked about"
                            .to_owned(),
                };
            }
            match reply {
                Some(reply) => answer(&reply, &self.always, &question.verdict),
                None => Answer::Unanswered {
                    why: "the client's retry brought no answer to the form".to_owned(),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use uexec_core::policy::rules::{Decision, Part, Verdict};

    fn question(command: &str) -> Question {
        Question {
            command: command.to_owned(),
            cwd: "/w".into(),
            verdict: Verdict {
                decision: Decision::Prompt,
                parts: vec![Part {
                    argv: command.split(' ').map(str::to_owned).collect(),
                    opaque: false,
                    decision: Decision::Prompt,
                    rule: None,
                }],
            },
        }
    }

    fn call(cmd: &str) -> CallToolRequestParams {
        CallToolRequestParams::new("exec_command")
            .with_arguments(json!({"cmd": cmd}).as_object().unwrap().clone())
    }

    /// The first round of `cmd`: its question's handle.
    async fn first(rounds: &Rounds, cmd: &str, timeout: Duration) -> String {
        let first = Rounding::for_call(rounds, &call(cmd), timeout, Always::default()).unwrap();
        assert!(matches!(
            first.ask(question(cmd)).await,
            Answer::Later { .. }
        ));
        let asked = first.question().expect("a question");
        assert!(asked.input_requests.unwrap().contains_key(KEY));
        asked.request_state.unwrap()
    }

    fn retry(cmd: &str, handle: &str, reply: serde_json::Value) -> CallToolRequestParams {
        call(cmd)
            .with_request_state(handle)
            .with_input_responses([(KEY.to_owned(), reply)].into())
    }

    #[tokio::test]
    async fn the_retry_brings_the_answer_once_and_only_for_the_same_call() {
        let rounds = Rounds::default();
        let long = Duration::from_secs(60);
        let handle = first(&rounds, "touch a", long).await;
        assert_eq!(rounds.pending(), 1);
        let yes = json!({"action": "accept", "content": {"answer": "run once"}});
        // Another call cannot use its answer, and the handle is spent by trying.
        let other = Rounding::for_call(
            &rounds,
            &retry("touch b", &handle, yes.clone()),
            long,
            Always::default(),
        );
        assert!(other.err().unwrap().contains("not the call"));
        let again = Rounding::for_call(
            &rounds,
            &retry("touch a", &handle, yes.clone()),
            long,
            Always::default(),
        );
        assert!(again.err().unwrap().contains("does not hold"));

        let handle = first(&rounds, "touch a", long).await;
        let answered = Rounding::for_call(
            &rounds,
            &retry("touch a", &handle, yes.clone()),
            long,
            Always::default(),
        )
        .unwrap();
        assert_eq!(answered.ask(question("touch a")).await, Answer::Yes);
        assert!(answered.question().is_none());
        assert_eq!(rounds.pending(), 0);
        let forged = Rounding::for_call(
            &rounds,
            &retry("touch a", "forged", yes),
            long,
            Always::default(),
        );
        assert!(forged.err().unwrap().contains("does not hold"));
    }

    #[tokio::test]
    async fn a_question_expires_and_their_number_is_bounded() {
        let rounds = Rounds::default();
        let handle = first(&rounds, "touch a", Duration::ZERO).await;
        let yes = json!({"action": "accept", "content": {"answer": "run once"}});
        let late = Rounding::for_call(
            &rounds,
            &retry("touch a", &handle, yes),
            Duration::ZERO,
            Always::default(),
        );
        assert!(late.err().unwrap().contains("--approval-timeout"));
        for _ in 0..MAX_PENDING {
            first(&rounds, "touch a", Duration::from_secs(60)).await;
        }
        let full = Rounding::for_call(
            &rounds,
            &call("touch a"),
            Duration::from_secs(60),
            Always::default(),
        )
        .unwrap();
        assert!(matches!(
            full.ask(question("touch a")).await,
            Answer::Unanswered { why } if why.contains("already wait")
        ));
        assert_eq!(rounds.pending(), MAX_PENDING);
    }

    #[tokio::test]
    async fn a_deny_says_its_reason_and_always_is_remembered() {
        let rounds = Rounds::default();
        let long = Duration::from_secs(60);
        let always = Always::default();
        let handle = first(&rounds, "make x", long).await;
        let no = json!({"action": "accept", "content": {"answer": "deny", "reason": "not now"}});
        let denied =
            Rounding::for_call(&rounds, &retry("make x", &handle, no), long, always.clone())
                .unwrap();
        assert_eq!(
            denied.ask(question("make x")).await,
            Answer::No {
                reason: Some("not now".into())
            }
        );
        let handle = first(&rounds, "make x", long).await;
        let all = json!({"action": "accept", "content": {"answer": super::super::ALWAYS}});
        let said = Rounding::for_call(
            &rounds,
            &retry("make x", &handle, all),
            long,
            always.clone(),
        )
        .unwrap();
        assert_eq!(said.ask(question("make x")).await, Answer::Yes);
        // The next call of that prefix is not asked.
        let next = Rounding::for_call(&rounds, &call("make x"), long, always).unwrap();
        assert_eq!(next.ask(question("make x")).await, Answer::Yes);
        assert!(next.question().is_none());
    }
}
