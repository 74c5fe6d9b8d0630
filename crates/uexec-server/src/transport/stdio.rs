//! `--listen stdio`: one connection over the server's own stdin and stdout, one JSON message
//! per line.
//!
//! 1. A writer task drains the connection's queue to stdout, a line per message, flushing
//!    after each so a client waiting for an answer gets it.
//! 2. The reader frames stdin into bounded lines (see [`lines`](super::lines)); blank lines
//!    are skipped, an oversized one is answered with id `-1`.
//! 3. At stdin EOF the connection ends and, since no one can ever resume it (there is no
//!    second stdin), the caller shuts the whole server down, killing its processes.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::lines::{Frame, LineFramer};
use crate::server::ExecServer;

/// How long the writer may take to flush what is queued once the input ended.
const FINAL_FLUSH_TIMEOUT_MS: u64 = 1_000;
/// Size of one read from stdin.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Serves one connection over the process's stdin/stdout until stdin ends.
pub async fn serve(server: Arc<ExecServer>) -> std::io::Result<()> {
    serve_on(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves one connection over any reader/writer pair until the reader ends.
pub async fn serve_on<R, W>(
    server: Arc<ExecServer>,
    mut input: R,
    mut output: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (mut conn, mut queue) = server.connect();
    let writer = tokio::spawn(async move {
        while let Some(text) = queue.recv().await {
            let mut line = text.into_bytes();
            line.push(b'\n');
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });

    let mut framer = LineFramer::new(server.config().max_message_bytes);
    let mut buf = vec![0u8; READ_BUFFER_BYTES];
    let mut frames = Vec::new();
    let result = loop {
        let n = match input.read(&mut buf).await {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(e),
        };
        framer.push(&buf[..n], &mut frames);
        for frame in frames.drain(..) {
            handle(&mut conn, frame).await;
        }
    };
    if let Some(frame) = framer.finish() {
        handle(&mut conn, frame).await;
    }
    conn.finish();
    let _ = tokio::time::timeout(Duration::from_millis(FINAL_FLUSH_TIMEOUT_MS), writer).await;
    result
}

async fn handle(conn: &mut crate::connection::Connection, frame: Frame) {
    match frame {
        Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
        Frame::Line(line) => conn.handle_frame(&line).await,
        Frame::Oversized => {
            conn.reject_frame("failed to parse JSON-RPC message: line too long")
                .await
        }
    }
}
