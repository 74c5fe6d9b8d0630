//! Which shells get a snapshot (step 1 of the module docs), and which files their login
//! reads (step 4). Here, apart, because it is what the table keys on and what the build
//! stamps, and it knows nothing of either: only a shell's name, the binary it resolves to,
//! and where its profile lives.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::backend::local::find_program;
use crate::env::Environment;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum ShellKind {
    Bash,
    /// dash: the environment only.
    Dash,
}

/// The shell a spawn names, if it can have a snapshot, with the program it resolves to.
pub(super) fn shell_kind(shell: &str, env: &Environment) -> Option<(ShellKind, PathBuf)> {
    let program = find_program(shell, env.get(OsStr::new("PATH")).map(OsString::as_os_str))?;
    let real = std::fs::canonicalize(&program).ok()?;
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    match (name(&program)?.as_str(), name(&real)?.as_str()) {
        ("bash", "bash") => Some((ShellKind::Bash, program)),
        ("sh" | "dash", "dash") => Some((ShellKind::Dash, program)),
        _ => None,
    }
}

/// The files a login shell of this kind reads, for invalidation.
pub(super) fn profile_files(kind: ShellKind, home: Option<&OsStr>) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["/etc/profile", "/etc/profile.d"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let home_files: &[&str] = match kind {
        ShellKind::Bash => {
            files.push("/etc/bash.bashrc".into());
            &[".bash_profile", ".bash_login", ".profile", ".bashrc"]
        }
        ShellKind::Dash => &[".profile"],
    };
    if let Some(home) = home {
        files.extend(home_files.iter().map(|f| Path::new(home).join(f)));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bash_and_dash_get_snapshots() {
        let env: Environment = [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))].into();
        assert!(matches!(
            shell_kind("bash", &env),
            Some((ShellKind::Bash, _))
        ));
        if std::fs::canonicalize("/bin/sh").is_ok_and(|p| p.ends_with("dash")) {
            assert!(matches!(
                shell_kind("/bin/sh", &env),
                Some((ShellKind::Dash, _))
            ));
        }
        assert!(shell_kind("/no/such/shell", &env).is_none());
    }
}
