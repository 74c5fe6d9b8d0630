//! A cgroup per session, where the machine has a cgroup v2 tree uexec may write. The
//! command is born in it (`ChildSpec::cgroup`), so no descendant
//! can leave it however it detaches (`setsid`, a double fork), and a kill reaches the whole
//! tree (`cgroup.kill`), not only the process group. Here, apart, because the spawn makes a
//! session's cgroup and the control kills it: a leaf both use, like `group`.
//!
//! 1. **Where**: uexec's own cgroup (`/proc/self/cgroup`'s `0::` line) under the cgroup2
//!    mount (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid machine), found
//!    once, at the first spawn. uexec makes `uexec.<its pid>` there and a cgroup `s<N>` in it
//!    per session. Where it may not (no cgroup2, or the cgroup is not delegated to this
//!    user), sessions live on process groups alone, as before; [`status`] says which holds.
//! 2. **Entry**: the command is started straight in its cgroup (`clone3` with
//!    `CLONE_INTO_CGROUP`): moving it in after its start would wait on the kernel's cgroup
//!    lock, about 7 ms after an idle pause (issue 41). Where the kernel (or a seccomp
//!    filter) refuses that, the first spawn says so, and from then on every command moves
//!    itself in before it execs; the tree remembers which ([`entry_probe`] tells `uexec
//!    doctor`).
//! 3. **Leftovers**: a `uexec.<pid>` whose uexec is gone (SIGKILLed with its last will) is
//!    killed and removed when the next uexec of that cgroup makes its own, and logged.
//! 4. **The end**: a session's cgroup is killed when its process group is swept (after the
//!    leader's exit) or terminated, then removed once empty (a thread waits for
//!    `cgroup.events` to say `populated 0` when dying processes still hold it). Made
//!    ahead and removed behind the call (`keeper`): neither is between a call and its
//!    result. Its
//!    figures are read just before (`usage`) and kept, and so is what the leader left
//!    running (`left`) and which limits it ran into (`limits`): the session's [`Ending`].
//! 5. **Pause**: `cgroup.freeze` freezes every process of the session at once, and the
//!    pause returns when `cgroup.events` says `frozen 1`. A frozen cgroup still dies of
//!    `cgroup.kill` (and its processes of SIGKILL), so a terminate needs no thaw.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use uexec_sys::{CgroupEntry, ChildCgroup};

mod keeper;
mod place;
mod removal;

use place::{own_cgroup_dir, sweep_leftovers, CgroupError};
use removal::{kill_and_remove, open_dir, remove_when_empty, wait_event};

use super::{left, limits, usage};
use crate::events::lock;
use crate::policy::Limits;
use crate::usage::{Ending, TreeEnd, Usage};

/// How long a pause (or resume) waits for the kernel to say the cgroup is frozen (thawed).
const FREEZE_WAIT: Duration = Duration::from_secs(5);

/// uexec's cgroup subtree, `…/uexec.<pid>`, or why there is none.
static TREE: OnceLock<Result<Tree, String>> = OnceLock::new();

/// Whether new sessions get a cgroup (where the machine allows): on unless turned off.
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns cgroups for new sessions on or off (the engine benchmark measures both in one
/// run); sessions already started keep theirs.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Where this process's sessions get their cgroups.
#[derive(Debug)]
pub struct Tree {
    /// uexec's own cgroup, where it found itself at start-up.
    own: PathBuf,
    /// `own/uexec.<pid>`: the sessions' cgroups are its children.
    root: PathBuf,
    next: AtomicU64,
    /// Until a spawn found that this kernel cannot start a child in its cgroup (then its
    /// commands migrate, see the module docs).
    born_inside: AtomicBool,
    /// The cgroups made ahead, and the thread that makes and removes them.
    keeper: keeper::Keeper,
}

/// Where sessions get their cgroups (`…/uexec.<pid>`), or why they live on process groups
/// alone: found (and made) on first use.
pub fn status() -> Result<&'static Path, &'static str> {
    match tree() {
        Ok(tree) => Ok(&tree.root),
        Err(why) => Err(why),
    }
}

/// Whether sessions would get cgroups here, tried for real without keeping anything: the
/// directory they would go under, or why not (`uexec doctor`).
pub fn probe() -> Result<PathBuf, String> {
    let own = own_cgroup_dir().map_err(|e| e.to_string())?;
    let dir = own.join(format!("uexec.{}", std::process::id()));
    if dir.exists() {
        return Ok(own); // this process made its own already
    }
    fs::create_dir(&dir).map_err(|source| {
        CgroupError::Make {
            dir: dir.clone(),
            source,
        }
        .to_string()
    })?;
    let _ = fs::remove_dir(&dir);
    Ok(own)
}

fn tree() -> Result<&'static Tree, &'static str> {
    TREE.get_or_init(|| Tree::make().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(String::as_str)
}

/// This process's cgroup v2 directory, or why there is none (`uexec doctor`).
pub(super) fn own_dir() -> Result<PathBuf, String> {
    own_cgroup_dir().map_err(|e| e.to_string())
}

/// How the next session's command will enter its cgroup (`None` without cgroups).
#[cfg(test)]
pub(super) fn tree_entry() -> Option<CgroupEntry> {
    tree().ok().map(Tree::entry)
}

/// uexec's own cgroup and its sessions' subtree (made on first use), or why there are none.
pub(super) fn tree_dirs() -> Result<(&'static Path, &'static Path), &'static str> {
    tree().map(|t| (t.own.as_path(), t.root.as_path()))
}

impl Tree {
    fn make() -> Result<Self, CgroupError> {
        let own = own_cgroup_dir()?;
        sweep_leftovers(&own);
        let root = own.join(format!("uexec.{}", std::process::id()));
        if root.exists() {
            // A uexec of this pid before (a container's restart): its leftovers.
            kill_and_remove(&root);
        }
        fs::create_dir(&root).map_err(|source| CgroupError::Make {
            dir: root.clone(),
            source,
        })?;
        Ok(Self {
            own,
            root,
            next: AtomicU64::new(1),
            born_inside: AtomicBool::new(true),
            keeper: keeper::Keeper::default(),
        })
    }
}

impl Tree {
    /// How its next session's command is to enter its cgroup.
    fn entry(&self) -> CgroupEntry {
        if self.born_inside.load(Ordering::Relaxed) {
            CgroupEntry::AtBirth
        } else {
            CgroupEntry::Migrates
        }
    }
}

/// Kills every process in uexec's cgroup subtree `root` (`…/uexec.<pid>`, as [`status`]
/// gave it) and removes it: the last will's end, once the uexec it watched is gone.
pub fn kill_tree(root: &Path) {
    let named = root
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("uexec."));
    if named && root.join("cgroup.kill").exists() {
        kill_and_remove(root);
    }
}

/// Whether this kernel starts a child straight in a cgroup (`clone3` with
/// `CLONE_INTO_CGROUP`), tried for real in a throwaway cgroup beside where sessions would
/// get theirs: `Ok` when it does, else why commands would migrate (`uexec doctor`).
pub fn entry_probe() -> Result<(), String> {
    let own = own_cgroup_dir().map_err(|e| e.to_string())?;
    let dir = own.join(format!("uexec.{}.probe", std::process::id()));
    fs::create_dir(&dir).map_err(|source| {
        CgroupError::Make {
            dir: dir.clone(),
            source,
        }
        .to_string()
    })?;
    let tried = open_dir(&dir).and_then(|fd| uexec_sys::probe_spawn_into_cgroup(fd.as_raw_fd()));
    let _ = fs::remove_dir(&dir);
    tried.map_err(|e| e.to_string())
}

/// Why a freeze cannot be: the session's processes are gone, and its cgroup with them.
const GONE: &str = "it has exited";

/// A freeze (or thaw) asked of the kernel, not yet done.
#[derive(Debug)]
pub(super) struct Freezing {
    dir: PathBuf,
    want: &'static str,
}

impl Freezing {
    /// Waits, at most [`FREEZE_WAIT`], until `cgroup.events` says it is done: blocking
    /// (a blocking thread's work).
    pub(super) fn wait(self) -> Result<(), String> {
        match wait_event(&self.dir, self.want, FREEZE_WAIT) {
            Some(true) => Ok(()),
            Some(false) => Err(format!(
                "the kernel did not say {:?} within {} s (a process stuck in the kernel?); \
                 `uexec ls` shows when it is",
                self.want,
                FREEZE_WAIT.as_secs()
            )),
            None => Err(GONE.to_owned()),
        }
    }
}

/// A cgroup made ahead for a process started ahead of its session (a warm sandbox
/// launcher), born in it so that no migration waits on the kernel's cgroup lock when the
/// session comes: the session that takes the process adopts it ([`SessionCgroup::adopt`]).
/// Dropped unadopted, it is killed and removed.
#[derive(Debug)]
pub struct SpareCgroup {
    dir: PathBuf,
    /// `None` once adopted.
    dir_fd: Option<OwnedFd>,
    tree: &'static Tree,
}

impl SpareCgroup {
    /// A new one, or `None` where sessions get no cgroups (or making it failed: then the
    /// process started ahead is moved into its session's when it comes).
    pub fn make() -> Option<Self> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        let tree = tree().ok()?;
        match tree.take_cgroup() {
            Ok(made) => Some(Self {
                dir: made.dir,
                dir_fd: Some(made.fd),
                tree,
            }),
            Err(e) => {
                tracing::debug!("no spare cgroup ({}: {e})", tree.root.display());
                None
            }
        }
    }

    /// Where and how the process started ahead is to enter it.
    pub fn child_cgroup(&self) -> Option<ChildCgroup> {
        self.dir_fd.as_ref().map(|fd| ChildCgroup {
            dir: fd.as_raw_fd(),
            entry: self.tree.entry(),
        })
    }
}

impl Drop for SpareCgroup {
    fn drop(&mut self) {
        if self.dir_fd.take().is_some() {
            let _ = fs::write(self.dir.join("cgroup.kill"), "1");
            remove_when_empty(self.dir.clone(), Arc::default());
        }
    }
}

/// One session's cgroup: made before the spawn, killed with the session, removed once
/// empty.
#[derive(Debug)]
pub(super) struct SessionCgroup {
    dir: PathBuf,
    /// Its directory, open (`O_PATH`): the child is born there (or moves itself in).
    dir_fd: OwnedFd,
    /// How its command was asked to enter it.
    entry: CgroupEntry,
    tree: &'static Tree,
    removed: AtomicBool,
    /// The figures read last before the removal: what the session used, in all.
    last: Arc<Mutex<Option<Usage>>>,
    /// Its limits, written into it before the spawn.
    limits: Limits,
    /// Killed whole by a terminate while its leader ran: nothing was left by the leader.
    killed: AtomicBool,
    /// What the leader left and the limits hit: read once, at the outcome (or at the sweep,
    /// before its kill, if that comes first), and kept.
    ending: Mutex<Option<Ending>>,
    /// Found empty once its leader was gone: nothing can enter it again, so its figures
    /// are final (read once more, then kept in `last`) and there is nothing to kill.
    settled: AtomicBool,
}

impl SessionCgroup {
    /// A new cgroup for a session with `limits` written in, or `None` where sessions have
    /// none (or making it failed: then the session lives on its process group alone, and
    /// that is logged). With limits, an error instead: a limit is never dropped.
    pub(super) fn make(limits: Limits) -> io::Result<Option<Self>> {
        let limited = !limits.is_empty();
        let tree = match (ENABLED.load(Ordering::Relaxed), tree()) {
            (true, Ok(tree)) => tree,
            (false, _) if limited => {
                return Err(io::Error::other(
                    "limits need a cgroup, and sessions' cgroups are turned off",
                ))
            }
            (true, Err(why)) if limited => {
                return Err(io::Error::other(format!(
                    "limits need a cgroup, and sessions have none here: {why}"
                )))
            }
            _ => return Ok(None),
        };
        let made = tree
            .take_cgroup()
            .and_then(|made| match limits::apply(&made.dir, &limits) {
                Ok(()) => Ok(made),
                Err(e) => {
                    let _ = fs::remove_dir(&made.dir);
                    Err(e)
                }
            });
        let entry = tree.entry();
        match made {
            Ok(keeper::Made { dir, fd: dir_fd }) => Ok(Some(Self {
                dir,
                dir_fd,
                entry,
                tree,
                removed: AtomicBool::new(false),
                last: Arc::default(),
                limits,
                killed: AtomicBool::new(false),
                ending: Mutex::new(None),
                settled: AtomicBool::new(false),
            })),
            Err(e) => {
                if limited {
                    return Err(e);
                }
                tracing::warn!(
                    "no cgroup for this session (under {}: {e}); its process group only",
                    tree.root.display()
                );
                Ok(None)
            }
        }
    }

    /// The cgroup of a session whose process was started ahead in `spare`, with `limits`
    /// written in (an error, the spare dropped: killed, when it cannot take them).
    pub(super) fn adopt(mut spare: SpareCgroup, limits: Limits) -> io::Result<Self> {
        limits::apply(&spare.dir, &limits)?;
        let dir_fd = spare
            .dir_fd
            .take()
            .ok_or_else(|| io::Error::other("the spare cgroup was adopted already"))?;
        Ok(Self {
            dir: std::mem::take(&mut spare.dir),
            dir_fd,
            entry: spare.tree.entry(),
            tree: spare.tree,
            removed: AtomicBool::new(false),
            last: Arc::default(),
            limits,
            killed: AtomicBool::new(false),
            ending: Mutex::new(None),
            settled: AtomicBool::new(false),
        })
    }

    /// Removes it, made for a session whose process went elsewhere (a spare): never entered,
    /// so nothing to read or kill.
    pub(super) fn remove_unused(self) {
        self.removed.store(true, Ordering::Release);
        self.tree.remove_later(self.dir.clone(), Arc::default());
    }

    /// Where and how the command is to enter the cgroup.
    pub(super) fn child_cgroup(&self) -> ChildCgroup {
        ChildCgroup {
            dir: self.dir_fd.as_raw_fd(),
            entry: self.entry,
        }
    }

    /// Makes sure `pid`, started with `entered` (as the spawn said), is in: a child born in
    /// it is; a launcher started ahead of the session (a warm sandbox) is moved in by the
    /// parent. A child that migrated when asked to be born there tells the tree that this
    /// kernel cannot. False when it could not be moved in (logged).
    pub(super) fn hold(&self, pid: u32, entered: Option<CgroupEntry>) -> bool {
        if entered == Some(CgroupEntry::AtBirth) {
            return true;
        }
        if self.entry == CgroupEntry::AtBirth
            && entered == Some(CgroupEntry::Migrates)
            && self.tree.born_inside.swap(false, Ordering::Relaxed)
        {
            tracing::info!(
                "this kernel cannot start a command in its cgroup (clone3 with \
                 CLONE_INTO_CGROUP, Linux 5.7); commands move themselves in instead, which \
                 costs milliseconds after an idle pause"
            );
        }
        let path = format!("/proc/{pid}/cgroup");
        let inside = uexec_sys::read_kernel_file(Path::new(&path)).is_ok_and(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("0::"))
                .map(|p| p.trim_start_matches('/'))
                // The root cgroup (`0::/`, uexec's own in many containers) is no session's:
                // an empty path would end every directory.
                .is_some_and(|p| !p.is_empty() && self.dir.ends_with(p))
        });
        if inside {
            return true;
        }
        let moved = OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))
            .and_then(|mut procs| procs.write_all(pid.to_string().as_bytes()));
        match moved {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("cannot move process {pid} into {}: {e}", self.dir.display());
                false
            }
        }
    }

    /// Kills every process in the cgroup, however it detached from the session's group:
    /// a terminate's, while the leader runs (so the leader left nothing of its own).
    pub(super) fn kill(&self) {
        if !self.removed.load(Ordering::Acquire) {
            self.killed.store(true, Ordering::Release);
            let _ = fs::write(self.dir.join("cgroup.kill"), "1");
        }
    }

    /// How its processes ended beside the leader (once the leader is reaped) and the
    /// limits they ran into: read the first time it is asked (the outcome, or the sweep),
    /// then kept.
    pub(super) fn ending(&self) -> Ending {
        lock(&self.ending)
            .get_or_insert_with(|| self.read_ending())
            .clone()
    }

    fn read_ending(&self) -> Ending {
        let tree = if self.killed.load(Ordering::Acquire) {
            TreeEnd::Whole
        } else {
            let tree = left::read(&self.dir);
            if tree == TreeEnd::Whole {
                self.settled.store(true, Ordering::Release);
            }
            tree
        };
        Ending {
            tree: Some(tree),
            limits_hit: limits::hits(&self.dir, &self.limits),
        }
    }

    /// What the session's processes used: so far, or in all once the cgroup is settled
    /// (read once more, then kept) or removed.
    pub(super) fn usage(&self) -> Option<Usage> {
        let mut last = lock(&self.last);
        let settled = self.settled.load(Ordering::Acquire);
        if settled && last.is_some() {
            return *last;
        }
        let usage = usage::read(&self.dir);
        if settled && usage.is_some() {
            *last = usage;
        }
        usage.or(*last)
    }

    /// Whether the cgroup is frozen now (`cgroup.events` says `frozen 1`).
    pub(super) fn frozen(&self) -> bool {
        !self.removed.load(Ordering::Acquire)
            && fs::read_to_string(self.dir.join("cgroup.events"))
                .is_ok_and(|t| t.lines().any(|l| l == "frozen 1"))
    }

    /// Freezes (or thaws) every process of the cgroup; the kernel may take a moment, which
    /// [`Freezing::wait`] waits for.
    pub(super) fn freeze(&self, frozen: bool) -> Result<Freezing, String> {
        if self.removed.load(Ordering::Acquire) {
            return Err(GONE.to_owned());
        }
        let path = self.dir.join("cgroup.freeze");
        fs::write(&path, if frozen { "1" } else { "0" })
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(Freezing {
            dir: self.dir.clone(),
            want: if frozen { "frozen 1" } else { "frozen 0" },
        })
    }

    /// Kills what is left and removes the cgroup: now if it is empty, else from a thread
    /// that waits until the killed processes are gone. The figures are read just before
    /// (or were, once it settled empty: then there is nothing to kill).
    pub(super) fn kill_and_remove(&self) {
        if self.removed.swap(true, Ordering::AcqRel) {
            return;
        }
        // What the leader left, before it is killed (as a rule, read at the outcome).
        let _ = self.ending();
        if self.settled.load(Ordering::Acquire) {
            let _ = self.usage(); // final: read once, and kept
        } else {
            let _ = fs::write(self.dir.join("cgroup.kill"), "1");
            if let Some(usage) = usage::read(&self.dir) {
                *lock(&self.last) = Some(usage);
            }
        }
        // Removed from the keeper's thread (killed there if it is not empty after all: a
        // process the kernel had not let go of yet), after the call's result.
        self.tree.remove_later(self.dir.clone(), self.last.clone());
    }
}

impl Drop for SessionCgroup {
    fn drop(&mut self) {
        // Nothing outlives its session: dropped, its cgroup takes every process with it.
        self.kill_and_remove();
    }
}

#[cfg(test)]
mod tests;
