//! The last will: a small watchdog process that kills what a session left behind when this
//! `uexec` dies without cleaning up (SIGKILL, the OOM killer).
//!
//! The parent-death signal only reaches a session's direct child; a background job (`cmd &`)
//! is a grandchild and would be orphaned. So:
//! 1. at start-up, `uexec` re-executes itself as `uexec __last-will PGID...` in a process
//!    group of its own, with the read end of a pipe as its stdin and the groups already live
//!    as its arguments;
//! 2. the local backend reports every process group it starts and every group it has swept
//!    after its leader exited; those reports only update the set of live groups (a short
//!    lock, no I/O), so they never block the async worker that makes them;
//! 3. a dedicated thread owns the pipe and tells the watchdog what changed in that set
//!    (`+PGID`, `-PGID` lines). A stopped watchdog blocks only that thread; whatever happens
//!    meanwhile is coalesced into the set, which the thread sends once it can write again;
//! 4. the same thread reaps the watchdog when it dies and starts another that is given the
//!    live set, logging the death as an error;
//! 5. the watchdog keeps the set of live groups; when the pipe closes, because `uexec`
//!    exited or died, it sends SIGKILL to every group still in the set and exits.
//!
//! A clean shutdown sweeps every group first, so the watchdog then has nothing to do.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use uexec_core::backend::local::{install_group_watch, GroupWatch};

/// Hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "__last-will";

/// How often the pipe's thread checks, when nothing changes, that the watchdog still lives.
const WATCHDOG_CHECK_INTERVAL_MS: u64 = 250;

/// Starts the watchdog and routes the local backend's group reports to it. Failing to start
/// it is not fatal (the parent-death signal still covers direct children): it is logged.
pub fn install() {
    let watch = Arc::new(LiveGroups::default());
    let watchdog = match Watchdog::spawn(&HashSet::new()) {
        Ok(watchdog) => watchdog,
        Err(e) => {
            tracing::warn!("no last-will watchdog (orphans possible if uexec is killed): {e}");
            return;
        }
    };
    let groups = Arc::clone(&watch);
    let thread = std::thread::Builder::new()
        .name("uexec-last-will".into())
        .spawn(move || keep_watch(&groups, watchdog));
    match thread {
        Ok(_) => {
            install_group_watch(watch);
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
    dirty: bool,
}

impl LiveGroups {
    fn lock(&self) -> MutexGuard<'_, GroupsState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn update(&self, change: impl FnOnce(&mut HashSet<u32>)) {
        let mut state = self.lock();
        change(&mut state.live);
        state.dirty = true;
        drop(state);
        self.changed.notify_one();
    }

    /// The live set once it changed, or after the check interval if it did not.
    fn wait_for_change(&self) -> HashSet<u32> {
        let mut state = self.lock();
        if !state.dirty {
            state = self
                .changed
                .wait_timeout(state, Duration::from_millis(WATCHDOG_CHECK_INTERVAL_MS))
                .map(|(state, _)| state)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        state.dirty = false;
        state.live.clone()
    }
}

impl GroupWatch for LiveGroups {
    fn started(&self, pgid: u32) {
        self.update(|live| {
            live.insert(pgid);
        });
    }

    fn swept(&self, pgid: u32) {
        self.update(|live| {
            live.remove(&pgid);
        });
    }
}

/// A running watchdog, its pipe, and the groups it was told of.
struct Watchdog {
    child: Child,
    pipe: ChildStdin,
    told: HashSet<u32>,
}

impl Watchdog {
    fn spawn(live: &HashSet<u32>) -> std::io::Result<Self> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .arg(SUBCOMMAND)
            .args(live.iter().map(u32::to_string))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let Some(pipe) = child.stdin.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the watchdog has no stdin"));
        };
        Ok(Self {
            child,
            pipe,
            told: live.clone(),
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

    /// Reaps the watchdog if it died; its exit status if so.
    fn reap_if_dead(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(status.to_string()),
            Err(e) => Some(e.to_string()),
        }
    }

    /// Ends a watchdog that cannot be told anything any more. SIGKILL, so that it does not
    /// take the closing pipe for our death and kill every live group.
    fn end(mut self) -> String {
        let _ = self.child.kill();
        match self.child.wait() {
            Ok(status) => status.to_string(),
            Err(e) => e.to_string(),
        }
    }
}

/// The pipe's thread: keeps a watchdog running and told of the live groups, for as long as
/// this process lives.
fn keep_watch(groups: &LiveGroups, watchdog: Watchdog) {
    let mut current = Some(watchdog);
    let mut restart_failed = false;
    loop {
        let live = groups.wait_for_change();
        if let Some(mut watchdog) = current.take() {
            if let Some(status) = watchdog.reap_if_dead() {
                tracing::error!("the last-will watchdog died ({status}); starting another");
            } else if let Err(e) = watchdog.tell(&live) {
                let status = watchdog.end();
                tracing::error!(
                    "the last-will watchdog stopped reading ({e}, {status}); starting another"
                );
            } else {
                current = Some(watchdog);
                continue;
            }
        }
        match Watchdog::spawn(&live) {
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
        uexec_core::sys::kill_group(pgid, uexec_core::sys::SIGKILL);
    }
}
