//! `clone3` with `CLONE_INTO_CGROUP`: a child born in its session's cgroup (Linux 5.7).
//!
//! Why: a child that moves itself into a cgroup (writes `0` into `cgroup.procs`) takes the
//! kernel's cgroup threadgroup lock for writing, and after an idle pause that waits for an
//! RCU grace period: about 7 ms on every call that follows a pause (issue 41), nothing back
//! to back. A child born in the cgroup is never migrated, so it takes no such lock.
//!
//! Why assembly: the child shares the parent's memory (`CLONE_VM | CLONE_VFORK`, as
//! `posix_spawn` does: no page tables copied) and runs on its own stack, so it cannot return
//! from a `syscall()` wrapper: that would unwind frames of the parent's stack. The C library
//! exports no `clone3` wrapper that takes a function, hence a trampoline of a few
//! instructions (x86_64 only; elsewhere every spawn migrates, as before):
//! 1. the parent issues `clone3`, its arguments naming the new stack and the cgroup;
//! 2. the child starts at the instruction after `syscall` with `rax == 0` and its stack
//!    pointer at the top of the new stack (16-byte aligned, so that after `call` pushes the
//!    return address the callee sees the alignment the ABI promises); it clears `rbp` (the
//!    end of the frame chain), calls the child function with its argument and ends with
//!    `SYS_exit` of its result, never coming back into Rust code;
//! 3. the parent, resumed once the child has exec'd or exited (`CLONE_VFORK`), gets the
//!    child's pid, or `-errno`, and the pidfd the kernel wrote (`CLONE_PIDFD`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// `clone3`'s argument block (`struct clone_args`, its size as of Linux 5.7).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_PIDFD: u64 = 0x1000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The function a child runs on its new stack: it execs or returns the exit status.
pub(crate) type ChildFn = extern "C" fn(*mut libc::c_void) -> libc::c_int;

/// Whether a refused `clone3` means this kernel (or the seccomp filter of a container,
/// which often answers ENOSYS for `clone3`) never spawns into a cgroup: the spawn and the
/// next ones migrate instead. Any other error is about this spawn (its cgroup, the pid or
/// memory limits) and fails it.
pub(crate) fn refused_for_good(errno: i32) -> bool {
    matches!(
        errno,
        libc::ENOSYS | libc::EPERM | libc::E2BIG | libc::EINVAL
    )
}

/// Whether this build has the trampoline at all.
pub(crate) const BUILT: bool = cfg!(target_arch = "x86_64");

/// Starts `child(arg)` on `stack` (its top 16-byte aligned) in the cgroup of the directory
/// `cgroup`, sharing memory with us and with us suspended until it execs or exits: its pid
/// and pidfd, or the errno of the refusal (ENOSYS where this build has no trampoline).
///
/// # Safety
/// As for `clone(CLONE_VM | CLONE_VFORK)`: `stack` and everything `arg` points to outlive
/// the child's use of them, `child` makes async-signal-safe calls only, and signals are
/// blocked (no handler of ours may run in the child on our memory).
pub(crate) unsafe fn clone_into_cgroup(
    child: ChildFn,
    arg: *mut libc::c_void,
    stack_top: *mut u8,
    stack_size: usize,
    cgroup: RawFd,
) -> Result<(libc::pid_t, OwnedFd), i32> {
    let mut pidfd: libc::c_int = -1;
    let mut args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_PIDFD | CLONE_INTO_CGROUP,
        pidfd: std::ptr::addr_of_mut!(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack_top as u64 - stack_size as u64,
        stack_size: stack_size as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    // SAFETY: the caller's promises; `args` and `pidfd` live across the call.
    let r = unsafe { raw_clone3(&mut args, std::mem::size_of::<CloneArgs>(), child, arg) };
    if r < 0 {
        return Err(-r as i32);
    }
    // SAFETY: the kernel wrote a new pidfd (close-on-exec) for us to own.
    Ok((r as libc::pid_t, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

#[cfg(target_arch = "x86_64")]
unsafe fn raw_clone3(
    args: *mut CloneArgs,
    size: usize,
    child: ChildFn,
    arg: *mut libc::c_void,
) -> isize {
    let ret: isize;
    // SAFETY: see the module docs. The parent's path clobbers rax, rcx and r11 only (the
    // syscall's); the child's path never returns here. `r12`/`r13` survive the syscall into
    // the child, which is why they carry the function and its argument.
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") args,
            in("rsi") size,
            in("r12") child,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn raw_clone3(
    _args: *mut CloneArgs,
    _size: usize,
    _child: ChildFn,
    _arg: *mut libc::c_void,
) -> isize {
    -(libc::ENOSYS as isize)
}

extern "C" fn exit_at_once(_: *mut libc::c_void) -> libc::c_int {
    0
}

/// Whether this kernel starts a child straight in the cgroup of the directory `cgroup`
/// (tried for real: a child that exits at once; `uexec doctor`). An error is the kernel's
/// refusal (ENOSYS where this build has no trampoline).
pub fn probe_spawn_into_cgroup(cgroup: RawFd) -> io::Result<()> {
    let mut stack = vec![0u8; 16 * 1024];
    // SAFETY: the child only returns 0 (then SYS_exit); signals are blocked around it; the
    // stack lives until the child is gone (CLONE_VFORK waits for that).
    let base = stack.as_mut_ptr();
    let top = (base as usize + stack.len()) & !0xf;
    // SAFETY: the child only returns 0 (then SYS_exit); signals are blocked around it; the
    // stack lives until the child is gone (CLONE_VFORK waits for that).
    let (pid, _pidfd) = with_signals_blocked(|| unsafe {
        clone_into_cgroup(
            exit_at_once,
            std::ptr::null_mut(),
            top as *mut u8,
            top - base as usize,
            cgroup,
        )
    })
    .map_err(io::Error::from_raw_os_error)?;
    let mut status = 0;
    // SAFETY: waitpid on our own child, which has exited (CLONE_VFORK waited for that).
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Runs `f` with every signal blocked: no handler of ours may run in a child on our memory
/// before it resets them.
pub(crate) fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: plain mask changes of this thread, restored before returning.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_or_filter_that_refuses_clone3_is_fallen_back_from_for_good() {
        for errno in [libc::ENOSYS, libc::EPERM, libc::E2BIG, libc::EINVAL] {
            assert!(refused_for_good(errno), "{errno}");
        }
    }

    #[test]
    fn a_refusal_about_this_spawn_or_its_cgroup_is_no_reason_to_fall_back() {
        for errno in [
            libc::EAGAIN,
            libc::ENOMEM,
            libc::EBUSY,
            libc::EACCES,
            libc::EOPNOTSUPP,
            libc::EBADF,
        ] {
            assert!(!refused_for_good(errno), "{errno}");
        }
    }
}
