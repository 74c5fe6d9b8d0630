//! Another process's memory, read for the supervisor of execs ([`crate::exec_notify`]):
//! `process_vm_readv`, or `/proc/PID/mem` where that call is refused; and its place in the
//! process tree (`/proc/PID/status`).

use std::io;

/// Another process's memory: `process_vm_readv`, or `/proc/PID/mem` where that call is
/// refused (a seccomp filter above uexec, a kernel without it).
pub(crate) struct Memory {
    pid: u32,
    mem: Option<std::fs::File>,
}

const PAGE: u64 = 4096;

impl Memory {
    pub(crate) fn new(pid: u32) -> Self {
        Self { pid, mem: None }
    }

    /// Up to `buf.len()` bytes at `at`, never past the end of `at`'s page (a string may end
    /// just before an unmapped one): how many were read.
    pub(crate) fn some(&mut self, at: u64, buf: &mut [u8]) -> io::Result<usize> {
        let room = (PAGE - at % PAGE) as usize;
        let len = room.min(buf.len());
        let buf = &mut buf[..len];
        if self.mem.is_none() {
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let remote = libc::iovec {
                iov_base: at as usize as *mut libc::c_void,
                iov_len: buf.len(),
            };
            // SAFETY: `local` covers `buf`, writable for its length; `remote` is only an
            // address in the other process, which the kernel checks.
            let n = unsafe {
                libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0)
            };
            if n > 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM) if n < 0 => {
                    self.mem = Some(std::fs::File::open(format!("/proc/{}/mem", self.pid))?);
                }
                _ if n == 0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
                _ => return Err(e),
            }
        }
        use std::os::unix::fs::FileExt;
        let Some(mem) = &self.mem else {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        };
        match mem.read_at(buf, at)? {
            0 => Err(io::Error::from_raw_os_error(libc::EFAULT)),
            n => Ok(n),
        }
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
        let mut chunk = [0u8; PAGE as usize];
        while out.len() < max {
            let want = (max - out.len()).min(chunk.len());
            let n = self.some(at, &mut chunk[..want])?;
            if let Some(end) = chunk[..n].iter().position(|b| *b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return Ok(Some(out));
            }
            out.extend_from_slice(&chunk[..n]);
            at += n as u64;
        }
        Ok(None)
    }
}

/// The process of thread `tid` and that process's parent (`Tgid` and `PPid` of
/// `/proc/TID/status`, in the reader's pid namespace): a thread's exec becomes its process's.
/// Read while the exec is held; the caller then asks whether it still is, since the pid may
/// have been reused meanwhile.
pub(crate) fn process_and_parent(tid: u32) -> io::Result<(u32, u32)> {
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
