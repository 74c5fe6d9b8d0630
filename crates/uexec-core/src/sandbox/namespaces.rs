//! The namespace layers: a user namespace (no root needed) that owns a pid and a mount
//! namespace, and a network namespace when the network is off.
//! 1. `unshare` the user, pid and mount namespaces; map our uid and gid to themselves
//!    (`setgroups` denied first, as the kernel requires);
//! 2. make every mount private, then bind-mount the protected paths read-only over
//!    themselves (`.git`, uexec's own directories): writes there fail with EROFS;
//! 3. network off: `unshare` a network namespace and bring its `lo` up, nothing else;
//! 4. the caller then forks: the child is pid 1 of the new pid namespace.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::sys;

/// Enters the namespaces (steps 1-2), failing with EPERM if `fail` says so.
pub fn enter(protect: &[PathBuf], fail: bool) -> io::Result<()> {
    if fail {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    let (uid, gid) = sys::real_ids();
    sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS)?;
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    sys::make_mounts_private()?;
    for path in protect {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        sys::bind_read_only(&c)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// Enters a network namespace with only `lo`, up (step 3); needs [`enter`] first.
pub fn isolate_network(fail: bool) -> io::Result<()> {
    if fail {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    sys::unshare(libc::CLONE_NEWNET)?;
    sys::loopback_up()
}
