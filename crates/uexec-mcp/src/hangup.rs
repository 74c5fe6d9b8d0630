//! The end of a client's input, told at once: a daemon connection's calls are cancelled
//! then, and on every JSON-lines face its listen streams end.
//!
//! Why: rmcp, at the end of a conversation, lets its handlers run on for up to 5 s to send
//! answers, and cancels them only then. In the daemon, a poll that ends meanwhile drains the
//! output and the exit into an answer nobody reads: the next client missed lines, and the
//! session vanished with its exit code. A call cancelled loses nothing (it is dropped at an
//! await, before it drains: what `notifications/cancelled` does), so a client that is gone
//! must cancel its calls as that would.
//!
//! Done is the end of what the client sends: it was killed, or it closed its stdin, which
//! is how an MCP client ends a stdio conversation (the relay then shuts its side of the
//! socket). A `subscriptions/listen` stream, which never ends by itself, would hold the
//! connection (the daemon) or the exit (in-process, and with it the end of its sessions)
//! for those 5 s. In-process, the calls go on: the sessions die with the server, so an
//! answer loses nothing, and `printf REQUESTS | uexec mcp` reads its answers
//! ([`crate::wire::lines`] waits for them, a bounded time).

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// The reading side of a connection: at its end (or a failed read), `gone` is cancelled.
pub(crate) struct Watched<R> {
    inner: R,
    gone: CancellationToken,
}

impl<R> Watched<R> {
    pub(crate) fn new(inner: R, gone: CancellationToken) -> Self {
        Self { inner, gone }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
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
