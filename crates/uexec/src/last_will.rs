//! The last will: a small watchdog process that kills what a session left behind when this
//! `uexec` dies without cleaning up (SIGKILL, the OOM killer).
//!
//! The parent-death signal only reaches a session's direct child; a background job (`cmd &`)
//! is a grandchild and would be orphaned. So:
//! 1. at start-up, `uexec` re-executes itself (`/proc/self/exe`: the running binary, not
//!    whatever its path holds now) as `uexec __last-will PGID...` in a process group of
//!    its own, with the read end of a pipe as its stdin and the groups already live as its
//!    arguments;
//! 2. the local backend reports every process group it starts and every group it has swept
//!    after its leader exited; those reports only update the set of live groups (a short
//!    lock, no I/O), so they never block the async worker that makes them;
//! 3. a dedicated thread owns the pipe and tells the watchdog what changed in that set
//!    (`+PGID`, `-PGID` lines). A stopped watchdog blocks only that thread; whatever happens
//!    meanwhile is coalesced into the set, which the thread sends once it can write again;
//! 4. a reaper thread waits on the watchdog (no polling) and reports its death; the pipe's
//!    thread then starts another, given the live set, and logs the death as an error;
//! 5. the watchdog keeps the set of live groups; when the pipe closes, because `uexec`
//!    exited or died, it sends SIGKILL to every group still in the set and exits.
//!
//! A clean shutdown sweeps every group first, so the watchdog then has nothing to do.
//!
//! Where sessions have cgroups (`uexec_core::backend::local::cgroup_status`, found here at
//! start-up, which also kills what a uexec that is gone left in its own), the watchdog is
//! given uexec's cgroup subtree too (`UEXEC_LAST_WILL_CGROUP`): it kills every process in it,
//! whatever group it left for, and removes it.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use uexec_core::backend::local::{install_group_watch, GroupWatch};

/// The watchdog's variable naming uexec's cgroup subtree, if sessions have cgroups.
const CGROUP_VAR: &str = "UEXEC_LAST_WILL_CGROUP";

/// Hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "__last-will";

/// This process's own executable, whatever its path holds now.
const RUNNING_EXE: &str = "/proc/self/exe";

/// How long the pipe's thread waits before it tries again to start a watchdog that failed
/// to start.
const RESTART_RETRY_MS: u64 = 1000;

/// Starts the watchdog and routes the local backend's group reports to it. Failing to start
/// it is not fatal (the parent-death signal still covers direct children): it is logged.
pub fn install() {
    if let Err(why) = uexec_core::backend::local::cgroup_status() {
        tracing::debug!("sessions have no cgroups: {why}");
    }
    let groups = Arc::new(LiveGroups::default());
    let watchdog = match Watchdog::spawn(&HashSet::new(), &groups) {
        Ok(watchdog) => watchdog,
        Err(e) => {
            tracing::warn!("no last-will watchdog (orphans possible if uexec is killed): {e}");
            return;
        }
    };
    let shared = Arc::clone(&groups);
    let thread = std::thread::Builder::new()
        .name("uexec-last-will".into())
        .spawn(move || keep_watch(&shared, watchdog));
    match thread {
        Ok(_) => {
            install_group_watch(groups);
        }
        Err(e) => {
            tracing::warn!("no last-will watchdog (orphans possible if uexec is killed): {e}")
        }
    }
}

/// The set of live process groups, shared between the backend (which changes it) and the
/// pipe's thread (which sends it). Its size is the number of live groups, whatever the pace
/// of changes or the state of the watchdog: this is the bounded "queue".
#[derive(Default)]
struct LiveGroups {
    state: Mutex<GroupsState>,
    changed: Condvar,
}

#[derive(Default)]
struct GroupsState {
    live: HashSet<u32>,
    /// The live set changed since the pipe's thread last took it.
    dirty: bool,
    /// The watchdog died (its exit status), as its reaper reported.
    died: Option<String>,
}

/// What the pipe's thread wakes up to.
enum Wake {
    Changed(HashSet<u32>),
    Died(String, HashSet<u32>),
}

impl LiveGroups {
    fn lock(&self) -> MutexGuard<'_, GroupsState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn update(&self, change: impl FnOnce(&mut GroupsState)) {
        let mut state = self.lock();
        change(&mut state);
        drop(state);
        self.changed.notify_all();
    }

    /// Waits until the live set changes or the watchdog dies (at most `limit`, if given).
    fn wait(&self, limit: Option<Duration>) -> Wake {
        let idle = |state: &mut GroupsState| !state.dirty && state.died.is_none();
        let state = self.lock();
        let mut state = match limit {
            None => self
                .changed
                .wait_while(state, idle)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            Some(limit) => self
                .changed
                .wait_timeout_while(state, limit, idle)
                .map(|(state, _)| state)
                .unwrap_or_else(|e| e.into_inner().0),
        };
        state.dirty = false;
        let live = state.live.clone();
        match state.died.take() {
            Some(status) => Wake::Died(status, live),
            None => Wake::Changed(live),
        }
    }
}

impl GroupWatch for LiveGroups {
    fn started(&self, pgid: u32) {
        self.update(|state| {
            state.live.insert(pgid);
            state.dirty = true;
        });
    }

    fn swept(&self, pgid: u32) {
        self.update(|state| {
            state.live.remove(&pgid);
            state.dirty = true;
        });
    }
}

/// A running watchdog (reaped by a thread of its own), its pipe, and the groups it knows.
struct Watchdog {
    pid: u32,
    pipe: ChildStdin,
    told: HashSet<u32>,
    /// A write failed: it is being killed, nothing more is written to it.
    broken: bool,
}

impl Watchdog {
    /// Starts a watchdog that knows `live`, and its reaper, which reports its death to `groups`.
    fn spawn(live: &HashSet<u32>, groups: &Arc<LiveGroups>) -> std::io::Result<Self> {
        // From the running binary, never by path: a sandboxed command may have replaced the
        // file (see `uexec_sandbox::Launcher`); `argv[0]` keeps the path for `ps`.
        let exe = std::env::current_exe()?;
        let mut child = Command::new(RUNNING_EXE)
            .arg0(exe)
            .arg(SUBCOMMAND)
            .args(live.iter().map(u32::to_string))
            .envs(
                uexec_core::backend::local::cgroup_status()
                    .ok()
                    .map(|root| (CGROUP_VAR, root)),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let pid = child.id();
        let pipe = child.stdin.take();
        let groups = Arc::clone(groups);
        let reaper = std::thread::Builder::new()
            .name("uexec-last-will-reaper".into())
            .spawn(move || {
                let status = match child.wait() {
                    Ok(status) => status.to_string(),
                    Err(e) => e.to_string(),
                };
                groups.update(|state| state.died = Some(status));
            });
        let (Ok(_), Some(pipe)) = (reaper, pipe) else {
            // In its own group, the watchdog's pgid is its pid. SIGKILL: it must not take the
            // closing pipe for our death and kill the live groups.
            uexec_sys::kill_group(pid, uexec_sys::SIGKILL);
            return Err(std::io::Error::other(
                "cannot watch the watchdog (no reaper thread or no stdin)",
            ));
        };
        Ok(Self {
            pid,
            pipe,
            told: live.clone(),
            broken: false,
        })
    }

    /// Sends what changed since the last call (blocks while the watchdog does not read).
    fn tell(&mut self, live: &HashSet<u32>) -> std::io::Result<()> {
        let mut lines = String::new();
        for pgid in live.difference(&self.told) {
            lines.push_str(&format!("+{pgid}\n"));
        }
        for pgid in self.told.difference(live) {
            lines.push_str(&format!("-{pgid}\n"));
        }
        if !lines.is_empty() {
            self.pipe.write_all(lines.as_bytes())?;
            self.told.clone_from(live);
        }
        Ok(())
    }
}

/// The pipe's thread: keeps a watchdog running and told of the live groups, for as long as
/// this process lives.
fn keep_watch(groups: &Arc<LiveGroups>, watchdog: Watchdog) {
    let mut current = Some(watchdog);
    let mut restart_failed = false;
    loop {
        let retry = current
            .is_none()
            .then(|| Duration::from_millis(RESTART_RETRY_MS));
        let live = match groups.wait(retry) {
            Wake::Changed(live) => live,
            Wake::Died(status, live) => {
                tracing::error!("the last-will watchdog died ({status}); starting another");
                current = None;
                live
            }
        };
        if let Some(watchdog) = current.as_mut() {
            if watchdog.broken {
                continue; // its reaper reports the death, and the next turn starts another
            }
            if let Err(e) = watchdog.tell(&live) {
                watchdog.broken = true;
                tracing::error!("the last-will watchdog stopped reading: {e}");
                // A closed pipe means it exited; anything else, it must go.
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    uexec_sys::kill_group(watchdog.pid, uexec_sys::SIGKILL);
                }
            }
            continue;
        }
        match Watchdog::spawn(&live, groups) {
            Ok(watchdog) => {
                current = Some(watchdog);
                restart_failed = false;
            }
            Err(e) if !restart_failed => {
                restart_failed = true;
                tracing::error!(
                    "cannot restart the last-will watchdog, retrying (background jobs are \
                     orphaned if uexec is killed meanwhile): {e}"
                );
            }
            Err(_) => {}
        }
    }
}

/// The watchdog's main loop: returns once stdin closes and every remaining group is killed.
pub fn run() {
    uexec_sys::name_after_argv0();
    let mut groups: HashSet<u32> = std::env::args_os()
        .skip(2)
        .filter_map(|arg| arg.to_str().and_then(|pgid| pgid.parse().ok()))
        .collect();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (op, pgid) = line.split_at(line.len().min(1));
        let Ok(pgid) = pgid.parse::<u32>() else {
            continue;
        };
        match op {
            "+" => {
                groups.insert(pgid);
            }
            "-" => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    for pgid in groups {
        uexec_sys::kill_group(pgid, uexec_sys::SIGKILL);
    }
    if let Some(root) = std::env::var_os(CGROUP_VAR) {
        uexec_core::backend::local::kill_cgroup_tree(std::path::Path::new(&root));
    }
}
