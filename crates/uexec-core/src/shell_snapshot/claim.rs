//! What a uexec that died without its `Drop` (SIGKILL, an OOM kill) left in a snapshot
//! directory: the runtime directory is shared by every uexec of the user, and each of its
//! files is named with the instance that wrote it (`bash-<key>-<instance>-<build>.sh`).
//!
//! 1. An instance holds `snap-<instance>.lock` locked (`flock`) while it lives, from its
//!    first build in the directory; its `Drop` removes the lock file with its scripts.
//! 2. Before it takes its own, it sweeps the directory: a lock file it can lock is one whose
//!    instance is gone (the kernel drops a lock with its last fd, however its process died),
//!    so that instance's files and its lock file are removed. Locks work across pid
//!    namespaces, where a pid would lie.
//! 3. Only names of exactly these shapes are touched: a directory the user configured may
//!    hold other files.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// This instance's lock file, locked while it lives and removed when dropped.
#[derive(Debug)]
pub(super) struct Claim {
    path: PathBuf,
    _file: File,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Sweeps `dir` of the files of instances that are gone, then claims it for `instance`;
/// `None` where it cannot (a read-only directory, or one not this user's alone: nothing is
/// built there either).
pub(super) fn claim(dir: &Path, instance: u32) -> Option<Claim> {
    crate::fs::private_dir(dir).ok()?;
    sweep(dir, instance);
    let path = dir.join(lock_name(instance));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .ok()?;
    file.try_lock().ok()?;
    Some(Claim { path, _file: file })
}

fn lock_name(instance: u32) -> String {
    format!("snap-{instance:08x}.lock")
}

/// Removes the files and lock files of the instances of `dir` that are gone.
fn sweep(dir: &Path, me: u32) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    for name in &names {
        let Some(instance) = lock_instance(name).filter(|i| *i != me) else {
            continue;
        };
        let lock = dir.join(name);
        let Ok(file) = OpenOptions::new().write(true).open(&lock) else {
            continue;
        };
        if file.try_lock().is_err() {
            continue; // its uexec lives
        }
        let mut removed = 0;
        for left in names.iter().filter(|n| file_instance(n) == Some(instance)) {
            if fs::remove_file(dir.join(left)).is_ok() {
                removed += 1;
            }
        }
        let _ = fs::remove_file(&lock);
        tracing::debug!(
            "removed {removed} shell snapshot file(s) of a uexec that is gone from {}",
            dir.display()
        );
    }
}

/// The instance of a lock file's name, `snap-<8 hex>.lock`.
fn lock_instance(name: &str) -> Option<u32> {
    let hex = name.strip_prefix("snap-")?.strip_suffix(".lock")?;
    parse_hex(hex, 8).map(|i| i as u32)
}

/// The instance of a snapshot file's name: `bash-` or `dash-`, the key (16 hex), the
/// instance (8 hex), the build number, then `.sh`, `.sh.new` or `.dump`.
fn file_instance(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix("bash-")
        .or_else(|| name.strip_prefix("dash-"))?;
    let stem = [".sh.new", ".sh", ".dump"]
        .iter()
        .find_map(|ext| rest.strip_suffix(ext))?;
    let mut parts = stem.split('-');
    let (key, instance, build) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || build.is_empty() || !build.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    parse_hex(key, 16)?;
    parse_hex(instance, 8).map(|i| i as u32)
}

fn parse_hex(text: &str, len: usize) -> Option<u64> {
    if text.len() != len || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_the_exact_shapes_are_an_instance_s() {
        let i = Some(0xdeadbeef);
        assert_eq!(file_instance("bash-0123456789abcdef-deadbeef-0.sh"), i);
        assert_eq!(file_instance("dash-0123456789abcdef-deadbeef-12.dump"), i);
        assert_eq!(file_instance("bash-0123456789abcdef-deadbeef-3.sh.new"), i);
        for other in [
            "bash-0123456789abcdef-deadbeef-.sh",
            "bash-0123456789abcdef-deadbeef-0.txt",
            "zsh-0123456789abcdef-deadbeef-0.sh",
            "bash-0123456789abcdef-deadbee-0.sh",
            "bash-0123456789abcdef-deadbeef-0-1.sh",
            "daemon.lock",
        ] {
            assert_eq!(file_instance(other), None, "{other}");
        }
        assert_eq!(lock_instance("snap-deadbeef.lock"), i);
        assert_eq!(lock_instance("snap-deadbeefX.lock"), None);
        assert_eq!(lock_instance("daemon.lock"), None);
    }
}
