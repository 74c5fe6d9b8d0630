//! A connection whose client is done cancels its calls at once.
//!
//! Why: rmcp, at the end of a conversation, lets its handlers run on for up to 5 s to send
//! answers, and cancels them only then. A poll that ends meanwhile drains the output and
//! the exit into an answer nobody reads: the next client missed lines, and the session
//! vanished with its exit code. A call cancelled loses nothing (it is dropped at an await,
//! before it drains: what `notifications/cancelled` does), so a client that is gone must
//! cancel its calls as that would.
//!
//! Done is the end of what the client sends: it was killed, or it closed its stdin, which
//! is how an MCP client ends a stdio conversation (the relay then shuts its side of the
//! socket). Either way no answer is read any more: a call that went on would drain for
//! nobody.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, BufReader, ReadBuf};
use tokio::net::unix::OwnedReadHalf;
use tokio_util::sync::CancellationToken;

/// The reading side of a daemon connection: at its end (or a failed read), `gone` is
/// cancelled.
pub(super) struct Watched {
    inner: BufReader<OwnedReadHalf>,
    gone: CancellationToken,
}

impl Watched {
    pub(super) fn new(inner: BufReader<OwnedReadHalf>, gone: CancellationToken) -> Self {
        Self { inner, gone }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                self.gone.cancel();
            }
            Poll::Ready(Err(_)) => self.gone.cancel(),
            _ => {}
        }
        polled
    }
}
