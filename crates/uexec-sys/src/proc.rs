//! What `/proc` tells of processes: whether a tree waits for input, a process's name and
//! working directory; and how a small kernel file is read.

use std::ffi::{CStr, CString};
use std::io::{self, Read};
use std::path::Path;

use crate::*;

/// What a process asleep in a system call may be waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputWait {
    /// `read` on fd 0: input, certainly.
    Reading,
    /// The `select`/`poll` family: readline and REPLs wait there before reading, but so do
    /// some servers.
    Polling,
    Neither,
}

pub(crate) fn wait_of(number: i64, fd: u64) -> InputWait {
    if number == libc::SYS_read && fd == 0 {
        return InputWait::Reading;
    }
    let pollers: &[i64] = &[
        libc::SYS_pselect6,
        libc::SYS_ppoll,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_select,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_poll,
    ];
    if pollers.contains(&number) {
        InputWait::Polling
    } else {
        InputWait::Neither
    }
}

/// What the processes of the tree under `leader` (at most 64 of them) wait in, read from
/// `/proc/PID/syscall`: `Reading` if any reads its stdin, else `Polling` if any polls.
/// `None` when the kernel would not say (another user's process, e.g. a setuid `sudo`).
pub fn tree_input_wait(leader: u32) -> Option<InputWait> {
    let mut queue = vec![leader];
    let mut seen = 0;
    let mut unknown = false;
    let mut found = InputWait::Neither;
    while let Some(pid) = queue.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        match std::fs::read_to_string(format!("/proc/{pid}/syscall")) {
            Ok(line) => {
                let mut words = line.split_whitespace();
                let number = words.next().and_then(|w| w.parse::<i64>().ok());
                let fd = words
                    .next()
                    .and_then(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok());
                if let (Some(number), Some(fd)) = (number, fd) {
                    match wait_of(number, fd) {
                        InputWait::Reading => return Some(InputWait::Reading),
                        InputWait::Polling => found = InputWait::Polling,
                        InputWait::Neither => {}
                    }
                }
            }
            Err(_) => unknown = true,
        }
        if let Ok(children) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
            queue.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    if unknown && found == InputWait::Neither {
        None
    } else {
        Some(found)
    }
}

/// `chdir(path)`.
pub fn change_dir(path: &CStr) -> io::Result<()> {
    // SAFETY: chdir of a NUL-terminated path.
    check(unsafe { libc::chdir(path.as_ptr()) })
}

/// Names the calling thread, the process's when it is the main one (`/proc/self/comm`,
/// what `ps -e` and `pgrep` show; at most 15 bytes are kept) after the file name of
/// `argv[0]`. A program exec'd through `/proc/self/exe` is otherwise named `exe`.
pub fn name_after_argv0() {
    use std::os::unix::ffi::OsStrExt;
    let Some(arg0) = std::env::args_os().next() else {
        return;
    };
    let Some(name) = std::path::Path::new(&arg0).file_name() else {
        return;
    };
    let Ok(name) = CString::new(name.as_bytes()) else {
        return;
    };
    // SAFETY: PR_SET_NAME reads a NUL-terminated string (the kernel copies 16 bytes at most).
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}

/// A small kernel file (procfs, cgroupfs) read whole: open, reads into a page-sized buffer
/// until the end, close. `fs::read_to_string` asks such a file its size first (they all
/// say 0) and then reads it 32 bytes, 32, 64...: a `/proc/PID/status` took 11 calls, this
/// takes 4. For paths on the hot paths (a session's end, a daemon's accept).
pub fn read_kernel_file(path: &Path) -> io::Result<String> {
    let mut text = String::with_capacity(4096);
    // Through `Take`, so no size is asked for.
    std::fs::File::open(path)?
        .take(u64::MAX)
        .read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_file_is_read_whole_and_an_absent_one_says_so() {
        let path = std::env::temp_dir().join(format!("uexec-read-small-{}", std::process::id()));
        let text = "x".repeat(10_000);
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_kernel_file(&path).unwrap(), text);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            read_kernel_file(&path).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        assert_eq!(
            read_kernel_file(Path::new("/proc/self/cgroup"))
                .ok()
                .map(|t| t.is_empty()),
            Some(false)
        );
    }
}
