//! Signal dispositions: what a face ignores, what a child resets, how a launcher waits.

use std::io;

use crate::*;

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

/// Numbers of the signals the engine sends.
pub const SIGINT: i32 = libc::SIGINT;
/// SIGKILL.
pub const SIGKILL: i32 = libc::SIGKILL;
/// SIGTERM.
pub const SIGTERM: i32 = libc::SIGTERM;

/// `PR_SET_PDEATHSIG`: this process gets `signal` when its parent dies.
pub fn set_parent_death_signal(signal: i32) -> io::Result<()> {
    // SAFETY: prctl with an integer argument.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) })
}

pub(crate) extern "C" fn ignore_signal(_: libc::c_int) {}

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

/// Raises `signal` with its default disposition against this process (to die of it).
pub fn die_of_signal(signal: i32) {
    // SAFETY: resetting a disposition and raising a signal.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// SIGHUP.
pub const SIGHUP: i32 = libc::SIGHUP;
/// SIGWINCH (the terminal changed size).
pub const SIGWINCH: i32 = libc::SIGWINCH;
/// SIGQUIT (Ctrl-\ on a terminal in its usual mode).
pub const SIGQUIT: i32 = libc::SIGQUIT;

/// Where [`signal_pipe`]'s handler writes (-1: none yet).
static SIGNAL_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn write_signal_number(signal: libc::c_int) {
    let fd = SIGNAL_PIPE.load(std::sync::atomic::Ordering::SeqCst);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; a full pipe drops the byte (non-blocking).
        unsafe {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
    }
}

/// Delivers `signals` as bytes (each its number) on the returned pipe, whichever thread the
/// kernel picks to take them: a blocking program reads them in a thread of its own. Once per
/// process (a second call gets an error); SIGPIPE is ignored as well, so a write to a reader
/// that went away fails with EPIPE instead of ending the process.
pub fn signal_pipe(signals: &[i32]) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let mut fds = [-1; 2];
    // SAFETY: pipe2 fills two fds, which are then owned here.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both fds were just made and are owned by nobody else.
    let (read, write) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    crate::fd::set_nonblocking(std::os::fd::AsRawFd::as_raw_fd(&write))?;
    let write = std::os::fd::IntoRawFd::into_raw_fd(write);
    if SIGNAL_PIPE
        .compare_exchange(
            -1,
            write,
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
        )
        .is_err()
    {
        // SAFETY: the fd is ours and unused.
        unsafe { libc::close(write) };
        return Err(io::Error::other("signal_pipe was already set up"));
    }
    for &signal in signals {
        // SAFETY: a sigaction with a valid, async-signal-safe handler and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = write_signal_number as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            check(libc::sigaction(signal, &action, std::ptr::null_mut()))?;
        }
    }
    // SAFETY: setting one disposition to "ignore"; no handler involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    Ok(read)
}
