//! uexec's own directories and files, and the one check that they are private.
//!
//! Why one check: uexec keeps its daemon's socket, shell-snapshot scripts that later login
//! commands source (`BASH_ENV`), transcripts and sandbox tmps in directories that may lie on a
//! shared filesystem (`/tmp` when `XDG_RUNTIME_DIR` is unset: containers, CI, cron, `su`). A
//! directory that another user made first, that others may enter, or that a symlink stands in
//! for would hand them a command's output, a socket that receives our requests, or a script
//! we run. Three copies of this check had drifted apart (one followed symlinks); this is the
//! only one. For each directory:
//! 1. it is made with mode 0700 if missing (missing parents too, also 0700);
//! 2. it is looked at without following a symlink (`lstat`): it must be a directory,
//! 3. owned by this process's effective uid,
//! 4. and closed to group and others (`mode & 0o077 == 0`).
//!
//! Anything else is refused with an error that names the path and what is wrong. Nothing is
//! chmod'ed or chown'ed behind the user's back: a directory in that state is someone's
//! mistake or someone's attack, and either way the user should hear of it.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Makes `dir` (0700, with its missing parents) if it does not exist, then [`check_private_dir`].
pub fn private_dir(dir: &Path) -> io::Result<()> {
    match DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => {}
        // A symlink or a file where the directory should be: the check says which.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    }
    check_private_dir(dir)
}

/// Checks that `dir` is a real directory (not a symlink), this user's, and closed to others
/// (steps 2-4 of the module docs), without making it.
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let uid = uexec_sys::effective_uid();
    let kind = if meta.file_type().is_symlink() {
        "a symlink"
    } else if meta.is_dir() {
        "a directory"
    } else {
        "not a directory"
    };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} must be a directory owned by uid {uid} with mode 0700 (it is {kind}, uid {}, mode {:o}); refusing to use it",
                dir.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Creates `path` anew (an old file of that name is removed first), mode 0600, never
/// through a symlink: a file only this user can read.
pub fn new_private_file(path: &Path) -> io::Result<File> {
    let _ = std::fs::remove_file(path);
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Opens `path` for appending, creating it 0600 if missing, refusing a symlink.
pub fn private_append_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// `$XDG_RUNTIME_DIR` when it is set to an absolute directory, else the directory logind
/// makes for this user ([`user_runtime`]).
///
/// Why the second: the clients that start `uexec mcp` (Codex, Claude Code, any MCP SDK's
/// stdio transport) pass it a few variables only (`HOME`, `PATH`...), not
/// `XDG_RUNTIME_DIR`, while the person's terminal has it. Without the fallback, the agent's
/// server would start a daemon of its own in `/tmp` beside the person's, and `uexec ls`
/// would not see the agent's sessions.
fn xdg_runtime() -> Option<PathBuf> {
    runtime_base(
        std::env::var_os("XDG_RUNTIME_DIR"),
        Path::new(RUN_USER),
        uexec_sys::effective_uid(),
    )
}

/// Where logind makes each user's runtime directory (`/run/user/<uid>`).
const RUN_USER: &str = "/run/user";

/// The runtime base: `xdg` when it is an absolute directory, else `run_user/<uid>` when it
/// is a directory of `uid`'s closed to others (see [`user_runtime`]).
fn runtime_base(xdg: Option<std::ffi::OsString>, run_user: &Path, uid: u32) -> Option<PathBuf> {
    xdg.map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .or_else(|| user_runtime(run_user, uid))
}

/// `run_user/<uid>`, when it is a real directory (no symlink), `uid`'s, and closed to group
/// and others, as logind makes it; `None` otherwise (not made here: it is logind's).
fn user_runtime(run_user: &Path, uid: u32) -> Option<PathBuf> {
    let dir = run_user.join(uid.to_string());
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0).then_some(dir)
}

/// Where this user's runtime directory is (the daemon's socket, shell snapshots):
/// `$XDG_RUNTIME_DIR/uexec`, else `/run/user/<uid>/uexec` (when logind made that directory),
/// else `<temp dir>/uexec-<uid>`. Not made nor checked: see [`runtime_dir`].
pub fn runtime_dir_path() -> PathBuf {
    match xdg_runtime() {
        Some(dir) => dir.join("uexec"),
        None => std::env::temp_dir().join(format!("uexec-{}", uexec_sys::effective_uid())),
    }
}

/// This user's runtime directory, made if missing and checked ([`private_dir`]).
pub fn runtime_dir() -> io::Result<PathBuf> {
    let dir = runtime_dir_path();
    private_dir(&dir)?;
    Ok(dir)
}

/// Where sandboxes' private tmps go: `$XDG_RUNTIME_DIR/uexec-sandbox` (or in
/// `/run/user/<uid>`, as [`runtime_dir_path`]), else `<temp dir>/uexec-sandbox-<uid>`. Not
/// made nor checked: see [`sandbox_base`].
pub fn sandbox_base_path() -> PathBuf {
    match xdg_runtime() {
        Some(dir) => dir.join("uexec-sandbox"),
        None => std::env::temp_dir().join(format!("uexec-sandbox-{}", uexec_sys::effective_uid())),
    }
}

/// The sandboxes' base directory, made if missing and checked ([`private_dir`]).
pub fn sandbox_base() -> io::Result<PathBuf> {
    let dir = sandbox_base_path();
    private_dir(&dir)?;
    Ok(dir)
}

/// `$XDG_STATE_HOME/uexec`, else `~/.local/state/uexec` (transcripts, the daemon's log).
pub fn state_dir() -> Option<PathBuf> {
    xdg_home("XDG_STATE_HOME", ".local/state")
}

/// `$XDG_CONFIG_HOME/uexec`, else `~/.config/uexec`.
pub fn config_dir() -> Option<PathBuf> {
    xdg_home("XDG_CONFIG_HOME", ".config")
}

fn xdg_home(var: &str, under_home: &str) -> Option<PathBuf> {
    let base = std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(under_home))
        })?;
    Some(base.join("uexec"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn without_xdg_runtime_dir_the_runtime_base_is_the_users_own_dir_under_run_user() {
        let run_user = scratch("run-user");
        std::fs::create_dir(&run_user).unwrap();
        let uid = uexec_sys::effective_uid();
        let mine = run_user.join(uid.to_string());
        // Not there: no base (the caller falls back to the temp dir).
        assert_eq!(runtime_base(None, &run_user, uid), None);
        std::fs::create_dir(&mine).unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(runtime_base(None, &run_user, uid), Some(mine.clone()));
        // XDG_RUNTIME_DIR wins when it is an absolute directory; a relative one is ignored.
        let xdg = scratch("xdg");
        std::fs::create_dir(&xdg).unwrap();
        assert_eq!(
            runtime_base(Some(xdg.clone().into()), &run_user, uid),
            Some(xdg.clone())
        );
        assert_eq!(
            runtime_base(Some("relative".into()), &run_user, uid),
            Some(mine.clone())
        );
        // Open to others, or another user's: not logind's, not used.
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(runtime_base(None, &run_user, uid), None);
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(runtime_base(None, &run_user, uid + 1), None);
        // A symlink standing in for it is refused.
        let real = scratch("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::remove_dir(&mine).unwrap();
        std::os::unix::fs::symlink(&real, &mine).unwrap();
        assert_eq!(runtime_base(None, &run_user, uid), None);
        for dir in [run_user, xdg, real] {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "uexec-fs-{name}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_missing_directory_is_made_private_with_its_parents() {
        let base = scratch("make");
        let dir = base.join("a/b");
        private_dir(&dir).expect("made");
        for d in [&base, &base.join("a"), &dir] {
            let mode = std::fs::metadata(d).expect("exists").permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", d.display());
        }
        private_dir(&dir).expect("and accepted again");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_directory_others_may_enter_is_refused_by_name() {
        let dir = scratch("open");
        private_dir(&dir).expect("made");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let err = private_dir(&dir).expect_err("open to others").to_string();
        assert!(err.contains(&dir.display().to_string()), "{err}");
        assert!(
            err.contains("mode 755") && err.contains("mode 0700"),
            "{err}"
        );
        assert!(err.contains("refusing"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_symlink_to_a_private_directory_is_refused() {
        let base = scratch("link");
        let real = base.join("real");
        private_dir(&real).expect("made");
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let err = private_dir(&link).expect_err("a symlink").to_string();
        assert!(err.contains("a symlink"), "{err}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let base = scratch("file");
        private_dir(&base).expect("made");
        let file = base.join("f");
        std::fs::write(&file, b"x").expect("write");
        let err = check_private_dir(&file).expect_err("a file").to_string();
        assert!(err.contains("not a directory"), "{err}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn private_files_are_0600_and_never_followed() {
        let base = scratch("files");
        private_dir(&base).expect("made");
        let path = base.join("f");
        new_private_file(&path).expect("created");
        let mode = std::fs::metadata(&path)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let target = base.join("target");
        std::fs::write(&target, b"keep").expect("write");
        let link = base.join("log");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(
            private_append_file(&link).is_err(),
            "appended through a symlink"
        );
        assert_eq!(std::fs::read(&target).expect("read"), b"keep");
        let _ = std::fs::remove_dir_all(&base);
    }
}
