//! The environment a command sees (SPEC §9): for an agent's commands, the server's own minus
//! anything that looks like a credential, plus variables that keep tools quiet and
//! non-interactive; for a person's own (`uexec run`), the person's environment as it is
//! ([`EnvPolicy::person`]).
//!
//! A login shell keeps the caller's PATH across its profile (which may reset it: Debian's
//! `/etc/profile` does): the caller's entries in their order, and what the profile added
//! where it put it ([`merge_path`]). The planned environment carries the caller's PATH in
//! [`CALLER_PATH_VAR`]; a snapshot's replay merges it in Rust, and a real login shell runs
//! [`after_login_profile`]'s line before the command, which merges it after the profile and
//! unsets the variable.
//!
//! Names and values are `OsString`s end to end: a variable that is not UTF-8 (a Latin-1
//! `PWD`, say) is handed on byte for byte, never decoded, and never a reason to fail.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// The environment of one process, by name.
pub type Environment = BTreeMap<OsString, OsString>;

/// Variables forced on every command, whatever the server's environment says.
pub const FORCED_ENV: &[(&str, &str)] = &[
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
    ("LANG", "C.UTF-8"),
    ("LC_CTYPE", "C.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("COLORTERM", ""),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GH_PAGER", "cat"),
    ("UEXEC", "1"),
    // Beyond the SPEC: Python writes as it goes on a pipe too, so a dev server's banner
    // reaches the window it is printed in, not the exit.
    ("PYTHONUNBUFFERED", "1"),
];

/// `TERM` of the PTY sessions people start (see [`EnvPolicy::pty_term`]): full-screen
/// programs (`top`, `vim`) draw for the person who attaches, as in their own terminal.
pub const PERSON_PTY_TERM: &str = "xterm-256color";

/// Name fragments (any case, anywhere in the name) that mark a variable as a secret.
pub const SECRET_NAME_FRAGMENTS: &[&str] = &[
    "KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE",
    "COOKIE",
];

/// Name suffixes (any case) that mark a variable as a secret: `GITHUB_PAT`, `NPM_AUTH`.
pub const SECRET_NAME_SUFFIXES: &[&str] = &["_PAT", "_AUTH"];

/// The rule in words, for `--help` and error messages.
pub const SECRET_RULE: &str = "names containing KEY, SECRET, TOKEN, PASSWORD, PASSWD, \
    CREDENTIAL, PRIVATE or COOKIE, or ending in _PAT or _AUTH (any case)";

/// The same rule as exec-server `exclude` wildcards, for servers on other machines.
pub fn secret_patterns() -> Vec<String> {
    SECRET_NAME_FRAGMENTS
        .iter()
        .map(|f| format!("*{f}*"))
        .chain(SECRET_NAME_SUFFIXES.iter().map(|s| format!("*{s}")))
        .collect()
}

/// How the server's flags adjust the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// A person's own commands (`uexec run`): their environment as it is, secrets and
    /// colours included; only `UEXEC=1` is set, `PYTHONUNBUFFERED=1` on pipes when they
    /// have none, and on a PTY the `TERM` of their terminal (else `pty_term`). `false`: an
    /// agent's, with the hygiene (secret-looking names dropped, [`FORCED_ENV`]).
    pub person: bool,
    /// Inherited even though the name looks secret.
    pub keep: Vec<String>,
    /// Set (after the forced variables, so they win).
    pub set: Vec<(String, String)>,
    /// Dropped even though inherited or forced.
    pub drop: Vec<String>,
    /// `TERM` of PTY sessions instead of the forced `dumb`, unless `set` names one. `None`
    /// (SPEC §9, as Codex does): `dumb` for every command. People's sessions get
    /// [`PERSON_PTY_TERM`]; a pipe session's `TERM` is `dumb` all the same.
    pub pty_term: Option<String>,
}

/// Whether a variable's name marks it as a secret ([`SECRET_RULE`]).
pub fn looks_secret(name: &OsStr) -> bool {
    // On the bytes, without a copy: every command's environment passes through here.
    let name = name.as_bytes();
    let contains = |f: &str| {
        name.windows(f.len())
            .any(|w| w.eq_ignore_ascii_case(f.as_bytes()))
    };
    SECRET_NAME_FRAGMENTS.iter().any(|f| contains(f))
        || SECRET_NAME_SUFFIXES.iter().any(|s| {
            name.len() >= s.len() && name[name.len() - s.len()..].eq_ignore_ascii_case(s.as_bytes())
        })
}

fn listed(names: &[String], name: &OsStr) -> bool {
    names.iter().any(|n| OsStr::new(n) == name)
}

impl EnvPolicy {
    /// The policy of a person's own commands ([`Self::person`]).
    pub fn for_person() -> Self {
        Self {
            person: true,
            pty_term: Some(PERSON_PTY_TERM.to_owned()),
            ..Self::default()
        }
    }

    /// What a command inherits of the server's environment: everything but dropped names
    /// and, for an agent, secret-looking names (unless kept).
    pub fn inherited(
        &self,
        server_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Environment {
        server_env
            .into_iter()
            .filter(|(k, _)| self.person || !looks_secret(k) || listed(&self.keep, k))
            .filter(|(k, _)| !listed(&self.drop, k))
            .collect()
    }

    /// Variables set on every command (on a PTY when `tty`): for an agent the forced ones,
    /// for a person `UEXEC=1` (and `PYTHONUNBUFFERED=1` on pipes); then the configured ones.
    pub fn overrides(&self, tty: bool) -> Environment {
        let mut env = Environment::new();
        if self.person {
            env.insert("UEXEC".into(), "1".into());
            if !tty {
                env.insert("PYTHONUNBUFFERED".into(), "1".into());
            }
        } else {
            for (k, v) in FORCED_ENV {
                env.insert((*k).into(), (*v).into());
            }
        }
        if let (true, Some(term)) = (tty, &self.pty_term) {
            env.insert("TERM".into(), term.into());
        }
        for (k, v) in &self.set {
            env.insert(k.into(), v.into());
        }
        for k in &self.drop {
            env.remove(OsStr::new(k));
        }
        env
    }

    /// The environment of a command (on a PTY when `tty`), given the server's.
    pub fn command_env(
        &self,
        server_env: impl IntoIterator<Item = (OsString, OsString)>,
        tty: bool,
    ) -> Environment {
        let mut env = self.inherited(server_env);
        let mut overrides = self.overrides(tty);
        if self.person {
            // Theirs stands where they have one: their terminal's TERM, their Python.
            let own = |k: &str| env.get(OsStr::new(k)).is_some_and(|v| !v.is_empty());
            for k in ["TERM", "PYTHONUNBUFFERED"] {
                if own(k) && !self.set.iter().any(|(name, _)| name == k) {
                    overrides.remove(OsStr::new(k));
                }
            }
        }
        env.extend(overrides);
        env
    }
}

/// The variable a planned login shell's environment carries the caller's PATH in, until
/// its profile has run ([`after_login_profile`], or a snapshot's replay).
pub const CALLER_PATH_VAR: &str = "UEXEC_CALLER_PATH";

/// The PATH of a login shell, from the caller's and the one its profile left: the caller's
/// entries in the caller's order, and those the profile added where the profile put them,
/// each just before the first entry the caller also has that follows it in the profile's
/// PATH, else at the end. So the caller's tools (a venv, `~/.cargo/bin`, `PATH=/opt/x:$PATH`)
/// stay ahead of whatever a profile that resets PATH puts back, and what it adds in front of
/// the system's (`PATH=$HOME/bin:$PATH`, pyenv's shims) stays in front of it. Each entry once,
/// in its first place; no empty entry (which would mean the working directory).
pub fn merge_path(caller: &OsStr, profile: &OsStr) -> OsString {
    let (caller, profile) = (path_entries(caller), path_entries(profile));
    let shared = |e: &&[u8]| caller.contains(e);
    // What the profile added before its entry `at`: since the shared entry before it.
    let added_before = |at: usize| {
        let from = profile[..at].iter().rposition(shared).map_or(0, |i| i + 1);
        &profile[from..at]
    };
    let mut out: Vec<&[u8]> = Vec::new();
    for entry in &caller {
        if let Some(at) = profile.iter().position(|p| p == entry) {
            out.extend_from_slice(added_before(at));
        }
        out.push(entry);
    }
    out.extend_from_slice(added_before(profile.len()));
    let mut seen: Vec<&[u8]> = Vec::with_capacity(out.len());
    for entry in out {
        if !seen.contains(&entry) {
            seen.push(entry);
        }
    }
    OsStr::from_bytes(&seen.join(&b':')).to_owned()
}

/// A PATH's entries, without the empty ones.
fn path_entries(path: &OsStr) -> Vec<&[u8]> {
    path.as_bytes()
        .split(|&b| b == b':')
        .filter(|e| !e.is_empty())
        .collect()
}

/// Shells that read the POSIX line of [`after_login_profile`] (by name: `/usr/bin/zsh` is
/// `zsh`); a login shell of another (fish, csh) keeps the PATH its profile leaves.
const POSIX_SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "oksh", "ash", "yash", "posh",
];

/// Marks a planned login shell's environment with the caller's PATH ([`CALLER_PATH_VAR`]),
/// when the shell is one that can take it back after its profile; an environment without
/// a PATH (or one of empty entries only) has nothing to keep.
pub fn keep_caller_path(env: &mut Environment, shell: &str) {
    env.remove(OsStr::new(CALLER_PATH_VAR));
    let name = shell.rsplit('/').next().unwrap_or(shell);
    if !POSIX_SHELLS.contains(&name) {
        return;
    }
    let Some(path) = env.get(OsStr::new("PATH")) else {
        return;
    };
    let path = merge_path(path, OsStr::new(""));
    if !path.is_empty() {
        env.insert(CALLER_PATH_VAR.into(), path);
    }
}

/// The line a real login shell runs after its profile and before `script`: PATH becomes
/// [`merge_path`] of [`CALLER_PATH_VAR`] (which [`keep_caller_path`] made: no empty entry,
/// none twice) and the profile's, and the variable (and the line's own) are unset. One
/// line, joined to the script's first by `;`: the script's lines keep their numbers and its
/// aliases expand as they would. POSIX, braced (zsh reads `$a:b` as a modifier), silent
/// under `set -eu`. It gathers, for each caller's entry, what the profile added before it
/// (`since`) and the entry, then what the profile added last, and keeps each entry once.
pub fn after_login_profile(script: &str) -> String {
    const LINE: &str = "if [ -n \"${UEXEC_CALLER_PATH+x}\" ]; then \
        __uexec_all=; __uexec_c=\"${UEXEC_CALLER_PATH}:\"; \
        while [ -n \"${__uexec_c}\" ]; do \
        __uexec_e=\"${__uexec_c%%:*}\"; __uexec_c=\"${__uexec_c#*:}\"; __uexec_since=; \
        case \":${PATH-}:\" in *\":${__uexec_e}:\"*) __uexec_p=\"${PATH-}:\"; \
        while [ -n \"${__uexec_p}\" ]; do \
        __uexec_f=\"${__uexec_p%%:*}\"; __uexec_p=\"${__uexec_p#*:}\"; \
        [ \"${__uexec_f}\" != \"${__uexec_e}\" ] || break; \
        case \":${UEXEC_CALLER_PATH}:\" in *\":${__uexec_f}:\"*) __uexec_since= ;; \
        *) __uexec_since=\"${__uexec_since}:${__uexec_f}\" ;; esac; done ;; esac; \
        __uexec_all=\"${__uexec_all}${__uexec_since}:${__uexec_e}\"; done; \
        __uexec_since=; __uexec_p=\"${PATH-}:\"; \
        while [ -n \"${__uexec_p}\" ]; do \
        __uexec_f=\"${__uexec_p%%:*}\"; __uexec_p=\"${__uexec_p#*:}\"; \
        case \":${UEXEC_CALLER_PATH}:\" in *\":${__uexec_f}:\"*) __uexec_since= ;; \
        *) __uexec_since=\"${__uexec_since}:${__uexec_f}\" ;; esac; done; \
        __uexec_all=\"${__uexec_all}${__uexec_since}:\"; PATH=; \
        while [ -n \"${__uexec_all}\" ]; do \
        __uexec_f=\"${__uexec_all%%:*}\"; __uexec_all=\"${__uexec_all#*:}\"; \
        case \"${__uexec_f}\" in \"\") ;; *) case \":${PATH}:\" in *\":${__uexec_f}:\"*) ;; \
        *) PATH=\"${PATH:+${PATH}:}${__uexec_f}\" ;; esac ;; esac; done; \
        export PATH; unset UEXEC_CALLER_PATH __uexec_all __uexec_c __uexec_e \
        __uexec_since __uexec_p __uexec_f; fi; ";
    format!("{LINE}{script}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn vars(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn get<'a>(env: &'a Environment, k: &str) -> Option<&'a str> {
        env.get(OsStr::new(k)).and_then(|v| v.to_str())
    }

    #[test]
    fn secrets_are_dropped_and_forced_values_win() {
        let env = EnvPolicy::default().command_env(
            vars(&[
                ("MY_API_KEY", "x"),
                ("my_secret_value", "x"),
                ("GH_TOKEN", "x"),
                ("VISIBLE", "yes"),
                ("TERM", "xterm"),
            ]),
            true,
        );
        assert_eq!(get(&env, "MY_API_KEY"), None);
        assert_eq!(get(&env, "my_secret_value"), None);
        assert_eq!(get(&env, "GH_TOKEN"), None);
        assert_eq!(get(&env, "VISIBLE"), Some("yes"));
        assert_eq!(get(&env, "TERM"), Some("dumb"));
        assert_eq!(get(&env, "COLORTERM"), Some(""));
        assert_eq!(get(&env, "UEXEC"), Some("1"));
    }

    #[test]
    fn passwords_credentials_cookies_pats_and_auths_look_secret() {
        for name in [
            "DB_PASSWORD",
            "mysql_pwd_passwd",
            "AWS_CREDENTIALS",
            "GOOGLE_APPLICATION_CREDENTIAL",
            "SSH_PRIVATE",
            "SESSION_COOKIE",
            "GITHUB_PAT",
            "npm_config__auth",
            "NPM_AUTH",
        ] {
            assert!(looks_secret(OsStr::new(name)), "{name}");
        }
        for name in ["PATH", "HOME", "AUTHOR", "PATTERN", "AUTH_URL_BASE", "PWD"] {
            assert!(!looks_secret(OsStr::new(name)), "{name}");
        }
        // Not UTF-8: judged on its bytes all the same.
        assert!(looks_secret(OsStr::from_bytes(b"caf\xe9_token")));
        assert!(looks_secret(OsStr::from_bytes(b"\xffNPM_auth")));
        assert!(!looks_secret(OsStr::from_bytes(b"caf\xe9_PATH")));
    }

    #[test]
    fn the_wildcards_say_the_same_as_the_rule() {
        let patterns = secret_patterns();
        assert!(patterns.contains(&"*PASSWORD*".to_string()));
        assert!(patterns.contains(&"*_PAT".to_string()));
        assert_eq!(
            patterns.len(),
            SECRET_NAME_FRAGMENTS.len() + SECRET_NAME_SUFFIXES.len()
        );
    }

    #[test]
    fn non_utf8_variables_pass_byte_for_byte() {
        let name = OsString::from("PWD");
        let value = OsString::from_vec(b"/tmp/caf\xe9".to_vec());
        let env = EnvPolicy::default().command_env([(name.clone(), value.clone())], false);
        assert_eq!(env.get(&name), Some(&value));
    }

    #[test]
    fn flags_keep_set_and_drop() {
        let policy = EnvPolicy {
            keep: vec!["GH_TOKEN".into()],
            set: vec![("TERM".into(), "xterm".into())],
            drop: vec!["PAGER".into()],
            pty_term: Some(PERSON_PTY_TERM.into()),
            person: false,
        };
        let env = policy.command_env(vars(&[("GH_TOKEN", "t")]), true);
        assert_eq!(get(&env, "GH_TOKEN"), Some("t"));
        assert_eq!(get(&env, "TERM"), Some("xterm"));
        assert_eq!(get(&env, "PAGER"), None);
    }

    #[test]
    fn a_persons_commands_get_their_environment_as_it_is() {
        let person = EnvPolicy::for_person();
        let theirs = || {
            vars(&[
                ("GH_TOKEN", "t"),
                ("AWS_SECRET_ACCESS_KEY", "s"),
                ("TERM", "screen-256color"),
                ("LANG", "fr_FR.UTF-8"),
                ("PAGER", "less"),
            ])
        };
        for tty in [false, true] {
            let env = person.command_env(theirs(), tty);
            assert_eq!(get(&env, "GH_TOKEN"), Some("t"));
            assert_eq!(get(&env, "AWS_SECRET_ACCESS_KEY"), Some("s"));
            assert_eq!(get(&env, "TERM"), Some("screen-256color"), "{tty}");
            assert_eq!(get(&env, "LANG"), Some("fr_FR.UTF-8"));
            assert_eq!(get(&env, "PAGER"), Some("less"));
            assert_eq!(get(&env, "NO_COLOR"), None);
            assert_eq!(get(&env, "COLORTERM"), None);
            assert_eq!(get(&env, "UEXEC"), Some("1"));
        }
        // Output as it comes on a pipe, as on their terminal; theirs where they say.
        assert_eq!(
            get(&person.command_env(theirs(), false), "PYTHONUNBUFFERED"),
            Some("1")
        );
        assert_eq!(
            get(&person.command_env(theirs(), true), "PYTHONUNBUFFERED"),
            None
        );
        let own = person.command_env(vars(&[("PYTHONUNBUFFERED", "")]), false);
        assert_eq!(get(&own, "PYTHONUNBUFFERED"), Some("1"));
        // No TERM of theirs: a PTY gets a real one, a pipe none.
        assert_eq!(
            get(&person.command_env(vars(&[]), true), "TERM"),
            Some(PERSON_PTY_TERM)
        );
        assert_eq!(get(&person.command_env(vars(&[]), false), "TERM"), None);
        // Their flags still count.
        let flagged = EnvPolicy {
            set: vec![("TERM".into(), "xterm".into())],
            drop: vec!["GH_TOKEN".into()],
            ..EnvPolicy::for_person()
        };
        let env = flagged.command_env(theirs(), true);
        assert_eq!(get(&env, "TERM"), Some("xterm"));
        assert_eq!(get(&env, "GH_TOKEN"), None);
        // An agent's, from the same environment: the hygiene.
        let env = EnvPolicy::default().command_env(theirs(), false);
        assert_eq!(get(&env, "GH_TOKEN"), None);
        assert_eq!(get(&env, "NO_COLOR"), Some("1"));
        assert_eq!(get(&env, "PAGER"), Some("cat"));
    }

    /// (caller, profile, merged): the cases of issue 42 and the corners of the rule.
    const MERGES: &[(&str, &str, &str)] = &[
        // A venv (or ~/.cargo/bin, nix, conda) the profile's reset forgot: still first.
        (
            "/venv/bin:/usr/bin:/bin",
            "/usr/local/bin:/usr/bin:/bin:/usr/games",
            "/venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/games",
        ),
        // `PATH=/opt/x:$PATH` first, `PATH=$PATH:/opt/y` last, as the caller had them.
        (
            "/opt/x:/usr/bin:/bin:/opt/y",
            "/usr/local/bin:/usr/bin:/bin",
            "/opt/x:/usr/local/bin:/usr/bin:/bin:/opt/y",
        ),
        // What the profile puts in front of the system's (`$HOME/bin`, pyenv's shims)
        // stays in front of it, behind the caller's own.
        (
            "/venv/bin:/usr/bin:/bin",
            "/h/bin:/h/.pyenv/shims:/usr/bin:/bin",
            "/venv/bin:/h/bin:/h/.pyenv/shims:/usr/bin:/bin",
        ),
        // A profile that only resets: the caller's, then the rest of the profile's.
        ("/tools", "/usr/bin:/bin", "/tools:/usr/bin:/bin"),
        // The caller's order wins where the two disagree.
        (
            "/bin:/usr/bin",
            "/usr/bin:/h/bin:/bin",
            "/h/bin:/bin:/usr/bin",
        ),
        // Each entry once, in its first place; no empty entry anywhere.
        ("/a:/b:/a", "/b:/c:/c", "/a:/b:/c"),
        ("/a:/b:/a", "/b:/c:/c:/a", "/c:/a:/b"),
        (":/a::/b:", "::/c:", "/a:/b:/c"),
        ("", "/usr/bin", "/usr/bin"),
        ("/a", "", "/a"),
        ("", "", ""),
        // Odd names: spaces, glob characters.
        (
            "/my tools/bin:/x*",
            "/[a]:/usr/bin",
            "/my tools/bin:/x*:/[a]:/usr/bin",
        ),
    ];

    #[test]
    fn a_login_path_keeps_the_callers_order_and_the_profiles_additions_where_it_put_them() {
        for (caller, profile, merged) in MERGES {
            assert_eq!(
                merge_path(OsStr::new(caller), OsStr::new(profile)),
                *merged,
                "{caller} + {profile}"
            );
        }
        // Bytes, not text.
        let odd = merge_path(OsStr::from_bytes(b"/caf\xe9"), OsStr::new("/bin"));
        assert_eq!(odd.as_bytes(), b"/caf\xe9:/bin");
    }

    #[test]
    fn only_posix_login_shells_with_a_path_are_marked() {
        let marked = |shell: &str, path: Option<&str>| {
            let mut env: Environment = path
                .map(|p| (OsString::from("PATH"), OsString::from(p)))
                .into_iter()
                .collect();
            keep_caller_path(&mut env, shell);
            get(&env, CALLER_PATH_VAR).map(str::to_owned)
        };
        assert_eq!(
            marked("/bin/bash", Some("/x::/x:/y")).as_deref(),
            Some("/x:/y")
        );
        assert_eq!(marked("zsh", Some("/x")).as_deref(), Some("/x"));
        assert_eq!(marked("sh", Some("/x")).as_deref(), Some("/x"));
        assert_eq!(marked("/usr/bin/fish", Some("/x")), None);
        assert_eq!(marked("bash", None), None);
        assert_eq!(marked("bash", Some("::")), None);
    }

    /// The line a real login runs, in the shells at hand, after a profile that set PATH
    /// (and `set -eu`): PATH is [`merge_path`]'s, the line's variables are gone.
    #[test]
    fn the_line_after_a_profile_merges_as_merge_path_does() {
        let shells = [
            "/bin/sh",
            "/bin/bash",
            "/bin/dash",
            "/usr/bin/zsh",
            "/bin/ksh",
        ];
        for shell in shells.iter().filter(|s| std::path::Path::new(s).exists()) {
            for (caller, profile, merged) in MERGES {
                let mut env = Environment::from([("PATH".into(), OsString::from(caller))]);
                keep_caller_path(&mut env, shell);
                let marked = env.remove(OsStr::new(CALLER_PATH_VAR));
                let script = after_login_profile(
                    "echo \"$PATH\"; echo \"${UEXEC_CALLER_PATH-}${__uexec_all-}${__uexec_c-}\
                     ${__uexec_e-}${__uexec_since-}${__uexec_p-}${__uexec_f-}gone\"",
                );
                let out = std::process::Command::new(shell)
                    .arg("-c")
                    .arg(format!("set -eu; PATH='{profile}'; {script}"))
                    .env_clear()
                    .envs(marked.map(|m| (CALLER_PATH_VAR, m)))
                    .output()
                    .expect("runs");
                // Without a caller's PATH, the line does nothing.
                let merged = if caller.split(':').all(str::is_empty) {
                    profile
                } else {
                    merged
                };
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout),
                    format!("{merged}\ngone\n"),
                    "{shell}: {caller} + {profile}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }

    #[test]
    fn a_pty_term_gives_an_agents_pty_sessions_a_real_term_and_its_pipe_sessions_dumb() {
        let person = EnvPolicy {
            pty_term: Some(PERSON_PTY_TERM.into()),
            ..EnvPolicy::default()
        };
        let server = || vars(&[("TERM", "screen")]);
        assert_eq!(
            get(&person.command_env(server(), true), "TERM"),
            Some("xterm-256color")
        );
        assert_eq!(
            get(&person.command_env(server(), false), "TERM"),
            Some("dumb")
        );
        // An agent's (the SPEC's) PTY sessions stay dumb.
        let agent = EnvPolicy::default();
        assert_eq!(
            get(&agent.command_env(server(), true), "TERM"),
            Some("dumb")
        );
        assert_eq!(get(&agent.overrides(true), "TERM"), Some("dumb"));
        assert_eq!(get(&person.overrides(true), "TERM"), Some("xterm-256color"));
    }
}
