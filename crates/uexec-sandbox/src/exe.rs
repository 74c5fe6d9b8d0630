//! The launcher's executable: the file every sandboxed command starts from, held by this
//! process rather than named by a path.
//!
//! Why: the launcher is `uexec-engine __sandbox-exec`, and that binary often lies where a
//! sandboxed command may write (a checkout that builds uexec, `~/.cargo/bin` with a writable
//! HOME). Were it exec'd by path, a command could replace it, and the next launcher, which
//! starts outside every layer, would be the replacement. So:
//! 1. when the launcher is this process's own binary (the faces' case), it runs from
//!    `/proc/self/exe`: the file this process was started from, whatever its path holds now;
//! 2. otherwise the file is opened when the config is made, and that descriptor is kept:
//!    it runs from `/proc/self/fd/N`, the descriptor left open across the exec so that an
//!    interpreter (`#!`, the tests' stand-ins) can open it too. The launcher marks every
//!    descriptor it inherits close-on-exec first thing, so none reaches the command;
//! 3. `argv[0]` stays the path people know, so `ps` shows `.../uexec-engine __sandbox-exec`.

use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most bytes of a probe's answer read.
const PROBE_OUTPUT_MAX_BYTES: u64 = 64 * 1024;

/// The program that runs [`super::LAUNCHER_SUBCOMMAND`].
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The path people see: `argv[0]` and messages.
    display: PathBuf,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    /// This process's own executable (`/proc/self/exe`).
    Running,
    /// A file opened when the launcher was configured (`O_PATH`), kept open.
    Held(Arc<OwnedFd>),
}

/// What this process's own executable is exec'd through.
const RUNNING_EXE: &str = "/proc/self/exe";

impl Launcher {
    /// This process's own binary: the engine is its own launcher.
    pub fn current_exe() -> io::Result<Self> {
        Ok(Self {
            display: std::env::current_exe()?,
            source: Source::Running,
        })
    }

    /// Another binary, opened now: what runs later is this file, even if `path` is replaced.
    pub fn open(path: impl Into<PathBuf>) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let display = path.into();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(&display)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", display.display())))?;
        // Kept above the descriptors a child's start moves into place (stdio, fd 3).
        let fd = uexec_sys::dup_at_least(file.as_raw_fd(), uexec_sys::PROGRAM_FD_LOWEST)?;
        Ok(Self {
            display,
            source: Source::Held(Arc::new(fd)),
        })
    }

    /// The path people know it by (`argv[0]`, messages).
    pub fn display(&self) -> &Path {
        &self.display
    }

    /// The path to exec: `/proc/self/exe` or `/proc/self/fd/N`. Unique among the launchers
    /// alive in this process (a held descriptor's number is not reused while it is held).
    pub fn program(&self) -> PathBuf {
        match &self.source {
            Source::Running => PathBuf::from(RUNNING_EXE),
            Source::Held(fd) => PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
        }
    }

    /// The descriptor [`Self::program`] goes through, which the exec must keep open.
    pub fn program_fd(&self) -> Option<RawFd> {
        match &self.source {
            Source::Running => None,
            Source::Held(fd) => Some(fd.as_raw_fd()),
        }
    }

    /// Runs `LAUNCHER __sandbox-exec --probe` from the file it holds, with this process's
    /// environment: its stdout and exit status.
    pub(super) fn probe(&self) -> io::Result<(String, std::process::ExitStatus)> {
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        };
        let envp = std::env::vars_os()
            .map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
            .collect::<io::Result<Vec<_>>>()?;
        let (read, write) = uexec_sys::pipe_cloexec()?;
        let null = uexec_sys::dev_null()?;
        let child = uexec_sys::spawn_child(&uexec_sys::ChildSpec {
            program: c(self.program().as_os_str().as_bytes())?,
            argv: vec![
                c(self.display.as_os_str().as_bytes())?,
                c(super::LAUNCHER_SUBCOMMAND.as_bytes())?,
                c(b"--probe")?,
            ],
            envp,
            cwd: c(b"/")?,
            stdio: [null.as_raw_fd(), write.as_raw_fd(), null.as_raw_fd()],
            controlling_tty: false,
            passed_fds: Vec::new(),
            program_fd: self.program_fd(),
            cgroup: None,
        })?;
        drop(write);
        let mut stdout = String::new();
        let read = std::fs::File::from(read)
            .take(PROBE_OUTPUT_MAX_BYTES)
            .read_to_string(&mut stdout);
        let (_, status) = uexec_sys::wait_child(Some(child.pid))?;
        read?;
        Ok((stdout, status))
    }
}

impl PartialEq for Launcher {
    fn eq(&self, other: &Self) -> bool {
        self.program() == other.program()
    }
}

impl Eq for Launcher {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_binary_is_exec_d_through_proc_and_shown_by_its_path() {
        let launcher = Launcher::current_exe().expect("current exe");
        assert_eq!(launcher.program(), Path::new("/proc/self/exe"));
        assert_eq!(launcher.program_fd(), None);
        assert_eq!(launcher.display(), std::env::current_exe().expect("exe"));
    }

    #[test]
    fn another_binary_is_held_open_and_survives_its_path_being_replaced() {
        let dir = std::env::temp_dir().join(format!(
            "uexec-exe-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("launcher");
        std::fs::write(&path, b"first").expect("write");
        let launcher = Launcher::open(&path).expect("opened");
        let fd = launcher.program_fd().expect("held");
        assert_eq!(
            launcher.program(),
            PathBuf::from(format!("/proc/self/fd/{fd}"))
        );
        assert_eq!(launcher.display(), path);
        // Replaced on disk (as a command would: a new file renamed over it).
        let other = dir.join("other");
        std::fs::write(&other, b"second").expect("write");
        std::fs::rename(&other, &path).expect("rename");
        assert_eq!(std::fs::read(launcher.program()).expect("read"), b"first");
        assert_eq!(launcher.clone(), launcher);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
