//! The process's own identity and limits: uids, dumpability, the open-files limit.

use std::io;

/// The effective uid of this process (the user a same-user loopback peer must be).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
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
// The sandbox launcher (`uexec __sandbox-exec`, see the `uexec-sandbox` crate). Every function below is
// for a single-threaded process (the launcher, `uexec doctor`): namespaces, mounts and forks
// there may allocate and need not be async-signal-safe.
// ---------------------------------------------------------------------------------------------

/// The real uid and gid of this process.
pub fn real_ids() -> (u32, u32) {
    // SAFETY: getuid and getgid cannot fail.
    unsafe { (libc::getuid(), libc::getgid()) }
}
