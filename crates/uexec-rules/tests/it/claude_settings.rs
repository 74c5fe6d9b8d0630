//! Claude Code's settings: `Bash(…)` entries in deny, ask and allow.

use uexec_rules::{CommandRules, Decision};

use crate::helpers::load;

fn settings(json: &str, unmatched: Decision) -> uexec_rules::Rules {
    load("settings.json", json, unmatched).unwrap()
}

#[test]
fn deny_then_ask_then_allow() {
    let rules = settings(
        r#"{"permissions": {
            "allow": ["Bash(git:*)", "Bash(npm run test:*)"],
            "ask": ["Bash(git push:*)"],
            "deny": ["Bash(git push --force:*)"]
        }}"#,
        Decision::Prompt,
    );
    assert_eq!(rules.judge("git log", "bash").decision, Decision::Allow);
    assert_eq!(rules.judge("git push", "bash").decision, Decision::Prompt);
    let forced = rules.judge("git push --force origin", "bash");
    assert_eq!(forced.decision, Decision::Forbidden);
    assert!(forced.parts[0]
        .rule
        .as_ref()
        .unwrap()
        .source
        .ends_with("settings.json: permissions.deny[0] Bash(git push --force:*)"));
    assert_eq!(
        rules.judge("npm run test:unit", "bash").decision,
        Decision::Prompt
    );
    assert_eq!(
        rules.judge("npm run test -- -w", "bash").decision,
        Decision::Allow
    );
}

#[test]
fn a_prefix_entry_against_an_exact_one() {
    let rules = settings(
        r#"{"permissions": {"allow": ["Bash(ls)", "Bash(cargo test:*)", "Bash(make *)"]}}"#,
        Decision::Prompt,
    );
    assert_eq!(rules.judge("ls", "bash").decision, Decision::Allow);
    assert_eq!(rules.judge("ls -la", "bash").decision, Decision::Prompt);
    assert_eq!(rules.judge("cargo test", "bash").decision, Decision::Allow);
    assert_eq!(
        rules.judge("cargo test -p x", "bash").decision,
        Decision::Allow
    );
    assert_eq!(rules.judge("make all", "bash").decision, Decision::Allow);
    // A prefix of words, not of text.
    assert_eq!(
        rules.judge("cargo testx", "bash").decision,
        Decision::Prompt
    );
}

#[test]
fn other_tools_entries_are_left_out_and_said_once() {
    let rules = settings(
        r#"{"permissions": {"allow": ["Read(./src/**)", "WebFetch", "Bash(ls)", "mcp__x__y"], "deny": ["Edit(.env)"]}}"#,
        Decision::Allow,
    );
    assert_eq!(rules.len(), 1);
    assert_eq!(rules.warnings().len(), 1);
    let warning = &rules.warnings()[0];
    assert!(warning.contains("4 entries"), "{warning}");
    assert!(warning.contains("Read(./src/**)") && warning.contains("Edit(.env)"));
}

#[test]
fn a_bare_bash_names_every_command() {
    let rules = settings(r#"{"permissions": {"deny": ["Bash"]}}"#, Decision::Allow);
    assert_eq!(rules.judge("ls", "bash").decision, Decision::Forbidden);
    assert_eq!(rules.judge("$(x) y", "bash").decision, Decision::Forbidden);
}

#[test]
fn a_wildcard_inside_is_stricter_for_deny_and_left_out_for_allow() {
    let rules = settings(
        r#"{"permissions": {"deny": ["Bash(git * main)"], "allow": ["Bash(rm * tmp)"]}}"#,
        Decision::Prompt,
    );
    assert_eq!(rules.judge("git log", "bash").decision, Decision::Forbidden);
    assert_eq!(rules.judge("rm -r tmp", "bash").decision, Decision::Prompt);
    assert!(rules.warnings()[0].contains("wildcard"));
}

#[test]
fn a_file_told_apart_by_content() {
    let rules = load(
        "settings.local",
        r#"{"permissions": {"deny": ["Bash(rm:*)"]}}"#,
        Decision::Allow,
    )
    .unwrap();
    assert_eq!(
        rules.judge("rm -rf x", "bash").decision,
        Decision::Forbidden
    );
}

#[test]
fn a_deny_entry_holds_the_words_its_text_begins() {
    let rules = settings(
        r#"{"permissions": {"deny": ["Bash(rm -rf:*)"], "allow": ["Bash(npm run test:*)"]}}"#,
        Decision::Prompt,
    );
    // Claude Code compares text: `rm -rf` begins `rm -rfv`.
    assert_eq!(
        rules.judge("rm -rfv /", "bash").decision,
        Decision::Forbidden
    );
    assert_eq!(rules.judge("rm -r x", "bash").decision, Decision::Prompt);
    // An allow admits whole words only.
    assert_eq!(
        rules.judge("npm run testx", "bash").decision,
        Decision::Prompt
    );
}

#[test]
fn an_unknown_permissions_key_is_said() {
    let rules = settings(
        r#"{"permissions": {"denied": ["Bash(rm:*)"], "defaultMode": "acceptEdits"}}"#,
        Decision::Allow,
    );
    assert_eq!(rules.len(), 0);
    assert_eq!(rules.warnings().len(), 1);
    assert!(rules.warnings()[0].contains("permissions.denied is not a key"));
}

#[test]
fn a_compound_allow_entry_is_left_out_and_said() {
    let rules = settings(
        r#"{"permissions": {"allow": ["Bash(cd web && npm test)", "Bash(ls)"]}}"#,
        Decision::Prompt,
    );
    assert_eq!(rules.len(), 1);
    assert!(rules.warnings()[0].contains("allow them one by one"));
    assert_eq!(
        rules.judge("cd web && npm test", "bash").decision,
        Decision::Prompt
    );
}
