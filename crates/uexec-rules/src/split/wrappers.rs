//! A simple command resolved to the program that runs: wrappers looked through, shells'
//! `-c` strings parsed again, and what cannot be known made opaque.
//!
//! 1. A wrapper (`timeout`, `nice`, `nohup`, `env`, `command`, `builtin`, `exec`, `time`,
//!    `xargs`, `sudo`, `doas`, `stdbuf`, `ionice`, `setsid`, `taskset`, `chrt`, `strace`,
//!    `unbuffer`, `fakeroot`, `chronic`, `rlwrap`) is skipped
//!    with its options and their values (each wrapper's own list) and its positional
//!    arguments (`timeout`'s duration, `env`'s `VAR=x`), and the rest is judged; the
//!    wrapper's own words stay beside it for stricter rules (`forbidden sudo` still holds).
//!    An option a wrapper is not known to take makes the part opaque: the program behind it
//!    is a guess.
//! 2. `xargs CMD` runs CMD with words read from stdin: one [`Word::Expanded`] is appended.
//! 3. A shell (`bash`, `sh`, `zsh`, `dash`, `ksh`, …) with `-c STRING` (`-lc`, `-ec` alike):
//!    STRING is split again as a script, its commands keep the wrappers around it. A shell
//!    given neither `-c` nor a script file reads its script from stdin (a pipe, a here-doc,
//!    a here-string): opaque. `su -c STRING` alike.
//!    A computed program (`$SHELL -c 'git push'`) may be a shell: opaque, and a literal
//!    string after its `-c` is split as well.
//! 4. `eval WORDS`: opaque (its text is computed); when its words are literal, they are
//!    split as a script as well, so a stricter rule on what it runs still applies.
//!    `trap STRING SIG…` runs STRING later: split as a script.
//! 5. `find … -exec CMD … ;` runs CMD: judged as a part of its own (`{}` is computed).
//! 6. `source FILE` / `. FILE` are ordinary commands: rules may name the files they trust.
//! 7. `git -C dir push`: git's global options before its subcommand are dropped for the
//!    stricter rules (`git push`'s forbidden holds it); an allow reads the words as written.

use super::specs::{spec, Spec};
use super::{self as split, Command, Context, Word};

/// Programs that read a script from `-c`, a file, or stdin.
const SHELLS: &[&str] = &[
    "bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "busybox",
];

/// Shells whose `-c` scripts the bash grammar reads.
pub(crate) fn posix_like(shell: &str) -> bool {
    let name = basename(shell);
    SHELLS.contains(&name) && name != "busybox"
}

pub(crate) fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Where the wrapped program starts in `words`, if it has one, and whether an option the
/// wrapper is not known to take was skipped (a guess).
fn unwrap(spec: &Spec, words: &[Word]) -> (Option<usize>, bool) {
    let mut unknown = false;
    let mut positional = spec.positional;
    let mut i = 1;
    while i < words.len() {
        let Some(word) = words[i].literal() else {
            if positional > 0 {
                positional -= 1;
                i += 1;
                continue;
            }
            if spec.assignments && is_assignment(words[i].text()) {
                i += 1; // `env PATH=$PATH git push`
                continue;
            }
            // `env $VARS git push`: the program may be anywhere from here.
            unknown = true;
            i += 1;
            continue;
        };
        if word == "--" {
            i += 1;
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            if long.contains('=') || spec.long_flag.contains(&name) {
                i += 1;
            } else if spec.long_value.contains(&name) {
                i += 2;
            } else {
                unknown = true;
                i += 1;
            }
            continue;
        }
        if word.len() > 1 && word.starts_with('-') {
            let cluster = &word[1..];
            if spec.numeric && cluster.chars().all(|c| c.is_ascii_digit()) {
                i += 1;
                continue;
            }
            let mut skip = 1;
            for (at, c) in cluster.char_indices() {
                if spec.short_value.contains(c) {
                    if at + c.len_utf8() == cluster.len() {
                        skip = 2;
                    }
                    break;
                } else if !spec.short_flag.contains(c) {
                    unknown = true;
                }
            }
            i += skip;
            continue;
        }
        if word == "-" && spec.assignments {
            i += 1; // `env -` is `env -i`
            continue;
        }
        if positional > 0 {
            positional -= 1;
            i += 1;
            continue;
        }
        if spec.assignments && is_assignment(word) {
            i += 1;
            continue;
        }
        break;
    }
    ((i < words.len()).then_some(i), unknown)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// `command -v git` looks git up, it does not run it; `env -S STRING` splits STRING itself.
fn runs_nothing_or_unknowable(program: &str, words: &[Word]) -> Option<bool> {
    let flags = words[1..]
        .iter()
        .filter_map(Word::literal)
        .take_while(|w| w.starts_with('-') && *w != "--");
    match program {
        "command" => {
            let mut lookup = false;
            for flag in flags {
                lookup |= flag.contains('v') || flag.contains('V');
            }
            lookup.then_some(false)
        }
        "env" => {
            let mut split_string = false;
            for flag in flags {
                split_string |= flag.starts_with("--split-string")
                    || (!flag.starts_with("--") && flag.contains('S'));
            }
            split_string.then_some(true)
        }
        _ => None,
    }
}

/// Resolves one simple command (its words as parsed) into parts, pushed onto `out`.
pub(crate) fn resolve(words: Vec<Word>, text: String, ctx: &Context, out: &mut Vec<Command>) {
    let mut wrappers = ctx.wrappers.clone();
    let mut opaque = ctx.opaque;
    let mut words = words;
    loop {
        let Some(first) = words.first() else {
            return;
        };
        let Some(name) = first.literal() else {
            // `$(echo git) push`, `$CMD push`: the program is computed. It may be a shell
            // (`$SHELL -c 'git push'`): a literal string after a `-c` is judged as well.
            let script = match shell_script("sh", &words) {
                ShellScript::String(Some(script)) => Some(script),
                _ => None,
            };
            let nested = Context {
                wrappers: wrappers.clone(),
                opaque,
                depth: ctx.depth + 1,
            };
            out.push(Command {
                words,
                wrappers,
                opaque: true,
                text,
            });
            if let Some(script) = script {
                split::split(&script, &nested, out);
            }
            return;
        };
        let program = basename(name);

        if let Some(spec) = spec(program) {
            if let Some(unknowable) = runs_nothing_or_unknowable(program, &words) {
                out.push(Command {
                    words,
                    wrappers,
                    opaque: opaque || unknowable,
                    text,
                });
                return;
            }
            let (start, unknown) = unwrap(&spec, &words);
            let Some(start) = start else {
                // `env`, `nohup`, `exec >log`: no program behind it.
                out.push(Command {
                    words,
                    wrappers,
                    opaque: opaque || unknown,
                    text,
                });
                return;
            };
            opaque |= unknown;
            let xargs = program == "xargs";
            let mut inner = words[start..].to_vec();
            if xargs {
                inner.push(Word::Expanded("{words from stdin}".into()));
            }
            wrappers.push(words);
            words = inner;
            continue;
        }

        if SHELLS.contains(&program) || program == "su" {
            match shell_script(program, &words) {
                ShellScript::String(Some(script)) => {
                    let nested = Context {
                        wrappers: {
                            let mut w = wrappers.clone();
                            w.push(words.clone());
                            w
                        },
                        opaque,
                        depth: ctx.depth + 1,
                    };
                    let before = out.len();
                    split::split(&script, &nested, out);
                    if out.len() == before {
                        // `bash -c ''`: the shell itself is the part.
                        out.push(Command {
                            words,
                            wrappers,
                            opaque,
                            text,
                        });
                    }
                }
                ShellScript::String(None) | ShellScript::Stdin => out.push(Command {
                    words,
                    wrappers,
                    opaque: true,
                    text,
                }),
                ShellScript::File => out.push(Command {
                    words,
                    wrappers,
                    opaque,
                    text,
                }),
            }
            return;
        }

        match program {
            "eval" => {
                let literal: Option<Vec<String>> = words[1..]
                    .iter()
                    .map(|w| w.literal().map(str::to_owned))
                    .collect();
                let nested = Context {
                    wrappers: wrappers.clone(),
                    opaque,
                    depth: ctx.depth + 1,
                };
                out.push(Command {
                    words,
                    wrappers,
                    opaque: true,
                    text,
                });
                if let Some(literal) = literal {
                    split::split(&literal.join(" "), &nested, out);
                }
            }
            "trap" => {
                let action = words.get(1).and_then(Word::literal).map(str::to_owned);
                let nested = Context {
                    wrappers: wrappers.clone(),
                    opaque,
                    depth: ctx.depth + 1,
                };
                let action_expanded = matches!(words.get(1), Some(Word::Expanded(_)));
                out.push(Command {
                    words,
                    wrappers,
                    opaque: opaque || action_expanded,
                    text,
                });
                if let Some(action) = action.filter(|a| !a.starts_with('-')) {
                    split::split(&action, &nested, out);
                }
            }
            "find" => {
                let execs = find_execs(&words);
                let nested = Context {
                    wrappers: wrappers.clone(),
                    opaque,
                    depth: ctx.depth,
                };
                out.push(Command {
                    words,
                    wrappers,
                    opaque,
                    text: text.clone(),
                });
                for exec in execs {
                    resolve(exec, text.clone(), &nested, out);
                }
            }
            "git" => {
                // `git -C dir push`: git's own options before its subcommand would hide it
                // from `git push`'s rule; the command without them is judged as well, by
                // the stricter rules (an allow still reads the words as written).
                if let Some(bare) = git_without_global_options(&words) {
                    wrappers.push(bare);
                }
                out.push(Command {
                    words,
                    wrappers,
                    opaque,
                    text,
                })
            }
            _ => out.push(Command {
                words,
                wrappers,
                opaque,
                text,
            }),
        }
        return;
    }
}

/// `git`'s words without its global options (those before the subcommand), if it has any.
fn git_without_global_options(words: &[Word]) -> Option<Vec<Word>> {
    const WITH_VALUE: &[&str] = &[
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--exec-path",
        "--config-env",
        "--super-prefix",
        "--list-cmds",
    ];
    let mut i = 1;
    while let Some(word) = words.get(i) {
        let Some(word) = word.literal() else {
            break;
        };
        if !word.starts_with('-') || word == "--" {
            break;
        }
        let name = word.split('=').next().unwrap_or(word);
        i += if WITH_VALUE.contains(&name) && !word.contains('=') {
            2
        } else {
            1
        };
    }
    (i > 1).then(|| {
        let mut bare = vec![words[0].clone()];
        bare.extend(words.iter().skip(i).cloned());
        bare
    })
}

enum ShellScript {
    /// `-c STRING`: the string if it is literal.
    String(Option<String>),
    /// A script file: the shell's words are the part.
    File,
    /// No `-c` and no file: the script comes from stdin.
    Stdin,
}

fn shell_script(program: &str, words: &[Word]) -> ShellScript {
    let mut args = words[1..].iter();
    if program == "busybox" {
        // `busybox sh -c …`
        match args.next().and_then(Word::literal) {
            Some(applet) if SHELLS.contains(&applet) && applet != "busybox" => {}
            _ => return ShellScript::File,
        }
    }
    let mut command_flag = false;
    while let Some(word) = args.next() {
        let Some(word) = word.literal() else {
            return if command_flag {
                ShellScript::String(None)
            } else {
                ShellScript::File
            };
        };
        if program == "su" {
            if word == "-c" || word == "--command" {
                return ShellScript::String(args.next().and_then(Word::literal).map(str::to_owned));
            }
            if let Some(script) = word.strip_prefix("--command=") {
                return ShellScript::String(Some(script.to_owned()));
            }
            continue;
        }
        if word == "--" || word == "-" {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            if matches!(long, "rcfile" | "init-file") {
                args.next();
            }
            continue;
        }
        if let Some(cluster) = word.strip_prefix('-').or_else(|| word.strip_prefix('+')) {
            if cluster.contains('c') {
                command_flag = true;
            }
            if cluster.contains('s') && !command_flag {
                return ShellScript::Stdin;
            }
            if cluster.ends_with('o') || cluster.ends_with('O') {
                args.next(); // `-o pipefail`
            }
            continue;
        }
        return if command_flag {
            ShellScript::String(Some(word.to_owned()))
        } else {
            ShellScript::File
        };
    }
    match (program, command_flag) {
        ("su", _) => ShellScript::File,
        (_, true) => match args.next() {
            Some(Word::Literal(script)) => ShellScript::String(Some(script.clone())),
            _ => ShellScript::String(None),
        },
        (_, false) => match args.next() {
            Some(_) => ShellScript::File,
            None => ShellScript::Stdin,
        },
    }
}

/// The commands `find` runs: each `-exec`/`-execdir`/`-ok`/`-okdir` up to `;` or `+`.
fn find_execs(words: &[Word]) -> Vec<Vec<Word>> {
    let mut execs = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if matches!(
            words[i].literal(),
            Some("-exec" | "-execdir" | "-ok" | "-okdir")
        ) {
            let mut exec = Vec::new();
            i += 1;
            while i < words.len() && !matches!(words[i].literal(), Some(";" | "+")) {
                exec.push(match &words[i] {
                    Word::Literal(s) if s.contains("{}") => Word::Expanded(s.clone()),
                    other => other.clone(),
                });
                i += 1;
            }
            if !exec.is_empty() {
                execs.push(exec);
            }
        }
        i += 1;
    }
    execs
}
