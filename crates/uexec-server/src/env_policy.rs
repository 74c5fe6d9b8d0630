//! The environment of a started process.
//!
//! Without `envPolicy` the process gets exactly the request's `env`, nothing of the server's
//! own (Codex does the same). With one, as Codex's shell environment policy does:
//! 1. start from the server's variables: all, the core set, or none (`inherit`);
//! 2. unless `ignoreDefaultExcludes`, drop names that look secret (uexec's rule,
//!    [`uexec_core::env::SECRET_RULE`]; Codex drops only `KEY`, `SECRET` and `TOKEN`);
//! 3. drop names matching any `exclude` pattern;
//! 4. apply `set`;
//! 5. when `includeOnly` is non-empty, keep only names matching one of its patterns;
//! 6. overlay the request's `env` (it wins).
//!
//! Patterns are case-insensitive wildcards: `*` any run, `?` any one character.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use uexec_core::env::{looks_secret, Environment};
use uexec_protocol::{EnvPolicy, EnvPolicyInherit};

/// Variables `inherit: core` keeps.
const CORE_VARIABLES: [&str; 9] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP",
];
/// The environment of a process from the request's `env`, its optional policy and the
/// server's own variables (byte strings: a variable that is not UTF-8 passes unchanged).
pub fn build_env(
    env: &BTreeMap<String, String>,
    policy: Option<&EnvPolicy>,
    server_env: impl IntoIterator<Item = (OsString, OsString)>,
) -> Environment {
    let request_env = env.iter().map(|(k, v)| (k.into(), v.into()));
    let Some(policy) = policy else {
        return request_env.collect();
    };
    let matches = |pattern: &String, name: &OsStr| wildcard_match(pattern, &name.to_string_lossy());
    let mut out: Environment = match policy.inherit {
        EnvPolicyInherit::All => server_env.into_iter().collect(),
        EnvPolicyInherit::Core => server_env
            .into_iter()
            .filter(|(k, _)| CORE_VARIABLES.iter().any(|c| OsStr::new(c) == k))
            .collect(),
        EnvPolicyInherit::None => Environment::new(),
    };
    if !policy.ignore_default_excludes {
        out.retain(|k, _| !looks_secret(k));
    }
    out.retain(|k, _| !policy.exclude.iter().any(|p| matches(p, k)));
    out.extend(policy.set.iter().map(|(k, v)| (k.into(), v.into())));
    if !policy.include_only.is_empty() {
        out.retain(|k, _| policy.include_only.iter().any(|p| matches(p, k)));
    }
    out.extend(request_env);
    out
}

/// Case-insensitive wildcard match of a whole name.
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().flat_map(char::to_lowercase).collect();
    let n: Vec<char> = name.chars().flat_map(char::to_lowercase).collect();
    // Iterative matcher with one backtrack point (the last `*`).
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn os(pairs: &[(&str, &str)]) -> Environment {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn without_a_policy_the_env_is_exact() {
        let env = vars(&[("A", "1")]);
        assert_eq!(
            build_env(&env, None, os(&[("PATH", "/bin")])),
            os(&[("A", "1")])
        );
    }

    #[test]
    fn policy_inherits_filters_sets_and_overlays() {
        let server = os(&[
            ("PATH", "/bin"),
            ("API_KEY", "k"),
            ("DB_PASSWORD", "p"),
            ("HOME", "/h"),
            ("X", "x"),
        ]);
        let policy = EnvPolicy {
            inherit: EnvPolicyInherit::All,
            ignore_default_excludes: false,
            exclude: vec!["x".into()],
            set: vars(&[("S", "s"), ("HOME", "/set")]).into_iter().collect(),
            include_only: vec![],
        };
        let env = vars(&[("HOME", "/env")]);
        assert_eq!(
            build_env(&env, Some(&policy), server.clone()),
            os(&[("HOME", "/env"), ("PATH", "/bin"), ("S", "s")])
        );
        let core = EnvPolicy {
            inherit: EnvPolicyInherit::Core,
            ignore_default_excludes: true,
            exclude: vec![],
            set: BTreeMap::new(),
            include_only: vec!["P*".into()],
        };
        assert_eq!(
            build_env(&BTreeMap::new(), Some(&core), server),
            os(&[("PATH", "/bin")])
        );
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match("*KEY*", "openai_api_key"));
        assert!(wildcard_match("a?c", "ABC"));
        assert!(wildcard_match("*", ""));
        assert!(!wildcard_match("a*b", "acbx"));
        assert!(wildcard_match("a*b*c", "aXbYbZc"));
    }
}
