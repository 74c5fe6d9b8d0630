//! The readers: one task per stream (each pipe, or the PTY master) that sends what it reads
//! as chunks, in arrival order, until EOF (EIO on a PTY master once every slave fd is
//! closed) or until the control says close. Here, apart from the spawn and the control,
//! because a reader knows only its stream, the output channel and the closing signal:
//! 1. read a chunk of up to [`READ_BUFFER_BYTES`] and send it (waiting while the channel is
//!    full: the session reads at its own pace);
//! 2. on close, first read whatever the kernel already buffered, so a kill never loses output
//!    written before it, then end; the output channel closes when the last reader ends.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

use crate::backend::{OutputChunk, Stream};

/// Size of one read from a pipe or PTY.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Reads one pipe of a process on pipes (its stdout or its stderr) as `stream`.
pub(super) async fn read_pipe<R: AsyncRead + Unpin>(
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

/// Reads the PTY master of a process on a PTY: its one merged stream.
pub(super) async fn read_pty(
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
