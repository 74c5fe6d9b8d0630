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
use crate::policy::exec_rules::RulesAt;
use crate::policy::rules::{CommandRules, Decision, Verdict};
use crate::request::ExecRequest;

use super::pre_spawn::{Pending, PreSpawn};
use crate::policy::decisions::{decided, Decided, DecisionLog};

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
    /// The question went back to the client, to be answered on its retry of the same call
    /// (MCP's input-required round): no decision yet. The door neither records nor counts
    /// it, and refuses this call saying so (the face replaces that refusal with the
    /// question); the retry's answer is the decision.
    Later { why: String },
}

/// What the refusal of an [`Answer::Later`] round says: the face that sent the question
/// back knows its refusal by it (no hook of a failed call runs for it; nothing failed).
pub const NO_DECISION_YET: &str = "no decision yet";

/// The seam of a person's yes or no, implemented by a face (MCP elicitation, the daemon's
/// list of what waits); a call brings its own, since it knows whom to ask.
pub trait Approver: Send + Sync {
    fn ask(&self, question: Question) -> BoxFuture<'_, Answer>;

    /// Who answered the last question, for the record (`the person (MCP form)`, `the
    /// person (uexec approve)`, a hook); asked after the answer.
    fn who(&self) -> String {
        "a person".to_owned()
    }
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
    /// With `RulesAt::Exec`: uexec's end of the socket the launcher hands the exec
    /// listener over on, or why execs are not handed over (the text alone was judged).
    pub exec_socket: Option<Result<std::os::fd::OwnedFd, String>>,
}

impl Admitted {
    /// Starts it: the one call of [`Backend::spawn`] in the engine.
    pub async fn spawn(&self, backend: &dyn Backend) -> Result<SpawnedProcess, BackendError> {
        backend.spawn(self.plan.spec.clone()).await
    }
}

/// Passes `plan` through the stages, in order; `pre_spawn` are the call's hooks, and
/// `approver` is whom a held command asks. Each decision is recorded ([`super::record`]):
/// a person's own command (`EnvPolicy::person`) is judged for the record only, never held
/// nor refused (they typed it).
pub async fn admit(
    caller: &StoreConfig,
    plan: Plan,
    pre_spawn: Option<&dyn PreSpawn>,
    approver: Option<&dyn Approver>,
) -> Result<Admitted, ExecError> {
    let records = Records {
        metrics: caller.metrics.as_deref(),
        log: caller.decisions.as_deref(),
    };
    let (plan, verdict, updated) = if caller.env_policy.person {
        let verdict = match caller.rules.as_deref() {
            Some(rules) => judge(rules, &plan.spec, &plan.command),
            None => Verdict::allowed(),
        };
        let mut decided = decided(&plan.command, &plan.spec.cwd, &verdict);
        decided.admitted = true;
        decided.by = PERSONS_OWN.to_owned();
        records.record(decided);
        (plan, verdict, None)
    } else {
        decide(caller, plan, pre_spawn, approver, records).await?
    };
    let mut admitted = confined_and_snapshot(caller, plan, verdict).await?;
    admitted.updated = updated;
    Ok(admitted)
}

/// Who decided a person's own command: no one, it is recorded.
const PERSONS_OWN: &str = "a person's own command (recorded, not judged)";

/// Where the door's decisions go: the metrics' counts and the log.
#[derive(Clone, Copy)]
struct Records<'a> {
    metrics: Option<&'a crate::metrics::Metrics>,
    log: Option<&'a dyn DecisionLog>,
}

impl Records<'_> {
    fn record(self, decided: Decided) {
        if let Some(metrics) = self.metrics {
            metrics.decided(decided.decision, decided.admitted);
        }
        if let Some(log) = self.log {
            log.record(decided);
        }
    }

    /// Records the end of `result`: admitted as `admitted` says, or refused with its text.
    fn outcome<T>(
        self,
        mut decided: Decided,
        result: Result<T, ExecError>,
    ) -> Result<T, ExecError> {
        match &result {
            Ok(_) => decided.admitted = true,
            Err(e) => {
                decided.admitted = false;
                decided.reason = Some(e.to_string());
            }
        }
        self.record(decided);
        result
    }
}

/// Stages 1 to 3: the rules, the pre-hooks, a person's yes; each end recorded.
async fn decide(
    caller: &StoreConfig,
    mut plan: Plan,
    pre_spawn: Option<&dyn PreSpawn>,
    approver: Option<&dyn Approver>,
    records: Records<'_>,
) -> Result<(Plan, Verdict, Option<ExecRequest>), ExecError> {
    let rules = caller.rules.as_deref();
    let mut verdict = judged(rules, &plan.spec, &plan.command);
    if verdict.decision == Decision::Forbidden {
        let d = decided(&plan.command, &plan.spec.cwd, &verdict);
        return records.outcome(d, Err(refused(&verdict, None)));
    }
    // 2. pre-hooks: a rewritten request is planned and judged again; the stricter decides.
    let mut updated = None;
    let mut by_hook = None;
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
            verdict = judged(rules, &plan.spec, &plan.command);
            if verdict.decision == Decision::Forbidden {
                let d = decided(&plan.command, &plan.spec.cwd, &verdict);
                return records.outcome(d, Err(refused(&verdict, None)));
            }
        }
        match answer.decision {
            Some(Decision::Forbidden) => {
                let mut d = decided(&plan.command, &plan.spec.cwd, &verdict);
                d.decision = Decision::Forbidden;
                d.by = answer.by.clone();
                let refusal = ExecError::Refused {
                    decision: Decision::Forbidden,
                    explanation: answer.denial(),
                };
                return records.outcome(d, Err(refusal));
            }
            Some(Decision::Prompt) if verdict.decision == Decision::Allow => {
                verdict = answer.held(&plan.command);
                by_hook = Some(answer.by.clone());
            }
            _ => {}
        }
        updated = answer.updated;
    }
    let mut d = decided(&plan.command, &plan.spec.cwd, &verdict);
    if let Some(hook) = by_hook {
        d.by = hook;
    }
    let verdict = asked(verdict, &plan.command, &plan.spec.cwd, approver, d, records).await?;
    Ok((plan, verdict, updated))
}

/// A spawn a face built itself (the exec server's `process/start`: its own argv and
/// environment, no plan): the rules and a person's yes, as for any spawn, recorded in
/// `log` and counted in `metrics`; then the face applies its own snapshot and starts it
/// with [`AdmittedSpec::spawn`].
pub async fn admit_spec(
    rules: Option<&dyn CommandRules>,
    spec: SpawnSpec,
    approver: Option<&dyn Approver>,
    metrics: Option<&crate::metrics::Metrics>,
    log: Option<&dyn DecisionLog>,
) -> Result<AdmittedSpec, ExecError> {
    let records = Records { metrics, log };
    let command = match &spec.program {
        Program::Shell { script, .. } => script.clone(),
        Program::Argv { argv } => shell_words(argv),
    };
    let verdict = judged(rules, &spec, &command);
    let d = decided(&command, &spec.cwd, &verdict);
    let verdict = match verdict.decision {
        Decision::Forbidden => records.outcome(d, Err(refused(&verdict, None)))?,
        _ => asked(verdict, &command, &spec.cwd, approver, d, records).await?,
    };
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

/// Stage 1: the rules' verdict on the script (every script passes without rules).
fn judged(rules: Option<&dyn CommandRules>, spec: &SpawnSpec, command: &str) -> Verdict {
    match rules {
        Some(rules) => judge(rules, spec, command),
        None => Verdict::allowed(),
    }
}

/// Stage 3: a person's yes, when the rules or the hooks hold the script; the end of the
/// decision, recorded in `records` (unless the question went back to the client: no
/// decision yet).
async fn asked(
    verdict: Verdict,
    command: &str,
    cwd: &std::path::Path,
    approver: Option<&dyn Approver>,
    mut decided: Decided,
    records: Records<'_>,
) -> Result<Verdict, ExecError> {
    if verdict.decision != Decision::Prompt {
        return records.outcome(decided, Ok(verdict));
    }
    let answer = match approver {
        Some(approver) => {
            let answer = approver
                .ask(Question {
                    command: command.to_owned(),
                    cwd: cwd.to_path_buf(),
                    verdict: verdict.clone(),
                })
                .await;
            decided.by = approver.who();
            answer
        }
        None => Answer::Unanswered {
            why: "no person can be asked here".to_owned(),
        },
    };
    let result = match answer {
        Answer::Yes => Ok(verdict),
        Answer::No { reason } => {
            let said = match reason {
                Some(r) => format!("the person said no: {r}"),
                None => "the person said no".to_owned(),
            };
            Err(refused(&verdict, Some(said)))
        }
        Answer::Unanswered { why } => {
            decided.by = NO_ONE.to_owned();
            Err(refused(&verdict, Some(format!("no answer: {why}"))))
        }
        // Not recorded: the retry's answer is the decision.
        Answer::Later { why } => {
            return Err(refused(&verdict, Some(format!("{NO_DECISION_YET}: {why}"))))
        }
    };
    records.outcome(decided, result)
}

/// Who decided a held command nobody answered.
const NO_ONE: &str = "no one (no answer)";

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
    // 4b. every exec handed over, when the rules judge there too (a person's own command
    // is never held nor refused).
    let exec_socket = match (&caller.rules, caller.rules_at) {
        (Some(_), RulesAt::Exec)
            if !caller.env_policy.person
                && matches!(plan.placement, crate::backend::Placement::Local) =>
        {
            Some(match caller.sandbox.confinement.as_ref() {
                Some(confinement) => confinement.judge_execs(&mut plan.spec),
                None => Err("this uexec has no launcher to hand execs over".to_owned()),
            })
        }
        _ => None,
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
        exec_socket,
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
mod tests;
