//! The JSON of `codex execpolicy check`.

use serde_json::{json, Value};
use uexec_rules::{codex_json, CommandRules, Decision};

use crate::helpers::{judge, load, rules};

#[test]
fn a_match_in_codex_s_shape() {
    let rules = rules(
        r#"prefix_rule(pattern = ["git", "push"], decision = "forbidden", justification = "ask a person")
prefix_rule(pattern = ["git"], decision = "prompt")"#,
    );
    assert_eq!(
        json_of(&rules.check("git push origin", "bash").to_codex_json()),
        json!({
            "matchedRules": [
                {"prefixRuleMatch": {"matchedPrefix": ["git", "push"], "decision": "forbidden", "justification": "ask a person"}},
                {"prefixRuleMatch": {"matchedPrefix": ["git"], "decision": "prompt"}}
            ],
            "decision": "forbidden"
        })
    );
    assert_eq!(
        json_of(&codex_json(&judge(&rules, "git push origin"))),
        json!({
            "matchedRules": [
                {"prefixRuleMatch": {"matchedPrefix": ["git", "push"], "decision": "forbidden", "justification": "ask a person"}}
            ],
            "decision": "forbidden"
        })
    );
}

#[test]
fn no_match_has_no_decision() {
    let rules = load(
        "x.rules",
        r#"prefix_rule(pattern = ["ls"])"#,
        Decision::Prompt,
    )
    .unwrap();
    assert_eq!(
        json_of(&rules.check("make", "bash").to_codex_json()),
        json!({"matchedRules": []})
    );
    assert_eq!(rules.judge("make", "bash").decision, Decision::Prompt);
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn keys_come_in_codex_s_order() {
    let rules = rules(
        r#"prefix_rule(pattern = ["git", "push"], decision = "prompt", justification = "ask")"#,
    );
    assert_eq!(
        rules.check("git push", "bash").to_codex_json(),
        r#"{"matchedRules":[{"prefixRuleMatch":{"matchedPrefix":["git","push"],"decision":"prompt","justification":"ask"}}],"decision":"prompt"}"#
    );
}
