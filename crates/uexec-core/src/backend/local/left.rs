//! What a session's command left running when it exited: the processes its cgroup still
//! holds once the leader is reaped (`cmd &`, `npm run dev &`, a daemonising server, a
//! `setsid -f`). Here, apart, because it is read at one moment only (the outcome, or the
//! sweep that kills them, whichever comes first) and has a pure part to test.
//!
//! 1. `cgroup.procs` lists every process of the cgroup (not a zombie: the kernel drops an
//!    exiting task from it before its parent reaps it), in this process's pid namespace;
//! 2. each is named by its command line (`/proc/PID/cmdline`, arguments joined by spaces,
//!    cut to [`COMMAND_CHARS`]), else its name (`comm`); a process gone in between is
//!    still counted, as `?`;
//! 3. the first [`NAMED`] are named, all are counted.

use std::fs;
use std::path::Path;

use crate::usage::{LeftProcess, TreeEnd};

/// How many of the processes left are named (all are counted).
const NAMED: usize = 5;

/// Longest command line shown for a process left running, in characters.
const COMMAND_CHARS: usize = 60;

/// What the cgroup `dir` holds now, as a tree's end: [`TreeEnd::Whole`] when it is empty
/// (or gone).
pub(super) fn read(dir: &Path) -> TreeEnd {
    let pids = uexec_sys::read_kernel_file(&dir.join("cgroup.procs")).unwrap_or_default();
    tree_end(&pids, name_of)
}

/// The tree's end from a `cgroup.procs` text, naming each pid with `name`.
fn tree_end(procs: &str, name: impl Fn(u32) -> Option<String>) -> TreeEnd {
    let pids: Vec<u32> = procs
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if pids.is_empty() {
        return TreeEnd::Whole;
    }
    let named = pids
        .iter()
        .take(NAMED)
        .map(|&pid| LeftProcess {
            pid,
            command: name(pid).unwrap_or_else(|| "?".to_owned()),
        })
        .collect();
    TreeEnd::LeftRunning {
        count: pids.len(),
        named,
    }
}

/// Process `pid`'s command line as a line, else its name.
fn name_of(pid: u32) -> Option<String> {
    let argv = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let line = command_line(&argv);
    if !line.is_empty() {
        return Some(line);
    }
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned()).filter(|c| !c.is_empty())
}

/// A `cmdline` (NUL-separated arguments) as one line of at most [`COMMAND_CHARS`].
fn command_line(argv: &[u8]) -> String {
    let text = String::from_utf8_lossy(argv);
    let joined = text
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let line: String = joined
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(COMMAND_CHARS)
        .collect();
    if joined.chars().count() > COMMAND_CHARS {
        format!("{line}\u{2026}")
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_cgroup_ended_whole() {
        assert_eq!(tree_end("", |_| None), TreeEnd::Whole);
        assert_eq!(tree_end("\n", |_| None), TreeEnd::Whole);
    }

    #[test]
    fn every_process_left_is_counted_and_the_first_are_named() {
        let procs: String = (100..107).map(|p| format!("{p}\n")).collect();
        let end = tree_end(&procs, |pid| (pid != 101).then(|| format!("sleep {pid}")));
        let TreeEnd::LeftRunning { count, named } = &end else {
            panic!("{end:?}");
        };
        assert_eq!(*count, 7);
        assert_eq!(named.len(), NAMED);
        assert_eq!(named[0].command, "sleep 100");
        assert_eq!(
            named[1].command, "?",
            "gone in between: counted all the same"
        );
        assert_eq!(
            end.left_text().as_deref(),
            Some("7 processes (pid 100: sleep 100; pid 101: ?; pid 102: sleep 102; pid 103: sleep 103; pid 104: sleep 104; 2 more)")
        );
    }

    #[test]
    fn a_command_line_is_one_line_cut_to_its_length() {
        assert_eq!(command_line(b"sleep\x00100\x00"), "sleep 100");
        assert_eq!(command_line(b"sh\x00-c\x00echo a\nb\x00"), "sh -c echo a b");
        let long = format!("node\0{}\0", "x".repeat(100));
        let line = command_line(long.as_bytes());
        assert_eq!(line.chars().count(), COMMAND_CHARS + 1);
        assert!(line.ends_with('\u{2026}'), "{line}");
        assert_eq!(command_line(b""), "");
    }
}
