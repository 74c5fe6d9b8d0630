//! A session's figures, read from its cgroup: what its processes used, dead ones included
//! (the kernel keeps their counts in the cgroup until it is removed). Here, apart from the
//! cgroup's making and killing, because reading figures is a concern of its own with a pure
//! parser to test.
//!
//! 1. `cpu.stat` is always there (`usage_usec`, `user_usec`, `system_usec`);
//! 2. `memory.current`, `memory.peak` and `pids.current` exist only where the memory and
//!    pids controllers are enabled for the cgroup: absent, the figure is absent too;
//! 3. the last figures are read once more just before the cgroup is removed, and kept, so
//!    a session that ended still says what it used.
//!
//! A session's end waits for these reads, so they are lean: a file found absent in one
//! session's cgroup is not looked for in the next ([`controllers_changed`] forgets that),
//! and each file is read in one go (`uexec_sys::read_kernel_file`).

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::usage::Usage;

/// The optional figures' files, each with whether it was found absent in a session's
/// cgroup, and so in its siblings: which exist depends on the controllers that the parent,
/// uexec's subtree, enables for its children.
static OPTIONAL: [(&str, AtomicBool); 3] = [
    ("memory.current", AtomicBool::new(false)),
    ("memory.peak", AtomicBool::new(false)),
    ("pids.current", AtomicBool::new(false)),
];

/// The controllers enabled for sessions' cgroups changed: every optional figure is looked
/// for again.
pub(super) fn controllers_changed() {
    for (_, absent) in &OPTIONAL {
        absent.store(false, Ordering::Relaxed);
    }
}

/// The figures of the cgroup `dir`, or `None` when its `cpu.stat` cannot be read (gone).
pub(super) fn read(dir: &Path) -> Option<Usage> {
    let cpu = uexec_sys::read_kernel_file(&dir.join("cpu.stat")).ok()?;
    let mut usage = parse_cpu_stat(&cpu)?;
    let [memory, peak, pids] = OPTIONAL.each_ref().map(|(name, absent)| {
        if absent.load(Ordering::Relaxed) {
            return None;
        }
        match uexec_sys::read_kernel_file(&dir.join(name)) {
            Ok(text) => text.trim().parse::<u64>().ok(),
            Err(e) => {
                // `cpu.stat` was there: the cgroup is, and this file is not.
                if e.kind() == io::ErrorKind::NotFound {
                    absent.store(true, Ordering::Relaxed);
                }
                None
            }
        }
    });
    (usage.memory_bytes, usage.memory_peak_bytes, usage.pids) = (memory, peak, pids);
    Some(usage)
}

/// The CPU figures of a `cpu.stat` (`key value` lines); `None` without `usage_usec`.
fn parse_cpu_stat(text: &str) -> Option<Usage> {
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    Some(Usage {
        cpu_usec: field("usage_usec")?,
        user_usec: field("user_usec").unwrap_or(0),
        system_usec: field("system_usec").unwrap_or(0),
        ..Usage::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_stat_gives_usage_user_and_system() {
        let text = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
        let usage = parse_cpu_stat(text).unwrap();
        assert_eq!(
            (usage.cpu_usec, usage.user_usec, usage.system_usec),
            (1500, 1000, 500)
        );
        assert_eq!(usage.memory_bytes, None);
        assert!((usage.cpu_seconds() - 0.0015).abs() < 1e-9);
    }

    #[test]
    fn a_cpu_stat_without_usage_is_no_figure() {
        assert_eq!(parse_cpu_stat("user_usec 3\n"), None);
        assert_eq!(parse_cpu_stat(""), None);
        assert_eq!(parse_cpu_stat("usage_usec x\n"), None);
    }

    #[test]
    fn a_key_that_only_starts_like_another_is_not_it() {
        let usage = parse_cpu_stat("usage_usec_x 9\nusage_usec 4\n").unwrap();
        assert_eq!(usage.cpu_usec, 4);
    }
}
