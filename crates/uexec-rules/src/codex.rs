//! A Codex `.rules` file, read as Codex reads it: a Starlark module (the `starlark` crate,
//! Codex's dialect: extended, f-strings on) whose builtins record rules.
//!
//! - `prefix_rule(pattern, decision="allow", match=[], not_match=[], justification=None)`:
//!   a pattern's element may be a list of alternatives; a rule whose first element has
//!   alternatives is one rule per alternative (as Codex indexes them by program). Each
//!   `match` example must match the rule and each `not_match` example must not, or the
//!   file is refused at that call's line and column, naming the example. An example is a
//!   list of words or a string of one command (split by the shell parser).
//! - `host_executable(name, paths)`: which absolute paths of `name` its rules may admit by
//!   basename (`/usr/bin/git` for `git`'s allow rules); a path not listed is still held by
//!   `git`'s stricter rules. `~/` is the user's home.
//! - `network_rule(…)`: read and left aside (uexec's network policy is the sandbox's), said
//!   once as a warning.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use starlark::codemap::FileSpan;
use starlark::environment::{GlobalsBuilder, Module};
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::syntax::{AstModule, Dialect};
use starlark::values::list::{ListRef, UnpackList};
use starlark::values::none::NoneType;
use starlark::values::Value;
use uexec_core::policy::rules::Decision;

use crate::error::{Format, LoadError};
use crate::rule::PrefixRule;
use crate::split::{self, Word};

/// What a `.rules` file declared.
#[derive(Debug, Default)]
pub(crate) struct Declared {
    pub rules: Vec<PrefixRule>,
    pub host_executables: Vec<(String, Vec<String>)>,
    pub network_rules: usize,
}

pub(crate) fn load(path: &Path, text: &str) -> Result<Declared, LoadError> {
    let name = path.display().to_string();
    let invalid = |err: starlark::Error| {
        let (line, column) = err
            .span()
            .map(|span| {
                let at = span.resolve_span().begin;
                (at.line + 1, at.column + 1)
            })
            .unwrap_or((1, 1));
        LoadError::Invalid {
            path: path.to_owned(),
            format: Format::CodexRules,
            line,
            column,
            message: err.without_diagnostic().to_string(),
        }
    };
    let mut dialect = Dialect::Extended.clone();
    dialect.enable_f_strings = true;
    let ast = AstModule::parse(&name, text.to_owned(), &dialect).map_err(invalid)?;
    let globals = GlobalsBuilder::standard().with(builtins).build();
    let module = Module::new();
    DECLARED.with(|d| *d.borrow_mut() = Some(Declared::default()));
    let evaluated = {
        let mut eval = Evaluator::new(&module);
        eval.eval_module(ast, &globals).map(drop)
    };
    let declared = DECLARED.with(|d| d.borrow_mut().take()).unwrap_or_default();
    evaluated.map_err(invalid)?;
    Ok(declared)
}

thread_local! {
    /// What the file being evaluated on this thread declared so far. Starlark hands its
    /// builtins a host value only through `Evaluator::extra`, whose `ProvidesStaticType` is
    /// an unsafe trait this crate does not implement; a load is one call on one thread.
    static DECLARED: RefCell<Option<Declared>> = const { RefCell::new(None) };
}

fn declare(what: impl FnOnce(&mut Declared)) -> anyhow::Result<()> {
    DECLARED.with(|d| match d.borrow_mut().as_mut() {
        Some(declared) => {
            what(declared);
            Ok(())
        }
        None => Err(anyhow::anyhow!(
            "the rules builtins were called outside a rules file"
        )),
    })
}

fn line_of(span: Option<FileSpan>) -> String {
    match span {
        Some(span) => format!("{}:{}", span.filename(), span.resolve_span().begin.line + 1),
        None => "?".into(),
    }
}

fn strings(value: Value<'_>, what: &str) -> anyhow::Result<Vec<String>> {
    let list = ListRef::from_value(value)
        .ok_or_else(|| anyhow::anyhow!("{what} must be a list of strings (got {value})"))?;
    list.content()
        .iter()
        .map(|v| {
            v.unpack_str()
                .map(str::to_owned)
                .ok_or_else(|| anyhow::anyhow!("{what} must hold strings only (got {v})"))
        })
        .collect()
}

fn example(value: Value<'_>) -> anyhow::Result<Vec<String>> {
    let words = match value.unpack_str() {
        Some(text) => split::literal_words(text)
            .ok_or_else(|| anyhow::anyhow!("example {text:?} is not one command of plain words"))?,
        None => strings(value, "an example")?,
    };
    if words.is_empty() {
        anyhow::bail!("an example cannot be empty");
    }
    Ok(words)
}

fn example_matches(rules: &[PrefixRule], words: &[String]) -> bool {
    let program = crate::split::basename(&words[0]);
    let words: Vec<Word> = words.iter().map(|w| Word::Literal(w.clone())).collect();
    rules.iter().any(|rule| {
        rule.program
            .as_deref()
            .is_some_and(|p| p == words[0].text() || p == program)
            && rule.matches(&words).is_some()
    })
}

#[starlark_module]
fn builtins(builder: &mut GlobalsBuilder) {
    fn prefix_rule<'v>(
        pattern: UnpackList<Value<'v>>,
        decision: Option<&str>,
        r#match: Option<UnpackList<Value<'v>>>,
        not_match: Option<UnpackList<Value<'v>>>,
        justification: Option<&str>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<NoneType> {
        let decision: Decision = match decision {
            Some(raw) => raw.parse().map_err(|e: String| anyhow::anyhow!(e))?,
            None => Decision::Allow,
        };
        let justification = match justification {
            Some(raw) if raw.trim().is_empty() => {
                anyhow::bail!("justification cannot be empty")
            }
            other => other.map(str::to_owned),
        };
        let mut tokens = Vec::with_capacity(pattern.items.len());
        for element in pattern.items {
            let alternatives = match element.unpack_str() {
                Some(word) => vec![word.to_owned()],
                None => strings(element, "a pattern element")?,
            };
            if alternatives.is_empty() {
                anyhow::bail!("a pattern element's alternatives cannot be empty");
            }
            tokens.push(alternatives);
        }
        let Some((first, rest)) = tokens.split_first() else {
            anyhow::bail!("pattern cannot be empty");
        };
        let source: Arc<str> = line_of(eval.call_stack_top_location()).into();
        let rest: Arc<[Vec<String>]> = rest.to_vec().into();
        let rules: Vec<PrefixRule> = first
            .iter()
            .map(|program| PrefixRule {
                program: Some(program.clone()),
                rest: rest.clone(),
                exact: false,
                text_prefix: false,
                decision,
                justification: justification.clone(),
                source: source.clone(),
            })
            .collect();
        for value in r#match.map(|m| m.items).unwrap_or_default() {
            let words = example(value)?;
            if !example_matches(&rules, &words) {
                anyhow::bail!(
                    "match example {words:?} does not match the rule's pattern {}",
                    rules[0].pattern_text_all(first)
                );
            }
        }
        for value in not_match.map(|m| m.items).unwrap_or_default() {
            let words = example(value)?;
            if example_matches(&rules, &words) {
                anyhow::bail!(
                    "not_match example {words:?} matches the rule's pattern {}",
                    rules[0].pattern_text_all(first)
                );
            }
        }
        declare(|d| d.rules.extend(rules))?;
        Ok(NoneType)
    }

    fn host_executable<'v>(name: &str, paths: UnpackList<Value<'v>>) -> anyhow::Result<NoneType> {
        if name.is_empty() || name.contains('/') {
            anyhow::bail!("host_executable name must be a bare executable name (got {name:?})");
        }
        let home = std::env::var("HOME").unwrap_or_default();
        let mut resolved = Vec::new();
        for value in paths.items {
            let raw = value.unpack_str().ok_or_else(|| {
                anyhow::anyhow!("host_executable paths must be strings (got {value})")
            })?;
            let path = match raw.strip_prefix("~/") {
                Some(rest) => format!("{}/{rest}", home.trim_end_matches('/')),
                None if raw.starts_with('/') => raw.to_owned(),
                None => anyhow::bail!(
                    "host_executable paths must be absolute or start with ~/ (got {raw:?})"
                ),
            };
            if crate::split::basename(&path) != name {
                anyhow::bail!("host_executable path {raw:?} must have basename {name:?}");
            }
            if !resolved.contains(&path) {
                resolved.push(path);
            }
        }
        declare(|d| d.host_executables.push((name.to_owned(), resolved)))?;
        Ok(NoneType)
    }

    fn network_rule(
        host: &str,
        protocol: &str,
        decision: &str,
        justification: Option<&str>,
    ) -> anyhow::Result<NoneType> {
        let _ = (host, protocol, decision, justification);
        declare(|d| d.network_rules += 1)?;
        Ok(NoneType)
    }
}

impl PrefixRule {
    /// The pattern with its first element's alternatives, as the author wrote it.
    fn pattern_text_all(&self, first: &[String]) -> String {
        let mut whole = self.clone();
        whole.program = None;
        let mut rest = vec![first.to_vec()];
        rest.extend(self.rest.iter().cloned());
        whole.rest = rest.into();
        whole.pattern_text()
    }
}
