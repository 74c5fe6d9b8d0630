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

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
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
    let (program, args) = spec
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
    let mut cmd = Command::new(program);
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
    cmd.args(args)
        .env_clear()
        .envs(&env)
        .current_dir(&spec.cwd)
        .kill_on_drop(false);
    if let Some(arg0) = &spec.arg0 {
        cmd.arg0(arg0);
    }
    let parent = sys::current_pid();
    let tty = spec.tty;
    // SAFETY: child_setup only makes async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || sys::child_setup(parent, tty));
    }

    let (closing_tx, closing_rx) = watch::channel(false);
    let (out_tx, out_rx) = mpsc::channel(OUTPUT_CHANNEL_CHUNKS);
    let stdin;
    let child;
    if spec.tty {
        let (master, slave) = sys::open_pty(PTY_ROWS, PTY_COLS)?;
        cmd.stdin(Stdio::from(slave.try_clone()?))
            .stdout(Stdio::from(slave.try_clone()?))
            .stderr(Stdio::from(slave));
        child = cmd.spawn()?;
        drop(cmd); // closes our copies of the slave: EOF must come when the child's close
        sys::set_nonblocking(master.as_raw_fd())?;
        let master = Arc::new(sys::async_fd(master)?);
        tokio::spawn(read_pty(master.clone(), out_tx, closing_rx));
        stdin = Stdin::Pty(master);
    } else {
        cmd.stdin(if spec.pipe_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut spawned = cmd.spawn()?;
        drop(cmd);
        if let Some(out) = spawned.stdout.take() {
            tokio::spawn(read_pipe(
                out,
                Stream::Stdout,
                out_tx.clone(),
                closing_rx.clone(),
            ));
        }
        if let Some(err) = spawned.stderr.take() {
            tokio::spawn(read_pipe(err, Stream::Stderr, out_tx, closing_rx));
        }
        stdin = match spawned.stdin.take() {
            Some(pipe) => Stdin::Pipe(tokio::sync::Mutex::new(Some(pipe))),
            None => Stdin::Closed,
        };
        child = spawned;
    }
    let pid = child.id().unwrap_or(0);
    let reaped = Arc::new(AtomicBool::new(false));
    let (exit_tx, exit_rx) = oneshot::channel();
    tokio::spawn(reap(child, reaped.clone(), exit_tx));
    Ok(SpawnedProcess {
        pid: Some(pid),
        output: out_rx,
        exit: exit_rx,
        control: Arc::new(LocalControl {
            pid,
            reaped,
            swept: AtomicBool::new(false),
            closing: closing_tx,
            stdin,
        }),
    })
}

async fn reap(mut child: Child, reaped: Arc<AtomicBool>, exit_tx: oneshot::Sender<ExitReport>) {
    let report = match child.wait().await {
        Ok(status) => ExitReport {
            exit_code: exit_code_of(status),
            failure: None,
        },
        Err(e) => ExitReport {
            exit_code: None,
            failure: Some(format!("waiting for the process failed: {e}")),
        },
    };
    reaped.store(true, Ordering::SeqCst);
    let _ = exit_tx.send(report);
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
    Pipe(tokio::sync::Mutex<Option<ChildStdin>>),
    Closed,
}

/// Writes, signals and kills for one local process.
pub struct LocalControl {
    /// Also the process group id: the child called `setsid`.
    pid: u32,
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
        sys::kill_process(self.pid, sys::SIGKILL);
        let _ = self.closing.send(true);
    }

    fn kill_leftovers(&self) {
        // Only a reaped leader's group is swept once; before the reap the pid is ours.
        let reaped = self.reaped.load(Ordering::SeqCst);
        if !(reaped && self.swept.swap(true, Ordering::SeqCst)) {
            sys::kill_group(self.pid, sys::SIGKILL);
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
