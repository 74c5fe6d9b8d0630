//! Namespaces and mounts for the sandbox launcher: `unshare`, read-only and writable
//! bind mounts, the loopback of a new network namespace, capabilities, the Landlock ABI.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::*;

/// `unshare(flags)`: the calling process enters new namespaces.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only.
    check(unsafe { libc::unshare(flags) })
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
pub(crate) const ST_RELATIME: libc::c_ulong = 0x1000;

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

pub(crate) fn bind_onto_itself(path: &CStr) -> io::Result<()> {
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
pub(crate) fn mount_flags(path: &CStr) -> io::Result<libc::c_ulong> {
    // SAFETY: statvfs on a valid NUL-terminated path fills a plain struct.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        check(libc::statvfs(path.as_ptr(), &mut st))?;
        Ok(st.f_flag)
    }
}

/// Remounts the bind at `path` read-only or writable. The remount keeps the flags the kernel
/// locks in a user namespace (nosuid, nodev, noexec, atime), or it fails.
pub(crate) fn remount_bind(path: &CStr, read_only: bool) -> io::Result<()> {
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
