//! uexec-sys: every raw syscall of uexec, in one place, and the only crate with `unsafe`.
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
//! 5. Nothing but stdio survives the `exec`, except the few descriptors the spawn may pass
//!    ([`ChildSpec::passed_fds`], moved to fds 3, 4, ... in order): the sandbox launcher's
//!    ends of its hand-overs (the allowlist proxy's, the exec listener's), socket pairs no
//!    other process can find (a socket *file* could be swapped).
//!
//! The child is started like `posix_spawn` starts one (shared memory, parent suspended until
//! `exec`), not with `fork`: no page tables are copied and the busy parent takes no
//! copy-on-write faults, which is most of the cost of a spawn. Given a cgroup, it is born
//! there (`clone3` with `CLONE_INTO_CGROUP`) rather than moving itself in, which would wait
//! on the kernel's cgroup lock (see the `clone3` module). It is reaped through a pidfd,
//! which also lets a kill reach exactly that child, never a recycled pid.
//!
//! PTY pairs are opened with `O_CLOEXEC` from the start (`posix_openpt` + `open` of the
//! slave), so a concurrent spawn can never inherit a master or slave: a leaked slave would
//! keep the master from ever seeing EOF.
//!
//! # Architecture invariants
//! - Every `unsafe` block of the workspace is here, each with its SAFETY line; every other
//!   crate says `#![forbid(unsafe_code)]` (the `uexec` front's C `main` is the one exception,
//!   and it only reads its arguments through [`c_main_args`]).
//! - Safe std calls stand wherever std has them: this crate wraps only what std lacks.
//! - It knows nothing of sessions, sandboxes or faces: it depends on `libc`, and on `tokio`
//!   only for [`async_fd`].
//! - The API is flat (`uexec_sys::spawn_child`); the modules split it by concern.

mod clone3;
mod exec_memory;
mod exec_notify;
mod fd;
mod ns;
mod proc;
mod pty;
mod signal;
mod spawn;
mod term;
mod user;

pub use clone3::probe_spawn_into_cgroup;
pub use exec_notify::*;
pub use fd::*;
pub use ns::*;
pub use proc::*;
pub use pty::*;
pub use signal::*;
pub use spawn::*;
pub use term::*;
pub use user::*;

use std::io;

pub(crate) fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The arguments of a C `main` (`argc`, `argv`) as `OsString`s: what a `#![no_main]` binary
/// reads where the C library does not hand them to Rust's start-up (musl, a static build).
///
/// # Safety
/// `argv` must hold `argc` valid NUL-terminated strings, as the C runtime passes them.
pub unsafe fn c_main_args(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    (0..usize::try_from(argc).unwrap_or(0))
        .map(|i| {
            // SAFETY: the caller's promise: `argv[i]` is a valid C string for i < argc.
            let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
            std::ffi::OsString::from_vec(arg.to_bytes().to_vec())
        })
        .collect()
}
