//! The stages a planned spawn passes, in order: **rules** (the store's [`CommandRules`]
//! judge the script, part by part; `forbidden` ends here), **pre-hooks** (the call's
//! [`PreSpawn`] hooks may deny, ask, or rewrite the request, which the rules judge again;
//! see [`super::pre_spawn`]), **ask** (a `prompt` verdict goes to
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
use crate::request::ExecRequest;

use super::pre_spawn::{Pending, PreSpawn};

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
    /// The request as a pre-spawn hook rewrote it, when one did: what runs.
    pub updated: Option<ExecRequest>,
}

impl Admitted {
    /// Starts it: the one call of [`Backend::spawn`] in the engine.
    pub async fn spawn(&self, backend: &dyn Backend) -> Result<SpawnedProcess, BackendError> {
        backend.spawn(self.plan.spec.clone()).await
    }
}

/// Passes `plan` through the stages, in order; `pre_spawn` are the call's hooks, and
/// `approver` is whom a held command asks.
pub async fn admit(
    caller: &StoreConfig,
    mut plan: Plan,
    pre_spawn: Option<&dyn PreSpawn>,
    approver: Option<&dyn Approver>,
) -> Result<Admitted, ExecError> {
    let rules = caller.rules.as_deref();
    let mut verdict = ruled(rules, &plan.spec, &plan.command)?;
    // 2. pre-hooks: a rewritten request is planned and judged again; the stricter decides.
    let mut updated = None;
    if let Some(hooks) = pre_spawn {
        let answer = hooks
            .before(Pending {
                command: plan.command.clone(),
                cwd: plan.spec.cwd.clone(),
                verdict: verdict.clone(),
            })
            .await;
        if let Some(req) = &answer.updated {
            plan = Plan::new(caller, req, plan.placement.clone())?;
            verdict = ruled(rules, &plan.spec, &plan.command)?;
        }
        match answer.decision {
            Some(Decision::Forbidden) => {
                return Err(ExecError::Refused {
                    decision: Decision::Forbidden,
                    explanation: answer.denial(),
                })
            }
            Some(Decision::Prompt) if verdict.decision == Decision::Allow => {
                verdict = answer.held(&plan.command);
            }
            _ => {}
        }
        updated = answer.updated;
    }
    let verdict = asked(verdict, &plan.command, &plan.spec.cwd, approver).await?;
    let mut admitted = confined_and_snapshot(caller, plan, verdict).await?;
    admitted.updated = updated;
    Ok(admitted)
}

/// A spawn a face built itself (the exec server's `process/start`: its own argv and
/// environment, no plan): the rules and a person's yes, as for any spawn; then the face
/// applies its own snapshot and starts it with [`AdmittedSpec::spawn`].
pub async fn admit_spec(
    rules: Option<&dyn CommandRules>,
    spec: SpawnSpec,
    approver: Option<&dyn Approver>,
) -> Result<AdmittedSpec, ExecError> {
    let command = match &spec.program {
        Program::Shell { script, .. } => script.clone(),
        Program::Argv { argv } => shell_words(argv),
    };
    let verdict = ruled(rules, &spec, &command)?;
    let verdict = asked(verdict, &command, &spec.cwd, approver).await?;
    Ok(AdmittedSpec { spec, verdict })
}

/// A face-built spawn that passed the rules ([`admit_spec`]).
pub struct AdmittedSpec {
    pub spec: SpawnSpec,
    pub verdict: Verdict,
}

impl AdmittedSpec {
    /// Starts it through `backend`.
    pub async fn spawn(self, backend: &dyn Backend) -> Result<SpawnedProcess, BackendError> {
        backend.spawn(self.spec).await
    }
}

/// `argv` as one shell command line, each word quoted when it needs to be.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Stage 1: the rules' verdict on the script; `forbidden` is refused here.
fn ruled(
    rules: Option<&dyn CommandRules>,
    spec: &SpawnSpec,
    command: &str,
) -> Result<Verdict, ExecError> {
    let verdict = match rules {
        Some(rules) => judge(rules, spec, command),
        None => Verdict::allowed(),
    };
    match verdict.decision {
        Decision::Forbidden => Err(refused(&verdict, None)),
        _ => Ok(verdict),
    }
}

/// Stage 3: a person's yes, when the rules or the hooks hold the script.
async fn asked(
    verdict: Verdict,
    command: &str,
    cwd: &std::path::Path,
    approver: Option<&dyn Approver>,
) -> Result<Verdict, ExecError> {
    if verdict.decision != Decision::Prompt {
        return Ok(verdict);
    }
    let answer = match approver {
        Some(approver) => {
            approver
                .ask(Question {
                    command: command.to_owned(),
                    cwd: cwd.to_path_buf(),
                    verdict: verdict.clone(),
                })
                .await
        }
        None => Answer::Unanswered {
            why: "no person can be asked here".to_owned(),
        },
    };
    match answer {
        Answer::Yes => Ok(verdict),
        Answer::No { reason } => {
            let said = match reason {
                Some(r) => format!("the person said no: {r}"),
                None => "the person said no".to_owned(),
            };
            Err(refused(&verdict, Some(said)))
        }
        Answer::Unanswered { why } => Err(refused(&verdict, Some(format!("no answer: {why}")))),
    }
}

/// Stages 4 and 5: the confinement, then the shell snapshot.
async fn confined_and_snapshot(
    caller: &StoreConfig,
    mut plan: Plan,
    verdict: Verdict,
) -> Result<Admitted, ExecError> {
    // 4. confine
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
    // 5. snapshot: a local login command runs from its shell's snapshot when the config has
    // them and one is ready (or can be built in time); see `crate::shell_snapshot`.
    if let (true, Some(snapshots)) = (plan.local_login, &caller.shell_snapshots) {
        snapshots.apply(&mut plan.spec).await;
    }
    Ok(Admitted {
        plan,
        confined,
        verdict,
        updated: None,
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
        let admitted = admit(&caller, plan(&caller, ls()), None, None)
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
        }) = admit(&caller, plan(&caller, ls()), None, Some(&yes)).await
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
        let admitted = admit(&caller, plan(&caller, ls()), None, Some(&yes))
            .await
            .expect("a yes");
        assert_eq!(admitted.verdict.decision, Decision::Prompt);
        let asked = yes.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].command, "git push");

        let no = person(Answer::No {
            reason: Some("not on a Friday".into()),
        });
        let e = admit(&caller, plan(&caller, ls()), None, Some(&no))
            .await
            .err()
            .expect("a no");
        assert!(e.to_string().contains("not on a Friday"), "{e}");
        assert!(e.to_string().ends_with("Nothing of the command ran"), "{e}");

        let e = admit(&caller, plan(&caller, ls()), None, None)
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
        let e = admit(&caller, plan(&caller, sandboxed), None, None)
            .await
            .err()
            .expect("no confinement");
        assert!(e.to_string().contains("sandbox"), "{e}");
    }

    /// Hooks that always answer `answer`.
    struct Hooked(super::super::PreSpawnAnswer);

    impl PreSpawn for Hooked {
        fn before(&self, _pending: Pending) -> BoxFuture<'_, super::super::PreSpawnAnswer> {
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    fn hook(decision: Option<Decision>, updated: Option<ExecRequest>) -> Hooked {
        Hooked(super::super::PreSpawnAnswer {
            decision,
            reason: Some("said the hook".into()),
            by: "PreToolUse hook \"check.sh\"".into(),
            updated,
        })
    }

    #[tokio::test]
    async fn a_hooks_deny_refuses_and_its_ask_goes_to_the_person() {
        let caller = caller(None);
        let deny = hook(Some(Decision::Forbidden), None);
        let e = admit(&caller, plan(&caller, ls()), Some(&deny), None)
            .await
            .err()
            .expect("denied");
        assert!(
            e.to_string().contains("check.sh") && e.to_string().contains("said the hook"),
            "{e}"
        );

        let ask = hook(Some(Decision::Prompt), None);
        let yes = person(Answer::Yes);
        admit(&caller, plan(&caller, ls()), Some(&ask), Some(&yes))
            .await
            .expect("a yes");
        let asked = yes.asked.lock().unwrap().clone();
        assert!(
            asked[0].verdict.explain().contains("check.sh"),
            "{:?}",
            asked[0]
        );
    }

    #[tokio::test]
    async fn the_rules_forbid_before_any_hook_and_a_hooks_allow_skips_no_person() {
        let caller = caller(Some(Decision::Forbidden));
        let allow = hook(Some(Decision::Allow), None);
        let e = admit(&caller, plan(&caller, ls()), Some(&allow), None)
            .await
            .err()
            .expect("forbidden");
        assert!(e.to_string().contains("test.rules:1"), "{e}");

        let caller = super::tests::caller(Some(Decision::Prompt));
        let e = admit(&caller, plan(&caller, ls()), Some(&allow), None)
            .await
            .err()
            .expect("still held");
        assert!(e.to_string().contains("no person can be asked"), "{e}");
    }

    #[tokio::test]
    async fn a_rewritten_request_is_what_runs_and_the_rules_judge_it() {
        let caller = caller(None);
        let rewrite = ExecRequest {
            cmd: "git status".into(),
            ..ls()
        };
        let update = hook(None, Some(rewrite));
        let admitted = admit(&caller, plan(&caller, ls()), Some(&update), None)
            .await
            .expect("admitted");
        assert_eq!(admitted.plan.command, "git status");
        assert_eq!(admitted.updated.expect("updated").cmd, "git status");
    }
}
