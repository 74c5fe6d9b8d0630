//! `uexec policy check`: how rules files judge a command, without running it, so a team
//! tests its policy in CI (as `codex execpolicy check`, whose JSON `--json` prints).
//!
//! 1. The files load as `uexec mcp --rules` loads them; one that does not is said with its
//!    file, line and column, exit 2 (bad input), as is a missing command.
//! 2. The command is `-c SCRIPT` (judged as `--shell` runs it) or an argv after `--`
//!    (quoted back into one command, so `-- bash -c 'git push'` is judged as bash runs it).
//! 3. Text: the decision, then each part with its decision and the rule that decided it;
//!    `--json`: Codex's shape. Exit 0 whatever the decision (read it from the output);
//!    what the files left out (other tools' entries) is said on stderr.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use uexec_rules::{Decision, Rules};

use super::common::EXIT_UEXEC;

/// Exit code for bad input (as clap's).
const EXIT_USAGE: u8 = 2;

/// `uexec policy …`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Judge a command by rules files, as `uexec mcp --rules` would, without running it:
    /// the decision (allow, prompt, forbidden), each simple command of it and the rule
    /// that decided it. Exit codes: 0 judged (whatever the decision); 2 bad input (a rules
    /// file that does not load, no command); 125 uexec failed.
    #[command(after_help = "Examples:
  uexec policy check --rules team.rules -- git push origin main
  uexec policy check --rules team.rules --rules .claude/settings.json -c 'ls && timeout 5 git push'
  uexec policy check --rules team.rules --json -- git push     Codex's `execpolicy check` JSON
  uexec policy check --rules team.rules --unmatched prompt -c 'make deploy'")]
    Check(PolicyCheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct PolicyCheckArgs {
    /// A rules file (repeatable, read in order): a Codex `.rules` file (Starlark
    /// `prefix_rule`, `host_executable`) or a Claude Code settings JSON
    /// (`permissions.allow` / `ask` / `deny`, `Bash(...)` entries).
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// The decision for a part no rule matches, and for one no rule can read (`eval`,
    /// `$(...)` as a command): allow, prompt or forbidden.
    #[arg(long, value_name = "DECISION", default_value = "allow", value_parser = parse_decision)]
    pub unmatched: Decision,
    /// Print Codex's `execpolicy check` JSON: {"matchedRules":[{"prefixRuleMatch":
    /// {"matchedPrefix":[...],"decision":...,"justification":...}}],"decision":...}
    /// (no "decision" when no rule matched, as Codex).
    #[arg(long)]
    pub json: bool,
    /// The shell that would run the script (bash, sh, zsh: split with the bash grammar;
    /// another: every part opaque).
    #[arg(long, value_name = "SHELL", default_value = "bash")]
    pub shell: String,
    /// The command as a shell script.
    #[arg(short = 'c', value_name = "SCRIPT", conflicts_with = "argv")]
    pub script: Option<String>,
    /// The command as an argv (after `--`).
    #[arg(last = true, value_name = "ARGV")]
    pub argv: Vec<String>,
}

fn parse_decision(text: &str) -> Result<Decision, String> {
    text.parse()
}

/// `uexec policy check`.
pub fn policy(command: PolicyCommand) -> ExitCode {
    let PolicyCommand::Check(args) = command;
    let script = match (&args.script, args.argv.is_empty()) {
        (Some(script), _) => script.clone(),
        (None, false) => args
            .argv
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" "),
        (None, true) => {
            eprintln!("uexec policy check: no command: give -c SCRIPT or -- ARGV...");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let rules = match Rules::load(&args.rules, args.unmatched) {
        Ok(rules) => rules,
        Err(e) => {
            eprintln!("uexec policy check: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    for warning in rules.warnings() {
        eprintln!("uexec policy check: warning: {warning}");
    }
    let check = rules.check(&script, &args.shell);
    let text = if args.json {
        format!("{}\n", check.to_codex_json())
    } else {
        render(&check.verdict)
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uexec policy check: cannot write to stdout: {e}");
            ExitCode::from(EXIT_UEXEC)
        }
    }
}

/// `forbidden`, then a line per part, then the explanation the model would read.
fn render(verdict: &uexec_rules::Verdict) -> String {
    let mut text = format!("{}\n", verdict.decision);
    for (at, part) in verdict.parts.iter().enumerate() {
        let words = part.argv.join(" ");
        let by = match &part.rule {
            Some(rule) => {
                let mut by = format!(
                    "rule {} (prefix \"{}\")",
                    rule.source,
                    rule.matched_prefix.join(" ")
                );
                if let Some(why) = &rule.justification {
                    by.push_str(&format!(": \"{why}\""));
                }
                by
            }
            None if part.opaque => "no rule can read it: --unmatched".to_owned(),
            None => "no rule: --unmatched".to_owned(),
        };
        text.push_str(&format!(
            "  part {}: {:<9} {}{}  [{by}]\n",
            at + 1,
            part.decision.as_str(),
            if part.opaque { "(opaque) " } else { "" },
            words
        ));
    }
    if verdict.decision != Decision::Allow {
        text.push_str(&verdict.explain());
        text.push('\n');
    }
    text
}

/// One word as the shell would read it back.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argv_is_quoted_back_into_one_command() {
        assert_eq!(shell_quote("git"), "git");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b;c"), "'a b;c'");
    }

    #[test]
    fn each_part_is_shown_with_what_decided_it() {
        use uexec_rules::{Part, RuleMatch, Verdict};
        let verdict = Verdict {
            decision: Decision::Forbidden,
            parts: vec![
                Part {
                    argv: vec!["ls".into()],
                    opaque: false,
                    decision: Decision::Allow,
                    rule: None,
                },
                Part {
                    argv: vec!["git".into(), "push".into()],
                    opaque: false,
                    decision: Decision::Forbidden,
                    rule: Some(RuleMatch {
                        source: "t.rules:1".into(),
                        matched_prefix: vec!["git".into(), "push".into()],
                        decision: Decision::Forbidden,
                        justification: Some("people push".into()),
                    }),
                },
            ],
        };
        assert_eq!(
            render(&verdict),
            "forbidden\n  part 1: allow     ls  [no rule: --unmatched]\n  part 2: forbidden git push  [rule t.rules:1 (prefix \"git push\"): \"people push\"]\nforbidden by rule t.rules:1 (prefix \"git push\"): \"people push\", matched by part 2 of 2: git push\n"
        );
    }
}
