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

/// `$XDG_RUNTIME_DIR` when it is set to an absolute directory.
fn xdg_runtime() -> Option<PathBuf> {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
}

/// Where this user's runtime directory is (the daemon's socket, shell snapshots):
/// `$XDG_RUNTIME_DIR/uexec`, else `<temp dir>/uexec-<uid>`. Not made nor checked: see
/// [`runtime_dir`].
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

/// Where sandboxes' private tmps go: `$XDG_RUNTIME_DIR/uexec-sandbox`, else
/// `<temp dir>/uexec-sandbox-<uid>`. Not made nor checked: see [`sandbox_base`].
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
