//! A judgement in the JSON shape of `codex execpolicy check`, so a team's CI that reads
//! Codex's answer reads uexec's:
//! `{"matchedRules":[{"prefixRuleMatch":{"matchedPrefix":[…],"decision":…,"justification":…}}],"decision":…}`.
//! As Codex: `justification` only when the rule has one, `decision` only when a rule
//! matched (the caller says what `unmatched` makes of a script no rule matched).

use serde_json::{json, Map, Value};
use uexec_core::policy::rules::{RuleMatch, Verdict};

/// A script judged, with every rule that matched any of its parts (not only the deciding
/// ones), in the parts' order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub verdict: Verdict,
    pub matched: Vec<RuleMatch>,
}

impl Check {
    pub fn to_codex_json(&self) -> Value {
        render(&self.verdict, &self.matched)
    }
}

/// A verdict alone in Codex's shape: the rule that decided each part.
pub fn codex_json(verdict: &Verdict) -> Value {
    let deciding: Vec<RuleMatch> = verdict
        .parts
        .iter()
        .filter_map(|p| p.rule.clone())
        .collect();
    render(verdict, &deciding)
}

fn render(verdict: &Verdict, matched: &[RuleMatch]) -> Value {
    let rules: Vec<Value> = matched
        .iter()
        .map(|rule| {
            let mut inner = Map::new();
            inner.insert("matchedPrefix".into(), json!(rule.matched_prefix));
            inner.insert("decision".into(), json!(rule.decision.as_str()));
            if let Some(why) = &rule.justification {
                inner.insert("justification".into(), json!(why));
            }
            json!({ "prefixRuleMatch": inner })
        })
        .collect();
    let mut out = Map::new();
    let any = !rules.is_empty();
    out.insert("matchedRules".into(), Value::Array(rules));
    if any {
        out.insert("decision".into(), json!(verdict.decision.as_str()));
    }
    Value::Object(out)
}
