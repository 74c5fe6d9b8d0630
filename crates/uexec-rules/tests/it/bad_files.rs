//! A rules file that cannot mean what it says stops the load, naming the file, line and
//! column; never a silent allow-all.

use uexec_rules::{Decision, Format, LoadError};

use crate::helpers::load;

fn invalid(name: &str, text: &str) -> (LoadError, String) {
    let err = load(name, text, Decision::Allow).unwrap_err();
    let shown = err.to_string();
    (err, shown)
}

fn at(err: &LoadError) -> (Format, usize, usize) {
    match err {
        LoadError::Invalid {
            format,
            line,
            column,
            ..
        } => (*format, *line, *column),
        other => panic!("not an invalid file: {other}"),
    }
}

#[test]
fn a_starlark_syntax_error_names_line_and_column() {
    let (err, shown) = invalid(
        "team.rules",
        "prefix_rule(pattern = [\"ls\"])\nprefix_rule(pattern = [\"git\" \"push\"]\n",
    );
    assert_eq!(at(&err).0, Format::CodexRules);
    assert_eq!(at(&err).1, 2, "{shown}");
    assert!(shown.contains("team.rules:2:"), "{shown}");
    assert!(shown.contains("Codex rules file"), "{shown}");
}

#[test]
fn an_unknown_decision_is_an_error() {
    let (err, shown) = invalid(
        "team.rules",
        "\n\nprefix_rule(pattern = [\"rm\"], decision = \"deny\")\n",
    );
    assert_eq!(at(&err).1, 3, "{shown}");
    assert!(shown.contains("\"deny\" is not a decision"), "{shown}");
}

#[test]
fn a_match_example_the_rule_contradicts_is_named() {
    let (err, shown) = invalid(
        "team.rules",
        "prefix_rule(\n    pattern = [\"git\", \"push\"],\n    match = [\"git status\"],\n)\n",
    );
    assert_eq!(at(&err).1, 1, "{shown}");
    assert!(
        shown.contains("match example [\"git\", \"status\"] does not match the rule's pattern [\"git\", \"push\"]"),
        "{shown}"
    );
}

#[test]
fn a_not_match_example_the_rule_matches_is_named() {
    let (_, shown) = invalid(
        "team.rules",
        "prefix_rule(pattern = [\"git\", [\"push\", \"fetch\"]], not_match = [[\"git\", \"fetch\", \"-a\"]])",
    );
    assert!(
        shown.contains("not_match example [\"git\", \"fetch\", \"-a\"] matches the rule's pattern [\"git\", [\"push\", \"fetch\"]]"),
        "{shown}"
    );
}

#[test]
fn an_unknown_function_or_argument_is_an_error() {
    let (_, shown) = invalid("team.rules", "allow_everything()\n");
    assert!(shown.contains("team.rules:1:1"), "{shown}");
    let (_, shown) = invalid(
        "team.rules",
        "prefix_rule(pattern = [\"ls\"], decison = \"allow\")\n",
    );
    assert!(shown.contains("decison"), "{shown}");
    let (_, shown) = invalid("team.rules", "prefix_rule(pattern = [])\n");
    assert!(shown.contains("pattern cannot be empty"), "{shown}");
}

#[test]
fn bad_json_names_line_and_column() {
    let (err, shown) = invalid(
        "settings.json",
        "{\n  \"permissions\": {\n    \"allow\": [\"Bash(ls)\",]\n  }\n}\n",
    );
    assert_eq!(at(&err).0, Format::ClaudeSettings);
    assert_eq!(at(&err).1, 3, "{shown}");
    assert!(shown.contains("Claude Code settings file"), "{shown}");
}

#[test]
fn a_bash_entry_that_is_not_a_command_is_an_error() {
    let (err, shown) = invalid(
        "settings.json",
        "{\"permissions\": {\n \"deny\": [\n  \"Bash(git push; rm:*)\"]}}",
    );
    assert_eq!((at(&err).1, at(&err).2), (3, 3), "{shown}");
    let (_, shown) = invalid(
        "settings.json",
        "{\"permissions\": {\"allow\": \"Bash(ls)\"}}",
    );
    assert!(
        shown.contains("permissions.allow is not an array"),
        "{shown}"
    );
}

#[test]
fn a_missing_file_is_named() {
    let err =
        uexec_rules::Rules::load(&["/nonexistent/x.rules".into()], Decision::Allow).unwrap_err();
    assert!(err
        .to_string()
        .starts_with("/nonexistent/x.rules: cannot read"));
}
