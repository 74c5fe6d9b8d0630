//! Descriptors: pipes, duplicates, close-on-exec, reads and writes, `SCM_RIGHTS`, and what
//! a socket says of its peer.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::*;

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

/// Waits up to `timeout_ms` for the kernel to flag a change of a pseudo-file such as a
/// cgroup's `cgroup.events` (poll reports `POLLPRI`); true when it did. The file must have
/// been read since it was opened or last flagged, or the old change is seen again.
pub fn wait_priority(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLPRI,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd.
    let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0 && pfd.revents & (libc::POLLPRI | libc::POLLERR) != 0)
}

/// A message header over `iov` and the first `len` bytes of `control` (a u64 buffer keeps
/// the control message aligned as cmsghdr needs). The header points into both: use it
/// while they live.
pub(crate) fn fd_message(
    iov: &mut libc::iovec,
    control: &mut [u64; 8],
    len: usize,
) -> libc::msghdr {
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
pub(crate) fn socket_option(fd: RawFd, option: libc::c_int) -> Option<libc::c_int> {
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
