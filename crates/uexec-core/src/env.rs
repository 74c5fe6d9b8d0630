//! The environment a command sees (SPEC §9): the server's own, minus anything that looks like
//! a credential, plus variables that keep tools quiet and non-interactive.

use std::collections::BTreeMap;

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
];

/// Name fragments (any case) that mark a variable as a secret not to hand on.
pub const SECRET_NAME_FRAGMENTS: &[&str] = &["KEY", "SECRET", "TOKEN"];

/// How the server's flags adjust the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// Inherited even though the name looks secret.
    pub keep: Vec<String>,
    /// Set (after the forced variables, so they win).
    pub set: Vec<(String, String)>,
    /// Dropped even though inherited or forced.
    pub drop: Vec<String>,
}

/// Whether a variable's name marks it as a secret.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_FRAGMENTS.iter().any(|f| upper.contains(f))
}

impl EnvPolicy {
    /// What a command inherits of the server's environment: everything but secret-looking
    /// names (unless kept) and dropped names.
    pub fn inherited(
        &self,
        server_env: impl IntoIterator<Item = (String, String)>,
    ) -> BTreeMap<String, String> {
        server_env
            .into_iter()
            .filter(|(k, _)| !looks_secret(k) || self.keep.iter().any(|x| x == k))
            .filter(|(k, _)| !self.drop.iter().any(|x| x == k))
            .collect()
    }

    /// Variables set on every command: the forced ones, then the configured ones.
    pub fn overrides(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for (k, v) in FORCED_ENV {
            env.insert((*k).to_owned(), (*v).to_owned());
        }
        for (k, v) in &self.set {
            env.insert(k.clone(), v.clone());
        }
        for k in &self.drop {
            env.remove(k);
        }
        env
    }

    /// The environment of a command, given the server's.
    pub fn command_env(
        &self,
        server_env: impl IntoIterator<Item = (String, String)>,
    ) -> BTreeMap<String, String> {
        let mut env = self.inherited(server_env);
        env.extend(self.overrides());
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secrets_are_dropped_and_forced_values_win() {
        let env = EnvPolicy::default().command_env(vars(&[
            ("MY_API_KEY", "x"),
            ("my_secret_value", "x"),
            ("GH_TOKEN", "x"),
            ("VISIBLE", "yes"),
            ("TERM", "xterm"),
        ]));
        assert!(!env.contains_key("MY_API_KEY"));
        assert!(!env.contains_key("my_secret_value"));
        assert!(!env.contains_key("GH_TOKEN"));
        assert_eq!(env["VISIBLE"], "yes");
        assert_eq!(env["TERM"], "dumb");
        assert_eq!(env["COLORTERM"], "");
        assert_eq!(env["UEXEC"], "1");
    }

    #[test]
    fn flags_keep_set_and_drop() {
        let policy = EnvPolicy {
            keep: vec!["GH_TOKEN".into()],
            set: vec![("TERM".into(), "xterm".into())],
            drop: vec!["PAGER".into()],
        };
        let env = policy.command_env(vars(&[("GH_TOKEN", "t")]));
        assert_eq!(env["GH_TOKEN"], "t");
        assert_eq!(env["TERM"], "xterm");
        assert!(!env.contains_key("PAGER"));
    }
}
