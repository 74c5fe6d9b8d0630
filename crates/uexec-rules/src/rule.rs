//! A prefix rule and how it matches a command's words.
//!
//! A rule is a program name and the tokens that must follow it, each with its alternatives
//! (Codex's `["git", ["push", "fetch"]]`); Claude Code's `Bash(ls)` is exact (the whole
//! command), and its bare `Bash` names every program. A computed word ([`Word::Expanded`])
//! may become any word: it never matches for an `allow` rule (an allow admits only what it
//! can read) and always matches for a stricter one (what it may become, it is treated as).

use std::sync::Arc;

use uexec_core::policy::rules::Decision;

use crate::split::Word;

#[derive(Debug, Clone)]
pub(crate) struct PrefixRule {
    /// The first word; `None`: any program (Claude Code's bare `Bash`).
    pub program: Option<String>,
    /// The words after it, each a set of alternatives.
    pub rest: Arc<[Vec<String>]>,
    /// The command must end where the pattern does.
    pub exact: bool,
    /// The pattern's last word is a prefix of text (Claude Code's `Bash(rm -rf:*)` holds
    /// `rm -rfv` too); only for a stricter rule, an allow matches whole words.
    pub text_prefix: bool,
    pub decision: Decision,
    pub justification: Option<String>,
    /// `FILE:LINE` or `FILE: permissions.deny[2] Bash(git push:*)`.
    pub source: Arc<str>,
}

impl PrefixRule {
    /// The words of the command this rule's pattern covers, if it matches `words` (whose
    /// first word was already found to be the rule's program, or the rule names any).
    pub(crate) fn matches<'w>(&self, words: &'w [Word]) -> Option<&'w [Word]> {
        let skip = usize::from(self.program.is_some());
        let len = skip + self.rest.len();
        if words.len() < len || (self.exact && words.len() != len) {
            return None;
        }
        let admits = self.decision == Decision::Allow;
        let covered = &words[..len];
        let last = self.rest.len().wrapping_sub(1);
        for (at, (alternatives, word)) in self.rest.iter().zip(&covered[skip..]).enumerate() {
            let loose = self.text_prefix && !admits && at == last;
            let ok = match word {
                Word::Literal(w) if loose => alternatives.iter().any(|a| w.starts_with(a.as_str())),
                Word::Literal(w) => alternatives.iter().any(|a| a == w),
                Word::Expanded(_) => !admits,
            };
            if !ok {
                return None;
            }
        }
        if self.program.is_none() && admits && covered.iter().any(|w| w.literal().is_none()) {
            return None;
        }
        Some(covered)
    }

    /// The rule as its author wrote the pattern, for messages.
    pub(crate) fn pattern_text(&self) -> String {
        let mut text = String::from("[");
        let first = self.program.as_deref().map(|p| format!("{p:?}"));
        let rest = self.rest.iter().map(|alts| match alts.as_slice() {
            [one] => format!("{one:?}"),
            many => format!("{many:?}"),
        });
        let all: Vec<String> = first.into_iter().chain(rest).collect();
        text.push_str(&all.join(", "));
        text.push(']');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(program: &str, rest: &[&[&str]], decision: Decision) -> PrefixRule {
        PrefixRule {
            program: Some(program.into()),
            rest: rest
                .iter()
                .map(|alts| alts.iter().map(|a| (*a).to_owned()).collect())
                .collect(),
            exact: false,
            text_prefix: false,
            decision,
            justification: None,
            source: "t.rules:1".into(),
        }
    }

    fn lit(words: &[&str]) -> Vec<Word> {
        words.iter().map(|w| Word::Literal((*w).into())).collect()
    }

    #[test]
    fn alternatives_and_prefixes() {
        let r = rule("git", &[&["push", "fetch"]], Decision::Forbidden);
        assert!(r.matches(&lit(&["git", "fetch", "origin"])).is_some());
        assert!(r.matches(&lit(&["git", "status"])).is_none());
        assert!(r.matches(&lit(&["git"])).is_none());
        assert_eq!(r.pattern_text(), r#"["git", ["push", "fetch"]]"#);
    }

    #[test]
    fn a_computed_word_admits_nothing_and_may_become_what_is_forbidden() {
        let words = vec![Word::Literal("git".into()), Word::Expanded("$x".into())];
        assert!(rule("git", &[&["push"]], Decision::Forbidden)
            .matches(&words)
            .is_some());
        assert!(rule("git", &[&["push"]], Decision::Allow)
            .matches(&words)
            .is_none());
        assert!(rule("git", &[], Decision::Allow).matches(&words).is_some());
    }
}
