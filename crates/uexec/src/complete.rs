//! `uexec completions SHELL`: clap_complete's script, plus the sessions.
//!
//! clap_complete writes a static script from the clap tree: it completes verbs and flags,
//! never what a verb's SESSION argument can be. Here the script is given that: for bash,
//! zsh and fish, a verb that takes a session (every positional whose value name is
//! `SESSION`: wait, kill, send, poll, logs, attach, rm, keep, pause, resume) completes the
//! ids and names `uexec ls -a --json` lists. `ls` starts no daemon (no daemon, no
//! candidates), asks the one the line names with `--socket`, and answers in milliseconds;
//! it is run only when the word being completed is a session (not a flag, not a flag's
//! value, not a verb's second argument). Other shells get clap_complete's script as it is.
//!
//! The verbs, whether they take several sessions, and their flags that take a value come
//! from the clap tree, so a new verb with a SESSION is completed without a change here.

use clap_complete::Shell;

/// A verb that takes sessions.
struct SessionVerb {
    name: String,
    /// Several sessions (`kill`, `rm`), or one and then other arguments (`send`).
    many: bool,
    /// Its flags that take a value (`--signal`, `-s`), the global ones included.
    takes: Vec<String>,
}

/// The completion script of `shell` for `cmd`, named `bin`.
pub fn script(shell: Shell, cmd: &mut clap::Command, bin: &str) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, cmd, bin, &mut out);
    let base = String::from_utf8_lossy(&out).into_owned();
    cmd.build();
    let verbs = session_verbs(cmd);
    let globals = value_flags(cmd);
    let script = match shell {
        Shell::Bash => bash(&base, &verbs, &globals, bin),
        Shell::Zsh => zsh(&base, &verbs, bin),
        Shell::Fish => fish(&base, &verbs, &globals, bin),
        _ => base,
    };
    script.into_bytes()
}

fn session_verbs(cmd: &clap::Command) -> Vec<SessionVerb> {
    cmd.get_subcommands()
        .filter_map(|sub| {
            let session = sub.get_positionals().next().filter(|a| {
                a.get_value_names()
                    .is_some_and(|names| names.iter().any(|n| n.as_str() == "SESSION"))
            })?;
            let many = session
                .get_num_args()
                .is_some_and(|range| range.max_values() > 1);
            Some(SessionVerb {
                name: sub.get_name().to_owned(),
                many,
                takes: value_flags(sub),
            })
        })
        .collect()
}

/// The flags of `cmd` that take a value, as they are typed (`--signal`, `-s`).
fn value_flags(cmd: &clap::Command) -> Vec<String> {
    let mut flags = Vec::new();
    for arg in cmd.get_arguments().filter(|a| !a.is_positional()) {
        if !arg.get_action().takes_values() {
            continue;
        }
        if let Some(long) = arg.get_long() {
            flags.push(format!("--{long}"));
        }
        if let Some(short) = arg.get_short() {
            flags.push(format!("-{short}"));
        }
    }
    flags
}

/// Bash: a function around clap_complete's `_BIN` that completes a session where one goes.
fn bash(base: &str, verbs: &[SessionVerb], globals: &[String], bin: &str) -> String {
    let f = bin.replace('-', "_");
    let cases: String = verbs
        .iter()
        .map(|v| {
            format!(
                "        {}) many={}; takes=\" {} \" ;;\n",
                v.name,
                u8::from(v.many),
                v.takes.join(" ")
            )
        })
        .collect();
    let register = format!("complete -F _{f} ");
    if base.matches(&register).count() != 2 {
        // Not the script this was written for (by bash version, it registers `_BIN` twice):
        // clap_complete's as it is (tests/it/completion.rs fails then).
        return base.to_owned();
    }
    let base = base.replace(&register, &format!("complete -F _{f}_with_sessions "));
    format!(
        r#"{base}
# uexec: the ids and names of sessions (`{bin} ls -a --json`, which starts no daemon).
_{f}_sessions() {{
    local cmd=$1 line
    [[ $cmd == "~/"* ]] && cmd=$HOME/${{cmd#"~/"}}
    local -a args=(ls -a --json)
    [[ -n $2 ]] && args+=(--socket "$2")
    while IFS= read -r line; do
        if [[ $line =~ ^\ *\"session_id\":\ ([0-9]+),?$ ]]; then
            printf '%s\n' "${{BASH_REMATCH[1]}}"
        elif [[ $line =~ ^\ *\"name\":\ \"([A-Za-z0-9._-]+)\",?$ ]]; then
            printf '%s\n' "${{BASH_REMATCH[1]}}"
        fi
    done < <("$cmd" "${{args[@]}}" 2>/dev/null </dev/null)
}}

# uexec: a session where a verb takes one, else clap_complete's _{f}.
_{f}_with_sessions() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} verb= word socket= many takes value=0 n=0 i=1
    local globals=" {globals} "
    while (( i < COMP_CWORD )); do
        word=${{COMP_WORDS[i]}}
        (( i++ ))
        if (( value )); then
            [[ $word == = ]] || value=0
        elif [[ $globals == *" $word "* ]]; then
            value=1
        elif [[ $word != -* ]]; then
            verb=$word
            break
        fi
    done
    case $verb in
{cases}        *) _{f} "$@"; return ;;
    esac
    while (( i < COMP_CWORD )); do
        word=${{COMP_WORDS[i]}}
        if (( value )); then
            if [[ $word != = ]]; then
                value=0
                [[ ${{COMP_WORDS[i-1]}} == = ]] && word=${{COMP_WORDS[i-2]}}=$word || word=${{COMP_WORDS[i-1]}}=$word
                [[ $word == --socket=* ]] && socket=${{word#--socket=}}
            fi
        elif [[ $word == --socket=* ]]; then
            socket=${{word#--socket=}}
        elif [[ $takes == *" $word "* ]]; then
            value=1
        elif [[ $word != -* ]]; then
            (( n++ ))
        fi
        (( i++ ))
    done
    if (( value )) || [[ $cur == -* || $cur == = ]] || (( n > 0 && ! many )); then
        _{f} "$@"
        return
    fi
    compopt +o default +o bashdefault 2>/dev/null
    COMPREPLY=( $(compgen -W "$(_{f}_sessions "${{COMP_WORDS[0]}}" "$socket")" -- "$cur") )
}}
"#,
        globals = globals.join(" "),
    )
}

/// Zsh: the SESSION arguments of clap_complete's `_arguments` specs complete with
/// `_BIN_sessions`.
fn zsh(base: &str, verbs: &[SessionVerb], bin: &str) -> String {
    let f = bin.replace('-', "_");
    let mut verb = "";
    let mut done = 0;
    let mut lines = Vec::new();
    for line in base.lines() {
        if let Some(name) = line.strip_prefix('(').and_then(|l| l.strip_suffix(')')) {
            verb = name;
        }
        let session = verbs.iter().any(|v| v.name == verb)
            && (line.starts_with("':") || line.starts_with("'*::"))
            && line.ends_with(":_default' \\")
            && lines.last().is_some_and(|l: &String| !l.starts_with("':"));
        if session {
            let cut = line.len() - ":_default' \\".len();
            lines.push(format!("{}:_{f}_sessions' \\", &line[..cut]));
            done += 1;
        } else {
            lines.push(line.to_owned());
        }
    }
    // Defined before the script's last lines, which call `_BIN` at once when zsh autoloads
    // the file as `_BIN` from its fpath.
    let mut text = lines.join("\n");
    let last = format!("\nif [ \"$funcstack[1]\" = \"_{f}\" ]; then");
    let at = match text.rfind(&last) {
        // Not the script this was written for: clap_complete's as it is (the test fails).
        Some(at) if done == verbs.len() => at,
        _ => return base.to_owned(),
    };
    let tail = text.split_off(at);
    format!(
        r#"{text}

# uexec: the ids and names of sessions (`{bin} ls -a --json`, which starts no daemon).
_{f}_sessions() {{
    local line
    local -a ids args
    args=(ls -a --json)
    local at=${{words[(I)--socket]}}
    (( at )) && args+=(--socket ${{words[at+1]}})
    for line in ${{(f)"$(${{service:-{bin}}} $args 2>/dev/null </dev/null)"}}; do
        if [[ $line =~ '^ *"session_id": ([0-9]+),?$' ]]; then
            ids+=($match[1])
        elif [[ $line =~ '^ *"name": "([A-Za-z0-9._-]+)",?$' ]]; then
            ids+=($match[1])
        fi
    done
    compadd -a ids
}}
{tail}
"#
    )
}

/// Fish: a `complete` line per verb that takes a session.
fn fish(base: &str, verbs: &[SessionVerb], globals: &[String], bin: &str) -> String {
    let f = bin.replace('-', "_");
    let lines: String = verbs
        .iter()
        .map(|v| {
            format!(
                "complete -c {bin} -n \"__fish_{f}_wants_session {} {} {}\" -f -a \"(__fish_{f}_sessions)\"\n",
                v.name,
                u8::from(v.many),
                v.takes.join(" ")
            )
        })
        .collect();
    format!(
        r#"{base}
# uexec: the ids and names of sessions (`{bin} ls -a --json`, which starts no daemon).
function __fish_{f}_sessions
    set -l words (commandline -opc)
    set -l args ls -a --json
    if set -l at (contains -i -- --socket $words)
        set -a args --socket $words[(math $at + 1)]
    end
    $words[1] $args 2>/dev/null </dev/null | string match -r -g '^\s*"(?:session_id|name)": "?([A-Za-z0-9._-]+)"?,?$'
end

# uexec: whether the word being completed is VERB's session. argv: VERB, 1 when it takes
# several, then its flags that take a value.
function __fish_{f}_wants_session
    set -l verb $argv[1]
    set -l many $argv[2]
    set -l takes $argv[3..-1]
    set -l globals {globals}
    set -l words (commandline -opc)
    set -l seen 0
    set -l value 0
    set -l n 0
    for word in $words[2..-1]
        if test $value = 1
            set value 0
        else if test $seen = 0
            if contains -- $word $globals
                set value 1
            else if not string match -q -- '-*' $word
                test "$word" = "$verb"; or return 1
                set seen 1
            end
        else if contains -- $word $takes
            set value 1
        else if not string match -q -- '-*' $word
            set n (math $n + 1)
        end
    end
    test $seen = 1 -a $value = 0; or return 1
    string match -q -- '-*' (commandline -ct); and return 1
    test $many = 1 -o $n = 0
end

{lines}"#,
        globals = globals.join(" "),
    )
}
