//! The door's stages, each with a scripted rules, person and hook.

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

/// A log that keeps what it is told.
#[derive(Debug, Default)]
struct Kept(std::sync::Mutex<Vec<Decided>>);

impl DecisionLog for Kept {
    fn record(&self, decided: Decided) {
        self.0.lock().unwrap().push(decided);
    }
}

fn recorded(rules: Option<Decision>) -> (StoreConfig, Arc<Kept>, Arc<crate::metrics::Metrics>) {
    let kept = Arc::new(Kept::default());
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let mut config = caller(rules);
    config.decisions = Some(kept.clone());
    config.metrics = Some(metrics.clone());
    (config, kept, metrics)
}

fn decisions(kept: &Kept) -> Vec<(Decision, bool, String)> {
    kept.0
        .lock()
        .unwrap()
        .iter()
        .map(|d| (d.decision, d.admitted, d.by.clone()))
        .collect()
}

#[tokio::test]
async fn every_decision_is_recorded_once_with_who_took_it_and_counted() {
    let (config, kept, metrics) = recorded(None);
    admit(&config, plan(&config, ls()), None, None)
        .await
        .unwrap();
    assert_eq!(
        decisions(&kept),
        [(Decision::Allow, true, "no rule".to_owned())]
    );

    let (config, kept, metrics2) = recorded(Some(Decision::Forbidden));
    admit(&config, plan(&config, ls()), None, None)
        .await
        .err()
        .expect("refused");
    let all = kept.0.lock().unwrap().clone();
    assert_eq!(all.len(), 1);
    assert_eq!(
        (all[0].decision, all[0].admitted),
        (Decision::Forbidden, false)
    );
    assert_eq!(all[0].by, "rules");
    assert_eq!(all[0].rule.as_ref().unwrap().source, "test.rules:1");
    assert!(all[0].reason.as_deref().unwrap().contains("a test"));

    let (config, kept, metrics3) = recorded(Some(Decision::Prompt));
    let mut no = person(Answer::No {
        reason: Some("not today".into()),
    });
    admit(&config, plan(&config, ls()), None, Some(&no))
        .await
        .err()
        .expect("refused");
    no.answer = Answer::Yes;
    admit(&config, plan(&config, ls()), None, Some(&no))
        .await
        .unwrap();
    admit(&config, plan(&config, ls()), None, None)
        .await
        .err()
        .expect("refused");
    assert_eq!(
        decisions(&kept),
        [
            (Decision::Prompt, false, "a person".to_owned()),
            (Decision::Prompt, true, "a person".to_owned()),
            (Decision::Prompt, false, "no one (no answer)".to_owned()),
        ]
    );
    let text = |m: &crate::metrics::Metrics| m.render(&crate::metrics::Now::default());
    assert!(
        text(&metrics).contains("uexec_decisions_total{decision=\"allow\",outcome=\"admitted\"} 1")
    );
    assert!(text(&metrics2)
        .contains("uexec_decisions_total{decision=\"forbidden\",outcome=\"refused\"} 1"));
    let third = text(&metrics3);
    assert!(third.contains("uexec_decisions_total{decision=\"prompt\",outcome=\"refused\"} 2"));
    assert!(third.contains("uexec_decisions_total{decision=\"prompt\",outcome=\"admitted\"} 1"));
}

#[tokio::test]
async fn a_hooks_deny_is_recorded_as_the_hooks_and_a_persons_own_command_is_never_held() {
    let (config, kept, _) = recorded(None);
    let deny = hook(Some(Decision::Forbidden), None);
    admit(&config, plan(&config, ls()), Some(&deny), None)
        .await
        .err()
        .expect("refused");
    assert_eq!(
        decisions(&kept),
        [(
            Decision::Forbidden,
            false,
            "PreToolUse hook \"check.sh\"".to_owned()
        )]
    );

    let (mut config, kept, _) = recorded(Some(Decision::Forbidden));
    config.env_policy.person = true;
    admit(&config, plan(&config, ls()), None, None)
        .await
        .expect("a person's own command runs");
    let all = kept.0.lock().unwrap().clone();
    assert_eq!(
        (all[0].decision, all[0].admitted),
        (Decision::Forbidden, true)
    );
    assert!(
        all[0].by.starts_with("a person's own command"),
        "{}",
        all[0].by
    );
}

#[tokio::test]
async fn a_secret_in_the_command_line_is_masked_in_the_record() {
    let (config, kept, _) = recorded(None);
    let req = ExecRequest {
        cmd: "GH_TOKEN=ghp_secret gh pr list".into(),
        ..ls()
    };
    admit(&config, plan(&config, req), None, None)
        .await
        .unwrap();
    let all = kept.0.lock().unwrap().clone();
    assert_eq!(all[0].command, "GH_TOKEN=*** gh pr list");
}

#[tokio::test]
async fn a_question_sent_back_to_the_client_is_refused_for_now_and_neither_recorded_nor_counted() {
    let (config, kept, metrics) = recorded(Some(Decision::Prompt));
    let mut later = person(Answer::Later {
        why: "the question went to the client's form".into(),
    });
    let refused = admit(&config, plan(&config, ls()), None, Some(&later))
        .await
        .err()
        .expect("refused for now");
    assert!(
        refused.to_string().contains("no decision yet")
            && refused.to_string().contains("the client's form"),
        "{refused}"
    );
    assert!(decisions(&kept).is_empty(), "{:?}", decisions(&kept));
    // The retry's answer is the one decision recorded.
    later.answer = Answer::Yes;
    admit(&config, plan(&config, ls()), None, Some(&later))
        .await
        .unwrap();
    assert_eq!(
        decisions(&kept),
        [(Decision::Prompt, true, "a person".to_owned())]
    );
    let text = metrics.render(&crate::metrics::Now::default());
    assert!(!text.contains("outcome=\"refused\"} 1"), "{text}");
    assert!(text.contains("uexec_decisions_total{decision=\"prompt\",outcome=\"admitted\"} 1"));
}
