//! An exec's words judged as they are (`judge_words`, every exec of a session under
//! `--rules-at exec`) give the verdict the one-command script that runs them gets: the
//! same decision, the same parts, the same rule; without a script parsed for them.

use uexec_core::policy::rules::shell_line;
use uexec_rules::{CommandRules, Decision, Rules};

use crate::helpers::rules;

fn team() -> Rules {
    rules(
        r#"
prefix_rule(pattern = ["git", "push"], decision = "forbidden", justification = "pushing is for people")
prefix_rule(pattern = ["git", "status"], decision = "allow")
prefix_rule(pattern = ["npm", "publish"], decision = "prompt")
prefix_rule(pattern = ["rm", "-rf"], decision = "forbidden")
prefix_rule(pattern = ["ls"], decision = "allow")
"#,
    )
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn words_are_judged_as_the_script_that_runs_them() {
    let rules = team();
    let cases: &[&[&str]] = &[
        &["git", "push", "origin", "main"],
        &["git", "status"],
        &["ls", "-la", "a dir with spaces"],
        &["npm", "publish"],
        &["true"],
        // Wrappers are looked through, a shell's -c string is still judged.
        &["env", "A=1", "git", "push"],
        &["timeout", "5", "rm", "-rf", "/tmp/x"],
        &["sudo", "-u", "root", "git", "push"],
        &["sh", "-c", "ls; git push"],
        &["bash", "-c", "git status && npm publish"],
        &["xargs", "git", "push"],
        // What a script would expand is, in an exec, a literal word.
        &["echo", "$(git push)", "`rm -rf /`", "*", "~", "it's"],
        &["git", "$(echo push)"],
        &["git", ""],
    ];
    for case in cases {
        let w = words(case);
        let exec = rules.judge_words(&w);
        let script = rules.judge(&shell_line(&w), "sh");
        assert_eq!(exec, script, "{case:?}");
    }
    assert_eq!(
        rules
            .judge_words(&words(&["env", "A=1", "git", "push"]))
            .decision,
        Decision::Forbidden
    );
    assert_eq!(
        rules.judge_words(&words(&["echo", "$(git push)"])).decision,
        Decision::Allow
    );
}
