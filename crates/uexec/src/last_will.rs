//! The last will: a small watchdog process that kills what a session left behind when this
//! `uexec` dies without cleaning up (SIGKILL, the OOM killer).
//!
//! The parent-death signal only reaches a session's direct child; a background job (`cmd &`)
//! is a grandchild and would be orphaned. So:
//! 1. at start-up, `uexec` re-executes itself as `uexec __last-will` in a process group of
//!    its own, with the read end of a pipe as its stdin;
//! 2. the local backend reports every process group it starts (`+PGID`) and every group it
//!    has swept after its leader exited (`-PGID`) on that pipe;
//! 3. the watchdog keeps the set of live groups; when the pipe closes, because `uexec`
//!    exited or died, it sends SIGKILL to every group still in the set and exits.
//!
//! A clean shutdown sweeps every group first, so the watchdog then has nothing to do.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use uexec_core::backend::local::{install_group_watch, GroupWatch};

/// Hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "__last-will";

/// Starts the watchdog and routes the local backend's group reports to it. Failing to start
/// it is not fatal (the parent-death signal still covers direct children): it is logged.
pub fn install() {
    match start() {
        Ok(watch) => {
            install_group_watch(Arc::new(watch));
        }
        Err(e) => {
            tracing::warn!("no last-will watchdog (orphans possible if uexec is killed): {e}")
        }
    }
}

struct PipeWatch {
    pipe: Mutex<std::process::ChildStdin>,
}

fn start() -> std::io::Result<PipeWatch> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg(SUBCOMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let pipe = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the watchdog has no stdin"))?;
    // The watchdog outlives us by design: it is reaped by whoever adopts it.
    drop(child);
    Ok(PipeWatch {
        pipe: Mutex::new(pipe),
    })
}

impl PipeWatch {
    fn send(&self, line: String) {
        let mut pipe = self
            .pipe
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = pipe.write_all(line.as_bytes()) {
            tracing::warn!("the last-will watchdog is gone: {e}");
        }
    }
}

impl GroupWatch for PipeWatch {
    fn started(&self, pgid: u32) {
        self.send(format!("+{pgid}\n"));
    }

    fn swept(&self, pgid: u32) {
        self.send(format!("-{pgid}\n"));
    }
}

/// The watchdog's main loop: returns once stdin closes and every remaining group is killed.
pub fn run() {
    let mut groups = HashSet::new();
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
