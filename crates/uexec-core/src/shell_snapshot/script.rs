//! The shell text a snapshot writes: the dump command a build's login shell runs after its
//! profile (step 2 of the module docs), and the script `BASH_ENV` names (step 3). Here,
//! apart, because both are pure: bytes in, bytes out, tested without a shell.
//! 1. [`dump_script`] writes the exported variables, then for bash [`STATE_MARKER`] and the
//!    shell state, into the dump file;
//! 2. [`bash_script`] turns that state back into a script: `BASH_ENV` as the profile left
//!    it, functions and aliases, then the profile's options;
//! 3. everything a path or a value puts into either is quoted ([`shell_quote`]).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::shell::ShellKind;

/// Separates the environment from the shell state in a dump (NUL-framed: no variable or
/// function can contain a NUL).
pub(super) const STATE_MARKER: &[u8] = b"\0UEXEC_SHELL_SNAPSHOT_STATE\0";

/// `'…'`-quoted for a POSIX shell, any bytes.
fn shell_quote(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'\'');
    for &b in s {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

/// The `-c` script a build's login shell runs after its profile.
pub(super) fn dump_script(kind: ShellKind, dump: &Path) -> Vec<u8> {
    let mut s = b"{ command -p env -0".to_vec();
    if kind == ShellKind::Bash {
        s.extend_from_slice(
            b"; printf '\\0UEXEC_SHELL_SNAPSHOT_STATE\\0'; builtin shopt -p; \
              builtin declare -f; builtin alias -p; builtin set +o",
        );
    }
    s.extend_from_slice(b"; } > ");
    s.extend_from_slice(&shell_quote(dump.as_os_str().as_bytes()));
    s.extend_from_slice(b" 2>/dev/null");
    s
}

/// The script `BASH_ENV` names: `BASH_ENV` as the profile left it, functions and aliases
/// (parsed with `extglob` on), then the options as the profile left them, `set -o` last (an
/// `errexit` or `xtrace` must not act on the snapshot itself).
pub(super) fn bash_script(state: &[u8], profile_bash_env: Option<&OsString>) -> Vec<u8> {
    let mut shopt = Vec::new();
    let mut set = Vec::new();
    let mut rest = Vec::new();
    for line in state.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b"shopt ") {
            // Read-only facts of the login shell, not options one can set.
            if !(line.ends_with(b" login_shell\n") || line.ends_with(b" restricted_shell\n")) {
                shopt.extend_from_slice(line);
            }
        } else if line.starts_with(b"set -o ") || line.starts_with(b"set +o ") {
            set.extend_from_slice(line);
        } else {
            rest.extend_from_slice(line);
        }
    }
    let mut out = b"# uexec shell snapshot (bash): sourced through BASH_ENV\n".to_vec();
    // First, so that nothing below can leave it set for the command's children.
    match profile_bash_env {
        Some(v) => {
            out.extend_from_slice(b"export BASH_ENV=");
            out.extend_from_slice(&shell_quote(v.as_bytes()));
            out.push(b'\n');
        }
        None => out.extend_from_slice(b"unset BASH_ENV\n"),
    }
    // Functions were parsed with whatever options the profile had at the time: parse them
    // back with extglob on and aliases not expanded, then set the options as it left them.
    out.extend_from_slice(b"builtin shopt -s extglob\n");
    out.extend_from_slice(&rest);
    if !rest.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(&shopt);
    out.extend_from_slice(&set);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes_and_odd_bytes() {
        assert_eq!(shell_quote(b"a'b"), b"'a'\\''b'");
        assert_eq!(shell_quote(b""), b"''");
        assert_eq!(shell_quote(b"\xff$x"), b"'\xff$x'");
    }

    #[test]
    fn the_script_parses_functions_with_extglob_then_sets_the_profiles_options() {
        let state = b"shopt -s extglob\nshopt -s login_shell\nset -o errexit\nf () \n{ \n    echo\n}\nalias ll='ls'\n";
        let script = bash_script(state, None);
        let text = String::from_utf8_lossy(&script);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(!text.contains("login_shell"));
        assert!(at("shopt -s extglob") < at("f ()"));
        assert!(at("unset BASH_ENV") < at("builtin shopt -s extglob"));
        assert!(at("builtin shopt -s extglob") < at("f ()"));
        assert!(at("alias ll") < at("\nshopt -s extglob"));
        assert!(at("\nshopt -s extglob") < at("set -o errexit"));
        let kept = bash_script(b"", Some(&OsString::from("/etc/it's")));
        assert!(String::from_utf8_lossy(&kept).contains("export BASH_ENV='/etc/it'\\''s'"));
    }
}
