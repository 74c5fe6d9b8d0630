//! Command rules: what a person decided about the commands a model may run, judged before a
//! spawn (the first stage of the front door, `crate::spawn`). Core declares the seam and
//! its vocabulary; reading rules files (Codex's `.rules` in Starlark, Claude Code's settings
//! JSON) and splitting a script into its simple commands (a real shell parser) belong to the
//! subsystem that implements [`CommandRules`] (the `uexec-rules` crate).
//!
//! A script is judged part by part: each simple command of it (after `;`, `&&`, `||`, pipes,
//! subshells and `bash -c` strings are split, and wrappers such as `timeout` or `env` are
//! looked through) gets a [`Decision`], and the strictest is the script's. A part that cannot
//! be split for sure (`eval`, `$(…)` as a command name) is opaque: no `allow` rule admits it
//! by a prefix of its text.

use std::fmt;

/// What a rule decides of a command, from the most lenient to the strictest: the strictest
/// of a script's parts is the script's (`Ord` says which is stricter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Decision {
    /// Runs.
    Allow,
    /// Runs once a person says yes.
    Prompt,
    /// Never runs; the model is told which rule and why.
    Forbidden,
}

impl Decision {
    pub const NAMES: &'static [&'static str] = &["allow", "prompt", "forbidden"];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Prompt => "prompt",
            Self::Forbidden => "forbidden",
        }
    }
}

impl std::str::FromStr for Decision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "allow" => Ok(Self::Allow),
            "prompt" => Ok(Self::Prompt),
            "forbidden" => Ok(Self::Forbidden),
            other => Err(format!(
                "{other:?} is not a decision (expected one of {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One part of a script (a simple command) and how it was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The command's words as the shell would pass them (wrappers looked through: `timeout
    /// 5 git push` is `git push`), or, for an opaque part, its text as one word.
    pub argv: Vec<String>,
    /// It could not be split for sure (`eval`, a command substitution or a variable as the
    /// command name, a here-doc fed to a shell): judged by [`Verdict::unmatched`] only.
    pub opaque: bool,
    pub decision: Decision,
    /// The rule that decided it; `None`: no rule matched (the rules' `unmatched` decided).
    pub rule: Option<RuleMatch>,
}

/// A rule that matched a part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMatch {
    /// Where the rule is: `FILE:LINE` for a `.rules` file, `FILE: permissions.deny[2]
    /// Bash(git push:*)` for a settings file.
    pub source: String,
    /// The words of the part the rule's pattern matched (its prefix).
    pub matched_prefix: Vec<String>,
    pub decision: Decision,
    /// Why, as the rule's author wrote it (Codex's `justification`), if they did.
    pub justification: Option<String>,
}

/// A script judged: its parts, in order, and the strictest decision among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    pub parts: Vec<Part>,
}

impl Verdict {
    /// A script with no rules to judge it: allowed, nothing matched.
    pub fn allowed() -> Self {
        Self {
            decision: Decision::Allow,
            parts: Vec::new(),
        }
    }

    /// The part that decided the script (the first of the strictest), if any part did.
    pub fn deciding(&self) -> Option<&Part> {
        self.parts.iter().find(|p| p.decision == self.decision)
    }

    /// What the model reads when the script is refused or held: the decision, the part,
    /// the rule and its justification. `forbidden by rule ~/.codex/rules/default.rules:3
    /// (prefix "git push"): "pushing is for people", matched by part 2 of 3: git push
    /// origin main`.
    pub fn explain(&self) -> String {
        let Some(index) = self.parts.iter().position(|p| p.decision == self.decision) else {
            return format!("{} (no part of the script matched a rule)", self.decision);
        };
        let (part, at) = (&self.parts[index], index + 1);
        let words = part.argv.join(" ");
        let which = if self.parts.len() > 1 {
            format!("part {at} of {}: {words}", self.parts.len())
        } else {
            words
        };
        match &part.rule {
            Some(rule) => {
                let mut text = format!(
                    "{} by rule {} (prefix \"{}\")",
                    self.decision,
                    rule.source,
                    rule.matched_prefix.join(" ")
                );
                if let Some(why) = &rule.justification {
                    text.push_str(&format!(": \"{why}\""));
                }
                text.push_str(&format!(", matched by {which}"));
                text
            }
            None if part.opaque => format!(
                "{} for a part no rule can judge by its text ({which}): the rules' default for unmatched commands",
                self.decision
            ),
            None => format!(
                "{} by the rules' default for unmatched commands ({which} matched no rule)",
                self.decision
            ),
        }
    }
}

/// The seam: judges a script as its shell would run it. Implemented outside core (the
/// `uexec-rules` crate reads the files and parses the shell); pure, so it may be called on
/// any thread and in a benchmark.
pub trait CommandRules: Send + Sync + fmt::Debug {
    /// The verdict on `script`, run by `shell` (`bash`, `sh`, `zsh`, a path) with `-c`.
    fn judge(&self, script: &str, shell: &str) -> Verdict;

    /// The verdict on a program run with exactly `words`, no shell between (an exec: the
    /// program and its arguments as the kernel got them). By default, the one-command
    /// script that runs them; an implementation may judge the words as they are, without
    /// parsing a script (every exec of a session comes here: `--rules-at exec`).
    fn judge_words(&self, words: &[String]) -> Verdict {
        self.judge(&shell_line(words), "sh")
    }
}

/// `words` as one line of `sh`, each quoted where the shell would split or expand it.
pub fn shell_line(words: &[String]) -> String {
    let plain = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    };
    let quoted: Vec<String> = words
        .iter()
        .map(|w| {
            if plain(w) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect();
    quoted.join(" ")
}

/// Several sets of rules judged together (a daemon's, and a client's of it): the strictest
/// verdict is the script's, so a `forbidden` of either wins.
#[derive(Debug)]
pub struct Strictest(pub Vec<std::sync::Arc<dyn CommandRules>>);

impl CommandRules for Strictest {
    fn judge(&self, script: &str, shell: &str) -> Verdict {
        self.strictest(|rules| rules.judge(script, shell))
    }

    fn judge_words(&self, words: &[String]) -> Verdict {
        self.strictest(|rules| rules.judge_words(words))
    }
}

impl Strictest {
    fn strictest(&self, judge: impl Fn(&dyn CommandRules) -> Verdict) -> Verdict {
        let mut strictest = Verdict::allowed();
        for rules in &self.0 {
            let verdict = judge(rules.as_ref());
            if verdict.decision > strictest.decision || strictest.parts.is_empty() {
                strictest = verdict;
            }
        }
        strictest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(words: &str, decision: Decision, rule: Option<RuleMatch>) -> Part {
        Part {
            argv: words.split(' ').map(str::to_owned).collect(),
            opaque: false,
            decision,
            rule,
        }
    }

    #[test]
    fn the_strictest_decision_is_the_script_s() {
        assert!(Decision::Forbidden > Decision::Prompt && Decision::Prompt > Decision::Allow);
        assert_eq!(
            "forbidden".parse::<Decision>().unwrap(),
            Decision::Forbidden
        );
        assert!("deny".parse::<Decision>().unwrap_err().contains("allow"));
    }

    #[derive(Debug)]
    struct Fixed(Decision);

    impl CommandRules for Fixed {
        fn judge(&self, script: &str, _shell: &str) -> Verdict {
            Verdict {
                decision: self.0,
                parts: vec![part(script, self.0, None)],
            }
        }
    }

    #[test]
    fn of_several_rules_the_strictest_verdict_wins() {
        use std::sync::Arc;
        for (a, b) in [
            (Decision::Forbidden, Decision::Allow),
            (Decision::Allow, Decision::Forbidden),
            (Decision::Prompt, Decision::Allow),
        ] {
            let both = Strictest(vec![Arc::new(Fixed(a)), Arc::new(Fixed(b))]);
            assert_eq!(both.judge("x", "sh").decision, a.max(b));
        }
        assert_eq!(
            Strictest(Vec::new()).judge("x", "sh").decision,
            Decision::Allow
        );
    }

    #[test]
    fn a_refusal_names_the_rule_the_part_and_the_justification() {
        let rule = RuleMatch {
            source: "team.rules:3".into(),
            matched_prefix: vec!["git".into(), "push".into()],
            decision: Decision::Forbidden,
            justification: Some("pushing is for people".into()),
        };
        let verdict = Verdict {
            decision: Decision::Forbidden,
            parts: vec![
                part("git status", Decision::Allow, None),
                part("git push origin main", Decision::Forbidden, Some(rule)),
            ],
        };
        assert_eq!(
            verdict.explain(),
            "forbidden by rule team.rules:3 (prefix \"git push\"): \"pushing is for people\", matched by part 2 of 2: git push origin main"
        );
        let unmatched = Verdict {
            decision: Decision::Prompt,
            parts: vec![part("make deploy", Decision::Prompt, None)],
        };
        assert!(unmatched.explain().contains("make deploy matched no rule"));
    }
}
