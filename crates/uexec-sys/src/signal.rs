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
