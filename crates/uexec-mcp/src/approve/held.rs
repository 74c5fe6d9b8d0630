//! Commands held for a person who answers at the daemon, not in the agent's client (a
//! headless client declares no elicitation): `uexec approvals` lists what waits, `uexec
//! approve ID [--always]` and `uexec deny ID [--reason TEXT]` answer (the person's tools
//! `list_approvals` and `answer_approval`). No answer within the timeout is a refusal that
//! says so; at most [`MAX_WAITING`] wait at once (more are refused, saying why), so memory
//! stays bounded whatever a client sends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use tokio::sync::oneshot;
use uexec_core::spawn::{Answer, Approver, Question};

use super::Always;

/// Questions that may wait at once, across every owner.
pub const MAX_WAITING: usize = 256;

/// What waits for a person, as `uexec approvals` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub id: u64,
    pub owner: String,
    pub command: String,
    pub cwd: String,
    /// The rule that held it, and why.
    pub why: String,
    pub since: SystemTime,
}

struct Entry {
    waiting: Waiting,
    answer: oneshot::Sender<Answer>,
    /// The asking connection's "always" prefixes, and its question's verdict.
    always: Always,
    question: Question,
}

/// The daemon's table of held commands.
#[derive(Default)]
pub struct Held {
    table: Mutex<BTreeMap<u64, Entry>>,
    next: Mutex<u64>,
}

impl Held {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What waits now, oldest first.
    pub fn list(&self) -> Vec<Waiting> {
        self.lock().values().map(|e| e.waiting.clone()).collect()
    }

    /// The person's answer to `id`: `Ok(the command)`, or why not (unknown, answered).
    pub fn answer(&self, id: u64, answer: Answer, always: bool) -> Result<String, String> {
        let entry = self.lock().remove(&id).ok_or_else(|| {
            format!("no command waits for approval as {id} (answered, timed out or never held)")
        })?;
        if always && answer == Answer::Yes {
            entry.always.remember(&entry.question.verdict);
        }
        let command = entry.waiting.command.clone();
        // The asker may have stopped waiting (cancelled): the answer is then moot.
        let _ = entry.answer.send(answer);
        Ok(command)
    }

    fn hold(
        &self,
        owner: &str,
        question: Question,
        always: Always,
    ) -> Result<(u64, oneshot::Receiver<Answer>), String> {
        let mut table = self.lock();
        if table.len() >= MAX_WAITING {
            return Err(format!(
                "{MAX_WAITING} commands already wait for a person's answer"
            ));
        }
        let id = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            *next
        };
        let (tx, rx) = oneshot::channel();
        let waiting = Waiting {
            id,
            owner: owner.to_owned(),
            command: question.command.clone(),
            cwd: question.cwd.display().to_string(),
            why: question.verdict.explain(),
            since: SystemTime::now(),
        };
        table.insert(
            id,
            Entry {
                waiting,
                answer: tx,
                always,
                question,
            },
        );
        Ok((id, rx))
    }

    fn forget(&self, id: u64) {
        self.lock().remove(&id);
    }
}

/// Holds a connection's questions in the daemon's table until a person answers.
pub struct AtTheDaemon {
    pub held: Arc<Held>,
    pub owner: String,
    pub timeout: Duration,
    pub always: Always,
}

impl Approver for AtTheDaemon {
    fn who(&self) -> String {
        "the person (uexec approve, or a client's answer_approval)".to_owned()
    }

    fn ask(&self, question: Question) -> BoxFuture<'_, Answer> {
        Box::pin(async move {
            if self.always.covers(&question.verdict) {
                return Answer::Yes;
            }
            let (id, answer) = match self.held.hold(&self.owner, question, self.always.clone()) {
                Ok(held) => held,
                Err(why) => return Answer::Unanswered { why },
            };
            // Forgotten however this ends: answered, timed out, or the call dropped.
            struct Forget<'a>(&'a Held, u64);
            impl Drop for Forget<'_> {
                fn drop(&mut self) {
                    self.0.forget(self.1);
                }
            }
            let _forget = Forget(&self.held, id);
            tracing::info!(approval = id, owner = %self.owner, "a command waits for a person's approval");
            match tokio::time::timeout(self.timeout, answer).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Answer::Unanswered {
                    why: "the daemon dropped the question".to_owned(),
                },
                Err(_) => Answer::Unanswered {
                    why: format!(
                        "no one answered `uexec approve {id}` within {} (--approval-timeout)",
                        super::shown(self.timeout)
                    ),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uexec_core::policy::rules::{Decision, Part, Verdict};

    fn question(words: &str) -> Question {
        Question {
            command: words.to_owned(),
            cwd: "/tmp".into(),
            verdict: Verdict {
                decision: Decision::Prompt,
                parts: vec![Part {
                    argv: words.split(' ').map(str::to_owned).collect(),
                    opaque: false,
                    decision: Decision::Prompt,
                    rule: None,
                }],
            },
        }
    }

    fn asker(held: &Arc<Held>, timeout: Duration) -> AtTheDaemon {
        AtTheDaemon {
            held: held.clone(),
            owner: "mcp:test".into(),
            timeout,
            always: Always::default(),
        }
    }

    #[tokio::test]
    async fn a_held_command_waits_for_the_persons_answer_and_is_forgotten_then() {
        let held = Arc::new(Held::default());
        let at = asker(&held, Duration::from_secs(60));
        let asking = tokio::spawn({
            let held = held.clone();
            async move {
                let at = asker(&held, Duration::from_secs(60));
                at.ask(question("make deploy")).await
            }
        });
        let id = loop {
            if let Some(w) = held.list().first() {
                break w.id;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(held.list()[0].command, "make deploy");
        assert_eq!(
            held.answer(id, Answer::Yes, false),
            Ok("make deploy".into())
        );
        assert_eq!(asking.await.unwrap(), Answer::Yes);
        assert!(held.list().is_empty());
        assert!(held
            .answer(id, Answer::Yes, false)
            .unwrap_err()
            .contains("no command waits"));
        drop(at);
    }

    #[tokio::test]
    async fn no_answer_in_time_is_a_refusal_that_says_so() {
        let held = Arc::new(Held::default());
        let answer = asker(&held, Duration::from_millis(20))
            .ask(question("make deploy"))
            .await;
        let Answer::Unanswered { why } = answer else {
            panic!("unanswered");
        };
        assert!(why.contains("within 20ms"), "{why}");
        assert!(held.list().is_empty(), "forgotten");
    }

    #[tokio::test]
    async fn the_table_is_bounded() {
        let held = Arc::new(Held::default());
        let mut kept = Vec::new();
        for _ in 0..MAX_WAITING {
            kept.push(held.hold("o", question("x"), Always::default()).unwrap());
        }
        let refused = held
            .hold("o", question("x"), Always::default())
            .unwrap_err();
        assert!(refused.contains("already wait"), "{refused}");
    }
}
