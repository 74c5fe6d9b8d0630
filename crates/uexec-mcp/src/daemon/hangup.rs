//! A connection whose client is gone for good cancels its calls at once.
//!
//! Why: rmcp, at the end of a conversation, lets its handlers run on for up to 5 s to send
//! answers, and cancels them only then. A poll that ends meanwhile drains the output and
//! the exit into an answer nobody reads: the next client missed lines, and the session
//! vanished with its exit code. A call cancelled loses nothing (it is dropped at an await,
//! before it drains: what `notifications/cancelled` does), so a client that is gone must
//! cancel its calls as that would.
//!
//! Gone is not merely done sending: `printf REQUEST | uexec mcp` ends its stdin and waits
//! for the answers, so the relay shuts down its writing side only. At the end of what the
//! client sent, the socket tells the two apart: a peer that closed (or was killed) hung up
//! both ways ([`uexec_sys::hung_up`]).

use std::os::fd::AsFd as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, BufReader, ReadBuf};
use tokio::net::unix::OwnedReadHalf;
use tokio_util::sync::CancellationToken;

/// The reading side of a daemon connection: at its end, `gone` is cancelled if the client
/// hung up for good (or the read failed).
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
                let socket = self.inner.get_ref().as_ref();
                if uexec_sys::hung_up(socket.as_fd()) {
                    self.gone.cancel();
                }
            }
            Poll::Ready(Err(_)) => self.gone.cancel(),
            _ => {}
        }
        polled
    }
}
