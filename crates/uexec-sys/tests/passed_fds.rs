//! Descriptors passed to a child ([`ChildSpec::passed_fds`]) arrive at fds 3, 4, ... in the
//! order given, wherever they sat in the parent (even on each other's places), nothing else
//! beside them; a list that cannot be passed is refused before any child exists.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use uexec_sys::ChildSpec;

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// `/bin/sh -c script` with `passed`, stdout a pipe: what it printed once it exited.
fn run(script: &str, passed: Vec<RawFd>) -> std::io::Result<String> {
    let null = uexec_sys::dev_null().unwrap();
    let (out_read, out_write) = uexec_sys::pipe_cloexec().unwrap();
    let spec = ChildSpec {
        program: c("/bin/sh"),
        argv: vec![c("sh"), c("-c"), c(script)],
        envp: vec![c("PATH=/usr/bin:/bin")],
        cwd: c("/"),
        stdio: [null.as_raw_fd(), out_write.as_raw_fd(), null.as_raw_fd()],
        controlling_tty: false,
        passed_fds: passed,
        program_fd: None,
        cgroup: None,
    };
    let child = uexec_sys::spawn_child(&spec)?;
    drop(out_write);
    let mut out = String::new();
    std::fs::File::from(out_read)
        .read_to_string(&mut out)
        .unwrap();
    uexec_sys::wait_child(Some(child.pid)).unwrap();
    Ok(out)
}

/// A socket pair's two ends, the child's at `at` or above.
fn pair_at(at: RawFd) -> (UnixStream, OwnedFd) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let moved = uexec_sys::dup_at_least(theirs.as_raw_fd(), at).unwrap();
    (ours, moved)
}

fn said(mut ours: UnixStream) -> String {
    ours.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut got = String::new();
    ours.read_to_string(&mut got).unwrap();
    got
}

/// The child's script: a line to each passed descriptor, and which fds from 3 it holds.
const SCRIPT: &str = "echo first >&3; echo second >&4; \
     for f in /proc/$$/fd/*; do n=${f##*/}; [ \"$n\" -gt 2 ] && echo \"$n\"; done";

#[test]
fn two_passed_descriptors_arrive_at_3_and_4_in_order_and_nothing_else() {
    // High numbers, given in an order against theirs.
    let (first, first_fd) = pair_at(60);
    let (second, second_fd) = pair_at(50);
    let out = run(SCRIPT, vec![first_fd.as_raw_fd(), second_fd.as_raw_fd()]).unwrap();
    drop((first_fd, second_fd));
    assert_eq!(said(first), "first\n");
    assert_eq!(said(second), "second\n");
    // The shell's own fd for /proc/$$/fd's listing aside, only 3 and 4 are there.
    let held: Vec<&str> = out.lines().collect();
    assert!(
        held.starts_with(&["3", "4"]) && held.len() <= 3,
        "the child held {held:?}"
    );
}

#[test]
fn passed_descriptors_sitting_on_each_other_s_places_are_swapped_right() {
    // The first goes to 3 but sits on 4, the second goes to 4 but sits on 3: each would be
    // replaced by the other's move if taken as they are. Made in a child of our own, where
    // fds 3 and 4 are free to take (this test's process holds others there).
    let (first, first_fd) = pair_at(70);
    let (second, second_fd) = pair_at(71);
    match uexec_sys::fork_process().unwrap() {
        None => {
            let ok = uexec_sys::dup_onto(first_fd.as_raw_fd(), 4).is_ok()
                && uexec_sys::dup_onto(second_fd.as_raw_fd(), 3).is_ok()
                && run(SCRIPT, vec![4, 3]).is_ok_and(|out| out.starts_with("3\n4\n"));
            uexec_sys::exit_now(if ok { 0 } else { 1 })
        }
        Some(pid) => {
            drop((first_fd, second_fd));
            let (_, status) = uexec_sys::wait_child(Some(pid)).unwrap();
            assert_eq!(status.code(), Some(0), "{status}");
            assert_eq!(said(first), "first\n");
            assert_eq!(said(second), "second\n");
        }
    }
}

#[test]
fn a_descriptor_passed_twice_or_too_many_are_refused_before_a_child_exists() {
    let (_ours, theirs) = pair_at(80);
    let fd = theirs.as_raw_fd();
    let e = run("true", vec![fd, fd]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        e.to_string(),
        format!("descriptor {fd} passed twice to one child")
    );
    let many: Vec<OwnedFd> = (0..=uexec_sys::MAX_PASSED_FDS)
        .map(|_| uexec_sys::dup_at_least(fd, 90).unwrap())
        .collect();
    let e = run("true", many.iter().map(AsRawFd::as_raw_fd).collect()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        e.to_string(),
        format!(
            "{} descriptors passed to one child: at most {}",
            uexec_sys::MAX_PASSED_FDS + 1,
            uexec_sys::MAX_PASSED_FDS
        )
    );
    let e = run("true", vec![-1]).unwrap_err();
    assert!(e.to_string().contains("not a descriptor"), "{e}");
    // The checks are the spawn's own, not the child's set-up failing (which says so).
    assert!(!e.to_string().contains("setting up the process"), "{e}");
}
