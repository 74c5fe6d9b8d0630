//! A foreground run, followed: the daemon started the command ([`RunRequest`]) and sends
//! what it prints and how it ends ([`RunFrame`]); this prints it as it comes and passes the
//! person's stdin, Ctrl-C and terminal size up ([`AttachFrame`]).
//!
//! Blocking code, for the front (which has no async runtime) and the engine alike: the
//! frames are read on the calling thread, stdin on a thread of its own, and signals arrive
//! on a pipe ([`uexec_sys::signal_pipe`]) read by a third.
//!
//! - Ctrl-C interrupts the command (SIGINT to its group, or `^C` on its terminal); when it
//!   has not ended [`HINT_AFTER`] later, the run says how to force it, and a second Ctrl-C
//!   kills it (SIGKILL to its group), as `docker compose` does.
//! - Ctrl-\ (SIGQUIT; with `--tty`, the detach key) leaves the command running and says so
//!   ([`EXIT_STILL_RUNNING`]): the daemon is told ([`AttachFrame::Detach`]) before this
//!   process hangs up.
//! - SIGTERM or SIGHUP of this process ends the command (it is this process's job), and the
//!   run reports how it ended; so does a stdout that nobody reads any more (`| head`), and
//!   so does this process's death (SIGKILL, the OOM killer): the daemon ends a run whose
//!   client hangs up without saying it leaves.
//! - `--tty`: this terminal in raw mode is joined to the command's, as `attach --write`
//!   is, its size followed.
//!
//! `uexec run -d` starts the command the same way and leaves at once ([`leave_at_spawn`]).
//!
//! [`RunRequest`]: uexec_protocol::daemon::RunRequest

use std::io::{BufRead, IsTerminal, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use uexec_protocol::daemon::{AttachFrame, RunFrame};

use super::super::common::{exit_code_of, print_json, Failure, EXIT_STILL_RUNNING, EXIT_UEXEC};

/// How long after a Ctrl-C a command that has not ended is said to ignore it (and how to
/// force it: a second Ctrl-C).
pub const HINT_AFTER: Duration = Duration::from_millis(500);

/// What a run reads from the daemon: what came with its reply, then the connection.
pub type Down = std::io::BufReader<std::io::Chain<std::io::Cursor<Vec<u8>>, UnixStream>>;
/// The key that detaches a `--tty` run (Ctrl-\), as for `uexec attach`.
const DETACH_KEY: u8 = 0x1c;

/// How the person's side of a run is joined to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Joined {
    /// The command runs on a terminal, and this stdin is one: raw mode, keys go through.
    pub interactive: bool,
    /// The command reads this stdin (a pipe or a file): it goes through, then its end.
    pub stdin: bool,
}

impl Joined {
    /// Nothing of this process joined: `uexec run -d`.
    pub const NONE: Self = Self {
        interactive: false,
        stdin: false,
    };

    /// How a run with (`tty`) or without a terminal joins this process's stdin.
    pub fn here(tty: bool) -> Self {
        let terminal = std::io::stdin().is_terminal();
        Self {
            interactive: tty && terminal,
            stdin: !terminal,
        }
    }
}

/// The upstream half: frames to the daemon, from any thread, one whole frame at a time.
#[derive(Clone)]
struct Up(Arc<Mutex<UnixStream>>);

impl Up {
    fn send(&self, frame: &AttachFrame) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(frame).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let stream = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        (&*stream).write_all(&line)
    }

    /// Leaves the command running: the daemon is told so, then sees this client go.
    fn leave(&self) {
        let _ = self.send(&AttachFrame::Detach);
        if let Ok(stream) = self.0.lock() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Puts the terminal back when dropped.
struct RawGuard(Option<uexec_sys::SavedTerminal>);

impl Drop for RawGuard {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            uexec_sys::restore_terminal(std::io::stdin().as_raw_fd(), saved);
        }
    }
}

/// Catches the signals a run passes on ([`on_signals`]), before its hello is sent: a Ctrl-C
/// from then on reaches the command, not this process's default action.
pub fn catch_signals(joined: Joined) -> Result<std::os::fd::OwnedFd, Failure> {
    let mut signals = vec![
        uexec_sys::SIGINT,
        uexec_sys::SIGTERM,
        uexec_sys::SIGHUP,
        uexec_sys::SIGQUIT,
    ];
    if joined.interactive {
        signals.push(uexec_sys::SIGWINCH);
    }
    uexec_sys::signal_pipe(&signals).map_err(|e| Failure {
        code: EXIT_UEXEC,
        message: format!("cannot catch signals: {e}"),
    })
}

/// The session a run's first frame names.
fn started(down: &mut impl BufRead) -> Result<i32, Failure> {
    match read_frame(down).map_err(lost)? {
        Some(RunFrame::Started { session_id }) => Ok(session_id),
        other => Err(Failure {
            code: EXIT_UEXEC,
            message: format!("the uexec daemon answered the run with {other:?}"),
        }),
    }
}

fn lost(e: std::io::Error) -> Failure {
    Failure {
        code: EXIT_UEXEC,
        message: format!("the uexec daemon closed the connection: {e}"),
    }
}

/// `uexec run -d` (a detached [`RunRequest`]: the daemon follows it no further): once the
/// command started, prints its id (`{session_id}` with `json`), exit 0.
///
/// [`RunRequest`]: uexec_protocol::daemon::RunRequest
pub fn leave_at_spawn(
    mut down: impl BufRead,
    stream: &UnixStream,
    json: bool,
) -> Result<u8, Failure> {
    let id = started(&mut down)?;
    let _ = stream.shutdown(std::net::Shutdown::Both);
    if json {
        print_json(&serde_json::json!({ "session_id": id }));
    } else {
        println!("{id}");
    }
    if std::io::stderr().is_terminal() {
        eprintln!("uexec: session {id} runs: `uexec logs -f {id}` follows it, `uexec wait {id}` waits for it, `uexec kill {id}` stops it");
    }
    Ok(0)
}

/// Follows a run whose hello the daemon accepted: `down` reads after its reply, `stream` is
/// the connection. Returns the exit code: the command's own, or [`EXIT_STILL_RUNNING`] when
/// the person left it running.
pub fn follow(
    mut down: impl BufRead,
    stream: &UnixStream,
    joined: Joined,
    signals: std::os::fd::OwnedFd,
) -> Result<u8, Failure> {
    let id = started(&mut down)?;
    let up = Up(Arc::new(Mutex::new(stream.try_clone().map_err(lost)?)));
    let left_running = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    std::thread::spawn({
        let (up, left_running, finished) = (up.clone(), left_running.clone(), finished.clone());
        move || {
            on_signals(
                std::fs::File::from(signals),
                &up,
                id,
                &left_running,
                &finished,
            )
        }
    });
    let _raw = RawGuard(if joined.interactive {
        let fd = std::io::stdin().as_raw_fd();
        if let Ok((rows, cols)) = uexec_sys::window_size(std::io::stdout().as_raw_fd()) {
            let _ = up.send(&AttachFrame::Resize(rows, cols));
        }
        uexec_sys::make_raw(fd).ok()
    } else {
        None
    });
    if joined.interactive || joined.stdin {
        let (up, left_running) = (up.clone(), left_running.clone());
        std::thread::spawn(move || carry_stdin(&up, joined.interactive, &left_running));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut stdout = std::io::stdout().lock();
    let mut stdout_open = true;
    let ended = loop {
        let frame = match read_frame(&mut down) {
            Ok(Some(frame)) => frame,
            Ok(None) | Err(_) => break None,
        };
        match frame {
            RunFrame::Output(text) => {
                let bytes = b64.decode(text).map_err(|e| Failure {
                    code: EXIT_UEXEC,
                    message: format!("the uexec daemon sent bad output: {e}"),
                })?;
                if stdout_open
                    && stdout
                        .write_all(&bytes)
                        .and_then(|()| stdout.flush())
                        .is_err()
                {
                    // Nobody reads it any more (`| head`): the command ends, as it would
                    // have writing there itself.
                    stdout_open = false;
                    let _ = up.send(&AttachFrame::Terminate);
                }
            }
            RunFrame::Skipped { bytes } => {
                let _ = stdout.flush();
                eprintln!("\r\nuexec: {bytes} bytes of output not shown: this terminal fell behind (`uexec logs {id}` has them)\r");
            }
            RunFrame::Ended {
                exit_code,
                timed_out_ms,
                failure,
            } => break Some((exit_code, timed_out_ms, failure)),
            RunFrame::Started { .. } => {}
        }
    };
    finished.store(true, Ordering::SeqCst);
    let _ = stdout.flush();
    drop(_raw);
    match ended {
        Some((_, _, Some(failure))) => Err(Failure {
            code: EXIT_UEXEC,
            message: format!("session {id} failed: {failure}"),
        }),
        Some((exit_code, timed_out_ms, None)) => {
            if let Some(ms) = timed_out_ms {
                eprintln!("uexec: the command ran past --timeout {ms} and was stopped");
            }
            Ok(exit_code_of(exit_code.map(i64::from)))
        }
        None if left_running.load(Ordering::SeqCst) => {
            eprintln!("\r\nuexec: still running as session {id} (uexec attach {id})\r");
            Ok(EXIT_STILL_RUNNING)
        }
        None => Err(Failure {
            code: EXIT_UEXEC,
            message: format!(
                "the uexec daemon closed the connection; session {id} may still run (uexec ls)"
            ),
        }),
    }
}

/// The next frame, or None at the end of the stream.
fn read_frame(down: &mut impl BufRead) -> std::io::Result<Option<RunFrame>> {
    let mut line = Vec::new();
    let n = down
        .take(super::super::conn::MAX_LINE_BYTES as u64)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    serde_json::from_slice(&line)
        .map(Some)
        .map_err(std::io::Error::other)
}

/// Signals, as they come: Ctrl-C interrupts (and says how to force a command that ignores
/// it; the second kills it), Ctrl-\ (SIGQUIT) leaves it running, SIGTERM and SIGHUP end
/// it, SIGWINCH passes the size on.
fn on_signals(
    mut pipe: std::fs::File,
    up: &Up,
    id: i32,
    left_running: &AtomicBool,
    ended: &Arc<AtomicBool>,
) {
    let mut interrupted = false;
    let mut byte = [0u8; 1];
    while let Ok(1) = pipe.read(&mut byte) {
        let signal = i32::from(byte[0]);
        let sent = if signal == uexec_sys::SIGINT {
            if interrupted {
                eprintln!("\r\nuexec: Ctrl-C again: killing session {id}\r");
                up.send(&AttachFrame::Terminate)
            } else {
                interrupted = true;
                let ended = ended.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(HINT_AFTER);
                    if !ended.load(Ordering::SeqCst) {
                        eprintln!("\r\nuexec: session {id} has not stopped on Ctrl-C: Ctrl-C again kills it, Ctrl-\\ leaves it running\r");
                    }
                });
                up.send(&AttachFrame::Interrupt)
            }
        } else if signal == uexec_sys::SIGQUIT {
            left_running.store(true, Ordering::SeqCst);
            up.leave();
            return;
        } else if signal == uexec_sys::SIGWINCH {
            match uexec_sys::window_size(std::io::stdout().as_raw_fd()) {
                Ok((rows, cols)) => up.send(&AttachFrame::Resize(rows, cols)),
                Err(_) => Ok(()),
            }
        } else {
            up.send(&AttachFrame::Terminate)
        };
        if sent.is_err() {
            return;
        }
    }
}

/// This stdin to the command: a pipe's bytes then its end, or (`interactive`) the keys
/// typed, until the detach key.
fn carry_stdin(up: &Up, interactive: bool, left_running: &AtomicBool) {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => {
                if !interactive {
                    let _ = up.send(&AttachFrame::Eof);
                }
                return;
            }
            Ok(n) => n,
        };
        let mut keys = &buf[..n];
        let detach = interactive && keys.contains(&DETACH_KEY);
        if let Some(at) = keys.iter().position(|k| interactive && *k == DETACH_KEY) {
            keys = &keys[..at];
        }
        if !keys.is_empty() && up.send(&AttachFrame::Input(b64.encode(keys))).is_err() {
            return;
        }
        if detach {
            left_running.store(true, Ordering::SeqCst);
            up.leave();
            return;
        }
    }
}
