//! The namespace layers: a user namespace (no root needed) that owns a pid and a mount
//! namespace, and a network namespace when the network is off.
//! 1. `unshare` the user and pid namespaces, and a mount namespace when there is something
//!    to protect (a copy of the mount table costs its making and its teardown, and a
//!    `read-only` sandbox mounts nothing); map our uid and gid to themselves (`setgroups`
//!    denied first, as the kernel requires);
//! 2. make every mount private, then make the mounts [`super::protect`] chose, in order:
//!    the protected paths bound read-only over themselves (writes there fail with EROFS),
//!    the pins and the private tmp bound writable over themselves;
//! 3. network off: `unshare` a network namespace and bring its `lo` up, nothing else;
//! 4. the caller then forks: the child is pid 1 of the new pid namespace.

use super::protect::Mount;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;

/// Which namespaces [`enter`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mounts {
    /// A mount namespace only when there are paths to protect.
    AsNeeded,
    /// Always (the probe: the layer must work for every policy).
    Always,
}

/// Enters the namespaces (steps 1-2), failing with EPERM if `fail` says so.
pub fn enter(binds: &[Mount], mounts: Mounts, fail: bool) -> io::Result<()> {
    if fail {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    let (uid, gid) = uexec_sys::real_ids();
    let mount_namespace = mounts == Mounts::Always || !binds.is_empty();
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID;
    if mount_namespace {
        flags |= libc::CLONE_NEWNS;
    }
    uexec_sys::unshare(flags)?;
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    if !mount_namespace {
        return Ok(());
    }
    uexec_sys::make_mounts_private()?;
    for bind in binds {
        let path = bind.path();
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        match bind {
            Mount::ReadOnly(_) => uexec_sys::bind_read_only(&c),
            Mount::Writable(_) => uexec_sys::bind_writable(&c),
        }
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// Enters a network namespace with only `lo`, up (step 3); needs [`enter`] first.
pub fn isolate_network(fail: bool) -> io::Result<()> {
    if fail {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    uexec_sys::unshare(libc::CLONE_NEWNET)?;
    uexec_sys::loopback_up()
}
