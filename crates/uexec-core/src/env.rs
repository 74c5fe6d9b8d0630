//! The environment a command sees (SPEC §9): the server's own, minus anything that looks like
//! a credential, plus variables that keep tools quiet and non-interactive.
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
    /// What a command inherits of the server's environment: everything but secret-looking
    /// names (unless kept) and dropped names.
    pub fn inherited(
        &self,
        server_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Environment {
        server_env
            .into_iter()
            .filter(|(k, _)| !looks_secret(k) || listed(&self.keep, k))
            .filter(|(k, _)| !listed(&self.drop, k))
            .collect()
    }

    /// Variables set on every command (on a PTY when `tty`): the forced ones, then the
    /// configured ones.
    pub fn overrides(&self, tty: bool) -> Environment {
        let mut env = Environment::new();
        for (k, v) in FORCED_ENV {
            env.insert((*k).into(), (*v).into());
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
        env.extend(self.overrides(tty));
        env
    }
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
        };
        let env = policy.command_env(vars(&[("GH_TOKEN", "t")]), true);
        assert_eq!(get(&env, "GH_TOKEN"), Some("t"));
        assert_eq!(get(&env, "TERM"), Some("xterm"));
        assert_eq!(get(&env, "PAGER"), None);
    }

    #[test]
    fn a_persons_pty_sessions_get_a_real_term_and_their_pipe_sessions_dumb() {
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
