//! Every raw syscall of the engine, in one place.
//!
//! Why these and not a crate's: the child needs a precise start (steps run in the child between
//! `clone(CLONE_VM | CLONE_VFORK)` and `exec`, so only async-signal-safe calls are allowed):
//! 1. `setsid()`: the command leads its own session and process group, so one `killpg`
//!    reaches every background job it started, and a PTY can become its controlling terminal.
//! 2. `TIOCSCTTY` on the PTY slave (fd 0) for TTY sessions, so job control and Ctrl-C work.
//! 3. `PR_SET_PDEATHSIG(SIGKILL)`, then a re-check of the parent: if uexec died between `fork`
//!    and `prctl`, the signal would never come, so the child kills itself. The death signal is
//!    tied to the forking *thread*; spawns therefore happen on runtime worker threads, which
//!    live as long as the runtime, never on short-lived blocking threads.
//! 4. Default dispositions for every signal and an empty mask: a server started in the
//!    background ignores SIGINT, and ignored signals survive `exec`.
//! 5. Nothing but stdio survives the `exec`, except one descriptor the spawn may pass
//!    ([`ChildSpec::passed_fd`], moved to fd 3): the sandbox launcher's end of its proxy
//!    hand-over, a socket pair no other process can find (a socket *file* could be swapped).
//!
//! The child is started like `posix_spawn` starts one (shared memory, parent suspended until
//! `exec`), not with `fork`: no page tables are copied and the busy parent takes no
//! copy-on-write faults, which is most of the cost of a spawn. It is reaped through a pidfd,
//! which also lets a kill reach exactly that child, never a recycled pid.
//!
//! PTY pairs are opened with `O_CLOEXEC` from the start (`posix_openpt` + `open` of the
//! slave), so a concurrent spawn can never inherit a master or slave: a leaked slave would
//! keep the master from ever seeing EOF.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Opens a PTY pair sized `rows` x `cols`; both ends close on exec.
pub fn open_pty(rows: u16, cols: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: plain libc calls on fds we own; every return value is checked.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if master < 0 {
            return Err(io::Error::last_os_error());
        }
        let master = OwnedFd::from_raw_fd(master);
        if libc::grantpt(master.as_raw_fd()) != 0 || libc::unlockpt(master.as_raw_fd()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut name = [0 as libc::c_char; 128];
        if libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let slave = libc::open(
            CStr::from_ptr(name.as_ptr()).as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if slave < 0 {
            return Err(io::Error::last_os_error());
        }
        let slave = OwnedFd::from_raw_fd(slave);
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        if libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((master, slave))
    }
}

/// Puts an fd in non-blocking mode (for the async reactor).
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a valid fd.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

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
    /// Becomes fd [`PASSED_FD`] of the child, the one descriptor besides stdio that stays
    /// open across the exec (the sandbox launcher's end of its proxy hand-over).
    pub passed_fd: Option<RawFd>,
    /// The descriptor `program` names the file through (`/proc/self/fd/N`), left open
    /// across the exec so that an interpreter (`#!`) can open it too; never below
    /// [`PROGRAM_FD_LOWEST`], so that neither stdio nor [`PASSED_FD`] lands on it.
    pub program_fd: Option<RawFd>,
}

/// Where [`ChildSpec::passed_fd`] lands in the child: the first descriptor after stdio.
pub const PASSED_FD: RawFd = 3;
/// The lowest number a [`ChildSpec::program_fd`] may have.
pub const PROGRAM_FD_LOWEST: RawFd = 10;

/// A started child: its pid and a pidfd that becomes readable when it exits.
#[derive(Debug)]
pub struct SpawnedChild {
    pub pid: u32,
    pub pidfd: OwnedFd,
}

/// Bytes of stack for the vforked child (it makes a handful of syscalls, then `execve`).
const CHILD_STACK_BYTES: usize = 64 * 1024;

struct ChildArgs<'a> {
    spec: &'a ChildSpec,
    /// `spec.passed_fd`, or where the parent moved it (off the stdio slots).
    passed_fd: Option<RawFd>,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    parent_pid: libc::pid_t,
    error_fd: RawFd,
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
    let (error_read, mut error_write) = pipe_cloexec()?;
    // With a descriptor passed, fd 3 of the child is that one: the error pipe may not sit
    // there, and the passed one may not sit on a stdio slot the child replaces first.
    let mut moved_passed = None;
    if let Some(passed) = spec.passed_fd {
        if error_write.as_raw_fd() <= PASSED_FD {
            error_write = dup_at_least(error_write.as_raw_fd(), PASSED_FD + 1)?;
        }
        if passed < PASSED_FD {
            moved_passed = Some(dup_at_least(passed, PASSED_FD + 1)?);
        }
    }
    let passed_fd = moved_passed
        .as_ref()
        .map(|fd| fd.as_raw_fd())
        .or(spec.passed_fd);
    let mut args = ChildArgs {
        spec,
        passed_fd,
        argv: &argv,
        envp: &envp,
        parent_pid: current_pid(),
        error_fd: error_write.as_raw_fd(),
    };
    let mut stack = vec![0u8; CHILD_STACK_BYTES];
    // SAFETY: the stack outlives the child's use of it (CLONE_VFORK suspends us until the
    // child execs or exits); all signals are blocked around clone so no handler of ours runs
    // on the shared memory in the child before it resets them; `child_main` only makes
    // async-signal-safe calls on data prepared above.
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(CHILD_STACK_BYTES);
        let top = (top as usize & !0xf) as *mut libc::c_void;
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut args as *mut ChildArgs<'_>).cast(),
        );
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    drop(error_write);
    drop(moved_passed);
    let mut report = [0u8; 8];
    let n = read_fd(error_read.as_raw_fd(), &mut report)?;
    if n == report.len() {
        // The child failed before exec and has exited: reap it, report why.
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(stage_error(report));
    }
    let pidfd = match pidfd_open(pid) {
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
    })
}

/// `close_range` flag: mark the range close-on-exec instead of closing it (Linux 5.11).
const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;

/// Where a child's start failed, as its 8-byte report says (`(stage, errno)`, native
/// endianness; also what a warm sandbox launcher answers, see `crate::sandbox`).
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

extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive while the parent is suspended.
    let args = unsafe { &*(arg as *const ChildArgs<'_>) };
    // SAFETY: async-signal-safe calls only, on memory prepared by the parent.
    unsafe {
        let fail = |stage: u32| -> ! {
            let report = stage_report(stage, *libc::__errno_location());
            libc::write(args.error_fd, report.as_ptr().cast(), report.len());
            libc::_exit(127)
        };
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
        // The passed descriptor goes to fd 3 (stdio is in place: a source there is done).
        let mut first_closed = PASSED_FD as u32;
        if let Some(source) = args.passed_fd {
            if source == PASSED_FD {
                if libc::fcntl(source, libc::F_SETFD, 0) < 0 {
                    fail(STAGE_SETUP);
                }
            } else if libc::dup2(source, PASSED_FD) < 0 {
                fail(STAGE_SETUP);
            }
            first_closed += 1;
        }
        // Nothing of ours but stdio (and the passed descriptor) reaches the command: every
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
        // never a stdio slot nor fd 3: `Launcher::open` keeps it higher).
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

/// A close-on-exec duplicate of `fd` numbered `lowest` or above (`F_DUPFD_CLOEXEC`).
pub fn dup_at_least(fd: RawFd, lowest: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl returns a new fd we own, or fails.
    unsafe {
        let new = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, lowest);
        if new < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(new))
    }
}

/// A pipe whose both ends close on exec: `(read, write)`.
pub fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills two fds we then own.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// `/dev/null` for reading and writing, close-on-exec.
pub fn dev_null() -> io::Result<OwnedFd> {
    // SAFETY: open of a constant path; the fd is ours.
    unsafe {
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
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

/// Puts SIGCHLD back to its default when this process inherited it ignored: with SIGCHLD
/// ignored the kernel reaps children itself, and no exit status could ever be read.
pub fn reset_ignored_sigchld() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: reading and, if ignored, resetting one disposition; no handler involved.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                libc::signal(libc::SIGCHLD, libc::SIG_DFL);
            }
        }
    });
}

/// SIGPIPE back to its default (Rust programs start with it ignored): a write to a pipe
/// nobody reads ends the process, as it does a C tool's.
pub fn default_sigpipe() {
    // SAFETY: setting one disposition to the default; no handler involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Ignores SIGXFSZ: under a file size limit (`ulimit -f`) a write past it then fails with
/// EFBIG, which a transcript survives (it stops there), instead of killing this process and
/// every session with it. Children get it back at its default (see `child_main`).
pub fn ignore_sigxfsz() {
    // SAFETY: setting one disposition to "ignore"; no handler involved.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
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

/// Numbers of the signals the engine sends.
pub const SIGINT: i32 = libc::SIGINT;
/// SIGKILL.
pub const SIGKILL: i32 = libc::SIGKILL;
/// SIGTERM.
pub const SIGTERM: i32 = libc::SIGTERM;

/// What a process asleep in a system call may be waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputWait {
    /// `read` on fd 0: input, certainly.
    Reading,
    /// The `select`/`poll` family: readline and REPLs wait there before reading, but so do
    /// some servers.
    Polling,
    Neither,
}

fn wait_of(number: i64, fd: u64) -> InputWait {
    if number == libc::SYS_read && fd == 0 {
        return InputWait::Reading;
    }
    let pollers: &[i64] = &[
        libc::SYS_pselect6,
        libc::SYS_ppoll,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_select,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_poll,
    ];
    if pollers.contains(&number) {
        InputWait::Polling
    } else {
        InputWait::Neither
    }
}

/// What the processes of the tree under `leader` (at most 64 of them) wait in, read from
/// `/proc/PID/syscall`: `Reading` if any reads its stdin, else `Polling` if any polls.
/// `None` when the kernel would not say (another user's process, e.g. a setuid `sudo`).
pub fn tree_input_wait(leader: u32) -> Option<InputWait> {
    let mut queue = vec![leader];
    let mut seen = 0;
    let mut unknown = false;
    let mut found = InputWait::Neither;
    while let Some(pid) = queue.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        match std::fs::read_to_string(format!("/proc/{pid}/syscall")) {
            Ok(line) => {
                let mut words = line.split_whitespace();
                let number = words.next().and_then(|w| w.parse::<i64>().ok());
                let fd = words
                    .next()
                    .and_then(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok());
                if let (Some(number), Some(fd)) = (number, fd) {
                    match wait_of(number, fd) {
                        InputWait::Reading => return Some(InputWait::Reading),
                        InputWait::Polling => found = InputWait::Polling,
                        InputWait::Neither => {}
                    }
                }
            }
            Err(_) => unknown = true,
        }
        if let Ok(children) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
            queue.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    if unknown && found == InputWait::Neither {
        None
    } else {
        Some(found)
    }
}

/// Sets a terminal's size (`TIOCSWINSZ`); the kernel tells its foreground group (SIGWINCH).
pub fn set_window_size(fd: RawFd, rows: u16, cols: u16) -> io::Result<()> {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, valid for the call.
    if unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &size) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A terminal's size (`TIOCGWINSZ`): `(rows, cols)`.
pub fn window_size(fd: RawFd) -> io::Result<(u16, u16)> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize through the pointer, valid for the call.
    if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((size.ws_row, size.ws_col))
}

/// A terminal's settings, to put back.
pub struct SavedTerminal(libc::termios);

/// Puts the terminal `fd` in raw mode (no echo, no line editing, no signals from keys);
/// returns what to restore.
pub fn make_raw(fd: RawFd) -> io::Result<SavedTerminal> {
    // SAFETY: termios is plain data; tcgetattr fills it or fails.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid, writable termios.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let saved = SavedTerminal(t);
    // SAFETY: cfmakeraw only edits the struct.
    unsafe { libc::cfmakeraw(&mut t) };
    // SAFETY: `t` is a valid termios.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(saved)
}

/// Puts back what [`make_raw`] changed.
pub fn restore_terminal(fd: RawFd, saved: &SavedTerminal) {
    // SAFETY: `saved.0` is the valid termios tcgetattr returned.
    unsafe {
        libc::tcsetattr(fd, libc::TCSANOW, &saved.0);
    }
}

/// The terminal's echo and canonical-mode flags (`tcgetattr`; on Linux a PTY master reports
/// its slave's settings): `(echo, canonical)`.
pub fn terminal_modes(fd: RawFd) -> io::Result<(bool, bool)> {
    // SAFETY: termios is plain data; tcgetattr fills it or fails.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid, writable termios.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((t.c_lflag & libc::ECHO != 0, t.c_lflag & libc::ICANON != 0))
}

/// One `read(2)`; `WouldBlock` comes back as an error, as the async reactor expects.
pub fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is a valid writable slice of the given length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One `write(2)`; `WouldBlock` comes back as an error, as the async reactor expects.
pub fn write_fd(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is a valid readable slice of the given length.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Registers an owned fd with the tokio reactor (the fd must already be non-blocking).
pub fn async_fd(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: `OwnedFd` keeps the descriptor open and unchanged for as long as the AsyncFd
    // owns it, and `as_raw_fd` always returns that same descriptor.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(io::Error::from)
}

/// Number of open fds of this process (Linux: `/proc/self/fd`), for leak checks.
pub fn open_fd_count() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count())
}

// ---------------------------------------------------------------------------------------------
// Process start-up hardening and peer identity (the network faces; see `uexec-net`).
// ---------------------------------------------------------------------------------------------

/// The effective uid of this process (the user a same-user loopback peer must be).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The pid and uid the kernel recorded for the peer of a connected Unix socket when it
/// connected (`SO_PEERCRED`). The pid may have been recycled since: prefer [`peer_pidfd`].
pub fn peer_credentials(socket: RawFd) -> io::Result<(i32, u32)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a valid ucred.
    let r = unsafe {
        libc::getsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    check(r)?;
    Ok((cred.pid, cred.uid))
}

/// A pidfd of the process that connected the peer end of a Unix socket (`SO_PEERPIDFD`,
/// Linux 6.5+): unlike `SO_PEERCRED`'s pid it names that process and no other, ever. Fails
/// with `ENOPROTOOPT` on older kernels.
pub fn peer_pidfd(socket: RawFd) -> io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `fd`, an int; on success the kernel
    // installed a new fd (close-on-exec) that we now own.
    let r = unsafe {
        libc::getsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    check(r)?;
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: `fd` was just installed by the kernel for us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the new soft limit. A server
/// holding many sessions and connections must not meet EMFILE at an arbitrary 1024.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid rlimit whose soft value does not exceed its hard one.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(limit.rlim_cur)
}

/// `prctl(PR_SET_DUMPABLE, 0)`: other processes of the same user, the server's own commands
/// included, can no longer read its `/proc/PID/{environ,mem,...}` or ptrace it. Children
/// become dumpable again at their `execve`.
pub fn set_undumpable() -> io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes one integer argument; the rest are ignored.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The sandbox launcher (`uexec __sandbox-exec`, see `crate::sandbox`). Every function below is
// for a single-threaded process (the launcher, `uexec doctor`): namespaces, mounts and forks
// there may allocate and need not be async-signal-safe.
// ---------------------------------------------------------------------------------------------

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `dup2(source, target)`: `target` becomes a copy of `source` (inherited across exec).
pub fn dup_onto(source: RawFd, target: RawFd) -> io::Result<()> {
    // SAFETY: dup2 takes two descriptor numbers; whatever `target` was is closed.
    check(unsafe { libc::dup2(source, target) })
}

/// `dup3(source, target, O_CLOEXEC)`: `target` becomes a copy of `source` that closes on
/// exec.
pub fn dup_onto_cloexec(source: RawFd, target: RawFd) -> io::Result<()> {
    // SAFETY: dup3 takes two descriptor numbers and a flag; whatever `target` was is closed.
    check(unsafe { libc::dup3(source, target, libc::O_CLOEXEC) })
}

/// Makes stdin (a PTY slave) the controlling terminal of this session's leader.
pub fn take_stdin_as_controlling_terminal() -> io::Result<()> {
    // SAFETY: an ioctl without arguments on fd 0.
    check(unsafe { libc::ioctl(0, libc::TIOCSCTTY as _, 0) })
}

/// `chdir(path)`.
pub fn change_dir(path: &CStr) -> io::Result<()> {
    // SAFETY: chdir of a NUL-terminated path.
    check(unsafe { libc::chdir(path.as_ptr()) })
}

/// Takes ownership of descriptor `fd`, which this process inherited (it came at exec, or
/// was moved there from a launch message) and nothing else of it claims: it must be an open
/// Unix stream socket. It closes on exec from now on, so nothing this process runs gets it.
pub fn adopt_inherited_unix_socket(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a descriptor number: fails with EBADF when nothing is open there.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) })?;
    if socket_option(fd, libc::SO_DOMAIN) != Some(libc::AF_UNIX)
        || socket_option(fd, libc::SO_TYPE) != Some(libc::SOCK_STREAM)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is not a Unix stream socket"),
        ));
    }
    // SAFETY: open (checked above), and ours alone by this function's contract.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `unshare(flags)`: the calling process enters new namespaces.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only.
    check(unsafe { libc::unshare(flags) })
}

/// The real uid and gid of this process.
pub fn real_ids() -> (u32, u32) {
    // SAFETY: getuid and getgid cannot fail.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// Makes every mount of this (new) mount namespace private: nothing done here propagates out.
pub fn make_mounts_private() -> io::Result<()> {
    // SAFETY: a propagation change of "/" with null source, type and data.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
}

/// `ST_RELATIME` from statvfs(3): the libc crate has it for glibc only.
const ST_RELATIME: libc::c_ulong = 0x1000;

/// Bind-mounts `path` onto itself, read-only (a file or a directory): writes there fail with
/// EROFS, and a mount point can be neither renamed nor removed.
pub fn bind_read_only(path: &CStr) -> io::Result<()> {
    bind_onto_itself(path)?;
    remount_bind(path, true)
}

/// Bind-mounts `path` onto itself, writable: a directory that can no longer be renamed or
/// removed, or a writable path beneath a read-only bind (a bind copies the read-only flag of
/// the mount it comes from: it is then remounted without it).
pub fn bind_writable(path: &CStr) -> io::Result<()> {
    bind_onto_itself(path)?;
    if mount_flags(path)? & libc::ST_RDONLY != 0 {
        remount_bind(path, false)?;
    }
    Ok(())
}

fn bind_onto_itself(path: &CStr) -> io::Result<()> {
    // SAFETY: mount on a valid NUL-terminated path, null type and data.
    check(unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    })
}

/// The `ST_*` flags of the mount `path` lies on (statvfs).
fn mount_flags(path: &CStr) -> io::Result<libc::c_ulong> {
    // SAFETY: statvfs on a valid NUL-terminated path fills a plain struct.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        check(libc::statvfs(path.as_ptr(), &mut st))?;
        Ok(st.f_flag)
    }
}

/// Remounts the bind at `path` read-only or writable. The remount keeps the flags the kernel
/// locks in a user namespace (nosuid, nodev, noexec, atime), or it fails.
fn remount_bind(path: &CStr, read_only: bool) -> io::Result<()> {
    let now = mount_flags(path)?;
    let mut flags = libc::MS_BIND | libc::MS_REMOUNT;
    if read_only {
        flags |= libc::MS_RDONLY;
    }
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (ST_RELATIME, libc::MS_RELATIME),
    ] {
        if now & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    // SAFETY: a remount of a valid NUL-terminated path with null source, type and data.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            path.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })
}

/// Marks every descriptor from 3 up close-on-exec: what this process inherited (the
/// launcher's own program, reached through a descriptor) goes no further than its exec.
pub fn close_inherited_on_exec() -> io::Result<()> {
    // SAFETY: close_range with the CLOEXEC flag only changes descriptor flags.
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
    if r == 0 {
        return Ok(());
    }
    // Before Linux 5.11: one by one.
    let fds: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: fcntl on a descriptor number; one closed meanwhile (the directory's own)
        // fails with EBADF, which is fine.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// Names the calling thread, the process's when it is the main one (`/proc/self/comm`,
/// what `ps -e` and `pgrep` show; at most 15 bytes are kept) after the file name of
/// `argv[0]`. A program exec'd through `/proc/self/exe` is otherwise named `exe`.
pub fn name_after_argv0() {
    use std::os::unix::ffi::OsStrExt;
    let Some(arg0) = std::env::args_os().next() else {
        return;
    };
    let Some(name) = std::path::Path::new(&arg0).file_name() else {
        return;
    };
    let Ok(name) = CString::new(name.as_bytes()) else {
        return;
    };
    // SAFETY: PR_SET_NAME reads a NUL-terminated string (the kernel copies 16 bytes at most).
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}

/// Empties this process's capability bounding and ambient sets: what it execs gains no
/// capability, not even as root of its user namespace (where a capability-holding command
/// could clone a mount tree and clear its read-only flags: `open_tree`, `mount_setattr`).
/// Needs CAP_SETPCAP, which a process holds in the user namespace it made.
pub fn drop_capabilities_on_exec() -> io::Result<()> {
    let last: libc::c_ulong = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63);
    // SAFETY: prctl with integer arguments only.
    unsafe {
        // EINVAL: a kernel without ambient capabilities has none to clear.
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) < 0
            && *libc::__errno_location() != libc::EINVAL
        {
            return Err(io::Error::last_os_error());
        }
        for cap in 0..=last {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 {
                // EINVAL: past the capabilities this kernel knows.
                if *libc::__errno_location() == libc::EINVAL {
                    break;
                }
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Brings the loopback interface of the current network namespace up.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: a datagram socket we own, and two ioctls on a zeroed ifreq naming "lo".
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        check(libc::ioctl(
            fd.as_raw_fd(),
            libc::SIOCGIFFLAGS as _,
            &mut req,
        ))?;
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        check(libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req))
    }
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

/// `PR_SET_PDEATHSIG`: this process gets `signal` when its parent dies.
pub fn set_parent_death_signal(signal: i32) -> io::Result<()> {
    // SAFETY: prctl with an integer argument.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) })
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Catches `signals` with a handler that does nothing (SA_RESTART): the process survives
/// them, and, unlike an ignored signal, the disposition goes back to default at `exec`.
pub fn catch_and_ignore(signals: &[i32]) {
    for &signal in signals {
        // SAFETY: a sigaction with a valid handler and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// True when the write end of this pipe is closed everywhere (poll reports a hang-up).
pub fn pipe_hung_up(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd, without waiting.
    let r = unsafe { libc::poll(&mut pfd, 1, 0) };
    r > 0 && pfd.revents & libc::POLLHUP != 0
}

/// The Landlock ABI version of the running kernel (`landlock_create_ruleset` with the
/// version flag: no ruleset is created).
pub fn landlock_abi() -> io::Result<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and size 0 the call only returns the version.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}

/// Ends this process at once, without running destructors or flushing stdio (a forked
/// child that must not touch its parent's state).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns.
    unsafe { libc::_exit(code) }
}

/// Raises `signal` with its default disposition against this process (to die of it).
pub fn die_of_signal(signal: i32) {
    // SAFETY: resetting a disposition and raising a signal.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// A message header over `iov` and the first `len` bytes of `control` (a u64 buffer keeps
/// the control message aligned as cmsghdr needs). The header points into both: use it
/// while they live.
fn fd_message(iov: &mut libc::iovec, control: &mut [u64; 8], len: usize) -> libc::msghdr {
    // SAFETY: msghdr is plain data; all zeroes is an empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = len.min(std::mem::size_of_val(control)) as _;
    msg
}

/// Most descriptors one message carries (what the 64-byte control buffer holds).
pub const MAX_FDS_PER_MESSAGE: usize = 8;

/// Sends `data` (at least one byte: a stream socket carries no ancillary data without any)
/// over the connected Unix stream socket `socket`, with `fds` attached (`SCM_RIGHTS`).
/// Returns how many bytes went out; the descriptors went with the first.
pub fn send_with_fds(socket: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    if data.is_empty() || fds.len() > MAX_FDS_PER_MESSAGE {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds) as libc::c_uint;
    let mut control = [0u64; 8];
    // SAFETY: the header points at live buffers (sendmsg only reads the iovec's bytes); the
    // CMSG_SPACE of at most 8 fds fits in 64 bytes, and CMSG_FIRSTHDR of a message with that
    // much control space is non-null.
    unsafe {
        let space = if fds.is_empty() {
            0
        } else {
            libc::CMSG_SPACE(fd_bytes) as usize
        };
        let msg = fd_message(&mut iov, &mut control, space);
        if !fds.is_empty() {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes) as _;
            let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
            for (i, fd) in fds.iter().enumerate() {
                std::ptr::write_unaligned(data.add(i), *fd);
            }
        }
        loop {
            let n = libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL);
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// One `recvmsg` into `buf` on a Unix stream socket: the bytes read (0 at end of stream) and
/// the descriptors that came with them (close-on-exec; any beyond the buffer's room are
/// closed by the kernel). `WouldBlock` when nothing is there yet on a non-blocking socket.
pub fn recv_with_fds(socket: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 8];
    let len = std::mem::size_of_val(&control);
    // SAFETY: as in send_with_fds; every control message the kernel returned lies within the
    // buffer, and an SCM_RIGHTS one holds whole fds, now ours.
    unsafe {
        let mut msg = fd_message(&mut iov, &mut control, len);
        let n = loop {
            let n = libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        let mut fds = Vec::new();
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Ok((n, fds))
    }
}

/// Sends `fd` over the connected Unix stream socket `socket` (`SCM_RIGHTS`), with one byte
/// of data.
pub fn send_fd(socket: RawFd, fd: RawFd) -> io::Result<()> {
    send_with_fds(socket, &[0], &[fd]).map(drop)
}

/// Receives one fd sent by [`send_fd`] on `socket` (close-on-exec). `WouldBlock` when
/// nothing is there yet on a non-blocking socket; `UnexpectedEof` when the peer closed
/// without sending one.
pub fn recv_fd(socket: RawFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let (n, fds) = recv_with_fds(socket, &mut byte)?;
    // The first is the one; any more are closed as they drop.
    match fds.into_iter().next() {
        Some(fd) => Ok(fd),
        None if n == 0 => Err(io::ErrorKind::UnexpectedEof.into()),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a message without a file descriptor",
        )),
    }
}

/// An int option of socket `fd` at `SOL_SOCKET`; `None` when it has none (not a socket).
fn socket_option(fd: RawFd, option: libc::c_int) -> Option<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt of an int option into an int.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(value)
}

/// Whether `fd` is a listening TCP socket (IPv4 or IPv6).
pub fn is_tcp_listener(fd: RawFd) -> bool {
    let int = |option| socket_option(fd, option);
    int(libc::SO_ACCEPTCONN) == Some(1)
        && int(libc::SO_TYPE) == Some(libc::SOCK_STREAM)
        && matches!(int(libc::SO_DOMAIN), Some(libc::AF_INET | libc::AF_INET6))
}
