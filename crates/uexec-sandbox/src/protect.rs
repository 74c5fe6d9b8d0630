//! What a `workspace-write` sandbox mounts over itself, and why (issue 23, "nothing a
//! sandboxed command writes runs later outside it").
//!
//! Landlock grants writes beneath each writable root and cannot carve exceptions out of a
//! grant. Yet some paths beneath a root must not change, because something outside the
//! sandbox later runs or trusts what is there:
//! - uexec's own: the runtime directory (the daemon's socket, the shell snapshots that every
//!   later login command sources through `BASH_ENV`), the state and config directories, the
//!   transcripts and shell-snapshot directories the store is configured with, the sandbox
//!   base (other sessions' tmps), the engine binary and the `uexec` front beside it;
//! - the repositories the roots and the working directory belong to, whose hooks and config
//!   the person's own next `git` runs ([`super::git`]), and an empty `.git` placeholder at
//!   each root and at the working directory, so that no repository can be made there.
//!
//! The mount namespace keeps them: each is bind-mounted read-only over itself (a write
//! fails with EROFS; a mount point can be neither renamed nor removed; Landlock forbids
//! the command to unmount anything). The flow:
//! 1. [`protection`] gathers the candidates (canonical paths: a root named through a
//!    symlink or `..` still covers what it holds), makes uexec's directories that a root
//!    exposes if they are missing (an absent directory cannot be mounted over, and one the
//!    command made would pass for uexec's), and places the `.git` placeholders;
//! 2. [`mounts`], a pure function, decides:
//!    - a candidate counts when it overlaps a writable root: beneath one, or holding one (a
//!      writable root at or inside uexec's directory does not make that directory writable);
//!    - one beneath another is covered by it and dropped;
//!    - the session's private tmp, beneath the sandbox base, is bound back writable over
//!      itself after the base;
//!    - every directory between a writable root and one of uexec's paths is bound over
//!      itself writable (a pin): renaming a parent would otherwise move the protected
//!      directory aside with its mount, and leave its path free for a planted one;
//!    - in path order, parents before children;
//! 3. the launcher makes them in that order ([`super::namespaces`]).
//!
//! Repositories are not pinned: a pin turns each rename across it into EXDEV, and `git mv`
//! between a subdirectory and the rest of the tree must keep working.
//!
//! `read-only` mounts nothing (and makes no mount namespace): Landlock already denies every
//! write but the private tmp's.

use std::path::{Path, PathBuf};

use uexec_core::confine::UexecDirs;

use super::{git, Launcher};

/// One mount the launcher makes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// Bound over itself read-only.
    ReadOnly(PathBuf),
    /// Bound over itself writable: pinned in place, or writable again beneath a read-only
    /// bind.
    Writable(PathBuf),
}

/// The launcher's flags for each kind.
pub const READ_ONLY_FLAG: &str = "--protect";
pub const WRITABLE_FLAG: &str = "--rebind";

impl Mount {
    pub fn path(&self) -> &Path {
        match self {
            Self::ReadOnly(p) | Self::Writable(p) => p,
        }
    }

    /// The launcher's flag for it.
    pub fn flag(&self) -> &'static str {
        match self {
            Self::ReadOnly(_) => READ_ONLY_FLAG,
            Self::Writable(_) => WRITABLE_FLAG,
        }
    }
}

/// What [`mounts`] chooses from.
#[derive(Debug, Clone, Copy)]
pub struct Candidates<'a> {
    /// The writable roots (not the private tmp).
    pub roots: &'a [PathBuf],
    /// The session's private tmp: writable whatever holds it.
    pub tmp: &'a Path,
    /// uexec's directories and binaries: read-only and pinned.
    pub uexec: &'a [PathBuf],
    /// Repositories (`.git`, gitdirs, placeholders): read-only.
    pub repositories: &'a [PathBuf],
}

/// The mounts that keep the candidates read-only (step 2 of the module docs), in the order
/// the launcher makes them.
pub fn mounts(c: Candidates<'_>) -> Vec<Mount> {
    let overlaps = |p: &Path| c.roots.iter().any(|w| p.starts_with(w) || w.starts_with(p));
    let mut protected: Vec<(&Path, bool)> = c
        .uexec
        .iter()
        .map(|p| (p.as_path(), true))
        .chain(c.repositories.iter().map(|p| (p.as_path(), false)))
        .filter(|(p, _)| overlaps(p))
        .collect();
    // Path order is a pre-order (a directory, then everything beneath it): ancestors first.
    protected.sort_by(|a, b| a.0.cmp(b.0).then(b.1.cmp(&a.1)));
    let mut kept: Vec<(&Path, bool)> = Vec::new();
    for (path, pinned) in protected {
        if !kept.iter().any(|(k, _)| path.starts_with(k)) {
            kept.push((path, pinned));
        }
    }
    let mut out = Vec::new();
    for &(path, pinned) in &kept {
        out.push(Mount::ReadOnly(path.to_path_buf()));
        if !pinned {
            continue;
        }
        for root in c.roots.iter().filter(|w| path.starts_with(w) && path != *w) {
            out.extend(
                path.ancestors()
                    .skip(1)
                    .take_while(|a| *a != root.as_path())
                    .map(|a| Mount::Writable(a.to_path_buf())),
            );
        }
    }
    if kept
        .iter()
        .any(|(k, _)| c.tmp.starts_with(k) && c.tmp != *k)
    {
        out.push(Mount::Writable(c.tmp.to_path_buf()));
    }
    // A read-only mount of a path also pins it: it goes first, and a pin of it is dropped.
    out.sort_by(|a, b| {
        a.path()
            .cmp(b.path())
            .then(matches!(b, Mount::ReadOnly(_)).cmp(&matches!(a, Mount::ReadOnly(_))))
    });
    out.dedup_by(|later, first| later.path() == first.path());
    out
}

/// The name of the front executable, installed beside the engine.
const FRONT_NAME: &str = "uexec";

/// uexec's own paths, kept read-only even inside writable roots: the runtime,
/// state and config directories, the store's transcripts and shell snapshots, the sandbox
/// base, and the launcher's binary with the `uexec` front beside it.
pub fn own_paths(store: &UexecDirs, launcher: &Launcher) -> OwnPaths {
    let dirs = [
        Some(uexec_core::fs::runtime_dir_path()),
        uexec_core::fs::state_dir(),
        uexec_core::fs::config_dir(),
        store.transcripts.clone(),
        store.shell_snapshots.clone(),
        Some(uexec_core::fs::sandbox_base_path()),
    ];
    let engine = launcher.display().to_path_buf();
    let front = engine.with_file_name(FRONT_NAME);
    OwnPaths {
        dirs: dirs.into_iter().flatten().collect(),
        binaries: vec![engine, front],
    }
}

/// uexec's own paths: directories (made if missing when a root exposes them) and binaries.
#[derive(Debug, Clone, Default)]
pub struct OwnPaths {
    pub dirs: Vec<PathBuf>,
    pub binaries: Vec<PathBuf>,
}

/// What a session mounts, and the placeholders it holds until it ends.
#[derive(Debug)]
pub struct Protection {
    pub mounts: Vec<Mount>,
    pub placeholders: git::Placeholders,
}

/// Gathers the candidates and places the placeholders (step 1), then [`mounts`].
/// `roots` are the writable roots as [`super::prepare`] computes them, `workdir` the
/// command's working directory, `tmp` its private tmp, `base` where placeholder records go.
pub fn protection(
    roots: &[PathBuf],
    workdir: &Path,
    tmp: &Path,
    own: &OwnPaths,
    base: &Path,
) -> std::io::Result<Protection> {
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let roots: Vec<PathBuf> = roots.iter().filter_map(|r| real(r)).collect();
    let overlaps = |p: &Path| roots.iter().any(|w| p.starts_with(w) || w.starts_with(p));
    let mut uexec = Vec::new();
    for dir in &own.dirs {
        if overlaps(dir) {
            // Refused (another user's, a symlink): mounted over as it is, if it exists.
            let _ = uexec_core::fs::private_dir(dir);
        }
        uexec.extend(real(dir));
    }
    uexec.extend(own.binaries.iter().filter_map(|b| real(b)));
    let workdir = real(workdir).unwrap_or_else(|| workdir.to_path_buf());
    let tmp = real(tmp).unwrap_or_else(|| tmp.to_path_buf());

    let mut repositories = Vec::new();
    for start in roots.iter().chain([&workdir]) {
        repositories.extend(git::repository_of(start));
    }
    for root in &roots {
        repositories.extend(git::repositories_in(root));
    }
    let mut repositories: Vec<PathBuf> = repositories.iter().filter_map(|p| real(p)).collect();
    // A placeholder at each root, and at the working directory when a root holds it; none
    // inside what is protected anyway.
    let mut places: Vec<PathBuf> = roots.clone();
    if roots.iter().any(|w| workdir.starts_with(w)) {
        places.push(workdir.clone());
    }
    places.retain(|p| !uexec.iter().chain(&repositories).any(|q| p.starts_with(q)));
    places.sort();
    places.dedup();
    let placeholders = git::Placeholders::hold(&places, base)?;
    repositories.extend(placeholders.paths().map(Path::to_path_buf));
    let mounts = mounts(Candidates {
        roots: &roots,
        tmp: &tmp,
        uexec: &uexec,
        repositories: &repositories,
    });
    Ok(Protection {
        mounts,
        placeholders,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    fn ro(p: &str) -> Mount {
        Mount::ReadOnly(p.into())
    }

    fn rw(p: &str) -> Mount {
        Mount::Writable(p.into())
    }

    fn plan(roots: &[&str], tmp: &str, uexec: &[&str], repositories: &[&str]) -> Vec<Mount> {
        mounts(Candidates {
            roots: &paths(roots),
            tmp: Path::new(tmp),
            uexec: &paths(uexec),
            repositories: &paths(repositories),
        })
    }

    #[test]
    fn only_what_a_writable_root_exposes_is_mounted() {
        let m = plan(
            &["/work"],
            "/run/user/0/uexec-sandbox/1-a",
            &["/run/user/0/uexec", "/home/me/.config/uexec"],
            &["/work/.git", "/elsewhere/.git"],
        );
        assert_eq!(m, [ro("/work/.git")]);
    }

    #[test]
    fn the_sandbox_base_is_read_only_and_the_sessions_own_tmp_writable_beneath_it() {
        let m = plan(
            &["/w"],
            "/w/tmp/uexec-sandbox-0/7-ab",
            &["/w/tmp/uexec-0", "/w/tmp/uexec-sandbox-0"],
            &[],
        );
        assert_eq!(
            m,
            [
                rw("/w/tmp"),
                ro("/w/tmp/uexec-0"),
                ro("/w/tmp/uexec-sandbox-0"),
                rw("/w/tmp/uexec-sandbox-0/7-ab"),
            ]
        );
    }

    #[test]
    fn parents_of_uexec_paths_inside_a_root_are_pinned_and_parents_come_first() {
        let m = plan(
            &["/home/me"],
            "/tmp/uexec-sandbox-0/1-a",
            &[
                "/home/me/.local/state/uexec",
                "/home/me/.config/uexec",
                "/home/me/.cargo/bin/uexec-engine",
                "/home/me/.cargo/bin/uexec",
            ],
            &["/home/me/.git"],
        );
        assert_eq!(
            m,
            [
                rw("/home/me/.cargo"),
                rw("/home/me/.cargo/bin"),
                ro("/home/me/.cargo/bin/uexec"),
                ro("/home/me/.cargo/bin/uexec-engine"),
                rw("/home/me/.config"),
                ro("/home/me/.config/uexec"),
                ro("/home/me/.git"),
                rw("/home/me/.local"),
                rw("/home/me/.local/state"),
                ro("/home/me/.local/state/uexec"),
            ]
        );
        for (i, a) in m.iter().enumerate() {
            for b in &m[i + 1..] {
                assert!(
                    !a.path().starts_with(b.path()),
                    "{a:?} before its parent {b:?}"
                );
            }
        }
    }

    #[test]
    fn repositories_are_not_pinned() {
        let m = plan(
            &["/w"],
            "/tmp/s/1",
            &[],
            &["/w/a/b/.git", "/w/repo/.git/worktrees/x"],
        );
        assert_eq!(m, [ro("/w/a/b/.git"), ro("/w/repo/.git/worktrees/x")]);
    }

    #[test]
    fn a_path_beneath_a_protected_one_is_covered_by_it() {
        let m = plan(
            &["/w"],
            "/tmp/s/1",
            &["/w/state/uexec", "/w/state/uexec/sessions"],
            &["/w/.git", "/w/.git/worktrees/x"],
        );
        assert_eq!(m, [ro("/w/.git"), rw("/w/state"), ro("/w/state/uexec")]);
    }

    #[test]
    fn a_writable_root_inside_uexecs_directory_does_not_make_it_writable() {
        // The root is the runtime directory itself, or lies inside the sandbox base.
        let m = plan(
            &["/tmp/uexec-0", "/tmp/uexec-sandbox-0/9-other"],
            "/tmp/uexec-sandbox-0/1-mine",
            &["/tmp/uexec-0", "/tmp/uexec-sandbox-0"],
            &[],
        );
        assert_eq!(
            m,
            [
                ro("/tmp/uexec-0"),
                ro("/tmp/uexec-sandbox-0"),
                rw("/tmp/uexec-sandbox-0/1-mine"),
            ]
        );
    }

    #[test]
    fn no_read_only_mount_holds_the_private_tmp_unless_it_is_bound_back_writable() {
        let tmp = "/r/uexec-sandbox/5-x";
        for roots in [&["/r"][..], &["/r/uexec-sandbox"], &["/elsewhere"]] {
            let m = plan(roots, tmp, &["/r/uexec", "/r/uexec-sandbox"], &[]);
            let last_over_tmp = m.iter().rfind(|x| Path::new(tmp).starts_with(x.path()));
            assert!(
                !matches!(last_over_tmp, Some(Mount::ReadOnly(_))),
                "{roots:?}: {m:?}"
            );
        }
    }

    #[test]
    fn nested_roots_pin_the_inner_one_on_the_way_down() {
        let m = plan(
            &["/srv", "/srv/ws"],
            "/tmp/s/1",
            &["/srv/ws/tmp/uexec-0"],
            &[],
        );
        assert_eq!(
            m,
            [rw("/srv/ws"), rw("/srv/ws/tmp"), ro("/srv/ws/tmp/uexec-0")]
        );
    }
}
