//! Where uexec's cgroup is (the cgroup2 mount and `/proc/self/cgroup`), and what uexecs
//! that are gone left beside it (step 1 and 3 of the module docs).

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::removal::kill_and_remove;

/// Why sessions have no cgroups here.
#[derive(Debug, thiserror::Error)]
pub(super) enum CgroupError {
    #[error("no cgroup2 file system is mounted")]
    NoMount,
    #[error("this process is in no cgroup v2 (/proc/self/cgroup has no 0:: line)")]
    NotInV2,
    #[error("cannot read {path}: {source}")]
    Read {
        path: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot make {dir}: {source} (a cgroup v2 subtree must be delegated to this user, e.g. \
         `systemd-run --user --scope -p Delegate=yes uexec ...`)"
    )]
    Make {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// This process's cgroup v2 directory.
pub(super) fn own_cgroup_dir() -> Result<PathBuf, CgroupError> {
    let read = |path: &'static str| {
        fs::read_to_string(path).map_err(|source| CgroupError::Read { path, source })
    };
    let cgroups = read("/proc/self/cgroup")?;
    let own = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or(CgroupError::NotInV2)?;
    let mounts = read("/proc/self/mountinfo")?;
    for line in mounts.lines() {
        // id parent dev root mountpoint options [optional...] - fstype source superoptions
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        if after.split(' ').next() != Some("cgroup2") {
            continue;
        }
        let fields: Vec<&str> = before.split(' ').collect();
        let (Some(root), Some(mountpoint)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        // The mount shows the hierarchy from `root` down; our cgroup must be inside it.
        let Some(inside) = own.strip_prefix(root.trim_end_matches('/')) else {
            continue;
        };
        let dir = Path::new(&unescape(mountpoint)).join(inside.trim_start_matches('/'));
        if dir.join("cgroup.procs").exists() {
            return Ok(dir);
        }
    }
    Err(CgroupError::NoMount)
}

/// A mountinfo path: spaces, tabs, newlines and backslashes come as octal escapes.
pub(super) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Kills and removes the `uexec.<pid>` subtrees of `parent` whose uexec is gone: its pid
/// is dead, or now a process elsewhere; and the leaves such a uexec moved itself into
/// (`uexec.<pid>.server`, see `limits`) and its probes' (`uexec.<pid>.probe`). Only this
/// user's.
pub(super) fn sweep_leftovers(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let me = std::process::id();
    let uid = uexec_sys::effective_uid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("uexec."))
            .map(|p| {
                p.strip_suffix(".server")
                    .or_else(|| p.strip_suffix(".probe"))
                    .unwrap_or(p)
            })
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let mine = entry.metadata().is_ok_and(|m| m.uid() == uid);
        if pid == me || !mine || lives_here(pid) {
            continue;
        }
        let dir = entry.path();
        let left = count_procs(&dir);
        kill_and_remove(&dir);
        if left > 0 {
            tracing::warn!(
                "killed what a uexec that is gone (pid {pid}) left running: {left} process(es) in {}",
                dir.display()
            );
        } else {
            tracing::debug!("removed {}, of a uexec that is gone", dir.display());
        }
    }
}

/// Whether process `pid` lives in this process's cgroup or below it: a uexec that still
/// runs there (a dead pid, or one recycled elsewhere, is not).
fn lives_here(pid: u32) -> bool {
    let v2 = |path: String| {
        fs::read_to_string(path).ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("0::"))
                .map(str::to_owned)
        })
    };
    match (
        v2(format!("/proc/{pid}/cgroup")),
        v2("/proc/self/cgroup".to_owned()),
    ) {
        (Some(theirs), Some(ours)) => theirs.starts_with(&ours),
        _ => false,
    }
}

/// Processes in the cgroup `dir` and below.
fn count_procs(dir: &Path) -> usize {
    let mut n = fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().count())
        .unwrap_or(0);
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                n += count_procs(&entry.path());
            }
        }
    }
    n
}
