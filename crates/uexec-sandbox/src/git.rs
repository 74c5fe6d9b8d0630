//! Repositories a `workspace-write` command must not touch, and `.git` placeholders that
//! keep it from making new ones (see [`super::protect`] for how they are mounted).
//!
//! Why: git runs what a repository's config and hooks say (`core.fsmonitor`, `core.pager`,
//! hooks) whenever the person runs `git` there. A command that can write a repository, or
//! make one where the person will next run `git`, runs code outside the sandbox later.
//! 1. [`repository_of`] walks up from each writable root and from the working directory to
//!    the nearest repository, as git's discovery does: every `.git` directory met, up to
//!    the first that is a repository (an empty one is skipped, as git skips it), or a
//!    `gitdir: PATH` file, with the directory it names and, for a worktree, its common
//!    directory. [`repositories_in`] adds the `.git` of each directory at a root's top.
//! 2. Landlock cannot deny a name, so a missing `.git` is made uncreatable by being there:
//!    [`Placeholders::hold`] makes an empty `.git` directory at each writable root and at
//!    the working directory (when a root holds it) before the launch; it is mounted
//!    read-only inside the sandbox, where a mount point can be neither removed nor renamed.
//!    git's discovery skips an empty `.git`, so outside the sandbox nothing changes.
//! 3. When the last session of this process that uses a placeholder ends, it is removed if
//!    it is still empty. Other uexec processes may use the same placeholder (they found it
//!    there): each session holds a shared `flock` on every `.git` directory it relies on,
//!    and a placeholder is removed only under an exclusive one (a removal would detach
//!    their mounts). One that another process still holds is retried later.
//! 4. Each process lists the placeholders it made in `git-PID` in the sandbox base; the
//!    next uexec's sweep removes those a dead process left, if they are still empty.
//!
//! Not covered: a `.git` made deeper in the tree than a root or the working directory (git
//! then runs it for the person in that directory only), since placeholders can only stand
//! where uexec knows, before the command runs, that a repository could be made.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How many entries of a root's top level are looked at for a `.git` (a home directory
/// with more is not scanned to its end on every command).
const MAX_TOP_LEVEL_ENTRIES: usize = 4096;

/// The name of this process's placeholder record in the sandbox base.
const RECORD_PREFIX: &str = "git-";

/// The repository paths `start` belongs to (step 1): each `.git` met walking up, and what a
/// `gitdir:` file names.
pub fn repository_of(start: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in start.ancestors() {
        let dot = dir.join(".git");
        if dot_git(&dot, &mut found) == Some(true) {
            break;
        }
    }
    found
}

/// The `.git` of each directory directly in `root`.
pub fn repositories_in(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return found;
    };
    for entry in entries.flatten().take(MAX_TOP_LEVEL_ENTRIES) {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            dot_git(&entry.path().join(".git"), &mut found);
        }
    }
    found
}

/// Adds `dot` (a `.git`) to `found` if it exists, with what a `gitdir:` file names.
/// `Some(true)` when it is a repository (discovery stops there), `Some(false)` when it is a
/// `.git` that is none (an empty directory), `None` when there is none.
fn dot_git(dot: &Path, found: &mut Vec<PathBuf>) -> Option<bool> {
    let meta = std::fs::metadata(dot).ok()?;
    found.push(dot.to_path_buf());
    if meta.is_dir() {
        return Some(is_repository(dot));
    }
    let base = dot.parent().unwrap_or(Path::new("/"));
    let Some(gitdir) = std::fs::read_to_string(dot)
        .ok()
        .and_then(|text| gitdir_of(&text, base))
    else {
        return Some(false);
    };
    if let Some(common) = std::fs::read_to_string(gitdir.join("commondir"))
        .ok()
        .and_then(|text| common_dir_of(&text, &gitdir))
    {
        found.push(common);
    }
    found.push(gitdir);
    Some(true)
}

/// A directory git takes for a repository: `HEAD`, and `objects` and `refs` (here or, for
/// a worktree's, in its common directory).
fn is_repository(dir: &Path) -> bool {
    dir.join("HEAD").is_file()
        && (dir.join("commondir").is_file()
            || (dir.join("objects").is_dir() && dir.join("refs").is_dir()))
}

/// The directory a `.git` file names (`gitdir: PATH`, relative to the file's directory).
fn gitdir_of(text: &str, base: &Path) -> Option<PathBuf> {
    let path = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    (!path.is_empty()).then(|| base.join(path))
}

/// A worktree's common directory (`commondir`, relative to its gitdir).
fn common_dir_of(text: &str, gitdir: &Path) -> Option<PathBuf> {
    let path = text.lines().next()?.trim();
    (!path.is_empty()).then(|| gitdir.join(path))
}

/// The placeholders this process made, per sandbox base (where their record goes): each
/// with how many of its sessions use it (zero: waiting for another process to let go).
type Registry = HashMap<PathBuf, usize>;
static MADE: Mutex<Option<HashMap<PathBuf, Registry>>> = Mutex::new(None);

/// Runs `f` on the registry of `base`, under the lock.
fn with_registry<T>(base: &Path, f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut made = MADE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let registry = made
        .get_or_insert_with(HashMap::new)
        .entry(base.to_path_buf())
        .or_default();
    f(registry)
}

/// A session's hold on the `.git` directories at its roots (step 2): placeholders it made
/// or shares, and the locks that keep any other process from removing them.
#[derive(Debug)]
pub struct Placeholders {
    /// `.git` directories held (shared lock), and whether this process made each one.
    held: Vec<(PathBuf, File, bool)>,
    /// Where the record goes.
    base: PathBuf,
}

impl Placeholders {
    /// Makes (or shares) an empty `.git` at each of `places` that has none, and holds a
    /// shared lock on each `.git` directory there.
    pub fn hold(places: &[PathBuf], base: &Path) -> io::Result<Self> {
        // Built first: dropped on an error, it lets go of what it held so far.
        let mut this = Self {
            held: Vec::new(),
            base: base.to_path_buf(),
        };
        with_registry(base, |registry| {
            for place in places {
                if let Some(held) = hold_one(&place.join(".git"), registry, base)? {
                    this.held.push(held);
                }
            }
            Ok::<_, io::Error>(())
        })?;
        Ok(this)
    }

    /// The placeholders this session holds (made here or by another session).
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.held.iter().map(|(p, _, _)| p.as_path())
    }
}

/// Holds `dot`: makes it if missing (and the place lets us), then takes a shared lock on it
/// if it is a directory. `None` when there is nothing to hold (a `.git` file, or a place we
/// cannot write either). The bool says whether it is a placeholder of this process's; such
/// a one is counted in `registry`, and recorded before it is made (a uexec killed right
/// after leaves none unrecorded).
fn hold_one(
    dot: &Path,
    registry: &mut Registry,
    base: &Path,
) -> io::Result<Option<(PathBuf, File, bool)>> {
    const ATTEMPTS: usize = 3;
    for _ in 0..ATTEMPTS {
        let made_now = match std::fs::symlink_metadata(dot) {
            Ok(meta) if meta.is_dir() => false,
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let recorded = !registry.contains_key(dot);
                if recorded {
                    registry.insert(dot.to_path_buf(), 0);
                    write_record(base, registry);
                }
                let made = std::fs::DirBuilder::new().mode(0o755).create(dot);
                if made.is_err() && recorded {
                    registry.remove(dot);
                    write_record(base, registry);
                }
                match made {
                    Ok(()) => true,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    // The command could not make one there either.
                    Err(e)
                        if e.kind() == io::ErrorKind::PermissionDenied
                            || e.kind() == io::ErrorKind::NotFound
                            || e.raw_os_error() == Some(libc::EROFS) =>
                    {
                        return Ok(None)
                    }
                    Err(e) => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("cannot make the .git placeholder {}: {e}", dot.display()),
                        ))
                    }
                }
            }
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dot.display()))),
        };
        let Ok(lock) = open_dir(dot) else {
            continue; // gone meanwhile
        };
        lock.lock_shared()?;
        // Removed (and perhaps made again) while we waited for the lock: look again.
        if !same_file(&lock, dot) {
            continue;
        }
        let ours = match registry.get_mut(dot) {
            Some(users) => {
                *users += 1;
                true
            }
            None => false,
        };
        debug_assert!(ours || !made_now);
        return Ok(Some((dot.to_path_buf(), lock, ours)));
    }
    Err(io::Error::other(format!(
        "{} keeps changing; cannot hold it",
        dot.display()
    )))
}

fn open_dir(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path)
}

fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// What became of a placeholder this process tried to remove.
#[derive(Debug, PartialEq, Eq)]
enum Removal {
    /// Removed, or no longer ours to remove (gone, replaced, filled).
    Done,
    /// Another process holds it: try again later.
    Busy,
}

fn try_remove(dot: &Path) -> Removal {
    let Ok(lock) = open_dir(dot) else {
        return Removal::Done;
    };
    if lock.try_lock().is_err() {
        return Removal::Busy;
    }
    if same_file(&lock, dot) {
        // Fails if it is no longer empty: the person made it a repository, it stays.
        let _ = std::fs::remove_dir(dot);
    }
    Removal::Done
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        let held = std::mem::take(&mut self.held);
        with_registry(&self.base, |registry| {
            for (dot, lock, ours) in held {
                drop(lock);
                if let (true, Some(users)) = (ours, registry.get_mut(&dot)) {
                    *users = users.saturating_sub(1);
                }
            }
            // Every unused one, those another process held last time too.
            let before = registry.len();
            registry.retain(|dot, users| *users > 0 || try_remove(dot) == Removal::Busy);
            if registry.len() != before {
                write_record(&self.base, registry);
            }
        });
    }
}

fn record_path(base: &Path, pid: u32) -> PathBuf {
    base.join(format!("{RECORD_PREFIX}{pid}"))
}

/// Writes this process's record (NUL-separated paths), or removes it when empty. A record
/// that cannot be written only leaves a killed uexec's placeholders behind.
fn write_record(base: &Path, registry: &Registry) {
    use std::os::unix::ffi::OsStrExt;
    let path = record_path(base, std::process::id());
    if registry.is_empty() {
        let _ = std::fs::remove_file(&path);
        return;
    }
    let mut text = Vec::new();
    for dot in registry.keys() {
        text.extend_from_slice(dot.as_os_str().as_bytes());
        text.push(0);
    }
    let next = base.join(format!("{RECORD_PREFIX}{}.next", std::process::id()));
    let written = uexec_core::fs::new_private_file(&next)
        .and_then(|mut f| io::Write::write_all(&mut f, &text))
        .and_then(|()| std::fs::rename(&next, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&next);
    }
}

/// Removes what dead uexec processes' records list, if still empty (step 4); one still held
/// by another process becomes this process's to remove later. Run once per process, with
/// the sandbox base's own sweep.
pub fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    with_registry(base, |registry| sweep_into(base, entries, registry));
}

fn sweep_into(base: &Path, entries: std::fs::ReadDir, registry: &mut Registry) {
    use std::os::unix::ffi::OsStrExt;
    let mut adopted = false;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(RECORD_PREFIX))
            .map(|p| p.strip_suffix(".next").unwrap_or(p))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let text = std::fs::read(entry.path()).unwrap_or_default();
        for dot in text.split(|b| *b == 0).filter(|p| !p.is_empty()) {
            let dot = Path::new(std::ffi::OsStr::from_bytes(dot));
            // Only what a placeholder can be: an empty `.git` directory.
            if dot.file_name() != Some(std::ffi::OsStr::new(".git")) {
                continue;
            }
            if try_remove(dot) == Removal::Busy {
                registry.entry(dot.to_path_buf()).or_insert(0);
                adopted = true;
            }
        }
        let _ = std::fs::remove_file(entry.path());
    }
    if adopted {
        write_record(base, registry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "uexec-git-{name}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).expect("scratch");
        dir.canonicalize().expect("canonical")
    }

    fn repository(at: &Path) {
        for d in ["objects", "refs"] {
            std::fs::create_dir_all(at.join(".git").join(d)).expect("mkdir");
        }
        std::fs::write(at.join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    }

    #[test]
    fn gitdir_files_are_read_relative_to_their_directory() {
        let base = Path::new("/w/sub");
        assert_eq!(
            gitdir_of("gitdir: ../.git/modules/sub\n", base),
            Some(PathBuf::from("/w/sub/../.git/modules/sub"))
        );
        assert_eq!(
            gitdir_of("gitdir: /r/.git/worktrees/wt", base),
            Some(PathBuf::from("/r/.git/worktrees/wt"))
        );
        assert_eq!(gitdir_of("not a gitdir file", base), None);
        assert_eq!(gitdir_of("gitdir:   \n", base), None);
        assert_eq!(
            common_dir_of("../..\n", Path::new("/r/.git/worktrees/wt")),
            Some(PathBuf::from("/r/.git/worktrees/wt/../.."))
        );
    }

    #[test]
    fn the_walk_up_passes_an_empty_git_and_stops_at_the_repository() {
        let dir = scratch("walk");
        repository(&dir.join("repo"));
        std::fs::create_dir_all(dir.join("repo/sub/.git")).expect("empty .git");
        std::fs::create_dir_all(dir.join("repo/sub/deeper")).expect("mkdir");
        let found = repository_of(&dir.join("repo/sub/deeper"));
        assert_eq!(found, [dir.join("repo/sub/.git"), dir.join("repo/.git")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_worktree_brings_its_gitdir_and_common_dir() {
        let dir = scratch("worktree");
        repository(&dir.join("main"));
        let gitdir = dir.join("main/.git/worktrees/wt");
        std::fs::create_dir_all(&gitdir).expect("gitdir");
        std::fs::write(gitdir.join("commondir"), "../..\n").expect("commondir");
        std::fs::create_dir_all(dir.join("wt")).expect("wt");
        std::fs::write(
            dir.join("wt/.git"),
            format!("gitdir: {}\n", gitdir.display()),
        )
        .expect(".git file");
        let found = repository_of(&dir.join("wt"));
        assert_eq!(
            found,
            [dir.join("wt/.git"), gitdir.join("../.."), gitdir.clone()]
        );
        let top = repositories_in(&dir);
        assert!(top.contains(&dir.join("main/.git")), "{top:?}");
        assert!(top.contains(&dir.join("wt/.git")), "{top:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sessions_share_a_placeholder_and_the_last_one_removes_it_if_empty() {
        let dir = scratch("share");
        let base = dir.join("base");
        std::fs::create_dir_all(&base).expect("base");
        let root = dir.join("root");
        std::fs::create_dir_all(&root).expect("root");
        let first = Placeholders::hold(std::slice::from_ref(&root), &base).expect("first");
        assert!(root.join(".git").is_dir());
        assert_eq!(first.paths().collect::<Vec<_>>(), [root.join(".git")]);
        let record = record_path(&base, std::process::id());
        assert!(record.exists(), "recorded");
        let second = Placeholders::hold(std::slice::from_ref(&root), &base).expect("second");
        drop(first);
        assert!(
            root.join(".git").is_dir(),
            "the second session still uses it"
        );
        drop(second);
        assert!(
            !root.join(".git").exists(),
            "removed after the last session"
        );
        assert!(!record.exists(), "the record goes with it");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_placeholder_someone_filled_or_a_real_git_stays() {
        let dir = scratch("filled");
        let base = dir.join("base");
        std::fs::create_dir_all(&base).expect("base");
        let (filled, real) = (dir.join("filled"), dir.join("real"));
        std::fs::create_dir_all(&filled).expect("mkdir");
        repository(&real);
        let held = Placeholders::hold(&[filled.clone(), real.clone()], &base).expect("held");
        std::fs::write(filled.join(".git/HEAD"), "x").expect("the person's git init");
        drop(held);
        assert!(filled.join(".git/HEAD").exists());
        assert!(real.join(".git/HEAD").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_placeholder_another_holder_locks_is_left_for_later() {
        let dir = scratch("busy");
        let base = dir.join("base");
        std::fs::create_dir_all(&base).expect("base");
        let root = dir.join("root");
        std::fs::create_dir_all(&root).expect("root");
        let held = Placeholders::hold(std::slice::from_ref(&root), &base).expect("held");
        // Another process's session (a lock of its own open file).
        let other = open_dir(&root.join(".git")).expect("open");
        other.lock_shared().expect("shared");
        drop(held);
        assert!(root.join(".git").is_dir(), "kept while another holds it");
        drop(other);
        // The next session's end (or the next sweep) takes it.
        let next = Placeholders::hold(&[], &base).expect("none");
        drop(next);
        assert!(!root.join(".git").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_dead_processs_empty_placeholders_are_swept() {
        let dir = scratch("sweep");
        let base = dir.join("base");
        std::fs::create_dir_all(&base).expect("base");
        let (empty, filled) = (dir.join("a/.git"), dir.join("b/.git"));
        std::fs::create_dir_all(&empty).expect("mkdir");
        std::fs::create_dir_all(&filled).expect("mkdir");
        std::fs::write(filled.join("HEAD"), "x").expect("write");
        let not_git = dir.join("c");
        std::fs::create_dir_all(&not_git).expect("mkdir");
        // No process has this pid (above the kernel's pid_max).
        let record = record_path(&base, 4_294_967);
        let mut text = Vec::new();
        for p in [&empty, &filled, &not_git] {
            text.extend_from_slice(p.as_os_str().as_encoded_bytes());
            text.push(0);
        }
        std::fs::write(&record, text).expect("record");
        sweep(&base);
        assert!(!empty.exists(), "an empty placeholder of a dead uexec goes");
        assert!(filled.join("HEAD").exists(), "a filled one stays");
        assert!(not_git.exists(), "only a .git is ever removed");
        assert!(!record.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
