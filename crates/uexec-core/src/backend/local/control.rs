//! [`LocalControl`]: writes, signals and termination for one local process, and the one
//! fact they all hang on, where the group's leader is ([`Leader`]). Here, apart from the
//! spawn, because everything after the spawn that goes *to* the process goes through it:
//! 1. writes go to the PTY master or the stdin pipe ([`Stdin`]); a closed end is a
//!    [`WriteOutcome::StdinClosed`], not an error;
//! 2. signals go to the whole process group (the child called `setsid`, so its pid is the
//!    group id) only while the leader is [`Leader::Running`]: once reaped, the id may be
//!    recycled;
//! 3. after the reap, the group is swept once ([`Leader::Swept`]) and the last will hears
//!    of it; a dropped control terminates its process;
//! 4. a pause, the figures and how the tree ended go to the session's cgroup, where it has
//!    one: without, a pause is refused and there are no figures.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::watch;

use super::cgroup::SessionCgroup;
use super::group;
use crate::backend::{
    BackendError, Ending, InputModes, InputWait, ProcessControl, Signal, Usage, WriteOutcome,
};
use crate::events::lock;

/// The process's input end: the PTY master (shared with the PTY reader), our end of the
/// stdin pipe (taken when closed), or none.
pub(super) enum Stdin {
    Pty(Arc<AsyncFd<OwnedFd>>),
    Pipe(tokio::sync::Mutex<Option<pipe::Sender>>),
    Closed,
}

/// Where the process group's leader (the spawned command) is: the one fact that says
/// whether its pid, which is also the group id, may still be signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Leader {
    /// Not reaped: the pid and the group id are ours.
    Running,
    /// Reaped: the group may live on (background jobs) and is swept once, at the exit.
    Reaped,
    /// Swept after the reap: the id may belong to someone else now; never signalled again.
    Swept,
}

/// Writes, signals and kills for one local process.
pub struct LocalControl {
    /// Also the process group id: the child called `setsid`.
    pub(super) pid: u32,
    /// Signals the child itself without any pid-reuse race.
    pub(super) pidfd: Arc<AsyncFd<OwnedFd>>,
    pub(super) leader: Arc<Mutex<Leader>>,
    pub(super) closing: watch::Sender<bool>,
    pub(super) stdin: Stdin,
    /// The session's cgroup, where the machine gives one: every descendant, however it
    /// detached from the group, is in it.
    pub(super) cgroup: Option<SessionCgroup>,
}

impl LocalControl {
    async fn write_bytes(&self, bytes: &[u8]) -> io::Result<WriteOutcome> {
        match &self.stdin {
            Stdin::Closed => Ok(WriteOutcome::StdinClosed),
            Stdin::Pipe(pipe) => {
                let mut pipe = pipe.lock().await;
                let Some(p) = pipe.as_mut() else {
                    return Ok(WriteOutcome::StdinClosed);
                };
                match p.write_all(bytes).await.and(p.flush().await) {
                    Ok(()) => Ok(WriteOutcome::Accepted),
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                        *pipe = None;
                        Ok(WriteOutcome::StdinClosed)
                    }
                    Err(e) => Err(e),
                }
            }
            Stdin::Pty(master) => {
                let mut rest = bytes;
                while !rest.is_empty() {
                    let mut guard = master.writable().await?;
                    match guard.try_io(|fd| uexec_sys::write_fd(fd.as_raw_fd(), rest)) {
                        Ok(Ok(n)) => rest = &rest[n..],
                        Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => {
                            return Ok(WriteOutcome::StdinClosed)
                        }
                        Ok(Err(e)) => return Err(e),
                        Err(_would_block) => continue,
                    }
                }
                Ok(WriteOutcome::Accepted)
            }
        }
    }
}

impl ProcessControl for LocalControl {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, Result<WriteOutcome, BackendError>> {
        Box::pin(async move {
            self.write_bytes(&bytes)
                .await
                .map_err(|e| BackendError::new(format!("writing to the process failed: {e}")))
        })
    }

    fn signal(&self, signal: Signal) -> BoxFuture<'_, Result<(), BackendError>> {
        // Once the leader is reaped the command is over, and its group id may be recycled.
        let leader = lock(&self.leader);
        if *leader == Leader::Running {
            uexec_sys::kill_group(self.pid, signal.number());
        }
        drop(leader);
        Box::pin(async { Ok(()) })
    }

    fn terminate(&self) {
        let leader = lock(&self.leader);
        if *leader == Leader::Running {
            uexec_sys::kill_group(self.pid, uexec_sys::SIGKILL);
            uexec_sys::pidfd_kill(self.pidfd.get_ref(), uexec_sys::SIGKILL);
            if let Some(cgroup) = &self.cgroup {
                cgroup.kill();
            }
            drop(leader);
            let _ = self.closing.send(true);
        } else {
            drop(leader);
            self.kill_leftovers();
        }
    }

    fn close_stdin(&self) -> BoxFuture<'_, Result<WriteOutcome, BackendError>> {
        Box::pin(async move {
            match &self.stdin {
                Stdin::Pipe(pipe) => {
                    let closed = pipe.lock().await.take();
                    Ok(match closed {
                        Some(_) => WriteOutcome::Accepted,
                        None => WriteOutcome::StdinClosed,
                    })
                }
                Stdin::Closed | Stdin::Pty(_) => Ok(WriteOutcome::StdinClosed),
            }
        })
    }

    fn input_modes(&self) -> Option<InputModes> {
        match &self.stdin {
            Stdin::Pty(master) => uexec_sys::terminal_modes(master.as_raw_fd())
                .ok()
                .map(|(echo, canonical)| InputModes { echo, canonical }),
            _ => None,
        }
    }

    fn resize(&self, rows: u16, cols: u16) -> Result<(), BackendError> {
        match &self.stdin {
            Stdin::Pty(master) => uexec_sys::set_window_size(master.as_raw_fd(), rows, cols)
                .map_err(|e| BackendError::new(format!("resizing the terminal failed: {e}"))),
            _ => Err(BackendError::new("this session has no terminal to resize")),
        }
    }

    fn input_wait(&self) -> Option<InputWait> {
        if *lock(&self.leader) != Leader::Running {
            return Some(InputWait::Neither);
        }
        uexec_sys::tree_input_wait(self.pid)
    }

    fn usage(&self) -> Option<Usage> {
        self.cgroup.as_ref().and_then(SessionCgroup::usage)
    }

    fn ending(&self) -> Ending {
        self.cgroup
            .as_ref()
            .map(SessionCgroup::ending)
            .unwrap_or_default()
    }

    fn pause(&self, frozen: bool) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let Some(cgroup) = &self.cgroup else {
                return Err(BackendError::new(
                    "this session has no cgroup to freeze (no writable cgroup v2 here: \
                     `uexec doctor` says why); it runs on its process group alone",
                ));
            };
            let freezing = cgroup.freeze(frozen).map_err(BackendError::new)?;
            // The kernel's notice is waited for off the runtime's threads.
            tokio::task::spawn_blocking(move || freezing.wait())
                .await
                .map_err(|e| BackendError::new(format!("the freeze's wait failed: {e}")))?
                .map_err(BackendError::new)
        })
    }

    fn paused(&self) -> bool {
        self.cgroup.as_ref().is_some_and(SessionCgroup::frozen)
    }

    fn kill_leftovers(&self) {
        let mut leader = lock(&self.leader);
        match *leader {
            // The leader is ours until reaped: its group cannot be anyone else's.
            Leader::Running => {
                uexec_sys::kill_group(self.pid, uexec_sys::SIGKILL);
                if let Some(cgroup) = &self.cgroup {
                    cgroup.kill();
                }
            }
            Leader::Reaped => {
                uexec_sys::kill_group(self.pid, uexec_sys::SIGKILL);
                // What left the group (setsid, a double fork) is still in the cgroup.
                if let Some(cgroup) = &self.cgroup {
                    cgroup.kill_and_remove();
                }
                *leader = Leader::Swept;
                group::swept(self.pid);
            }
            Leader::Swept => {}
        }
        drop(leader);
        let _ = self.closing.send(true);
    }
}

impl Drop for LocalControl {
    fn drop(&mut self) {
        // Nothing outlives its handle: a dropped session takes its process group with it.
        self.terminate();
    }
}
