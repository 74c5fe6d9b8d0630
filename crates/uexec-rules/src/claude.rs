//! A Claude Code settings file (`.claude/settings.json` and its kin): its
//! `permissions.deny`, `ask` and `allow` entries for the `Bash` tool, read as Claude Code
//! reads them.
//!
//! - `Bash(npm run test:*)`: the command starts with `npm run test`; `Bash(npm run test *)`
//!   alike (Claude Code's newer spelling). Claude Code compares text, so a deny or ask
//!   entry's last word holds any word it begins (`Bash(rm -rf:*)` holds `rm -rfv`); an
//!   allow entry admits whole words only (`npm run test:*` does not admit `npm run testx`);
//! - `Bash(ls)`: exactly `ls`, no argument;
//! - `Bash` or `Bash(*)`: every command;
//! - a `*` inside (`Bash(git * main)`): a deny or ask entry holds from the words before it
//!   (stricter than written, never looser); an allow entry is left out, said in a warning;
//! - deny, then ask, then allow: deny is `forbidden`, ask `prompt`, and the strictest wins,
//!   which is Claude Code's order;
//! - an allow entry that is not one command of plain words (`Bash(cd x && npm test)`, as
//!   Claude Code's "always allow" writes them) is left out, said in a warning; such a deny
//!   or ask entry stops the load (it would hold nothing);
//! - the other tools' entries (`Read(…)`, `WebFetch`, `mcp__…`) are left out, said once per
//!   file in a warning.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use uexec_core::policy::rules::Decision;

use crate::error::{Format, LoadError};
use crate::rule::PrefixRule;
use crate::split;

/// The keys of Claude Code's `permissions`; another (a typo of `deny`) is said, never
/// silently taken for nothing.
const KNOWN_KEYS: &[&str] = &[
    "allow",
    "ask",
    "deny",
    "defaultMode",
    "additionalDirectories",
    "disableBypassPermissionsMode",
];

pub(crate) struct Read {
    pub rules: Vec<PrefixRule>,
    pub warnings: Vec<String>,
}

pub(crate) fn load(path: &Path, text: &str) -> Result<Read, LoadError> {
    let invalid = |(line, column): (usize, usize), message: String| LoadError::Invalid {
        path: path.to_owned(),
        format: Format::ClaudeSettings,
        line,
        column,
        message,
    };
    let settings: Value = serde_json::from_str(text)
        .map_err(|e| invalid((e.line(), e.column()), format!("not JSON: {e}")))?;
    let mut read = Read {
        rules: Vec::new(),
        warnings: Vec::new(),
    };
    let Some(settings) = settings.as_object() else {
        return Err(invalid((1, 1), "the settings are not a JSON object".into()));
    };
    let Some(permissions) = settings.get("permissions") else {
        read.warnings.push(format!(
            "{}: a Claude Code settings file with no \"permissions\": no rule from it",
            path.display()
        ));
        return Ok(read);
    };
    let Some(permissions) = permissions.as_object() else {
        return Err(invalid(
            locate(text, "\"permissions\""),
            "\"permissions\" is not an object".into(),
        ));
    };
    for key in permissions.keys() {
        if !KNOWN_KEYS.contains(&key.as_str()) {
            read.warnings.push(format!(
                "{}: permissions.{key} is not a key of Claude Code's permissions ({}): left out",
                path.display(),
                KNOWN_KEYS.join(", ")
            ));
        }
    }
    let mut ignored = Vec::new();
    for (list, decision) in [
        ("deny", Decision::Forbidden),
        ("ask", Decision::Prompt),
        ("allow", Decision::Allow),
    ] {
        let Some(entries) = permissions.get(list) else {
            continue;
        };
        let Some(entries) = entries.as_array() else {
            return Err(invalid(
                locate(text, &format!("\"{list}\"")),
                format!("permissions.{list} is not an array"),
            ));
        };
        for (index, entry) in entries.iter().enumerate() {
            let Some(entry) = entry.as_str() else {
                return Err(invalid(
                    locate(text, &format!("\"{list}\"")),
                    format!("permissions.{list}[{index}] is not a string"),
                ));
            };
            let source: Arc<str> =
                format!("{}: permissions.{list}[{index}] {entry}", path.display()).into();
            match bash_rule(entry, decision, source) {
                Entry::Rule(rule) => read.rules.push(rule),
                Entry::OtherTool => ignored.push(entry.to_owned()),
                Entry::Skipped(why) => read.warnings.push(format!(
                    "{}: permissions.{list}[{index}] {entry}: {why}",
                    path.display()
                )),
                Entry::Invalid(why) => {
                    let quoted = serde_json::to_string(entry).unwrap_or_default();
                    return Err(invalid(
                        locate(text, &quoted),
                        format!("permissions.{list}[{index}] {entry}: {why}"),
                    ));
                }
            }
        }
    }
    if !ignored.is_empty() {
        read.warnings.push(format!(
            "{}: {} entr{} for other tools than Bash left out ({})",
            path.display(),
            ignored.len(),
            if ignored.len() == 1 { "y" } else { "ies" },
            ignored.join(", ")
        ));
    }
    Ok(read)
}

enum Entry {
    Rule(PrefixRule),
    OtherTool,
    Skipped(String),
    Invalid(String),
}

fn bash_rule(entry: &str, decision: Decision, source: Arc<str>) -> Entry {
    let rule = |words: Vec<String>, exact: bool| {
        let mut words = words.into_iter();
        let program = words.next();
        Entry::Rule(PrefixRule {
            program,
            rest: words.map(|w| vec![w]).collect(),
            exact,
            text_prefix: !exact,
            decision,
            justification: None,
            source: source.clone(),
        })
    };
    let inner = match entry.trim() {
        "Bash" => return rule(Vec::new(), false),
        other => match other
            .strip_prefix("Bash(")
            .and_then(|r| r.strip_suffix(')'))
        {
            Some(inner) => inner.trim(),
            None => return Entry::OtherTool,
        },
    };
    if inner.is_empty() || inner == "*" {
        return rule(Vec::new(), false);
    }
    let (command, exact) = if let Some(prefix) = inner.strip_suffix(":*") {
        (prefix.trim_end(), false)
    } else if let Some(prefix) = inner.strip_suffix(" *") {
        (prefix.trim_end(), false)
    } else {
        (inner, true)
    };
    if let Some(star) = command.find('*') {
        if decision == Decision::Allow {
            return Entry::Skipped(
                "a wildcard inside an allow entry is not read (it would admit more than its words say)"
                    .into(),
            );
        }
        // Held from the whole words before the wildcard: stricter than written.
        let before = command[..star]
            .rsplit_once(char::is_whitespace)
            .map_or("", |(head, _)| head);
        return match split::literal_words(before) {
            Some(words) => rule(words, false),
            None if before.trim().is_empty() => rule(Vec::new(), false),
            None => Entry::Invalid(format!("{before:?} is not one command of plain words")),
        };
    }
    match split::literal_words(command) {
        Some(words) if !words.is_empty() => rule(words, exact),
        // Claude Code's "always allow" writes whole compound lines (`cd x && npm test`):
        // uexec judges each command of a script, and such an entry would admit none of
        // them for sure, so it is left out, said; a deny or ask entry is a person's own
        // words, and one uexec cannot read stops the load rather than hold nothing.
        _ if decision == Decision::Allow => Entry::Skipped(format!(
            "{command:?} is not one command of plain words: left out (uexec judges each command of a script; allow them one by one)"
        )),
        _ => Entry::Invalid(format!(
            "{command:?} is not one command of plain words (quote it as the shell would)"
        )),
    }
}

/// The 1-based line and column of `needle`'s first occurrence in `text`.
fn locate(text: &str, needle: &str) -> (usize, usize) {
    let Some(at) = text.find(needle) else {
        return (1, 1);
    };
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(at, |nl| at - nl - 1) + 1;
    (line, column)
}
