//! `uexec run` on the daemon's side: start the person's command as a session of theirs and
//! follow it to its end ([`uexec_core::store::Run`]): every byte it prints goes down as a
//! [`RunFrame`], and the person's stdin, Ctrl-C and terminal size come up as
//! [`AttachFrame`]s. A client that says it leaves ([`AttachFrame::Detach`]: `uexec run -d`,
//! Ctrl-\) leaves the session running, the person's own; one that goes away without a word
//! (its `uexec` killed, its terminal closed) ends it, as a shell's job ends with its shell.
//!
//! Input waits for the process to read it, and must not hold up the rest: the output goes
//! on meanwhile, and so do Ctrl-C and resizes, behind at most [`MAX_QUEUED_INPUT_BYTES`] of
//! input the process has not read yet (beyond that the client is not read, and its own
//! writes wait).

use base64::Engine as _;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use uexec_core::store::{Followed, Run, RunInput};
use uexec_protocol::daemon::{AttachFrame, Hello, Reply, RunFrame, RunRequest, PERSON};

use crate::settings;
use crate::tools::parse::Dialect;
use crate::tools::{exec_command, render};

/// Longest frame a client may send (a chunk of stdin, base64).
const MAX_FRAME_BYTES: u64 = 1 << 20;
/// Input read from the client and not yet taken by the process, beyond which the client is
/// not read.
const MAX_QUEUED_INPUT_BYTES: usize = 1 << 20;

/// Why a run's connection ended early (the session runs on).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("a run frame over {MAX_FRAME_BYTES} bytes")]
    FrameTooLong,
    #[error("a bad run frame: {0}")]
    BadFrame(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Follows `run` for its client until it ends, or the client leaves (the session runs on)
/// or goes away (the session ends).
pub async fn serve(
    mut run: Run,
    from: impl AsyncBufRead + Unpin + Send + 'static,
    mut to: impl AsyncWriteExt + Unpin,
) -> Result<(), RunError> {
    let id = run.session_id();
    let detached = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (gone_tx, mut gone) = tokio::sync::oneshot::channel();
    let upstream = tokio::spawn({
        let input = run.input();
        let detached = detached.clone();
        async move {
            let why = carry_input(input, from, &detached).await;
            let _ = gone_tx.send(why);
        }
    });
    if let Err(e) = send(&mut to, &RunFrame::Started { session_id: id }).await {
        upstream.abort();
        run.input().terminate();
        return Err(e.into());
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut ended = false;
    let result = loop {
        let next = tokio::select! {
            next = run.next() => next,
            why = &mut gone => break why.unwrap_or(Ok(())),
        };
        let frame = match next {
            None => break Ok(()),
            Some(Followed::Output(bytes)) => RunFrame::Output(b64.encode(&bytes)),
            Some(Followed::Skipped(bytes)) => RunFrame::Skipped { bytes },
            Some(Followed::Ended(outcome)) => RunFrame::Ended {
                exit_code: outcome.exit_code,
                timed_out_ms: outcome.timed_out_ms,
                failure: outcome.failure,
            },
        };
        ended = matches!(frame, RunFrame::Ended { .. });
        if let Err(e) = send(&mut to, &frame).await {
            break Err(e.into());
        }
        if ended {
            break Ok(());
        }
    };
    upstream.abort();
    if !ended {
        if detached.load(std::sync::atomic::Ordering::SeqCst) {
            tracing::debug!(session_id = id, "run's client left; the session runs on");
        } else {
            tracing::debug!(session_id = id, "run's client went away; the session ends");
            run.input().terminate();
        }
    }
    result
}

/// Reads the client's frames and applies them, until it hangs up (Ok) or breaks the protocol.
async fn carry_input(
    input: RunInput,
    mut from: impl AsyncBufRead + Unpin,
    detached: &std::sync::atomic::AtomicBool,
) -> Result<(), RunError> {
    // The process takes its input in a task of its own, so a process that does not read
    // holds up neither Ctrl-C nor resizes.
    // Unbounded in messages, bounded in bytes: `read_frames` stops reading the client once
    // `queued` (bytes sent here, not yet written) reaches MAX_QUEUED_INPUT_BYTES, and an
    // Eof is one message.
    let (writes, mut to_write) = mpsc::unbounded_channel::<Write>();
    let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let room = std::sync::Arc::new(tokio::sync::Notify::new());
    let writer = tokio::spawn({
        let input = input.clone();
        let queued = queued.clone();
        let room = room.clone();
        async move {
            let mut open = true;
            while let Some(write) = to_write.recv().await {
                match write {
                    Write::Bytes(bytes) => {
                        // Input the process no longer takes is dropped, as a closed pipe would.
                        if open && input.write(&bytes).await.is_err() {
                            open = false;
                        }
                        queued.fetch_sub(bytes.len(), std::sync::atomic::Ordering::SeqCst);
                        room.notify_one();
                    }
                    Write::Eof => {
                        if open {
                            let _ = input.eof().await;
                        }
                        open = false;
                    }
                }
            }
        }
    });
    let result = read_frames(&input, &mut from, &writes, &queued, &room, detached).await;
    // The writer finishes what it was given (the stdin's end among it) even when the client
    // is gone.
    drop(writes);
    drop(writer);
    result
}

enum Write {
    Bytes(Vec<u8>),
    Eof,
}

async fn read_frames(
    input: &RunInput,
    from: &mut (impl AsyncBufRead + Unpin),
    writes: &mpsc::UnboundedSender<Write>,
    queued: &std::sync::atomic::AtomicUsize,
    room: &tokio::sync::Notify,
    detached: &std::sync::atomic::AtomicBool,
) -> Result<(), RunError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut line = Vec::new();
    loop {
        while queued.load(std::sync::atomic::Ordering::SeqCst) >= MAX_QUEUED_INPUT_BYTES {
            room.notified().await;
        }
        line.clear();
        let n = (&mut *from)
            .take(MAX_FRAME_BYTES)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') {
            return Err(RunError::FrameTooLong);
        }
        let frame: AttachFrame =
            serde_json::from_slice(&line).map_err(|e| RunError::BadFrame(e.to_string()))?;
        match frame {
            AttachFrame::Input(text) => {
                let bytes = b64
                    .decode(text)
                    .map_err(|e| RunError::BadFrame(e.to_string()))?;
                queued.fetch_add(bytes.len(), std::sync::atomic::Ordering::SeqCst);
                let _ = writes.send(Write::Bytes(bytes));
            }
            AttachFrame::Eof => {
                let _ = writes.send(Write::Eof);
            }
            AttachFrame::Interrupt => {
                if let Err(e) = input.interrupt().await {
                    tracing::debug!("run: interrupt: {e}");
                }
            }
            AttachFrame::Terminate => input.terminate(),
            AttachFrame::Detach => detached.store(true, std::sync::atomic::Ordering::SeqCst),
            AttachFrame::Resize(rows, cols) => {
                if let Err(e) = input.resize(rows, cols) {
                    tracing::debug!("run: resize: {e}");
                }
            }
        }
    }
}

async fn send(to: &mut (impl AsyncWriteExt + Unpin), frame: &RunFrame) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(frame).map_err(std::io::Error::other)?;
    line.push(b'\n');
    to.write_all(&line).await?;
    to.flush().await
}

/// A run's hello: a person's only; the command starts in their store with this connection's
/// defaults, and an error (a bad argument, a spawn that failed) is the refusal, before
/// anything ran.
pub(super) async fn client(
    daemon: &super::Daemon,
    hello: &Hello,
    req: RunRequest,
    read: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut write: tokio::net::unix::OwnedWriteHalf,
) -> Result<(), super::ConnectionError> {
    let started = async {
        if hello.owner != PERSON {
            return Err("only people run commands in the foreground (owner @person)".to_owned());
        }
        let config = settings::store_config(hello, &daemon.base)?;
        let store = daemon.store_of(&hello.owner, &config)?;
        let dialect = Dialect {
            environments: false,
            extended: true,
            ..Dialect::default()
        };
        let serde_json::Value::Object(arguments) = req.arguments else {
            return Err("the run's arguments are not an object".to_owned());
        };
        let mut exec = exec_command::request(Some(&arguments), dialect)
            .map_err(|e| format!("{}: {e}", exec_command::NAME))?;
        // A person's terminal shows stdout and stderr as the program wrote them.
        exec.one_stream = true;
        let run = store
            .run(&config, exec)
            .await
            .map_err(|e| format!("{}: {}", exec_command::NAME, render::error_text(&e)))?;
        if run.tty() {
            run.input()
                .resize(req.rows, req.cols)
                .map_err(|e| e.to_string())?;
        }
        Ok(run)
    };
    let run = match started.await {
        Ok(run) => run,
        Err(why) => {
            super::write_reply(&mut write, &Reply::refuse(why.clone())).await?;
            return Err(super::ConnectionError::Refused(why));
        }
    };
    super::write_reply(&mut write, &Reply::ok()).await?;
    if req.detach {
        // Started, and left at once: its end is not this client's to be told.
        let session_id = run.session_id();
        send(&mut write, &RunFrame::Started { session_id }).await?;
        return Ok(());
    }
    Ok(serve(run, read, write).await?)
}
