//! Every raw syscall of the engine, in one place.
//!
//! Why these and not a crate's: the child needs a precise start (steps run in the forked child,
//! before `exec`, so only async-signal-safe calls are allowed):
//! 1. `setsid()`: the command leads its own session and process group, so one `killpg`
//!    reaches every background job it started, and a PTY can become its controlling terminal.
//! 2. `TIOCSCTTY` on the PTY slave (fd 0) for TTY sessions, so job control and Ctrl-C work.
//! 3. `PR_SET_PDEATHSIG(SIGKILL)`, then a re-check of the parent: if uexec died between `fork`
//!    and `prctl`, the signal would never come, so the child kills itself. The death signal is
//!    tied to the forking *thread*; spawns therefore happen on runtime worker threads, which
//!    live as long as the runtime, never on short-lived blocking threads.
//! 4. Default dispositions for every signal and an empty mask: a server started in the
//!    background ignores SIGINT, and ignored signals survive `exec`.
//!
//! PTY pairs are opened with `O_CLOEXEC` from the start (`posix_openpt` + `open` of the
//! slave), so a concurrent spawn can never inherit a master or slave: a leaked slave would
//! keep the master from ever seeing EOF.

use std::ffi::CStr;
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

/// Runs in the forked child before `exec` (see the module docs). Async-signal-safe only.
pub fn child_setup(parent_pid: libc::pid_t, controlling_tty: bool) -> io::Result<()> {
    // SAFETY: async-signal-safe calls only, in the child between fork and exec.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        if controlling_tty && libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
        #[cfg(target_os = "linux")]
        {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent_pid {
                libc::_exit(1);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = parent_pid;
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
    Ok(())
}

/// The pid of this process, for [`child_setup`]'s parent re-check.
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

/// Sends `signal` to one process; a process that is already gone is not an error.
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
