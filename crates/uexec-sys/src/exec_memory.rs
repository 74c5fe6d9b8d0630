//! Another process's memory, read for the supervisor of execs ([`crate::exec_notify`]):
//! `process_vm_readv`, or `/proc/PID/mem` where that call is refused; and its place in the
//! process tree (the kernel's `PIDFD_GET_INFO`, else `/proc/PID/status`).

use std::io;

/// Another process's memory: `process_vm_readv`, or `/proc/PID/mem` where that call is
/// refused (a seccomp filter above uexec, a kernel without it). It reads whole pages and keeps
/// the last two: an exec's path, its `argv` array and its strings mostly share a page or two,
/// and each system call costs some microseconds while the exec waits.
pub(crate) struct Memory {
    pid: u32,
    mem: Option<std::fs::File>,
    /// The pages read last; `older` says which of the two goes next.
    kept: [Page; 2],
    older: usize,
}

/// One page of the other process's memory, as read.
struct Page {
    bytes: Box<[u8; PAGE as usize]>,
    /// Its address; `u64::MAX` while it holds nothing.
    at: u64,
}

const PAGE: u64 = 4096;

impl Memory {
    pub(crate) fn new(pid: u32) -> Self {
        let empty = || Page {
            bytes: Box::new([0; PAGE as usize]),
            at: u64::MAX,
        };
        Self {
            pid,
            mem: None,
            kept: [empty(), empty()],
            older: 0,
        }
    }

    /// Up to `buf.len()` bytes at `at`, never past the end of `at`'s page (a string may end
    /// just before an unmapped one): how many were read.
    pub(crate) fn some(&mut self, at: u64, buf: &mut [u8]) -> io::Result<usize> {
        let bytes = self.at(at)?;
        let n = buf.len().min(bytes.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        Ok(n)
    }

    /// The bytes from `at` to the end of its page, read now unless one of the two pages kept.
    fn at(&mut self, at: u64) -> io::Result<&[u8]> {
        let page = at - at % PAGE;
        let slot = match self.kept.iter().position(|p| p.at == page) {
            Some(slot) => slot,
            None => {
                let slot = self.older;
                self.kept[slot].at = u64::MAX;
                self.read_page(page, slot)?;
                self.kept[slot].at = page;
                self.older = 1 - slot;
                slot
            }
        };
        Ok(&self.kept[slot].bytes[(at - page) as usize..])
    }

    /// Reads the page at `page` into slot `slot`, whole.
    fn read_page(&mut self, page: u64, slot: usize) -> io::Result<()> {
        let buf = &mut self.kept[slot].bytes[..];
        if self.mem.is_none() {
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let remote = libc::iovec {
                iov_base: page as usize as *mut libc::c_void,
                iov_len: buf.len(),
            };
            // SAFETY: `local` covers `buf`, writable for its length; `remote` is only an
            // address in the other process, which the kernel checks.
            let n = unsafe {
                libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0)
            };
            // A page is mapped whole or not at all.
            if n == PAGE as isize {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM) if n < 0 => {
                    self.mem = Some(std::fs::File::open(format!("/proc/{}/mem", self.pid))?);
                }
                _ if n >= 0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
                _ => return Err(e),
            }
        }
        use std::os::unix::fs::FileExt;
        let Some(mem) = &self.mem else {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        };
        let buf = &mut self.kept[slot].bytes[..];
        mem.read_exact_at(buf, page).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => io::Error::from_raw_os_error(libc::EFAULT),
            _ => e,
        })
    }

    /// Exactly `buf.len()` bytes at `at`.
    pub(crate) fn exact(&mut self, mut at: u64, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.some(at, buf)?;
            at += n as u64;
            buf = &mut buf[n..];
        }
        Ok(())
    }

    /// The NUL-terminated string at `at`, its NUL left out, if it is shorter than `max`
    /// bytes with its NUL; `None` if it is not.
    pub(crate) fn c_string(&mut self, mut at: u64, max: usize) -> io::Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        while out.len() < max {
            let want = max - out.len();
            let bytes = self.at(at)?;
            let bytes = &bytes[..want.min(bytes.len())];
            if let Some(end) = bytes.iter().position(|b| *b == 0) {
                out.extend_from_slice(&bytes[..end]);
                return Ok(Some(out));
            }
            out.extend_from_slice(bytes);
            at += bytes.len() as u64;
        }
        Ok(None)
    }
}

/// The process of thread `tid` and that process's parent, in the reader's pid namespace: a
/// thread's exec becomes its process's. Read while the exec is held; the caller then asks
/// whether it still is, since the pid may have been reused meanwhile.
///
/// Asked of a pidfd (`PIDFD_GET_INFO`, Linux 6.13: three system calls, 8-10 µs on a held
/// process of a 2-vCPU VM), else read from `/proc/TID/status` (`Tgid`, `PPid`: the kernel
/// formats some fifty lines for it, about 30 µs, on every exec a session makes under
/// `--rules-at exec`).
pub(crate) fn process_and_parent(tid: u32) -> io::Result<(u32, u32)> {
    match pidfd_info(tid) {
        Ok(found) => Ok(found),
        Err(_) => process_and_parent_of_status(tid),
    }
}

/// `struct pidfd_info` of `<linux/pidfd.h>` as of Linux 6.13 (`PIDFD_INFO_SIZE_VER0`).
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ids: [u32; 8],
    _spare: [u32; 1],
}

const _: () = assert!(std::mem::size_of::<PidfdInfo>() == 64);

/// `PIDFD_THREAD`: a pidfd of a thread, not only of a process's leader (Linux 6.9).
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;
/// `PIDFD_GET_INFO`: `_IOWR(0xFF, 11, struct pidfd_info)`.
const PIDFD_GET_INFO: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<PidfdInfo>() as libc::c_ulong) << 16) | (0xFF << 8) | 11;
/// `PIDFD_INFO_PID`: the pids are filled in (always, when the call knows them).
const PIDFD_INFO_PID: u64 = 1;

fn pidfd_info(tid: u32) -> io::Result<(u32, u32)> {
    // SAFETY: pidfd_open returns a new descriptor (close-on-exec) or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, PIDFD_THREAD) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this descriptor.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_PID,
        ..PidfdInfo::default()
    };
    // SAFETY: the kernel writes at most the size the request encodes into the live local.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            PIDFD_GET_INFO as _,
            &mut info as *mut PidfdInfo,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if info.mask & PIDFD_INFO_PID == 0 || info.tgid == 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOTTY));
    }
    Ok((info.tgid, info.ppid))
}

fn process_and_parent_of_status(tid: u32) -> io::Result<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u32>().ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("no {name} in /proc/{tid}/status"),
                )
            })
    };
    Ok((field("Tgid:")?, field("PPid:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_s_process_and_parent_are_the_same_from_a_pidfd_and_from_proc() {
        let me = std::process::id();
        let of_status = process_and_parent_of_status(me).unwrap();
        assert_eq!(of_status.0, me);
        // SAFETY: getppid cannot fail.
        assert_eq!(of_status.1, unsafe { libc::getppid() } as u32);
        assert_eq!(process_and_parent(me).unwrap(), of_status);
        // A thread other than the leader: its process is the leader's.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // SAFETY: gettid cannot fail.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, me);
        assert_eq!(process_and_parent(tid).unwrap(), of_status);
        match pidfd_info(tid) {
            Ok(found) => assert_eq!(found, of_status),
            // A kernel before 6.13 (or 6.9, for a thread's pidfd): /proc answers.
            Err(e) => eprintln!("no PIDFD_GET_INFO here: {e}"),
        }
        done_tx.send(()).unwrap();
        thread.join().unwrap();
    }
}
