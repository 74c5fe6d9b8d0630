//! The record of the front door (`crate::spawn`): every decision it takes (admitted or
//! refused, and by whom) is told to the store's [`DecisionLog`] and counted in its metrics,
//! once, whatever face asked. The log is a seam: the faces write it (`uexec audit` reads it);
//! core keeps no file. Here, beside the rules, so that the store's config names it without
//! a circle through the door.

use std::path::PathBuf;
use std::time::SystemTime;

use super::rules::{Decision, RuleMatch, Verdict};

/// One decision of the door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub at: SystemTime,
    /// The script as it was judged (a pre-spawn hook's rewrite, when one rewrote it),
    /// with the values of secret-looking assignments and flags masked ([`masked`]).
    pub command: String,
    pub cwd: PathBuf,
    /// What the rules and hooks decided before any person: `allow`, `prompt` (a person was
    /// asked), `forbidden`.
    pub decision: Decision,
    /// Whether it passed (to the confinement; its spawn may still fail).
    pub admitted: bool,
    /// The rule that decided, if one did.
    pub rule: Option<RuleMatch>,
    /// The words of the part that decided (`git push origin`), when the script had parts.
    pub part: Option<String>,
    /// Who decided: `rules`, `no rules`, a hook, a person (and how), `no one` (no answer),
    /// `a person's own command` (recorded, not judged).
    pub by: String,
    /// The refusal's text, or a person's reason.
    pub reason: Option<String>,
    /// For an exec judged in a session (`--rules-at exec`): its place in the session's
    /// process tree. `None` for a script's text.
    pub exec: Option<ExecPlace>,
}

/// Where a judged exec stands: its session, its process (which keeps its pid across its
/// execs) and that process's parent, as the kernel numbered them when it was held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecPlace {
    pub session: i32,
    pub pid: u32,
    pub ppid: u32,
}

/// Where a store's door decisions go (a face writes them down; see `uexec audit`).
pub trait DecisionLog: Send + Sync + std::fmt::Debug {
    /// Writes `decided` down. Never fails the spawn: a log that cannot be written says so in
    /// its own way (the process log).
    fn record(&self, decided: Decided);

    /// Writes each of `all` down, in order: an exec watch's batch (`--rules-at exec`), which
    /// a log may write at once.
    fn record_all(&self, all: Vec<Decided>) {
        for decided in all {
            self.record(decided);
        }
    }
}

/// A decision on `command` by `verdict`, to be completed by the stage that took it.
pub(crate) fn decided(command: &str, cwd: &std::path::Path, verdict: &Verdict) -> Decided {
    let deciding = verdict.deciding();
    Decided {
        at: SystemTime::now(),
        command: masked(command),
        cwd: cwd.to_path_buf(),
        decision: verdict.decision,
        admitted: false,
        rule: deciding.and_then(|p| p.rule.clone()),
        part: deciding.map(|p| masked(&p.argv.join(" "))),
        by: match deciding {
            Some(p) if p.rule.is_some() => "rules".to_owned(),
            _ => "no rule".to_owned(),
        },
        reason: None,
        exec: None,
    }
}

/// `command` with the value of each secret-looking assignment (`GH_TOKEN=…`) and flag
/// (`--password=…`, `--api-key …`) replaced by `***`: a record must not keep a secret the
/// model wrote into a command line.
pub fn masked(command: &str) -> String {
    let secret = |name: &str| crate::env::looks_secret(std::ffi::OsStr::new(name));
    let mut out = String::with_capacity(command.len());
    let mut hide_next = false;
    for (i, word) in command.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if std::mem::take(&mut hide_next) && !word.is_empty() && !word.starts_with('-') {
            out.push_str("***");
            continue;
        }
        let flag = word.trim_start_matches('-');
        let is_flag = flag.len() < word.len();
        match word.split_once('=') {
            Some((name, value)) if !value.is_empty() => {
                let bare = name.trim_start_matches('-').replace('-', "_");
                let plain = name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if plain && secret(&bare.to_ascii_uppercase()) {
                    out.push_str(name);
                    out.push_str("=***");
                } else {
                    out.push_str(word);
                }
            }
            _ => {
                out.push_str(word);
                hide_next = is_flag
                    && !flag.is_empty()
                    && secret(&flag.replace('-', "_").to_ascii_uppercase());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::masked;

    #[test]
    fn secrets_in_a_command_line_are_masked_and_the_rest_is_kept() {
        assert_eq!(
            masked("GH_TOKEN=ghp_abc gh pr list"),
            "GH_TOKEN=*** gh pr list"
        );
        assert_eq!(
            masked("mysql --password=hunter2 -u root"),
            "mysql --password=*** -u root"
        );
        assert_eq!(masked("curl --api-key k123 x"), "curl --api-key *** x");
        assert_eq!(masked("git push origin main"), "git push origin main");
        assert_eq!(masked("FOO=bar make -j2"), "FOO=bar make -j2");
    }
}
