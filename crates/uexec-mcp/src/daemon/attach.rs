//! `uexec attach` on the daemon's side: redraw the session's screen, then carry its output
//! to the person and (with the lease) their keys and terminal size to the session.
//!
//! A PTY session's screen is kept in a `vt100` emulator for its whole life (see
//! `uexec_core::screen`): a full-screen program or a shell prompt comes back as it looks,
//! however long ago it was drawn. A person whose terminal falls behind the output is not
//! queued for without end: the feed drops chunks, and the screen is redrawn instead.
//!
//! A pipe session's output is a log written for a file, not a terminal: its lines end in a
//! bare `\n`, which a terminal in raw mode (the person's, while attached) takes as "down one
//! row" without a carriage return, so the lines staircase. They go out with `\r\n`
//! ([`LineEnds`]), as `tail -f` shows them; a PTY's output is the screen's and goes as it is.

use std::num::NonZeroU16;

use base64::Engine as _;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use uexec_core::screen::{Screen, ScreenFactory};
use uexec_core::store::{Attachment, CatchUp};

use uexec_protocol::daemon::AttachFrame;

/// Output a redraw is rebuilt from when no screen is kept (and a pipe session's log seed).
pub const SEED_BYTES: usize = 256 * 1024;
/// Longest frame a client may send (a paste of keys).
const MAX_FRAME_BYTES: u64 = 1 << 20;

/// The daemon's emulator for the screens it keeps.
pub fn screens() -> ScreenFactory {
    ScreenFactory::new(|rows, cols| Box::new(VtScreen::new(rows, cols)))
}

/// A `vt100` screen without scrollback.
struct VtScreen(vt100::Parser);

impl VtScreen {
    fn new(rows: u16, cols: u16) -> Self {
        let one = NonZeroU16::MIN;
        Self(vt100::Parser::new(
            NonZeroU16::new(rows).unwrap_or(one),
            NonZeroU16::new(cols).unwrap_or(one),
            0,
        ))
    }
}

impl Screen for VtScreen {
    fn feed(&mut self, bytes: &[u8]) {
        self.0.process(bytes);
    }

    fn resize(&mut self, rows: u16, cols: u16) {
        let one = NonZeroU16::MIN;
        self.0.set_size(
            NonZeroU16::new(rows).unwrap_or(one),
            NonZeroU16::new(cols).unwrap_or(one),
        );
    }

    fn render(&self) -> Vec<u8> {
        let screen = self.0.screen();
        let mut out = b"\x1b[H\x1b[2J".to_vec();
        out.extend_from_slice(screen.state_formatted().as_bytes());
        let (row, col) = screen.cursor_position();
        out.extend_from_slice(format!("\x1b[{};{}H", row + 1, col + 1).as_bytes());
        out
    }
}

/// Escape codes that draw the screen `seed` leaves on a `rows`×`cols` terminal (for a PTY
/// session whose screen is not kept), or the seed itself (a pipe session's log).
pub fn redraw(seed: &[u8], rows: u16, cols: u16, tty: bool) -> Vec<u8> {
    if !tty {
        return seed.to_vec();
    }
    let mut screen = VtScreen::new(rows, cols);
    screen.feed(seed);
    screen.render()
}

/// A pipe session's bare `\n` as `\r\n`, across the chunks of one stream: a `\r\n`
/// already there (even split between two chunks) stays as it is.
#[derive(Debug, Default)]
struct LineEnds {
    /// The last byte translated was a `\r`.
    after_cr: bool,
}

impl LineEnds {
    /// `bytes`, the next chunk, for a terminal.
    fn translate(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 16);
        for &b in bytes {
            if b == b'\n' && !self.after_cr {
                out.push(b'\r');
            }
            out.push(b);
            self.after_cr = b == b'\r';
        }
        out
    }

    /// A chunk of a PTY session (`!pipe`) as it is; of a pipe session, translated.
    fn terminal_bytes(&mut self, pipe: bool, bytes: &[u8]) -> Vec<u8> {
        if pipe {
            self.translate(bytes)
        } else {
            bytes.to_vec()
        }
    }
}

/// Why an attached person's connection ended early.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("an attach frame over {MAX_FRAME_BYTES} bytes")]
    FrameTooLong,
    /// Not JSON of an [`AttachFrame`], or keys that are not base64.
    #[error("a bad attach frame: {0}")]
    BadFrame(String),
    #[error(transparent)]
    Exec(#[from] uexec_core::ExecError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

enum Event {
    Output(Option<bytes::Bytes>),
    Frame(std::io::Result<usize>),
    Exited(uexec_core::Outcome),
}

/// Serves one attached person until they detach, the session ends, or the daemon stops;
/// what the session prints passes `filter` ([`super::escapes`]).
pub async fn serve(
    mut attachment: Attachment,
    mut from: impl AsyncBufRead + Unpin,
    mut to: impl AsyncWriteExt + Unpin,
    (mut rows, mut cols): (u16, u16),
    mut filter: super::escapes::EscapeFilter,
) -> Result<(), AttachError> {
    let tty = attachment.tty();
    let id = attachment.session_id();
    let mut ends = LineEnds::default();
    let first = match attachment.screen.take() {
        Some(screen) => screen,
        None => {
            let seed = std::mem::take(&mut attachment.watch.seed);
            ends.terminal_bytes(!tty, &redraw(&seed, rows, cols, tty))
        }
    };
    to.write_all(&filter.pass(&first)).await?;
    to.flush().await?;
    let exited = attachment.exit_future();
    tokio::pin!(exited);
    let mut line = Vec::new();
    loop {
        let event = {
            // A frame may arrive in pieces across turns: `line` keeps them, bounded.
            let room = MAX_FRAME_BYTES.saturating_sub(line.len() as u64);
            let mut limited = (&mut from).take(room);
            tokio::select! {
                chunk = attachment.watch.output.recv() => Event::Output(chunk),
                read = limited.read_until(b'\n', &mut line) => Event::Frame(read),
                outcome = &mut exited => Event::Exited(outcome),
            }
        };
        match event {
            Event::Output(None) => break,
            Event::Output(Some(bytes)) => {
                if attachment.lagged() {
                    let screen = match attachment.resync((rows, cols), SEED_BYTES).await {
                        CatchUp::Screen(screen) => screen,
                        CatchUp::Seed(seed) => {
                            ends.terminal_bytes(!tty, &redraw(&seed, rows, cols, tty))
                        }
                    };
                    to.write_all(&filter.pass(&screen)).await?;
                } else {
                    to.write_all(&filter.pass(&ends.terminal_bytes(!tty, &bytes)))
                        .await?;
                }
                to.flush().await?;
            }
            Event::Frame(read) => {
                if read? == 0 {
                    break; // detached
                }
                if line.last() != Some(&b'\n') {
                    if line.len() as u64 >= MAX_FRAME_BYTES {
                        return Err(AttachError::FrameTooLong);
                    }
                    continue;
                }
                let frame: AttachFrame = serde_json::from_slice(&line)
                    .map_err(|e| AttachError::BadFrame(e.to_string()))?;
                line.clear();
                match frame {
                    AttachFrame::Input(b64) => {
                        let keys = base64::engine::general_purpose::STANDARD
                            .decode(b64)
                            .map_err(|e| AttachError::BadFrame(e.to_string()))?;
                        attachment.write(keys).await?;
                    }
                    AttachFrame::Resize(r, c) => {
                        (rows, cols) = (r.max(1), c.max(1));
                        attachment.resize(rows, cols)?;
                    }
                    AttachFrame::Eof
                    | AttachFrame::Interrupt
                    | AttachFrame::Terminate
                    | AttachFrame::Detach => {
                        return Err(AttachError::BadFrame("a run's frame in an attach".into()));
                    }
                }
            }
            Event::Exited(outcome) => {
                // What it printed last, then how it ended.
                while let Ok(bytes) = attachment.watch.output.try_recv() {
                    to.write_all(&filter.pass(&ends.terminal_bytes(!tty, &bytes)))
                        .await?;
                }
                let how = match (outcome.failure, outcome.exit_code) {
                    (Some(f), _) => format!("failed: {f}"),
                    (None, Some(code)) => format!("exited with code {code}"),
                    (None, None) => "exited".to_owned(),
                };
                to.write_all(format!("\r\n[uexec: session {id} {how}]\r\n").as_bytes())
                    .await?;
                to.flush().await?;
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_is_redrawn_with_its_cursor() {
        let out = redraw(b"first line\r\nPassword: ", 24, 80, true);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("\x1b[H\x1b[2J"));
        assert!(
            text.contains("first line") && text.contains("Password: "),
            "{text:?}"
        );
        assert!(text.ends_with("\x1b[2;11H"), "{text:?}");
        assert_eq!(redraw(b"log\n", 24, 80, false), b"log\n");
    }

    #[test]
    fn a_pipe_log_gets_carriage_returns_once_across_chunks() {
        let mut ends = LineEnds::default();
        assert_eq!(ends.translate(b"one\ntwo\r\n"), b"one\r\ntwo\r\n");
        assert_eq!(ends.translate(b"\n\nthree"), b"\r\n\r\nthree");
        // A `\r\n` split between chunks is not doubled; a lone `\r` before it stays.
        assert_eq!(ends.translate(b"four\r"), b"four\r");
        assert_eq!(ends.translate(b"\nfive\r\r\n"), b"\nfive\r\r\n");
        assert_eq!(ends.translate(b""), b"");
        assert_eq!(ends.translate(b"\n"), b"\r\n");
        // A PTY's screen bytes go as they are (a bare `\n` there moves down a row).
        assert_eq!(ends.terminal_bytes(false, b"\x1b[H\n"), b"\x1b[H\n");
    }
}
