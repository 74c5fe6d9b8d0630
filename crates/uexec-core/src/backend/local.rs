//! Local processes: on pipes (stdout and stderr read concurrently, stdin `/dev/null` or a
//! pipe) or on a PTY (one merged stream, 24x80, the PTY as controlling terminal).
//!
//! Per process, three tasks own the moving parts:
//! 1. the *reaper* owns the `Child`, waits for it and reports the exit;
//! 2. one *reader* per stream (two for pipes, one for the PTY master) sends chunks in arrival
//!    order; the output channel closes when the last reader ends;
//! 3. the caller holds a [`LocalControl`] for writes and signals.
//!
//! Readers end on EOF (EIO on a PTY master once every slave fd is closed), or when told to
//! close: then they first read whatever the kernel already buffered, so a kill never loses
//! output that was written before it.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot, watch};

use super::{
    Backend, BackendError, BackendErrorKind, EnvMode, ExitReport, InputModes, InputWait, Launch,
    OutputChunk, ProcessControl, Signal, SpawnSpec, SpawnedProcess, Stream, WriteOutcome,
};
use crate::events::lock;
use crate::limits::{PTY_COLS, PTY_ROWS};

/// Size of one read from a pipe or PTY.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Chunks in flight between the readers and the session before readers wait.
const OUTPUT_CHANNEL_CHUNKS: usize = 64;

/// Runs processes on this machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalBackend;

/// Hears of every process group the local backend starts and, once it is gone, sweeps: the
/// hook for a *last will*, something outside this process that kills what is left if this
/// process dies without cleaning up (SIGKILL, OOM killer). The parent-death signal reaches
/// only direct children; a background job of a session is a grandchild.
pub trait GroupWatch: Send + Sync + 'static {
    fn started(&self, pgid: u32);
    fn swept(&self, pgid: u32);
}

static GROUP_WATCH: OnceLock<Arc<dyn GroupWatch>> = OnceLock::new();

/// Installs the process-wide [`GroupWatch`] (one per process, as the process has one death);
/// false when one was already installed.
pub fn install_group_watch(watch: Arc<dyn GroupWatch>) -> bool {
    GROUP_WATCH.set(watch).is_ok()
}

impl Backend for LocalBackend {
    fn spawn(&self, spec: SpawnSpec) -> BoxFuture<'_, Result<SpawnedProcess, BackendError>> {
        // Spawn synchronously on the calling worker thread (see `sys` on PR_SET_PDEATHSIG).
        let result = spawn_local(&spec).map_err(|e| {
            let kind = match e.kind() {
                io::ErrorKind::NotFound => BackendErrorKind::NotFound,
                io::ErrorKind::PermissionDenied => BackendErrorKind::PermissionDenied,
                _ => BackendErrorKind::Other,
            };
            BackendError::with_kind(kind, describe_spawn_error(&spec, &e))
        });
        Box::pin(async move { result })
    }
}

fn describe_spawn_error(spec: &SpawnSpec, e: &io::Error) -> String {
    let (argv, _) = spec.command();
    let program = argv.first().map(String::as_str).unwrap_or("");
    match e.kind() {
        io::ErrorKind::NotFound if !spec.cwd.is_dir() => {
            format!(
                "working directory {} does not exist: {e}",
                spec.cwd.display()
            )
        }
        io::ErrorKind::NotFound => format!("program {program:?} not found: {e}"),
        io::ErrorKind::PermissionDenied => format!("program {program:?} is not executable: {e}"),
        _ if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => format!(
            "uexec has run out of file descriptors ({e}); end sessions that are no longer \
             needed (terminate_session) or raise the open-files limit (ulimit -n)"
        ),
        _ => format!("{program:?}: {e}"),
    }
}

fn spawn_local(spec: &SpawnSpec) -> io::Result<SpawnedProcess> {
    uexec_sys::reset_ignored_sigchld();
    let env = match &spec.env_mode {
        EnvMode::Exact => spec.env.clone(),
        EnvMode::InheritFiltered { drop } => {
            let mut env = crate::env::EnvPolicy {
                drop: drop.clone(),
                ..Default::default()
            }
            .inherited(std::env::vars_os());
            env.extend(spec.env.clone());
            env
        }
    };
    let (command, arg0) = spec.command();
    let program = command
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
    let path = env.get(OsStr::new("PATH")).map(OsString::as_os_str);
    let resolved = match find_program(program, path) {
        Some(path) => path,
        // A path is tried as is: exec says precisely what is wrong with it.
        None if program.contains('/') => PathBuf::from(program),
        None => return Err(io::Error::new(io::ErrorKind::NotFound, "not found in PATH")),
    };
    let mut argv: Vec<CString> = command
        .iter()
        .map(|a| c_string(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    if let Some(arg0) = &arg0 {
        argv[0] = c_string(arg0.as_bytes())?;
    }
    let envp = env
        .iter()
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<io::Result<Vec<_>>>()?;
    // Held until the child has its copy, then closed: the child holds the only one.
    let passed = match &spec.passed_fd {
        Some(passed) => Some(passed.take().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the descriptor for this spawn was passed to an earlier one",
            )
        })?),
        None => None,
    };
    let child_spec = uexec_sys::ChildSpec {
        program: c_string(resolved.as_os_str().as_bytes())?,
        argv,
        envp,
        cwd: c_string(spec.cwd.as_os_str().as_bytes())?,
        stdio: [-1; 3],
        controlling_tty: spec.tty,
        passed_fd: passed.as_ref().map(|fd| fd.as_raw_fd()),
        program_fd: None,
    };

    // Everything that can fail without the child is prepared before it exists; what is left
    // after the spawn is guarded, so a failure never leaves a command running unreaped.
    let (closing_tx, closing_rx) = watch::channel(false);
    let (out_tx, out_rx) = mpsc::channel(OUTPUT_CHANNEL_CHUNKS);
    let (child, stdin) = if spec.tty {
        let (master, slave) = uexec_sys::open_pty(PTY_ROWS, PTY_COLS)?;
        uexec_sys::set_nonblocking(master.as_raw_fd())?;
        let master = Arc::new(uexec_sys::async_fd(master)?);
        let fd = slave.as_raw_fd();
        let child = Unclaimed::spawn(
            &uexec_sys::ChildSpec {
                stdio: [fd, fd, fd],
                ..child_spec
            },
            spec.launcher.as_deref(),
        )?;
        drop(slave); // EOF must come when the child's copies close
        tokio::spawn(read_pty(master.clone(), out_tx, closing_rx));
        (child, Stdin::Pty(master))
    } else {
        let (stdin_child, stdin_ours) = if spec.pipe_stdin {
            let (read, write) = uexec_sys::pipe_cloexec()?;
            (read, Some(write))
        } else {
            (uexec_sys::dev_null()?, None)
        };
        let (out_read, out_write) = uexec_sys::pipe_cloexec()?;
        let (err_read, err_write) = uexec_sys::pipe_cloexec()?;
        let out = pipe::Receiver::from_owned_fd(out_read)?;
        let err = pipe::Receiver::from_owned_fd(err_read)?;
        let stdin = match stdin_ours {
            Some(write) => Stdin::Pipe(tokio::sync::Mutex::new(Some(pipe::Sender::from_owned_fd(
                write,
            )?))),
            None => Stdin::Closed,
        };
        let stdio = [
            stdin_child.as_raw_fd(),
            out_write.as_raw_fd(),
            err_write.as_raw_fd(),
        ];
        let child = Unclaimed::spawn(
            &uexec_sys::ChildSpec {
                stdio,
                ..child_spec
            },
            spec.launcher.as_deref(),
        )?;
        drop((stdin_child, out_write, err_write));
        tokio::spawn(read_pipe(
            out,
            Stream::Stdout,
            out_tx.clone(),
            closing_rx.clone(),
        ));
        tokio::spawn(read_pipe(err, Stream::Stderr, out_tx, closing_rx));
        (child, stdin)
    };
    drop(passed);
    let (pid, pidfd) = child.claim()?;
    if let Some(watch) = GROUP_WATCH.get() {
        watch.started(pid);
    }
    let leader = Arc::new(Mutex::new(Leader::Running));
    let (exit_tx, exit_rx) = oneshot::channel();
    tokio::spawn(reap(pid, pidfd.clone(), leader.clone(), exit_tx));
    Ok(SpawnedProcess {
        pid: Some(pid),
        output: out_rx,
        exit: exit_rx,
        control: Arc::new(LocalControl {
            pid,
            pidfd,
            leader,
            closing: closing_tx,
            stdin,
        }),
    })
}

/// A child that exists but is not yet handed to a reaper: dropped (the set-up after the
/// spawn failed), it is killed with its group and reaped, so the call that reports
/// "Failed to create process" leaves nothing running.
struct Unclaimed {
    child: Option<uexec_sys::SpawnedChild>,
}

impl Unclaimed {
    fn spawn(spec: &uexec_sys::ChildSpec, launcher: Option<&dyn Launch>) -> io::Result<Self> {
        // A launched command (a sandbox's) may be started by its launcher: one started
        // ahead, or a cold one from the file it holds.
        let started = match launcher {
            Some(launcher) => launcher.start(spec)?,
            None => None,
        };
        let child = match started {
            Some(child) => child,
            None => uexec_sys::spawn_child(spec)?,
        };
        #[cfg(test)]
        tests::note_spawned(child.pid);
        Ok(Self { child: Some(child) })
    }

    /// Registers the pidfd with the reactor: the last step that can fail.
    fn claim(mut self) -> io::Result<(u32, Arc<AsyncFd<OwnedFd>>)> {
        #[cfg(test)]
        tests::fail_after_spawn()?;
        let child = self
            .child
            .take()
            .ok_or_else(|| io::Error::other("the child was already claimed"))?;
        let pid = child.pid;
        match uexec_sys::async_fd(child.pidfd) {
            Ok(pidfd) => Ok((pid, Arc::new(pidfd))),
            Err(e) => {
                uexec_sys::kill_and_reap(pid);
                Err(e)
            }
        }
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            uexec_sys::pidfd_kill(&child.pidfd, uexec_sys::SIGKILL);
            uexec_sys::kill_and_reap(child.pid);
        }
    }
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} contains a NUL byte", String::from_utf8_lossy(bytes)),
        )
    })
}

/// Finds an executable program like `execvp` would: a path with a slash as is, else the
/// first of that name in `PATH`; `None` unless it is an executable file.
pub fn find_program(program: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| match dir {
            b"" => Path::new(".").join(program),
            dir => Path::new(OsStr::from_bytes(dir)).join(program),
        })
        .find(|p| executable(p))
}

/// Waits for the pidfd to report the exit, then reaps the child. The reap and the change
/// to [`Leader::Reaped`] happen under the leader's lock, so a signal never reaches a pid that
/// was freed by the reap and given to someone else.
async fn reap(
    pid: u32,
    pidfd: Arc<AsyncFd<OwnedFd>>,
    leader: Arc<Mutex<Leader>>,
    exit_tx: oneshot::Sender<ExitReport>,
) {
    let report = loop {
        let mut guard = match pidfd.readable().await {
            Ok(guard) => guard,
            Err(e) => break failed_wait(e),
        };
        let mut state = lock(&leader);
        match uexec_sys::try_reap(pid) {
            Ok(Some(status)) => {
                *state = Leader::Reaped;
                break ExitReport {
                    exit_code: exit_code_of(status),
                    failure: None,
                };
            }
            Ok(None) => {
                drop(state);
                guard.clear_ready();
            }
            Err(e) => {
                *state = Leader::Reaped;
                break failed_wait(e);
            }
        }
    };
    let _ = exit_tx.send(report);
}

fn failed_wait(e: io::Error) -> ExitReport {
    ExitReport {
        exit_code: None,
        failure: Some(format!("waiting for the process failed: {e}")),
    }
}

/// The status code, or `128 + N` for a process killed by signal N.
pub fn exit_code_of(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

async fn read_pipe<R: AsyncRead + Unpin>(
    mut pipe: R,
    stream: Stream,
    tx: mpsc::Sender<OutputChunk>,
    mut closing: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    loop {
        tokio::select! {
            read = pipe.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if send(&tx, stream, &buf[..n]).await.is_err() {
                        return;
                    }
                }
            },
            _ = closed(&mut closing) => {
                // Keep what the kernel already holds, then stop.
                while let Some(Ok(n)) = pipe.read(&mut buf).now_or_never() {
                    if n == 0 || send(&tx, stream, &buf[..n]).await.is_err() {
                        break;
                    }
                }
                return;
            }
        }
    }
}

async fn read_pty(
    master: Arc<AsyncFd<OwnedFd>>,
    tx: mpsc::Sender<OutputChunk>,
    mut closing: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    loop {
        tokio::select! {
            ready = master.readable() => {
                let Ok(mut guard) = ready else { return };
                match guard.try_io(|fd| uexec_sys::read_fd(fd.as_raw_fd(), &mut buf)) {
                    Ok(Ok(0)) | Ok(Err(_)) => return, // EIO: every slave fd is closed
                    Ok(Ok(n)) => {
                        if send(&tx, Stream::Pty, &buf[..n]).await.is_err() {
                            return;
                        }
                    }
                    Err(_would_block) => continue,
                }
            }
            _ = closed(&mut closing) => {
                while let Ok(n) = uexec_sys::read_fd(master.as_raw_fd(), &mut buf) {
                    if n == 0 || send(&tx, Stream::Pty, &buf[..n]).await.is_err() {
                        break;
                    }
                }
                return;
            }
        }
    }
}

/// Resolves when the control asks readers to close (or is gone).
async fn closed(closing: &mut watch::Receiver<bool>) {
    let _ = closing.wait_for(|c| *c).await;
}

async fn send(
    tx: &mpsc::Sender<OutputChunk>,
    stream: Stream,
    bytes: &[u8],
) -> Result<(), mpsc::error::SendError<OutputChunk>> {
    tx.send(OutputChunk {
        stream,
        bytes: Bytes::copy_from_slice(bytes),
    })
    .await
}

enum Stdin {
    Pty(Arc<AsyncFd<OwnedFd>>),
    Pipe(tokio::sync::Mutex<Option<pipe::Sender>>),
    Closed,
}

/// Where the process group's leader (the spawned command) is: the one fact that says
/// whether its pid, which is also the group id, may still be signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leader {
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
    pid: u32,
    /// Signals the child itself without any pid-reuse race.
    pidfd: Arc<AsyncFd<OwnedFd>>,
    leader: Arc<Mutex<Leader>>,
    closing: watch::Sender<bool>,
    stdin: Stdin,
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
            match signal {
                Signal::Interrupt => uexec_sys::kill_group(self.pid, uexec_sys::SIGINT),
                Signal::Terminate => uexec_sys::kill_group(self.pid, uexec_sys::SIGTERM),
            }
        }
        drop(leader);
        Box::pin(async { Ok(()) })
    }

    fn terminate(&self) {
        let leader = lock(&self.leader);
        if *leader == Leader::Running {
            uexec_sys::kill_group(self.pid, uexec_sys::SIGKILL);
            uexec_sys::pidfd_kill(self.pidfd.get_ref(), uexec_sys::SIGKILL);
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

    fn kill_leftovers(&self) {
        let mut leader = lock(&self.leader);
        match *leader {
            // The leader is ours until reaped: its group cannot be anyone else's.
            Leader::Running => uexec_sys::kill_group(self.pid, uexec_sys::SIGKILL),
            Leader::Reaped => {
                uexec_sys::kill_group(self.pid, uexec_sys::SIGKILL);
                *leader = Leader::Swept;
                if let Some(watch) = GROUP_WATCH.get() {
                    watch.swept(self.pid);
                }
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::BTreeMap;

    use crate::backend::Program;

    use super::*;

    thread_local! {
        static FAIL_AFTER_SPAWN: Cell<bool> = const { Cell::new(false) };
        static LAST_PID: Cell<u32> = const { Cell::new(0) };
    }

    pub(super) fn note_spawned(pid: u32) {
        LAST_PID.with(|p| p.set(pid));
    }

    /// Fault injection: the set-up after the spawn fails on this thread once.
    pub(super) fn fail_after_spawn() -> io::Result<()> {
        if FAIL_AFTER_SPAWN.with(|f| f.replace(false)) {
            return Err(io::Error::from_raw_os_error(libc::EMFILE));
        }
        Ok(())
    }

    fn spec(cmd: &str, tty: bool) -> SpawnSpec {
        SpawnSpec {
            program: Program::Shell {
                shell: "/bin/sh".into(),
                login: false,
                script: cmd.into(),
            },
            arg0: None,
            cwd: std::env::temp_dir(),
            env: BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]),
            env_mode: EnvMode::Exact,
            tty,
            pipe_stdin: false,
            passed_fd: None,
            launcher: None,
        }
    }

    /// A passed descriptor is the child's fd 3 (moved there from wherever it was, nothing
    /// else beside), the engine keeps no copy of it (its peer reads the end when the child
    /// exits), and a clone of the spec cannot pass it again.
    #[tokio::test]
    async fn a_passed_descriptor_is_the_child_s_fd_3_and_the_engine_keeps_no_copy() {
        use std::io::Read;
        for tty in [false, true] {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("pair");
            ours.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .expect("timeout");
            // Far from fd 3, so that the move shows.
            let moved = uexec_sys::dup_at_least(theirs.as_raw_fd(), 40).expect("dup");
            drop(theirs);
            let mut s = spec(
                "echo passed >&3; for n in 4 40; do [ -e /proc/$$/fd/$n ] && echo fd$n >&3; done; exit 0",
                tty,
            );
            s.passed_fd = Some(super::super::PassedFd::new(moved));
            let process = LocalBackend.spawn(s.clone()).await.expect("spawn");
            let _ = process.exit.await;
            let mut got = String::new();
            (&ours)
                .read_to_string(&mut got)
                .expect("the end, once the child is gone");
            assert_eq!(got, "passed\n", "tty: {tty}");
            let e = LocalBackend.spawn(s).await.expect_err("passed once");
            assert!(
                e.message.contains("passed to an earlier one"),
                "{}",
                e.message
            );
        }
    }

    #[tokio::test]
    async fn a_failure_after_the_spawn_kills_and_reaps_the_child() {
        for tty in [false, true] {
            FAIL_AFTER_SPAWN.with(|f| f.set(true));
            let err = LocalBackend
                .spawn(spec("exec sleep 600", tty))
                .await
                .expect_err("the injected failure");
            assert!(err.message.contains("file descriptors"), "{}", err.message);
            let pid = LAST_PID.with(Cell::get);
            assert_ne!(pid, 0);
            // Killed and reaped: no such process, not even a zombie.
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "pid {pid} still exists (tty: {tty})"
            );
        }
    }
}
