//! The rules of every file, indexed by program, and a script judged against them.
//!
//! 1. The script is split into resolved simple commands (`crate::split`); a shell the bash
//!    grammar does not read (`fish`, `pwsh`) is still split, every part opaque.
//! 2. Each part is matched against the rules of its program: by its first word as written,
//!    and for a path (`/usr/bin/git`, `./git`) by its basename too, where a basename's
//!    `allow` rules admit only an absolute path its `host_executable` lists (any absolute
//!    path when none is declared, as Codex), while its stricter rules hold every path.
//!    Each wrapper it was found behind is matched by the stricter rules alone.
//! 3. The strictest matching rule decides the part (the first one written among equals);
//!    with none, `unmatched` does. An opaque part is never admitted by an `allow` rule:
//!    it is the strictest of `unmatched` and the stricter rules matching its visible words.
//! 4. The strictest part decides the script; a script of no command (`X=1`, a comment)
//!    is allowed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use uexec_core::policy::rules::{CommandRules, Decision, Part, RuleMatch, Verdict};

use crate::check::Check;
use crate::error::{Format, LoadError};
use crate::rule::PrefixRule;
use crate::split as wrappers;
use crate::split::{self, Command, Context, Word};
use crate::{claude, codex};

/// Rules read from files, ready to judge scripts ([`CommandRules`]).
#[derive(Debug)]
pub struct Rules {
    by_program: HashMap<String, ProgramRules>,
    /// Rules naming every program (Claude Code's bare `Bash`).
    any_program: Vec<PrefixRule>,
    /// `host_executable`: the absolute paths a basename's `allow` rules admit.
    host_executables: HashMap<String, Vec<String>>,
    unmatched: Decision,
    warnings: Vec<String>,
    count: usize,
}

impl Rules {
    /// Reads every file, in order (a Codex `.rules` or a Claude Code settings JSON each);
    /// `unmatched` decides a part no rule matches. The first file that cannot be read as
    /// rules stops the load, named with its line and column.
    pub fn load(files: &[PathBuf], unmatched: Decision) -> Result<Rules, LoadError> {
        let mut rules = Rules {
            by_program: HashMap::new(),
            any_program: Vec::new(),
            host_executables: HashMap::new(),
            unmatched,
            warnings: Vec::new(),
            count: 0,
        };
        for path in files {
            let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
                path: path.clone(),
                source,
            })?;
            match format_of(path, &text) {
                Format::CodexRules => {
                    let declared = codex::load(path, &text)?;
                    if declared.network_rules > 0 {
                        rules.warnings.push(format!(
                            "{}: {} network_rule call(s) left out (uexec's network policy is the sandbox's --allow-net)",
                            path.display(),
                            declared.network_rules
                        ));
                    }
                    for (name, paths) in declared.host_executables {
                        rules.host_executables.insert(name, paths);
                    }
                    declared.rules.into_iter().for_each(|r| rules.add(r));
                }
                Format::ClaudeSettings => {
                    let read = claude::load(path, &text)?;
                    rules.warnings.extend(read.warnings);
                    read.rules.into_iter().for_each(|r| rules.add(r));
                }
            }
        }
        Ok(rules)
    }

    fn add(&mut self, rule: PrefixRule) {
        self.count += 1;
        match &rule.program {
            Some(program) => self
                .by_program
                .entry(program.clone())
                .or_default()
                .add(rule),
            None => self.any_program.push(rule),
        }
    }

    /// What decides a part no rule matches.
    pub fn unmatched(&self) -> Decision {
        self.unmatched
    }

    /// What the files held that is left out (other tools' entries, network rules), one
    /// line per file and kind, for the caller to say once.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// How many rules were read (a pattern's first-word alternatives count one each).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The verdict on `script` run by `shell -c`, and every rule that matched a part.
    pub fn check(&self, script: &str, shell: &str) -> Check {
        let mut matched = Vec::new();
        let verdict = self.judge_all(script, shell, Some(&mut matched));
        Check { verdict, matched }
    }

    /// The rules of a command whose first word is `name`, each group with whether its
    /// `allow` rules may admit it (a basename's admit only an absolute path its
    /// `host_executable` lists, or any when none is declared).
    fn groups<'a>(&'a self, name: Option<&'a str>) -> [(Option<&'a ProgramRules>, bool); 2] {
        let Some(name) = name else {
            return [(None, false), (None, false)];
        };
        let exact = self.by_program.get(name);
        let base = wrappers::basename(name);
        if base == name {
            return [(exact, true), (None, false)];
        }
        let base_admits = name.starts_with('/')
            && self
                .host_executables
                .get(base)
                .is_none_or(|paths| paths.iter().any(|p| p == name));
        [(exact, true), (self.by_program.get(base), base_admits)]
    }

    fn judge_command(
        &self,
        command: Command,
        scratch: &mut Vec<u32>,
        mut matched: Option<&mut Vec<RuleMatch>>,
    ) -> Part {
        let mut best: Option<(&PrefixRule, &[Word])> = None;
        let layers = std::iter::once((&command.words, !command.opaque))
            .chain(command.wrappers.iter().map(|layer| (layer, false)));
        for (words, may_admit) in layers {
            let groups = self.groups(words.first().and_then(Word::literal));
            let judged = |rule: &'_ PrefixRule, admits: bool| {
                if rule.decision == Decision::Allow && !(admits && may_admit) {
                    return None;
                }
                rule.matches(words).map(|covered| (covered, rule.decision))
            };
            for (group, admits) in groups {
                let Some(group) = group else {
                    continue;
                };
                group.select(words.get(1), scratch);
                for &at in scratch.iter() {
                    let rule = &group.rules[at as usize];
                    let Some((covered, decision)) = judged(rule, admits) else {
                        continue;
                    };
                    if best.is_none_or(|(b, _)| decision > b.decision) {
                        best = Some((rule, covered));
                    }
                    if let Some(matched) = matched.as_deref_mut() {
                        matched.push(rule_match(rule, covered));
                    }
                }
            }
            for rule in &self.any_program {
                let Some((covered, decision)) = judged(rule, true) else {
                    continue;
                };
                if best.is_none_or(|(b, _)| decision > b.decision) {
                    best = Some((rule, covered));
                }
                if let Some(matched) = matched.as_deref_mut() {
                    matched.push(rule_match(rule, covered));
                }
            }
        }
        let (decision, rule) = match best {
            Some((rule, covered)) if !command.opaque || rule.decision >= self.unmatched => {
                (rule.decision, Some(rule_match(rule, covered)))
            }
            _ => (self.unmatched, None),
        };
        let argv = if command.opaque {
            vec![command.text]
        } else {
            command.words.into_iter().map(Word::into_text).collect()
        };
        Part {
            argv,
            opaque: command.opaque,
            decision,
            rule,
        }
    }

    fn judge_all(
        &self,
        script: &str,
        shell: &str,
        matched: Option<&mut Vec<RuleMatch>>,
    ) -> Verdict {
        let ctx = Context {
            opaque: !(shell.is_empty() || wrappers::posix_like(shell)),
            ..Context::default()
        };
        let mut commands = Vec::new();
        split::split(script, &ctx, &mut commands);
        self.verdict(commands, matched)
    }

    /// The verdict on `commands`: each judged, the strictest of them the whole's.
    fn verdict(&self, commands: Vec<Command>, mut matched: Option<&mut Vec<RuleMatch>>) -> Verdict {
        let mut scratch = Vec::new();
        let parts: Vec<Part> = commands
            .into_iter()
            .map(|command| self.judge_command(command, &mut scratch, matched.as_deref_mut()))
            .collect();
        let decision = parts
            .iter()
            .map(|p| p.decision)
            .max()
            .unwrap_or(Decision::Allow);
        Verdict { decision, parts }
    }
}

fn rule_match(rule: &PrefixRule, covered: &[Word]) -> RuleMatch {
    RuleMatch {
        source: rule.source.to_string(),
        matched_prefix: covered.iter().map(|w| w.text().to_owned()).collect(),
        decision: rule.decision,
        justification: rule.justification.clone(),
    }
}

impl CommandRules for Rules {
    fn judge(&self, script: &str, shell: &str) -> Verdict {
        self.judge_all(script, shell, None)
    }

    /// An exec's words, judged as they are: no script is parsed (but a `sh -c STRING`'s).
    fn judge_words(&self, words: &[String]) -> Verdict {
        let mut commands = Vec::new();
        split::exec(words, &mut commands);
        self.verdict(commands, None)
    }
}

fn format_of(path: &Path, text: &str) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => Format::ClaudeSettings,
        Some("rules" | "star" | "bzl" | "codexpolicy") => Format::CodexRules,
        _ if text.trim_start().starts_with('{') => Format::ClaudeSettings,
        _ => Format::CodexRules,
    }
}

/// One program's rules, indexed by the word after the program, so a part is matched against
/// the few rules that name its second word (and those any second word may match), not all
/// of its program's.
#[derive(Debug, Default)]
struct ProgramRules {
    rules: Vec<PrefixRule>,
    /// Each second word a rule names (every alternative): the rules, in order.
    by_second: HashMap<String, Vec<u32>>,
    /// The rules any second word may match: the program alone, or a text prefix (Claude
    /// Code's `Bash(rm -rf:*)` holds `rm -rfv`).
    any_second: Vec<u32>,
}

impl ProgramRules {
    fn add(&mut self, rule: PrefixRule) {
        let at = u32::try_from(self.rules.len()).unwrap_or(u32::MAX);
        match rule.rest.first() {
            Some(alternatives) if !(rule.text_prefix && rule.rest.len() == 1) => {
                for word in alternatives {
                    self.by_second.entry(word.clone()).or_default().push(at);
                }
            }
            _ => self.any_second.push(at),
        }
        self.rules.push(rule);
    }

    /// Into `out`, in the order they were written: the rules that may match a command whose
    /// second word is `second` (all of them for a computed word, which may become any).
    fn select(&self, second: Option<&Word>, out: &mut Vec<u32>) {
        out.clear();
        match second {
            Some(Word::Expanded(_)) => {
                out.extend(0..u32::try_from(self.rules.len()).unwrap_or(u32::MAX));
                return;
            }
            Some(Word::Literal(word)) => {
                if let Some(named) = self.by_second.get(word) {
                    out.extend_from_slice(named);
                }
            }
            None => {}
        }
        out.extend_from_slice(&self.any_second);
        out.sort_unstable();
        out.dedup();
    }
}
