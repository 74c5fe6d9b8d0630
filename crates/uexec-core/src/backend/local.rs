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

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot, watch};

use super::{
    Backend, BackendError, BackendErrorKind, EnvMode, ExitReport, OutputChunk, ProcessControl,
    Signal, SpawnSpec, SpawnedProcess, Stream, WriteOutcome,
};
use crate::limits::{PTY_COLS, PTY_ROWS};
use crate::sys;

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
    let program = spec.argv.first().map(String::as_str).unwrap_or("");
    match e.kind() {
        io::ErrorKind::NotFound if !spec.cwd.is_dir() => {
            format!(
                "working directory {} does not exist: {e}",
                spec.cwd.display()
            )
        }
        io::ErrorKind::NotFound => format!("program {program:?} not found: {e}"),
        io::ErrorKind::PermissionDenied => format!("program {program:?} is not executable: {e}"),
        _ => format!("{program:?}: {e}"),
    }
}

fn spawn_local(spec: &SpawnSpec) -> io::Result<SpawnedProcess> {
    let env = match &spec.env_mode {
        EnvMode::Exact => spec.env.clone(),
        EnvMode::InheritFiltered { drop } => {
            let mut env = crate::env::EnvPolicy {
                drop: drop.clone(),
                ..Default::default()
            }
            .inherited(std::env::vars());
            env.extend(spec.env.clone());
            env
        }
    };
    let program = spec
        .argv
        .first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
    let resolved = match find_program(program, env.get("PATH").map(String::as_str)) {
        Some(path) => path,
        // A path is tried as is: exec says precisely what is wrong with it.
        None if program.contains('/') => PathBuf::from(program),
        None => return Err(io::Error::new(io::ErrorKind::NotFound, "not found in PATH")),
    };
    let mut argv: Vec<CString> = spec
        .argv
        .iter()
        .map(|a| c_string(a))
        .collect::<io::Result<_>>()?;
    if let Some(arg0) = &spec.arg0 {
        argv[0] = c_string(arg0)?;
    }
    let envp = env
        .iter()
        .map(|(k, v)| c_string(&format!("{k}={v}")))
        .collect::<io::Result<Vec<_>>>()?;
    let child_spec = sys::ChildSpec {
        program: c_string(&resolved.to_string_lossy())?,
        argv,
        envp,
        cwd: c_string(&spec.cwd.to_string_lossy())?,
        stdio: [-1; 3],
        controlling_tty: spec.tty,
    };

    let (closing_tx, closing_rx) = watch::channel(false);
    let (out_tx, out_rx) = mpsc::channel(OUTPUT_CHANNEL_CHUNKS);
    let (child, stdin) = if spec.tty {
        let (master, slave) = sys::open_pty(PTY_ROWS, PTY_COLS)?;
        let fd = slave.as_raw_fd();
        let child = sys::spawn_child(&sys::ChildSpec {
            stdio: [fd, fd, fd],
            ..child_spec
        })?;
        drop(slave); // EOF must come when the child's copies close
        sys::set_nonblocking(master.as_raw_fd())?;
        let master = Arc::new(sys::async_fd(master)?);
        tokio::spawn(read_pty(master.clone(), out_tx, closing_rx));
        (child, Stdin::Pty(master))
    } else {
        let (stdin_child, stdin_ours) = if spec.pipe_stdin {
            let (read, write) = sys::pipe_cloexec()?;
            (read, Some(write))
        } else {
            (sys::dev_null()?, None)
        };
        let (out_read, out_write) = sys::pipe_cloexec()?;
        let (err_read, err_write) = sys::pipe_cloexec()?;
        let stdio = [
            stdin_child.as_raw_fd(),
            out_write.as_raw_fd(),
            err_write.as_raw_fd(),
        ];
        let child = sys::spawn_child(&sys::ChildSpec {
            stdio,
            ..child_spec
        })?;
        drop((stdin_child, out_write, err_write));
        let out = pipe::Receiver::from_owned_fd(out_read)?;
        let err = pipe::Receiver::from_owned_fd(err_read)?;
        tokio::spawn(read_pipe(
            out,
            Stream::Stdout,
            out_tx.clone(),
            closing_rx.clone(),
        ));
        tokio::spawn(read_pipe(err, Stream::Stderr, out_tx, closing_rx));
        let stdin = match stdin_ours {
            Some(write) => Stdin::Pipe(tokio::sync::Mutex::new(Some(pipe::Sender::from_owned_fd(
                write,
            )?))),
            None => Stdin::Closed,
        };
        (child, stdin)
    };
    let sys::SpawnedChild { pid, pidfd } = child;
    if let Some(watch) = GROUP_WATCH.get() {
        watch.started(pid);
    }
    let pidfd = Arc::new(sys::async_fd(pidfd)?);
    let reaped = Arc::new(AtomicBool::new(false));
    let (exit_tx, exit_rx) = oneshot::channel();
    tokio::spawn(reap(pid, pidfd.clone(), reaped.clone(), exit_tx));
    Ok(SpawnedProcess {
        pid: Some(pid),
        output: out_rx,
        exit: exit_rx,
        control: Arc::new(LocalControl {
            pid,
            pidfd,
            reaped,
            swept: AtomicBool::new(false),
            closing: closing_tx,
            stdin,
        }),
    })
}

fn c_string(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{s:?} contains a NUL byte"),
        )
    })
}

/// Finds an executable program like `execvp` would: a path with a slash as is, else the
/// first of that name in `PATH`; `None` unless it is an executable file.
pub fn find_program(program: &str, path: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    path.unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .split(':')
        .map(|dir| Path::new(if dir.is_empty() { "." } else { dir }).join(program))
        .find(|p| executable(p))
}

/// Waits for the pidfd to report the exit, then reaps the child.
async fn reap(
    pid: u32,
    pidfd: Arc<AsyncFd<OwnedFd>>,
    reaped: Arc<AtomicBool>,
    exit_tx: oneshot::Sender<ExitReport>,
) {
    let report = loop {
        let mut guard = match pidfd.readable().await {
            Ok(guard) => guard,
            Err(e) => break failed_wait(e),
        };
        match sys::try_reap(pid) {
            Ok(Some(status)) => {
                break ExitReport {
                    exit_code: exit_code_of(status),
                    failure: None,
                }
            }
            Ok(None) => guard.clear_ready(),
            Err(e) => break failed_wait(e),
        }
    };
    reaped.store(true, Ordering::SeqCst);
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
                match guard.try_io(|fd| sys::read_fd(fd.as_raw_fd(), &mut buf)) {
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
                while let Ok(n) = sys::read_fd(master.as_raw_fd(), &mut buf) {
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

/// Writes, signals and kills for one local process.
pub struct LocalControl {
    /// Also the process group id: the child called `setsid`.
    pid: u32,
    /// Signals the child itself without any pid-reuse race.
    pidfd: Arc<AsyncFd<OwnedFd>>,
    reaped: Arc<AtomicBool>,
    /// Set once the group was swept after the reap: from then on its id may be reused by an
    /// unrelated process group, so it is never signalled again.
    swept: AtomicBool,
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
                    match guard.try_io(|fd| sys::write_fd(fd.as_raw_fd(), rest)) {
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
        match signal {
            Signal::Interrupt => sys::kill_group(self.pid, sys::SIGINT),
        }
        Box::pin(async { Ok(()) })
    }

    fn terminate(&self) {
        if self.reaped.load(Ordering::SeqCst) {
            self.kill_leftovers();
            return;
        }
        sys::kill_group(self.pid, sys::SIGKILL);
        sys::pidfd_kill(self.pidfd.get_ref(), sys::SIGKILL);
        let _ = self.closing.send(true);
    }

    fn kill_leftovers(&self) {
        // Only a reaped leader's group is swept once; before the reap the pid is ours.
        let reaped = self.reaped.load(Ordering::SeqCst);
        if !(reaped && self.swept.swap(true, Ordering::SeqCst)) {
            sys::kill_group(self.pid, sys::SIGKILL);
            if reaped {
                if let Some(watch) = GROUP_WATCH.get() {
                    watch.swept(self.pid);
                }
            }
        }
        let _ = self.closing.send(true);
    }
}

impl Drop for LocalControl {
    fn drop(&mut self) {
        // Nothing outlives its handle: a dropped session takes its process group with it.
        self.terminate();
    }
}
