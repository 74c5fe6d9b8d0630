//! Every `exec` handed to a supervisor: a seccomp filter whose only business is `execve` and
//! `execveat` (`SECCOMP_RET_USER_NOTIF`, Linux 5.0+), the listener descriptor it gives, and
//! what a supervisor does with it: receive a held exec, read the program and its arguments
//! from the process's memory, and let it go on (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`, 5.5+) or
//! fail it with an errno.
//!
//! How it is used: the process to watch calls [`ExecListener::install`] just before its own
//! `exec` (the sandbox launcher does), sends the listener to the supervisor
//! ([`send_fd`]) and closes its copy; from then on it and every descendant wait in each
//! `execve`/`execveat` until the supervisor answers. When every copy of the listener is
//! closed (the supervisor died), a held exec and every later one fails with `ENOSYS`: no
//! answer means no exec.
//!
//! Honest limits, which make this a policy that tells a command no, not a wall:
//! - The arguments are read from the memory of the process after it asked: another thread
//!   of it (or a process sharing its memory) can change them between the read and the
//!   kernel's own copy (a time-of-check/time-of-use race). The sandbox stays the wall.
//! - A 32-bit exec (`int 0x80` on x86_64, AArch32 on arm64) and an x32 one are refused
//!   outright (`EACCES`): their arguments would be read with another pointer size, and no
//!   command uexec runs needs them.
//! - The program is the path the process named, made absolute (the working directory, or
//!   the directory descriptor of `execveat`); symlinks are not followed.
//!
//! After the read, [`ExecListener::id_valid`] is asked again: the process may have died
//! and its pid been reused while its memory was read (the kernel's documented guard).

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use crate::exec_memory::{process_and_parent, Memory};
use crate::*;

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (linux/seccomp.h, 6.6; not in `libc` yet).
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;

/// Longest program path read from a process, its NUL included (`PATH_MAX`).
pub const EXEC_PATH_MAX: usize = 4096;
/// Most arguments read from one exec.
pub const EXEC_ARGS_MAX: usize = 4096;
/// Most bytes of arguments (their NULs included) read from one exec.
pub const EXEC_ARG_BYTES_MAX: usize = 256 * 1024;

// Architectures as `seccomp_data.arch` names them (linux/audit.h), and their exec calls.
#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "x86_64")]
const COMPAT: (u32, [u32; 2]) = (0x4000_0003, [11, 358]); // AUDIT_ARCH_I386: execve, execveat
#[cfg(target_arch = "x86_64")]
const X32_EXECS: [u32; 2] = [0x4000_0000 | 520, 0x4000_0000 | 545];
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
#[cfg(target_arch = "aarch64")]
const COMPAT: (u32, [u32; 2]) = (0x4000_0028, [11, 387]); // AUDIT_ARCH_ARM: execve, execveat
#[cfg(target_arch = "aarch64")]
const X32_EXECS: [u32; 0] = [];

/// The filter, in classic BPF: the architecture first (a foreign one's exec is refused,
/// anything else of it allowed), then the call: `execve` and `execveat` go to the listener,
/// x32's copies are refused, everything else is allowed.
pub(crate) fn exec_notify_program() -> Vec<libc::sock_filter> {
    const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code, k, jt, jf| libc::sock_filter { code, jt, jf, k };
    // Offsets into `struct seccomp_data` (nr, then arch).
    let load_nr = op(LOAD, 0, 0, 0);
    let load_arch = op(LOAD, 4, 0, 0);
    let refuse = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
    // `if value: return action` is two instructions: a test that skips the return when
    // unequal, and the return.
    let return_if = |value, action| [op(JEQ, value, 0, 1), op(RET, action, 0, 0)];
    let mut p = vec![load_arch];
    // The compatible 32-bit ABI: its two execs refused, the rest allowed (6 instructions).
    p.push(op(JEQ, COMPAT.0, 0, 6));
    p.push(load_nr);
    for nr in COMPAT.1 {
        p.extend(return_if(nr, refuse));
    }
    p.push(op(RET, libc::SECCOMP_RET_ALLOW, 0, 0));
    // Any other architecture cannot be on this machine: killed, as the sandbox's filter does.
    p.push(op(JEQ, NATIVE_ARCH, 1, 0));
    p.push(op(RET, libc::SECCOMP_RET_KILL_PROCESS, 0, 0));
    p.push(load_nr);
    for nr in [libc::SYS_execve, libc::SYS_execveat] {
        p.extend(return_if(nr as u32, libc::SECCOMP_RET_USER_NOTIF));
    }
    for nr in X32_EXECS {
        p.extend(return_if(nr, refuse));
    }
    p.push(op(RET, libc::SECCOMP_RET_ALLOW, 0, 0));
    p
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, program)` after
/// `PR_SET_NO_NEW_PRIVS`: the new listener's descriptor, or -errno. Only raw system calls,
/// so a forked child of a threaded process may call it.
fn install_raw(program: &[libc::sock_filter]) -> Result<RawFd, i32> {
    let prog = libc::sock_fprog {
        len: program.len() as libc::c_ushort,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with integer arguments; seccomp reads `prog`, which points at `program`,
    // alive for the call. Neither allocates nor touches this process's memory otherwise.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(*libc::__errno_location());
        }
        let fd = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        );
        if fd < 0 {
            return Err(*libc::__errno_location());
        }
        Ok(fd as RawFd)
    }
}

/// Whether this kernel, and whatever seccomp filter this process already runs under, let a
/// process hand its execs to a supervisor: a forked child tries to install the filter. The
/// error says why not: `EINVAL` (a kernel before 5.0, or without seccomp), `EBUSY` (a
/// filter above already has a listener: uexec under another supervisor), `EACCES`/`EPERM`
/// (a filter above forbids `seccomp` itself), `ENOSYS`.
pub fn probe_exec_notify() -> io::Result<()> {
    let program = exec_notify_program();
    // SAFETY: fork; the child makes only raw system calls (prctl, seccomp, close, _exit) on
    // memory prepared before the fork, as a child of a threaded process must.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = match install_raw(&program) {
            // SAFETY: our own new descriptor; _exit never returns.
            Ok(fd) => unsafe {
                libc::close(fd);
                0
            },
            Err(errno) => errno.clamp(1, 255),
        };
        // SAFETY: _exit never returns and runs nothing of the parent's.
        unsafe { libc::_exit(code) }
    }
    let (_, status) = wait_child(Some(pid as u32))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
        None => Err(io::Error::other(format!(
            "the probe's child ended with {status}"
        ))),
    }
}

/// One exec held by the kernel until the supervisor answers.
#[derive(Clone, Copy, Debug)]
pub struct ExecNotification {
    /// The kernel's cookie for this exec: answers and [`ExecListener::id_valid`] name it.
    pub id: u64,
    /// The thread that asked, in the supervisor's pid namespace.
    pub pid: u32,
    /// `SYS_execve` or `SYS_execveat`.
    pub syscall: i64,
    pub args: [u64; 6],
}

/// What a held exec asks to run, as read from the process's memory (bounded by
/// [`EXEC_PATH_MAX`], [`EXEC_ARGS_MAX`] and [`EXEC_ARG_BYTES_MAX`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecCall {
    /// The program, absolute: the path the process named, joined to its working directory
    /// or to `execveat`'s directory; for `fexecve`, the file its descriptor is open on.
    pub program: PathBuf,
    /// The arguments, `argv[0]` first (empty when the process passed none).
    pub argv: Vec<OsString>,
    /// The process that execs (a thread's exec is its process's: it keeps this pid) and its
    /// parent, in the supervisor's pid namespace: the thread's id and 0 until
    /// [`ExecCall::find_process`] reads them (only the record needs them).
    pub pid: u32,
    pub ppid: u32,
}

impl ExecCall {
    /// Reads which process made the exec and its parent, for the record: while the exec is
    /// held (once it goes on, a read waits behind the exec's own locks), and the caller's
    /// answer then says whether the pid still was the exec's.
    pub fn find_process(&mut self) -> io::Result<()> {
        (self.pid, self.ppid) = process_and_parent(self.pid)?;
        Ok(())
    }
}

/// What [`ExecListener::wait`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerState {
    /// An exec waits: [`ExecListener::recv`] takes it without blocking for long.
    Ready,
    /// Nothing within the time given.
    Idle,
    /// No process runs under the filter any more (all exited and were reaped): the end.
    Gone,
}

/// The supervisor's end of an exec-notify filter.
#[derive(Debug)]
pub struct ExecListener {
    fd: OwnedFd,
}

impl AsRawFd for ExecListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for ExecListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl From<OwnedFd> for ExecListener {
    /// A listener received from the process that installed the filter ([`recv_fd`]).
    fn from(fd: OwnedFd) -> Self {
        Self { fd }
    }
}

impl ExecListener {
    /// Installs the filter on the calling thread (inherited by its children, kept across
    /// `exec`), after `PR_SET_NO_NEW_PRIVS`, and returns its listener (close-on-exec). Call
    /// it last among seccomp filters: one installed later that refuses `seccomp` itself is
    /// fine, but one installed earlier that does makes this fail. From here on, this thread's
    /// own `exec` waits for an answer: send the listener away first.
    pub fn install() -> io::Result<Self> {
        let fd = install_raw(&exec_notify_program()).map_err(io::Error::from_raw_os_error)?;
        // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
        Ok(Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Waits up to `timeout_ms` (-1: for ever) for an exec to arrive.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<ListenerState> {
        let mut pfd = libc::pollfd {
            fd: self.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::Interrupted => Ok(ListenerState::Idle),
                _ => Err(e),
            };
        }
        Ok(if pfd.revents & libc::POLLIN != 0 {
            ListenerState::Ready
        } else if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            ListenerState::Gone
        } else {
            ListenerState::Idle
        })
    }

    /// Asks the kernel to switch straight to the supervisor when an exec arrives, and back
    /// to the process when it is answered (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, Linux 6.6):
    /// the round trip of each exec without two scheduler wake-ups. `EINVAL` on older
    /// kernels, which answer as fast as they can all the same.
    pub fn sync_wake_up(&self) -> io::Result<()> {
        // SAFETY: this ioctl takes its flags by value.
        let r = unsafe {
            libc::ioctl(
                self.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Takes the next held exec (`SECCOMP_IOCTL_NOTIF_RECV`), blocking until there is one.
    /// `ENOENT` when the one announced was gone before it was taken (its process was
    /// killed): wait again.
    pub fn recv(&self) -> io::Result<ExecNotification> {
        // The kernel writes its own size of `seccomp_notif`, which may grow: the buffer is
        // the larger of the two, and must be zeroed.
        let words = notif_size().div_ceil(8);
        let mut buf = vec![0u64; words];
        loop {
            buf.fill(0);
            // SAFETY: the buffer holds at least the kernel's `seccomp_notif`, zeroed, and is
            // aligned for it (u64 words).
            let r = unsafe {
                libc::ioctl(
                    self.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_RECV,
                    buf.as_mut_ptr(),
                )
            };
            if r == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        // SAFETY: the kernel filled a `seccomp_notif` at the start of the aligned buffer.
        let notif = unsafe { std::ptr::read(buf.as_ptr().cast::<libc::seccomp_notif>()) };
        Ok(ExecNotification {
            id: notif.id,
            pid: notif.pid,
            syscall: i64::from(notif.data.nr),
            args: notif.data.args,
        })
    }

    /// Whether exec `id` still waits (its process alive, not answered):
    /// `SECCOMP_IOCTL_NOTIF_ID_VALID`.
    pub fn id_valid(&self, id: u64) -> bool {
        // SAFETY: the ioctl reads one u64.
        let r = unsafe {
            libc::ioctl(
                self.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &id as *const u64,
            )
        };
        r == 0
    }

    /// Lets exec `id` go on as if no filter were there.
    pub fn respond_continue(&self, id: u64) -> io::Result<()> {
        self.respond(libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        })
    }

    /// Fails exec `id` with `errno` (`EACCES`: the command's own error handling sees an
    /// ordinary "Permission denied").
    pub fn respond_error(&self, id: u64, errno: i32) -> io::Result<()> {
        self.respond(libc::seccomp_notif_resp {
            id,
            val: 0,
            error: -errno.abs(),
            flags: 0,
        })
    }

    /// `SECCOMP_IOCTL_NOTIF_SEND`; `ENOENT` when the exec's process is gone.
    fn respond(&self, mut resp: libc::seccomp_notif_resp) -> io::Result<()> {
        loop {
            // SAFETY: the ioctl reads one `seccomp_notif_resp`, a live local.
            let r = unsafe {
                libc::ioctl(
                    self.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_SEND,
                    &mut resp as *mut libc::seccomp_notif_resp,
                )
            };
            if r == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// What held exec `n` asks to run, read from its process's memory (and its process and
    /// parent from `/proc`), then `id_valid` asked again so that what was read is known to
    /// be that process's (`ESRCH` if it is gone, whether or not the reading failed).
    /// `InvalidData` when a bound is passed or the memory cannot be read as an exec.
    pub fn read_exec(&self, n: &ExecNotification) -> io::Result<ExecCall> {
        let call = read_exec_call(n);
        if !self.id_valid(n.id) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        call
    }
}

/// Bytes of the kernel's `seccomp_notif` (`SECCOMP_GET_NOTIF_SIZES`), at least ours.
fn notif_size() -> usize {
    static SIZE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        let mut sizes = libc::seccomp_notif_sizes {
            seccomp_notif: 0,
            seccomp_notif_resp: 0,
            seccomp_data: 0,
        };
        // SAFETY: the kernel writes one `seccomp_notif_sizes` into the live local.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_NOTIF_SIZES,
                0,
                &mut sizes as *mut libc::seccomp_notif_sizes,
            )
        };
        let ours = std::mem::size_of::<libc::seccomp_notif>();
        if r == 0 {
            ours.max(usize::from(sizes.seccomp_notif))
        } else {
            ours
        }
    })
}

fn too_big(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("exec {what} too long"))
}

/// Reads the program and arguments of held exec `n` (no `id_valid` check: the caller's).
fn read_exec_call(n: &ExecNotification) -> io::Result<ExecCall> {
    let mut memory = Memory::new(n.pid);
    let (path_at, argv_at, dirfd, flags) = if n.syscall == libc::SYS_execve {
        (n.args[0], n.args[1], libc::AT_FDCWD, 0)
    } else if n.syscall == libc::SYS_execveat {
        (n.args[1], n.args[2], n.args[0] as i32, n.args[4] as i32)
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("system call {} is not an exec", n.syscall),
        ));
    };
    let path = memory
        .c_string(path_at, EXEC_PATH_MAX)?
        .ok_or_else(|| too_big("path"))?;
    let program = resolve(n.pid, &path, dirfd, flags)?;
    // The array first, then its strings: the two pages kept then serve the strings.
    let mut pointers = Vec::new();
    if argv_at != 0 {
        const WORD: u64 = std::mem::size_of::<usize>() as u64;
        loop {
            if pointers.len() >= EXEC_ARGS_MAX {
                return Err(too_big("argument list"));
            }
            let mut word = [0u8; WORD as usize];
            memory.exact(argv_at + pointers.len() as u64 * WORD, &mut word)?;
            match usize::from_ne_bytes(word) as u64 {
                0 => break,
                at => pointers.push(at),
            }
        }
    }
    let mut argv = Vec::with_capacity(pointers.len());
    let mut total = 0usize;
    for at in pointers {
        let left = EXEC_ARG_BYTES_MAX - total;
        let arg = memory
            .c_string(at, left)?
            .ok_or_else(|| too_big("arguments"))?;
        total += arg.len() + 1;
        argv.push(OsString::from_vec(arg));
    }
    Ok(ExecCall {
        program,
        argv,
        pid: n.pid,
        ppid: 0,
    })
}

/// The absolute program path of an exec of `path` relative to `dirfd` (`execveat`'s
/// `AT_EMPTY_PATH` with an empty path: the file `dirfd` is open on).
fn resolve(pid: u32, path: &[u8], dirfd: i32, flags: i32) -> io::Result<PathBuf> {
    let link = |what: String| std::fs::read_link(format!("/proc/{pid}/{what}"));
    if path.is_empty() {
        if flags & libc::AT_EMPTY_PATH != 0 && dirfd >= 0 {
            return link(format!("fd/{dirfd}"));
        }
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    let path = PathBuf::from(OsString::from_vec(path.to_vec()));
    if path.is_absolute() {
        return Ok(tidy(&path));
    }
    let base = if dirfd == libc::AT_FDCWD {
        link("cwd".to_owned())?
    } else {
        link(format!("fd/{dirfd}"))?
    };
    Ok(tidy(&base.join(path)))
}

/// `path` without its `.` components (`..` stays: a symlink may stand before it).
fn tidy(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_of_the_filter_lands_inside_it_and_it_ends_in_a_return() {
        let p = exec_notify_program();
        for (i, op) in p.iter().enumerate() {
            if op.code == (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16 {
                assert!(
                    i + 1 + usize::from(op.jt.max(op.jf)) < p.len(),
                    "jump at {i}"
                );
            }
        }
        let last = p.last().map(|op| (op.code, op.k));
        assert_eq!(
            last,
            Some((
                (libc::BPF_RET | libc::BPF_K) as u16,
                libc::SECCOMP_RET_ALLOW
            ))
        );
    }

    #[test]
    fn a_path_loses_its_dots_but_keeps_its_parents() {
        assert_eq!(tidy(Path::new("/usr/bin/./x")), Path::new("/usr/bin/x"));
        assert_eq!(tidy(Path::new("/a/../b")), Path::new("/a/../b"));
    }

    #[test]
    fn an_exec_s_words_are_read_alike_from_one_page_and_spread_over_many() {
        // This process's own memory, laid out as an exec's: the path, then `argv`'s
        // pointers and strings, packed into one page or each string on a page of its own.
        let words: Vec<Vec<u8>> = ["/bin/echo", "echo", "", "two words", "x"]
            .iter()
            .map(|w| w.as_bytes().to_vec())
            .collect();
        for spread in [false, true] {
            let mut strings = vec![0u8; 16 * 4096];
            let mut at = Vec::new();
            let mut next = 0;
            for w in &words {
                let place = if spread {
                    // Its last bytes and NUL on the next page: read across the edge.
                    let page = (strings.as_ptr() as usize + next).next_multiple_of(4096)
                        - strings.as_ptr() as usize;
                    page + 4096 - w.len() / 2 - 1
                } else {
                    next
                };
                strings[place..place + w.len()].copy_from_slice(w);
                strings[place + w.len()] = 0;
                at.push(strings.as_ptr() as u64 + place as u64);
                next = place + w.len() + 1;
            }
            let mut argv: Vec<u64> = at[1..].to_vec();
            argv.push(0);
            let n = ExecNotification {
                id: 0,
                pid: std::process::id(),
                syscall: libc::SYS_execve,
                args: [at[0], argv.as_ptr() as u64, 0, 0, 0, 0],
            };
            let call = read_exec_call(&n).unwrap();
            assert_eq!(call.program, Path::new("/bin/echo"), "spread: {spread}");
            let read: Vec<Vec<u8>> = call.argv.into_iter().map(OsString::into_vec).collect();
            assert_eq!(read, words[1..], "spread: {spread}");
        }
    }

    #[test]
    fn a_string_is_read_across_pages_and_a_long_one_is_not_returned() {
        // This process's own memory, through the same calls.
        let text = vec![b'x'; 10_000];
        let mut owned = text.clone();
        owned.push(0);
        let mut memory = Memory::new(std::process::id());
        let at = owned.as_ptr() as u64;
        let read = memory.c_string(at, 20_000).unwrap_or_default();
        assert_eq!(read.as_deref(), Some(&text[..]));
        assert_eq!(memory.c_string(at, 10_000).ok(), Some(None));
    }
}
