//! What `environment/info` (and `initialize`) report: the user's shell, the server's working
//! directory, home and temp directories, and the OS.
//!
//! The shell is the user's login shell as Codex finds it: the passwd entry of the server's uid
//! (read from `/etc/passwd`; the uid from the owner of `/proc/self`), then `$SHELL`, then
//! `/bin/sh`, keeping the first that is an executable file. Computed once at startup.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use uexec_protocol::file_uri;
use uexec_protocol::{EnvironmentInfo, ShellInfo};

/// Describes the environment processes of this server run in.
pub fn detect() -> EnvironmentInfo {
    let passwd = passwd_entry();
    let shell = passwd
        .as_ref()
        .map(|p| p.shell.clone())
        .into_iter()
        .chain(std::env::var_os("SHELL").map(PathBuf::from))
        .chain([PathBuf::from("/bin/sh")])
        .find(|p| p.is_absolute() && is_executable(p))
        .unwrap_or_else(|| PathBuf::from("/bin/sh"));
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .or_else(|| passwd.map(|p| p.home));
    EnvironmentInfo {
        shell: ShellInfo {
            name: shell_name(&shell),
            path: shell.to_string_lossy().into_owned(),
        },
        cwd: std::env::current_dir().ok().map(|d| file_uri::to_uri(&d)),
        user_home_dir: home.map(|h| file_uri::to_uri(&h)),
        platform_os: Some(std::env::consts::OS.to_string()),
        temp_dir: Some(file_uri::to_uri(&std::env::temp_dir())),
    }
}

fn shell_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sh".to_string())
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

struct PasswdEntry {
    home: PathBuf,
    shell: PathBuf,
}

fn passwd_entry() -> Option<PasswdEntry> {
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    parse_passwd(&text, uid)
}

/// The home and shell of `uid` in `/etc/passwd` text (`name:pw:uid:gid:gecos:home:shell`).
fn parse_passwd(text: &str, uid: u32) -> Option<PasswdEntry> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() < 7 || fields[2].parse::<u32>().ok()? != uid {
            return None;
        }
        Some(PasswdEntry {
            home: PathBuf::from(fields[5]),
            shell: PathBuf::from(fields[6]),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lines_are_matched_by_uid() {
        let text = "root:x:0:0:root:/root:/bin/bash\nme:x:1000:1000::/home/me:/usr/bin/zsh\n";
        let me = parse_passwd(text, 1000).unwrap();
        assert_eq!(me.home, PathBuf::from("/home/me"));
        assert_eq!(me.shell, PathBuf::from("/usr/bin/zsh"));
        assert!(parse_passwd(text, 42).is_none());
    }

    #[test]
    fn the_detected_shell_is_executable() {
        let info = detect();
        assert!(is_executable(Path::new(&info.shell.path)), "{info:?}");
        assert!(!info.shell.name.is_empty());
    }
}
