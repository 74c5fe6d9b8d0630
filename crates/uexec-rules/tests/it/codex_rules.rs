//! Codex's `.rules` semantics: alternatives, defaults, the strictest rule, examples checked
//! at load, host executables.

use uexec_rules::{CommandRules, Decision};

use crate::helpers::{judge, load, rules};

#[test]
fn alternatives_in_a_pattern() {
    let rules = rules(
        r#"prefix_rule(pattern = ["git", ["push", "fetch"]], decision = "prompt")
prefix_rule(pattern = [["npm", "pnpm"], "test"])"#,
    );
    assert_eq!(judge(&rules, "git fetch origin").decision, Decision::Prompt);
    assert_eq!(judge(&rules, "git push").decision, Decision::Prompt);
    assert!(judge(&rules, "git pull").parts[0].rule.is_none());
    assert!(judge(&rules, "pnpm test").parts[0].rule.is_some());
    assert_eq!(rules.len(), 3);
}

#[test]
fn decision_defaults_to_allow() {
    let rules = rules(r#"prefix_rule(pattern = ["cargo", "test"])"#);
    let verdict = judge(&rules, "cargo test -p x");
    assert_eq!(verdict.decision, Decision::Allow);
    assert_eq!(
        verdict.parts[0].rule.as_ref().unwrap().matched_prefix,
        ["cargo", "test"]
    );
}

#[test]
fn the_strictest_matching_rule_wins() {
    let rules = rules(
        r#"
prefix_rule(pattern = ["git"])
prefix_rule(pattern = ["git", "push"], decision = "prompt")
prefix_rule(pattern = ["git", "push", "--force"], decision = "forbidden", justification = "never force")
"#,
    );
    assert_eq!(judge(&rules, "git log").decision, Decision::Allow);
    assert_eq!(judge(&rules, "git push").decision, Decision::Prompt);
    let forced = judge(&rules, "git push --force");
    assert_eq!(forced.decision, Decision::Forbidden);
    assert_eq!(
        forced.parts[0]
            .rule
            .as_ref()
            .unwrap()
            .justification
            .as_deref(),
        Some("never force")
    );
    // Every rule that matched is in the check.
    assert_eq!(rules.check("git push --force", "bash").matched.len(), 3);
}

#[test]
fn the_strictest_part_decides_and_unmatched_decides_the_rest() {
    let rules = load(
        "u.rules",
        r#"prefix_rule(pattern = ["ls"])"#,
        Decision::Prompt,
    )
    .unwrap();
    let verdict = rules.judge("ls && make", "bash");
    assert_eq!(verdict.decision, Decision::Prompt);
    assert_eq!(verdict.parts[0].decision, Decision::Allow);
    assert_eq!(verdict.parts[1].rule, None);
    assert!(verdict.explain().contains("make matched no rule"));
}

#[test]
fn match_and_not_match_examples_pass_at_load() {
    let rules = rules(
        r#"
prefix_rule(
    pattern = ["git", ["push", "fetch"]],
    decision = "prompt",
    match = [["git", "push"], "git fetch origin", "/usr/bin/git push"],
    not_match = ["git status", ["git"]],
)
"#,
    );
    assert_eq!(rules.len(), 1);
}

#[test]
fn starlark_is_a_language() {
    let rules = rules(
        r#"
TOOLS = ["cargo", "npm"]
def safe(tool, verb):
    prefix_rule(pattern = [tool, verb], justification = f"{tool} {verb} is read-only")
[safe(t, "test") for t in TOOLS]
"#,
    );
    assert_eq!(rules.len(), 2);
    let verdict = judge(&rules, "npm test");
    assert_eq!(
        verdict.parts[0]
            .rule
            .as_ref()
            .unwrap()
            .justification
            .as_deref(),
        Some("npm test is read-only")
    );
    assert!(verdict.parts[0]
        .rule
        .as_ref()
        .unwrap()
        .source
        .ends_with(":4"));
}

#[test]
fn host_executable_limits_which_paths_a_basename_admits() {
    let rules = rules(
        r#"
host_executable(name = "git", paths = ["/usr/bin/git"])
prefix_rule(pattern = ["git", "status"])
prefix_rule(pattern = ["git", "push"], decision = "forbidden")
"#,
    );
    assert!(judge(&rules, "/usr/bin/git status").parts[0].rule.is_some());
    assert!(judge(&rules, "/opt/evil/git status").parts[0]
        .rule
        .is_none());
    // A stricter rule holds every path.
    assert_eq!(
        judge(&rules, "/opt/evil/git push").decision,
        Decision::Forbidden
    );
}

#[test]
fn network_rules_are_read_and_left_aside() {
    let rules = rules(
        r#"network_rule(host = "example.com", protocol = "https", decision = "allow")
prefix_rule(pattern = ["ls"])"#,
    );
    assert_eq!(rules.len(), 1);
    assert!(rules.warnings()[0].contains("network_rule"));
}

#[test]
fn rules_from_several_files_merge() {
    let a = crate::helpers::file("a.rules", r#"prefix_rule(pattern = ["ls"])"#);
    let b = crate::helpers::file(
        "settings.json",
        r#"{"permissions": {"deny": ["Bash(ls -R:*)"]}}"#,
    );
    let rules = uexec_rules::Rules::load(&[a, b], Decision::Allow).unwrap();
    assert_eq!(rules.judge("ls -R /", "bash").decision, Decision::Forbidden);
    assert_eq!(rules.judge("ls /", "bash").decision, Decision::Allow);
}

#[test]
fn rules_are_the_seam_core_calls() {
    let rules: std::sync::Arc<dyn CommandRules> =
        std::sync::Arc::new(crate::helpers::push_forbidden());
    let judge_elsewhere = std::thread::spawn(move || rules.judge("git push", "/bin/bash").decision);
    assert_eq!(judge_elsewhere.join().unwrap(), Decision::Forbidden);
}
