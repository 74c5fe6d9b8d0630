//! Killing a cgroup, waiting for the kernel to say it is empty (or frozen), and removing it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::super::usage;
use crate::events::lock;
use crate::usage::Usage;

/// How long a removal waits for the killed processes of a cgroup to be gone.
pub(super) const EMPTY_WAIT: Duration = Duration::from_secs(5);

/// Kills everything in the cgroup `dir` and below, waits (at most [`EMPTY_WAIT`]) until it
/// is empty, and removes it with its children.
pub(super) fn kill_and_remove(dir: &Path) {
    let _ = fs::write(dir.join("cgroup.kill"), "1");
    wait_empty(dir, EMPTY_WAIT);
    remove_tree(dir);
}

fn remove_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}

/// Waits until `cgroup.events` of `dir` says `populated 0`, at most `limit`; true when it
/// did (or the cgroup is gone).
pub(super) fn wait_empty(dir: &Path, limit: Duration) -> bool {
    wait_event(dir, "populated 0", limit).unwrap_or(true)
}

/// Waits until `cgroup.events` of `dir` has the line `want` (woken by the kernel's change
/// notice, not by polling), at most `limit`: whether it did, or `None` when the cgroup is
/// gone (or its events unreadable).
pub(super) fn wait_event(dir: &Path, want: &str, limit: Duration) -> Option<bool> {
    let Ok(mut events) = File::open(dir.join("cgroup.events")) else {
        return None;
    };
    let deadline = Instant::now() + limit;
    loop {
        let mut text = String::new();
        if events.rewind().is_err() || events.read_to_string(&mut text).is_err() {
            return None;
        }
        if text.lines().any(|l| l == want) {
            return Some(true);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Some(false);
        }
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        if uexec_sys::wait_priority(events.as_raw_fd(), ms).is_err() {
            return Some(false);
        }
    }
}

/// A cgroup's directory, open for a spawn to name it (`O_PATH`: nothing is read through it).
pub(super) fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    Ok(file.into())
}

/// Removes the killed cgroup `dir`: now if it is empty, else from a thread that waits until
/// its processes are gone, reading its figures into `last` just before.
/// Removes the cgroup `dir` of a session that ended, now if it is empty; else kills what is
/// in it, keeps its figures in `last` and removes it once empty.
pub(super) fn remove_or_kill(dir: PathBuf, last: Arc<Mutex<Option<Usage>>>) {
    match fs::remove_dir(&dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {}
        _ => return, // removed, or gone already
    }
    let _ = fs::write(dir.join("cgroup.kill"), "1");
    if let Some(usage) = usage::read(&dir) {
        *lock(&last) = Some(usage);
    }
    remove_when_empty(dir, last);
}

pub(super) fn remove_when_empty(dir: PathBuf, last: Arc<Mutex<Option<Usage>>>) {
    if fs::remove_dir(&dir).is_ok() {
        return;
    }
    let shown = dir.display().to_string();
    let spawned = std::thread::Builder::new()
        .name("uexec-cgroup-rm".into())
        .spawn(move || {
            wait_empty(&dir, EMPTY_WAIT);
            if let Some(usage) = usage::read(&dir) {
                *lock(&last) = Some(usage);
            }
            let _ = fs::remove_dir(&dir);
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot remove {shown}: {e}");
    }
}
