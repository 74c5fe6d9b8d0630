//! Command rules judged at each exec (issue 40): what an exec the kernel handed over
//! (`uexec_sys::ExecCall`: the program's absolute path and its argv) is, as a command the
//! same [`CommandRules`] judge as they judge a script's parts.
//!
//! The command is the program's basename and the arguments after `argv[0]` (the kernel's
//! arguments, not a script's text: `$(echo deploy) prod`, `eval`, `make`, `xargs` and
//! `find -exec` all end in an exec of the real words). An interpreter run on a script file
//! (`bash deploy.sh x`, `python3 -u tool.py`) is judged as that script (`deploy.sh x`); an
//! interpreter given code on its command line (`sh -c`, `python3 -c`) is judged as itself
//! with `-c` only: whatever that code runs is exec'd, hence judged, in its turn.

use std::ffi::OsString;
use std::path::Path;

pub use super::rules::shell_line;
use super::rules::{CommandRules, Decision, Verdict};

/// Where a store's command rules judge (`--rules-at`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RulesAt {
    /// The script's text, part by part, before it runs (the default).
    #[default]
    Text,
    /// The script's text, and every exec of every process the session starts (where the
    /// kernel can hand them over; else the text alone, said at start).
    Exec,
}

impl RulesAt {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "text" => Some(Self::Text),
            "exec" => Some(Self::Exec),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Exec => "exec",
        }
    }
}

/// The environment variable that makes [`exec_support`] fail (`fail`), as on a kernel
/// without seccomp user notification: tests of the fallback.
pub const EXEC_SUPPORT_TEST_ENV: &str = "UEXEC_TEST_EXEC_NOTIFY";

/// Whether this machine can hand every exec to uexec (`uexec_sys::probe_exec_notify`, asked
/// once per process): `Err(why)` when not (a kernel before 5.0, another supervisor's filter
/// that forbids a new one: `EBUSY`), and the rules then judge the script's text only.
pub fn exec_support() -> Result<(), String> {
    static SUPPORT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    SUPPORT
        .get_or_init(|| {
            let result = if std::env::var(EXEC_SUPPORT_TEST_ENV).is_ok_and(|v| v == "fail") {
                Err(format!(
                    "seccomp user notification is unavailable ({EXEC_SUPPORT_TEST_ENV}=fail)"
                ))
            } else {
                uexec_sys::probe_exec_notify()
                    .map_err(|e| format!("seccomp user notification is unavailable: {e}"))
            };
            result
        })
        .clone()
}

/// Programs that run their first operand as a script (options before it skipped).
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "fish", "python", "python3", "perl", "ruby", "node",
];

fn is_shell(program: &str) -> bool {
    matches!(program, "sh" | "bash" | "dash" | "zsh" | "ksh" | "fish")
}

/// The options with which `interpreter` runs code given on its command line.
fn code_flags(interpreter: &str) -> &'static [&'static str] {
    match interpreter {
        "perl" => &["-e", "-E"],
        "ruby" => &["-e"],
        "node" => &["-e", "--eval", "-p", "--print"],
        _ => &["-c"],
    }
}

/// The words of the command an exec runs, as rules judge them (module docs).
pub fn exec_words(program: &Path, argv: &[OsString]) -> Vec<String> {
    let name = |p: &Path| {
        p.file_name()
            .map_or_else(|| p.to_string_lossy(), |n| n.to_string_lossy())
            .into_owned()
    };
    let program = name(program);
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if !INTERPRETERS.contains(&program.as_str()) {
        return std::iter::once(program).chain(args).collect();
    }
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            code if code_flags(&program).contains(&code) => return vec![program, arg.clone()],
            // A shell's short flags together (`bash -lc`, `sh -ec`): code when `c` is one.
            code if is_shell(&program)
                && code.starts_with('-')
                && !code.starts_with("--")
                && code.contains('c') =>
            {
                return vec![program, arg.clone()]
            }
            "-m" => return rest.cloned().collect(),
            "--" => break,
            option if option.starts_with('-') => continue,
            script => {
                let words = std::iter::once(name(Path::new(script)));
                return words.chain(rest.cloned()).collect();
            }
        }
    }
    match rest.next() {
        Some(script) => std::iter::once(name(Path::new(script)))
            .chain(rest.cloned())
            .collect(),
        // An interactive interpreter, or one reading its script from stdin.
        None => vec![program],
    }
}

/// The verdict of `rules` on the exec of `program` with `argv`.
pub fn judge_exec(rules: &dyn CommandRules, program: &Path, argv: &[OsString]) -> Verdict {
    rules.judge_words(&exec_words(program, argv))
}

/// The line a session's output shows for an exec refused (or left unanswered):
/// `refused at exec: /usr/bin/git push origin (forbidden by rule team.rules:2 …)`.
pub fn refused_at_exec(program: &Path, argv: &[OsString], verdict: &Verdict) -> String {
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut command = program.to_string_lossy().into_owned();
    if !args.is_empty() {
        command.push(' ');
        command.push_str(&shell_line(&args));
    }
    let verb = match verdict.decision {
        Decision::Prompt => "not run (no one said yes)",
        _ => "refused",
    };
    format!(
        "{verb} at exec: {} ({})",
        super::decisions::masked(&command),
        verdict.explain()
    )
}

#[cfg(test)]
mod tests {
    use super::super::rules::{Part, RuleMatch};
    use super::*;

    fn words(program: &str, argv: &[&str]) -> Vec<String> {
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        exec_words(Path::new(program), &argv)
    }

    #[test]
    fn a_program_is_its_basename_and_its_arguments() {
        assert_eq!(
            words("/usr/bin/git", &["git", "push", "origin"]),
            ["git", "push", "origin"]
        );
        // argv[0] is the caller's to choose: the program's path decides.
        assert_eq!(
            words("/usr/bin/git", &["innocent", "push"]),
            ["git", "push"]
        );
        assert_eq!(words("/opt/x/deploy", &[]), ["deploy"]);
    }

    #[test]
    fn an_interpreter_is_judged_as_its_script_and_code_as_itself() {
        assert_eq!(
            words("/bin/bash", &["bash", "-e", "./scripts/deploy.sh", "prod"]),
            ["deploy.sh", "prod"]
        );
        assert_eq!(
            words("/usr/bin/python3", &["python3", "-u", "tool.py", "--x"]),
            ["tool.py", "--x"]
        );
        assert_eq!(
            words("/bin/sh", &["sh", "-c", "git push", "sh"]),
            ["sh", "-c"]
        );
        assert_eq!(
            words("/usr/bin/python3", &["python3", "-m", "pip", "install"]),
            ["pip", "install"]
        );
        assert_eq!(words("/bin/bash", &["bash"]), ["bash"]);
        // A login shell's flags together: code, not a script named by the code.
        assert_eq!(
            words("/bin/bash", &["bash", "-lc", "git push"]),
            ["bash", "-lc"]
        );
        assert_eq!(words("/bin/sh", &["sh", "-ec", "x"]), ["sh", "-ec"]);
        assert_eq!(
            words("/usr/bin/perl", &["perl", "-e", "system 1"]),
            ["perl", "-e"]
        );
        assert_eq!(
            words("/bin/bash", &["bash", "--", "-weird.sh"]),
            ["-weird.sh"]
        );
    }

    #[test]
    fn words_are_quoted_as_sh_reads_them() {
        let line = shell_line(&["echo".into(), "a b".into(), "it's".into(), "".into()]);
        assert_eq!(line, r"echo 'a b' 'it'\''s' ''");
        assert_eq!(shell_line(&["git".into(), "push".into()]), "git push");
    }

    #[derive(Debug)]
    struct NoPush;

    impl CommandRules for NoPush {
        fn judge(&self, script: &str, shell: &str) -> Verdict {
            assert_eq!(shell, "sh");
            let forbidden = script.starts_with("git push");
            let decision = if forbidden {
                Decision::Forbidden
            } else {
                Decision::Allow
            };
            let rule = forbidden.then(|| RuleMatch {
                source: "team.rules:2".into(),
                matched_prefix: vec!["git".into(), "push".into()],
                decision,
                justification: Some("pushing is for people".into()),
            });
            Verdict {
                decision,
                parts: vec![Part {
                    argv: script.split(' ').map(str::to_owned).collect(),
                    opaque: false,
                    decision,
                    rule,
                }],
            }
        }
    }

    #[test]
    fn an_exec_is_judged_by_the_same_rules_and_its_refusal_names_the_rule() {
        let argv: Vec<OsString> = ["git", "push", "origin"].map(OsString::from).to_vec();
        let verdict = judge_exec(&NoPush, Path::new("/usr/bin/git"), &argv);
        assert_eq!(verdict.decision, Decision::Forbidden);
        let line = refused_at_exec(Path::new("/usr/bin/git"), &argv, &verdict);
        assert!(
            line.starts_with(
                "refused at exec: /usr/bin/git push origin (forbidden by rule team.rules:2"
            ),
            "{line}"
        );
        assert!(line.contains("pushing is for people"), "{line}");
        let status: Vec<OsString> = ["git", "status"].map(OsString::from).to_vec();
        let verdict = judge_exec(&NoPush, Path::new("/usr/bin/git"), &status);
        assert_eq!(verdict.decision, Decision::Allow);
    }
}
