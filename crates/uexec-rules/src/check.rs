//! A judgement in the JSON shape of `codex execpolicy check`, so a team's CI that reads
//! Codex's answer reads uexec's:
//! `{"matchedRules":[{"prefixRuleMatch":{"matchedPrefix":[…],"decision":…,"justification":…}}],"decision":…}`.
//! As Codex: `justification` only when the rule has one, `decision` only when a rule
//! matched (the caller says what `unmatched` makes of a script no rule matched).

use serde::Serialize;
use uexec_core::policy::rules::{RuleMatch, Verdict};

/// A script judged, with every rule that matched any of its parts (not only the deciding
/// ones), in the parts' order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub verdict: Verdict,
    pub matched: Vec<RuleMatch>,
}

impl Check {
    /// Codex's JSON, on one line, its keys in Codex's order.
    pub fn to_codex_json(&self) -> String {
        render(&self.verdict, &self.matched)
    }
}

/// A verdict alone in Codex's shape: the rule that decided each part.
pub fn codex_json(verdict: &Verdict) -> String {
    let deciding: Vec<RuleMatch> = verdict
        .parts
        .iter()
        .filter_map(|p| p.rule.clone())
        .collect();
    render(verdict, &deciding)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Output<'a> {
    matched_rules: Vec<Matched<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Matched<'a> {
    prefix_rule_match: PrefixRuleMatch<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PrefixRuleMatch<'a> {
    matched_prefix: &'a [String],
    decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    justification: Option<&'a str>,
}

fn render(verdict: &Verdict, matched: &[RuleMatch]) -> String {
    let output = Output {
        matched_rules: matched
            .iter()
            .map(|rule| Matched {
                prefix_rule_match: PrefixRuleMatch {
                    matched_prefix: &rule.matched_prefix,
                    decision: rule.decision.as_str(),
                    justification: rule.justification.as_deref(),
                },
            })
            .collect(),
        decision: (!matched.is_empty()).then(|| verdict.decision.as_str()),
    };
    // Strings, string slices and a derived struct: nothing here can fail to serialize.
    serde_json::to_string(&output).unwrap_or_default()
}
