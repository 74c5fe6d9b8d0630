//! The stages a planned spawn passes, in order: **rules** (the store's [`CommandRules`]
//! judge the script, part by part; `forbidden` ends here), **ask** (a `prompt` verdict goes to
//! the call's [`Approver`], a person's yes or no; with none, it is refused), **confine** (the
//! store's confinement gives the spec its launcher) and **snapshot** (a login shell's profile
//! from its snapshot). Each refusal says why, and nothing of a refused script runs.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::plan::{uexec_dirs, Plan};
use crate::backend::{Backend, BackendError, Program, SpawnSpec, SpawnedProcess};
use crate::config::StoreConfig;
use crate::confine::{Confine, Confined};
use crate::error::ExecError;
use crate::policy::rules::{CommandRules, Decision, Verdict};

/// What a person is asked before a held command runs.
#[derive(Debug, Clone)]
pub struct Question {
    /// The script as the model wrote it.
    pub command: String,
    pub cwd: PathBuf,
    /// The rules' verdict: which part, which rule, why.
    pub verdict: Verdict,
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run it.
    Yes,
    /// Do not run it; the model reads the reason, when one was given.
    No { reason: Option<String> },
    /// No answer came (no one could be asked, or the time ran out): a refusal that says so.
    Unanswered { why: String },
}

/// The seam of a person's yes or no, implemented by a face (MCP elicitation, the daemon's
/// list of what waits); a call brings its own, since it knows whom to ask.
pub trait Approver: Send + Sync {
    fn ask(&self, question: Question) -> BoxFuture<'_, Answer>;
}

/// A spawn that passed every stage: what the backend starts, and the session's side of its
/// sandbox.
pub struct Admitted {
    pub plan: Plan,
    /// The session's side of the confinement, when one applies.
    pub confined: Option<Arc<dyn Confined>>,
    /// The rules' verdict (allowed, or held and then allowed by a person).
    pub verdict: Verdict,
}

impl Admitted {
    /// Starts it: the one call of [`Backend::spawn`] in the engine.
    pub async fn spawn(&self, backend: &dyn Backend) -> Result<SpawnedProcess, BackendError> {
        backend.spawn(self.plan.spec.clone()).await
    }
}

/// Passes `plan` through the stages, in order; `approver` is whom a held command asks.
pub async fn admit(
    caller: &StoreConfig,
    mut plan: Plan,
    approver: Option<&dyn Approver>,
) -> Result<Admitted, ExecError> {
    // 1. rules
    let verdict = match &caller.rules {
        Some(rules) => judge(rules.as_ref(), &plan.spec, &plan.command),
        None => Verdict::allowed(),
    };
    match verdict.decision {
        Decision::Allow => {}
        Decision::Forbidden => return Err(refused(&verdict, None)),
        // 2. ask
        Decision::Prompt => {
            let answer = match approver {
                Some(approver) => {
                    approver
                        .ask(Question {
                            command: plan.command.clone(),
                            cwd: plan.spec.cwd.clone(),
                            verdict: verdict.clone(),
                        })
                        .await
                }
                None => Answer::Unanswered {
                    why: "no person can be asked here".to_owned(),
                },
            };
            match answer {
                Answer::Yes => {}
                Answer::No { reason } => {
                    let said = match reason {
                        Some(r) => format!("the person said no: {r}"),
                        None => "the person said no".to_owned(),
                    };
                    return Err(refused(&verdict, Some(said)));
                }
                Answer::Unanswered { why } => {
                    return Err(refused(&verdict, Some(format!("no answer: {why}"))))
                }
            }
        }
    }
    // 3. confine
    let confined = match plan.sandbox.clone() {
        None => None,
        Some(sandboxing) => {
            let policy = &caller.sandbox;
            let confinement = policy.confinement.as_ref().ok_or_else(|| {
                ExecError::invalid(
                    "sandbox",
                    "this uexec has no sandbox launcher configured (StoreConfig::sandbox.confinement); \
                     it cannot run sandboxed commands",
                )
            })?;
            for root in &policy.writable_roots {
                if !root.is_dir() {
                    return Err(ExecError::invalid(
                        "writable_roots",
                        format!("{} does not exist or is not a directory", root.display()),
                    ));
                }
            }
            let confine = Confine {
                profile: sandboxing.profile,
                network: sandboxing.network,
                layers: sandboxing.layers,
                workspace: &caller.cwd,
                writable_roots: &policy.writable_roots,
                fallback: policy.fallback,
                on_denial: policy.on_denial,
                dirs: uexec_dirs(caller),
            };
            Some(confinement.confine(confine, &mut plan.spec)?)
        }
    };
    // 4. snapshot: a local login command runs from its shell's snapshot when the config has
    // them and one is ready (or can be built in time); see `crate::shell_snapshot`.
    if let (true, Some(snapshots)) = (plan.local_login, &caller.shell_snapshots) {
        snapshots.apply(&mut plan.spec).await;
    }
    Ok(Admitted {
        plan,
        confined,
        verdict,
    })
}

/// The rules' verdict on the script the spec runs (a program run without a shell is judged
/// as its words).
fn judge(rules: &dyn CommandRules, spec: &SpawnSpec, command: &str) -> Verdict {
    match &spec.program {
        Program::Shell { shell, script, .. } => rules.judge(script, shell),
        _ => rules.judge(command, "sh"),
    }
}

/// The refusal of a script the rules (or a person) would not run.
fn refused(verdict: &Verdict, said: Option<String>) -> ExecError {
    let mut explanation = verdict.explain();
    if let Some(said) = said {
        explanation.push_str(&format!("; {said}"));
    }
    ExecError::Refused {
        decision: verdict.decision,
        explanation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Placement;
    use crate::policy::rules::{Part, RuleMatch};
    use crate::request::ExecRequest;

    /// Rules that decide every script the same way, by a rule named `test.rules:1`.
    #[derive(Debug)]
    struct Always(Decision);

    impl CommandRules for Always {
        fn judge(&self, script: &str, _shell: &str) -> Verdict {
            Verdict {
                decision: self.0,
                parts: vec![Part {
                    argv: script.split(' ').map(str::to_owned).collect(),
                    opaque: false,
                    decision: self.0,
                    rule: Some(RuleMatch {
                        source: "test.rules:1".into(),
                        matched_prefix: vec![script.to_owned()],
                        decision: self.0,
                        justification: Some("a test".into()),
                    }),
                }],
            }
        }
    }

    /// A person who always answers `answer`, and counts the questions.
    struct Person {
        answer: Answer,
        asked: std::sync::Mutex<Vec<Question>>,
    }

    impl Approver for Person {
        fn ask(&self, question: Question) -> BoxFuture<'_, Answer> {
            self.asked.lock().unwrap().push(question);
            let answer = self.answer.clone();
            Box::pin(async move { answer })
        }
    }

    fn person(answer: Answer) -> Person {
        Person {
            answer,
            asked: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn caller(rules: Option<Decision>) -> StoreConfig {
        StoreConfig {
            cwd: std::env::temp_dir(),
            default_shell: Some("/bin/sh".into()),
            shell_snapshots: None,
            rules: rules.map(|d| Arc::new(Always(d)) as Arc<dyn CommandRules>),
            ..StoreConfig::default()
        }
    }

    fn plan(caller: &StoreConfig, req: ExecRequest) -> Plan {
        Plan::new(caller, &req, Placement::Local).expect("planned")
    }

    fn ls() -> ExecRequest {
        ExecRequest {
            cmd: "git push".into(),
            login: Some(false),
            ..ExecRequest::default()
        }
    }

    #[tokio::test]
    async fn without_rules_every_script_passes() {
        let caller = caller(None);
        let admitted = admit(&caller, plan(&caller, ls()), None)
            .await
            .expect("admitted");
        assert_eq!(admitted.verdict.decision, Decision::Allow);
    }

    #[tokio::test]
    async fn a_forbidden_script_is_refused_naming_its_rule_and_no_one_is_asked() {
        let caller = caller(Some(Decision::Forbidden));
        let yes = person(Answer::Yes);
        let Err(ExecError::Refused {
            decision,
            explanation,
        }) = admit(&caller, plan(&caller, ls()), Some(&yes)).await
        else {
            panic!("refused");
        };
        assert_eq!(decision, Decision::Forbidden);
        assert!(
            explanation.contains("test.rules:1") && explanation.contains("a test"),
            "{explanation}"
        );
        assert!(yes.asked.lock().unwrap().is_empty(), "no one asked");
    }

    #[tokio::test]
    async fn a_held_script_runs_on_a_yes_and_is_refused_on_a_no_or_no_answer() {
        let caller = caller(Some(Decision::Prompt));
        let yes = person(Answer::Yes);
        let admitted = admit(&caller, plan(&caller, ls()), Some(&yes))
            .await
            .expect("a yes");
        assert_eq!(admitted.verdict.decision, Decision::Prompt);
        let asked = yes.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].command, "git push");

        let no = person(Answer::No {
            reason: Some("not on a Friday".into()),
        });
        let e = admit(&caller, plan(&caller, ls()), Some(&no))
            .await
            .err()
            .expect("a no");
        assert!(e.to_string().contains("not on a Friday"), "{e}");
        assert!(e.to_string().ends_with("Nothing of the command ran"), "{e}");

        let e = admit(&caller, plan(&caller, ls()), None)
            .await
            .err()
            .expect("no one to ask");
        assert!(e.to_string().contains("no person can be asked"), "{e}");
    }

    #[tokio::test]
    async fn a_sandbox_without_a_confinement_is_a_clear_error() {
        let caller = caller(None);
        let sandboxed = ExecRequest {
            sandbox: Some(crate::policy::Profile::ReadOnly),
            ..ls()
        };
        let e = admit(&caller, plan(&caller, sandboxed), None)
            .await
            .err()
            .expect("no confinement");
        assert!(e.to_string().contains("sandbox"), "{e}");
    }
}
