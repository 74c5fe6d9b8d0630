//! Starting, signalling and reaping children: a `clone(CLONE_VM | CLONE_VFORK)` start with
//! the set-up of the crate docs (a `clone3` one born in its cgroup where there is one, see
//! the `clone3` module), pidfds, and the plain `fork` the sandbox launcher uses.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::*;

/// Everything a new child needs, prepared by the parent: the child may not allocate.
#[derive(Clone)]
pub struct ChildSpec {
    /// Absolute path of the program (resolved by the parent).
    pub program: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub cwd: CString,
    /// Become stdin, stdout and stderr.
    pub stdio: [RawFd; 3],
    /// Make stdin (a PTY slave) the controlling terminal.
    pub controlling_tty: bool,
    /// Become fds [`PASSED_FD`], `PASSED_FD + 1`, ... of the child, in this order: the
    /// descriptors besides stdio that stay open across the exec (the sandbox launcher's ends
    /// of its hand-overs: the allowlist proxy's, the exec listener's). At most
    /// [`MAX_PASSED_FDS`], none twice ([`check_passed_fds`]).
    pub passed_fds: Vec<RawFd>,
    /// The descriptor `program` names the file through (`/proc/self/fd/N`), left open
    /// across the exec so that an interpreter (`#!`) can open it too; never below
    /// [`PROGRAM_FD_LOWEST`], so that neither stdio nor a passed descriptor lands on it.
    pub program_fd: Option<RawFd>,
    /// The cgroup the child starts in, so that no descendant of it can start outside.
    pub cgroup: Option<ChildCgroup>,
}

/// Where the first of [`ChildSpec::passed_fds`] lands in the child: the first descriptor
/// after stdio (the next ones follow it).
pub const PASSED_FD: RawFd = 3;
/// How many descriptors one child may be passed ([`ChildSpec::passed_fds`]).
pub const MAX_PASSED_FDS: usize = 4;
/// The lowest number a [`ChildSpec::program_fd`] may have.
pub const PROGRAM_FD_LOWEST: RawFd = 10;
const _: () = assert!(PASSED_FD + MAX_PASSED_FDS as RawFd <= PROGRAM_FD_LOWEST);

/// Refuses a list of descriptors to pass ([`ChildSpec::passed_fds`]) that cannot be: longer
/// than [`MAX_PASSED_FDS`], a negative number, or one descriptor twice (it cannot be two of
/// the child's). Checked before a child exists.
pub fn check_passed_fds(fds: &[RawFd]) -> io::Result<()> {
    let refuse = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    if fds.len() > MAX_PASSED_FDS {
        return refuse(format!(
            "{} descriptors passed to one child: at most {MAX_PASSED_FDS}",
            fds.len()
        ));
    }
    for (i, fd) in fds.iter().enumerate() {
        if *fd < 0 {
            return refuse(format!(
                "descriptor {fd} passed to a child: not a descriptor"
            ));
        }
        if fds[..i].contains(fd) {
            return refuse(format!("descriptor {fd} passed twice to one child"));
        }
    }
    Ok(())
}

/// The cgroup a child starts in ([`ChildSpec::cgroup`]).
#[derive(Clone, Copy, Debug)]
pub struct ChildCgroup {
    /// The cgroup's directory, open (`O_PATH` will do).
    pub dir: RawFd,
    /// How the child is to enter it: ask [`CgroupEntry::AtBirth`] until a spawn answers
    /// that it migrated instead ([`SpawnedChild::cgroup_entry`]).
    pub entry: CgroupEntry,
}

/// How a child enters its cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupEntry {
    /// Born there: `clone3` with `CLONE_INTO_CGROUP` (Linux 5.7, x86_64 builds), no
    /// migration, so no wait on the kernel's cgroup lock (see the `clone3` module).
    AtBirth,
    /// Moves itself in before anything else (it writes `0` into `cgroup.procs`): where the
    /// kernel, a seccomp filter or the build cannot spawn into a cgroup. A failed write
    /// leaves it where uexec is (the caller checks).
    Migrates,
}

/// A started child: its pid and a pidfd that becomes readable when it exits.
#[derive(Debug)]
pub struct SpawnedChild {
    pub pid: u32,
    pub pidfd: OwnedFd,
    /// How it entered [`ChildSpec::cgroup`] (`None` without one). [`CgroupEntry::Migrates`]
    /// when asked [`CgroupEntry::AtBirth`] means this kernel cannot: ask that way from then on.
    pub cgroup_entry: Option<CgroupEntry>,
}

/// Bytes of stack for the vforked child (it makes a handful of syscalls, then `execve`).
pub(crate) const CHILD_STACK_BYTES: usize = 64 * 1024;

pub(crate) struct ChildArgs<'a> {
    spec: &'a ChildSpec,
    /// `spec.passed_fds` (the first `passed_count`), each where the parent moved it when it
    /// sat where the child's set-up replaces it before its turn.
    passed: [RawFd; MAX_PASSED_FDS],
    passed_count: usize,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    parent_pid: libc::pid_t,
    error_fd: RawFd,
    /// The cgroup directory the child moves itself into (`CgroupEntry::Migrates`).
    migrate_into: Option<RawFd>,
}

/// Starts a child the way `posix_spawn` does (`clone(CLONE_VM | CLONE_VFORK)`: no page
/// tables copied, no copy-on-write faults in a busy parent), with the set-up of the module
/// docs that `posix_spawn` cannot express (the parent-death signal). The parent is suspended
/// until the child has exec'd or failed; a failure comes back through a close-on-exec pipe
/// as `(stage, errno)`.
pub fn spawn_child(spec: &ChildSpec) -> io::Result<SpawnedChild> {
    let argv: Vec<*const libc::c_char> = spec
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = spec
        .envp
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    check_passed_fds(&spec.passed_fds)?;
    let (error_read, mut error_write) = pipe_cloexec()?;
    // With descriptors passed, fds 3.. of the child are those: the error pipe may not sit
    // there, and a passed one may not sit where the child puts something else first (a
    // stdio slot, or an earlier passed one's). Moved copies close on exec, and here once
    // the child has its own.
    let count = spec.passed_fds.len();
    let end = PASSED_FD + count as RawFd;
    let mut passed = [-1; MAX_PASSED_FDS];
    let mut moved = Vec::new();
    if count > 0 && error_write.as_raw_fd() < end {
        error_write = dup_at_least(error_write.as_raw_fd(), end)?;
    }
    for (i, &fd) in spec.passed_fds.iter().enumerate() {
        passed[i] = if fd < end && fd != PASSED_FD + i as RawFd {
            let copy = dup_at_least(fd, end)?;
            let raw = copy.as_raw_fd();
            moved.push(copy);
            raw
        } else {
            fd
        };
    }
    let mut args = ChildArgs {
        spec,
        passed,
        passed_count: count,
        argv: &argv,
        envp: &envp,
        parent_pid: current_pid(),
        error_fd: error_write.as_raw_fd(),
        migrate_into: None,
    };
    let mut stack = vec![0u8; CHILD_STACK_BYTES];
    let (pid, pidfd, cgroup_entry) = match spec.cgroup {
        None => (clone_vfork(&mut args, &mut stack)?, None, None),
        Some(cgroup) => match enter_at_birth(cgroup, &mut args, &mut stack)? {
            Some((pid, pidfd)) => (pid, Some(pidfd), Some(CgroupEntry::AtBirth)),
            None => {
                args.migrate_into = Some(cgroup.dir);
                let pid = clone_vfork(&mut args, &mut stack)?;
                (pid, None, Some(CgroupEntry::Migrates))
            }
        },
    };
    drop(error_write);
    drop(moved);
    let mut report = [0u8; 8];
    let n = read_fd(error_read.as_raw_fd(), &mut report)?;
    if n == report.len() {
        // The child failed before exec and has exited: reap it, report why.
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(stage_error(report));
    }
    let pidfd = match pidfd.map_or_else(|| pidfd_open(pid), Ok) {
        Ok(pidfd) => pidfd,
        Err(e) => {
            // The command runs, but we cannot watch it: it must not run unwatched.
            kill_and_reap(pid as u32);
            return Err(e);
        }
    };
    Ok(SpawnedChild {
        pid: pid as u32,
        pidfd,
        cgroup_entry,
    })
}

/// The top of `stack`, 16-byte aligned, and the bytes below it.
fn stack_top(stack: &mut [u8]) -> (*mut u8, usize) {
    let base = stack.as_mut_ptr();
    let top = (base as usize + stack.len()) & !0xf;
    (top as *mut u8, top - base as usize)
}

/// `clone(CLONE_VM | CLONE_VFORK)` of [`child_main`]: the pid once the child has exec'd or
/// failed.
fn clone_vfork(args: &mut ChildArgs<'_>, stack: &mut [u8]) -> io::Result<libc::pid_t> {
    let (top, _) = stack_top(stack);
    let arg: *mut libc::c_void = (args as *mut ChildArgs<'_>).cast();
    // SAFETY: the stack outlives the child's use of it (CLONE_VFORK suspends us until the
    // child execs or exits); signals are blocked; `child_main` only makes async-signal-safe
    // calls on data prepared by the caller.
    let pid = crate::clone3::with_signals_blocked(|| unsafe {
        let pid = libc::clone(
            child_main,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        );
        (pid, io::Error::last_os_error())
    });
    match pid {
        (pid, _) if pid >= 0 => Ok(pid),
        (_, e) => Err(e),
    }
}

/// Starts [`child_main`] born in `cgroup` when asked and able: `None` when the child is
/// to migrate instead (asked so, or the kernel refused `clone3` for good).
fn enter_at_birth(
    cgroup: ChildCgroup,
    args: &mut ChildArgs<'_>,
    stack: &mut [u8],
) -> io::Result<Option<(libc::pid_t, OwnedFd)>> {
    if cgroup.entry == CgroupEntry::Migrates || !crate::clone3::BUILT {
        return Ok(None);
    }
    let (top, size) = stack_top(stack);
    let arg: *mut libc::c_void = (args as *mut ChildArgs<'_>).cast();
    // SAFETY: as in `clone_vfork`: the stack and `args` outlive the child's use of them,
    // signals are blocked, `child_main` is async-signal-safe.
    let r = crate::clone3::with_signals_blocked(|| unsafe {
        crate::clone3::clone_into_cgroup(child_main, arg, top, size, cgroup.dir)
    });
    match r {
        Ok(child) => Ok(Some(child)),
        Err(errno) if crate::clone3::refused_for_good(errno) => Ok(None),
        Err(errno) => {
            let e = io::Error::from_raw_os_error(errno);
            Err(io::Error::new(
                e.kind(),
                format!("starting the process in its cgroup: {e}"),
            ))
        }
    }
}

/// `close_range` flag: mark the range close-on-exec instead of closing it (Linux 5.11).
pub(crate) const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;

/// Where a child's start failed, as its 8-byte report says (`(stage, errno)`, native
/// endianness; also what a warm sandbox launcher answers, see the `uexec-sandbox` crate).
pub const STAGE_SETUP: u32 = 1;
pub const STAGE_CHDIR: u32 = 2;
pub const STAGE_EXEC: u32 = 3;

/// The report of a failed start: `(stage, errno)`.
pub fn stage_report(stage: u32, errno: i32) -> [u8; 8] {
    let mut report = [0u8; 8];
    report[..4].copy_from_slice(&stage.to_ne_bytes());
    report[4..].copy_from_slice(&errno.to_ne_bytes());
    report
}

/// The error a start's report describes.
pub fn stage_error(report: [u8; 8]) -> io::Error {
    let stage = u32::from_ne_bytes([report[0], report[1], report[2], report[3]]);
    let errno = i32::from_ne_bytes([report[4], report[5], report[6], report[7]]);
    let err = io::Error::from_raw_os_error(errno);
    let what = match stage {
        STAGE_CHDIR => "changing to the working directory",
        STAGE_EXEC => "executing the program",
        _ => "setting up the process",
    };
    io::Error::new(err.kind(), format!("{what}: {err}"))
}

pub(crate) extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive while the parent is suspended.
    let args = unsafe { &*(arg as *const ChildArgs<'_>) };
    // SAFETY: async-signal-safe calls only, on memory prepared by the parent.
    unsafe {
        let fail = |stage: u32| -> ! {
            let report = stage_report(stage, *libc::__errno_location());
            libc::write(args.error_fd, report.as_ptr().cast(), report.len());
            libc::_exit(127)
        };
        if let Some(dir) = args.migrate_into {
            // Into the session's cgroup before anything can fork.
            let procs = libc::openat(
                dir,
                c"cgroup.procs".as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            );
            if procs >= 0 {
                libc::write(procs, b"0".as_ptr().cast(), 1);
                libc::close(procs);
            }
        }
        for sig in 1..libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        if libc::setsid() < 0 {
            fail(STAGE_SETUP);
        }
        for (target, &source) in args.spec.stdio.iter().enumerate() {
            let target = target as RawFd;
            if source == target {
                if libc::fcntl(source, libc::F_SETFD, 0) < 0 {
                    fail(STAGE_SETUP);
                }
            } else if libc::dup2(source, target) < 0 {
                fail(STAGE_SETUP);
            }
        }
        if args.spec.controlling_tty && libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
            fail(STAGE_SETUP);
        }
        // The passed descriptors go to fds 3, 4, ... in order (stdio is in place: a source
        // there is done; the parent moved any source an earlier one's slot would replace).
        let passed = &args.passed[..args.passed_count];
        for (i, &source) in passed.iter().enumerate() {
            let target = PASSED_FD + i as RawFd;
            if source == target {
                if libc::fcntl(source, libc::F_SETFD, 0) < 0 {
                    fail(STAGE_SETUP);
                }
            } else if libc::dup2(source, target) < 0 {
                fail(STAGE_SETUP);
            }
        }
        let first_closed = (PASSED_FD as usize + passed.len()) as u32;
        // Nothing of ours but stdio (and the passed descriptors) reaches the command: every
        // other fd (inherited by uexec from its own parent, or opened without O_CLOEXEC by
        // a library) closes at exec. CLOSE_RANGE_CLOEXEC keeps the error pipe usable until
        // then; kernels older than 5.11 close the range around it instead.
        if libc::syscall(
            libc::SYS_close_range,
            first_closed,
            u32::MAX,
            CLOSE_RANGE_CLOEXEC,
        ) < 0
        {
            // Close around the descriptors the exec still needs, lowest first.
            let program_fd = args.spec.program_fd.unwrap_or(args.error_fd);
            let mut keep = [args.error_fd as u32, program_fd as u32];
            if keep[0] > keep[1] {
                keep.swap(0, 1);
            }
            let mut from = first_closed;
            for fd in keep {
                if fd >= from {
                    if fd > from {
                        libc::syscall(libc::SYS_close_range, from, fd - 1, 0u32);
                    }
                    from = fd + 1;
                }
            }
            libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32);
        }
        // The launcher's file, named `/proc/self/fd/N`, stays open across the exec (it is
        // never a stdio slot nor a passed one's: `Launcher::open` keeps it higher).
        if let Some(fd) = args.spec.program_fd {
            if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                fail(STAGE_SETUP);
            }
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
            fail(STAGE_SETUP);
        }
        if libc::getppid() != args.parent_pid {
            libc::_exit(1);
        }
        if libc::chdir(args.spec.cwd.as_ptr()) < 0 {
            fail(STAGE_CHDIR);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(
            args.spec.program.as_ptr(),
            args.argv.as_ptr(),
            args.envp.as_ptr(),
        );
        fail(STAGE_EXEC)
    }
}

pub(crate) fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: the pidfd_open syscall returns a new fd we own (close-on-exec by default).
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd as RawFd))
    }
}

/// Reaps an exited child without blocking: `Ok(None)` while it still runs.
pub fn try_reap(pid: u32) -> io::Result<Option<std::process::ExitStatus>> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: waitpid on our own child; WNOHANG never blocks.
    let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    match r {
        0 => Ok(None),
        r if r < 0 => Err(io::Error::last_os_error()),
        _ => Ok(Some(std::process::ExitStatus::from_raw(status))),
    }
}

/// Kills a child of ours that nobody else will reap (its group too) and reaps it, blocking
/// for the moment SIGKILL takes: for error paths after a spawn.
pub fn kill_and_reap(pid: u32) {
    kill_group(pid, SIGKILL);
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    let mut status = 0;
    // SAFETY: our own unreaped child: the pid cannot belong to anyone else until reaped.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        while libc::waitpid(pid, &mut status, 0) < 0 && *libc::__errno_location() == libc::EINTR {}
    }
}

/// Sends `signal` to a child through its pidfd: never reaches a recycled pid.
pub fn pidfd_kill(pidfd: &OwnedFd, signal: i32) {
    // SAFETY: pidfd_send_signal on an fd we own; errors (the child is gone) are expected.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
}

/// The pid of this process, for the child's parent re-check.
pub fn current_pid() -> libc::pid_t {
    // SAFETY: getpid cannot fail.
    unsafe { libc::getpid() }
}

/// Sends `signal` to the process group `pgid`; a group that is already gone is not an error.
pub fn kill_group(pgid: u32, signal: i32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        if pgid > 1 {
            // SAFETY: killpg has no memory effects; errors (ESRCH) are expected and ignored.
            unsafe {
                libc::killpg(pgid, signal);
            }
        }
    }
}

/// Sends `signal` to the process `pid`; a process that is already gone is not an error.
pub fn kill_process(pid: u32, signal: i32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        if pid > 1 {
            // SAFETY: kill has no memory effects; errors (ESRCH) are expected and ignored.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}

/// Whether the process of `pidfd` still runs (`pidfd_send_signal(fd, 0)`: no signal is
/// sent). EPERM means it runs but we may not signal it; only ESRCH means it is gone.
pub fn pidfd_alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: pidfd_send_signal with signal 0 on an fd we own only checks the target.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// `fork()`: `Some(pid)` in the parent, `None` in the child.
pub fn fork_process() -> io::Result<Option<u32>> {
    // SAFETY: only called in a single-threaded process, so the child may do anything.
    match unsafe { libc::fork() } {
        pid if pid < 0 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid as u32)),
    }
}

/// Blocks until a child exits: `pid` (or any child with `None`); its pid and status.
pub fn wait_child(pid: Option<u32>) -> io::Result<(u32, std::process::ExitStatus)> {
    use std::os::unix::process::ExitStatusExt;
    let target = pid.map_or(-1, |p| p as libc::pid_t);
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own children.
        let r = unsafe { libc::waitpid(target, &mut status, 0) };
        if r > 0 {
            return Ok((r as u32, std::process::ExitStatus::from_raw(status)));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Ends this process at once, without running destructors or flushing stdio (a forked
/// child that must not touch its parent's state).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns.
    unsafe { libc::_exit(code) }
}
