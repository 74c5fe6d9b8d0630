//! Writing to a session: the model's `write_stdin` (SPEC §3), which then observes the
//! session for its window, and a person's `send_input`, which does not. Both, and an
//! attached terminal ([`super::attach`]), go through one path, [`deliver`]: the write, the
//! close of stdin, the deadline; each caller says what an outcome means to its reader.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::SessionStore;
use crate::backend::{Signal, WriteOutcome};
use crate::config::StoreConfig;
use crate::error::ExecError;
use crate::events::EventKind;
use crate::limits::{
    write_window_ms, MAX_WRITE_CHARS_BYTES, POST_EXIT_CLOSE_WAIT_MS, TTY_WRITE_SETTLE_MS,
};
use crate::output::snapshot::Snapshot;
use crate::output::until::Condition;
use crate::request::WriteRequest;
use crate::session::Session;
use crate::spawn as plan;

impl SessionStore {
    /// Writes to (or polls) a session and observes it for its window (SPEC §3).
    pub async fn write_stdin(self: &Arc<Self>, req: WriteRequest) -> Result<Snapshot, ExecError> {
        self.write_stdin_for(&self.config, req).await
    }

    /// [`Self::write_stdin`] with a caller's defaults (token budget, secret input): see
    /// [`Self::exec_command_for`].
    pub async fn write_stdin_for(
        self: &Arc<Self>,
        caller: &StoreConfig,
        req: WriteRequest,
    ) -> Result<Snapshot, ExecError> {
        let id = req.session_id;
        let max_output_tokens = plan::token_budget(caller, req.max_output_tokens)?;
        if req.chars.len() > MAX_WRITE_CHARS_BYTES {
            return Err(ExecError::invalid(
                "chars",
                format!(
                    "{} bytes is more than the {MAX_WRITE_CHARS_BYTES} a single write accepts",
                    req.chars.len()
                ),
            ));
        }
        let condition = req.until.as_ref().map(Condition::new).transpose()?;
        let is_poll = req.chars.is_empty() && !req.eof;
        let window = Duration::from_millis(write_window_ms(req.yield_time_ms, is_poll));
        let session = self.touch(id).ok_or(ExecError::UnknownProcess(id))?;
        if req.eof && !session.info.pipe_stdin {
            return Err(ExecError::invalid(
                "eof",
                format!("session {id} has no piped stdin to close (start it with stdin: \"pipe\"; on a tty session type \"\\u0004\" for Ctrl-D)"),
            ));
        }
        let hygiene = session.info.hygiene.with(req.hygiene);
        if session.leased() && (!req.chars.is_empty() || req.eof) {
            return Err(ExecError::Leased { session_id: id });
        }
        let _interaction = session.interaction.lock().await;
        // A call queued behind the one that reported the exit finds the id dead.
        if session.reported() {
            return Err(ExecError::UnknownProcess(id));
        }
        let aborting = req.chars == "\u{3}" || req.chars == "\u{4}";
        if !req.chars.is_empty()
            && !aborting
            && !caller.allow_secret_input
            && session.awaiting_secret()
        {
            return Err(ExecError::SecretPrompt { session_id: id });
        }

        if session.info.pipe_stdin && (req.eof || (!req.chars.is_empty() && req.chars != "\u{3}")) {
            self.write_pipe(&session, &req, window).await?;
        } else if !req.chars.is_empty() {
            if session.info.tty {
                let write = deliver(&session, req.chars.as_bytes(), false, Some(window));
                let Some(outcome) = write.await? else {
                    return Err(ExecError::Write {
                        session_id: id,
                        message: format!(
                            "the process did not read its input within {} ms",
                            window.as_millis()
                        ),
                    });
                };
                if outcome != WriteOutcome::Accepted {
                    // The backend no longer has a live stdin for it: the process is gone.
                    session.mark_exited();
                }
                tokio::time::sleep(Duration::from_millis(TTY_WRITE_SETTLE_MS)).await;
            } else if req.chars == "\u{3}" {
                if let Err(e) = session.control().signal(Signal::Interrupt).await {
                    session.fail_and_terminate(e.message);
                }
            } else {
                return Err(ExecError::StdinClosed { session_id: id });
            }
        }

        let window_start = Instant::now();
        let reason = session
            .observe(
                window_start + window,
                Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS),
                condition.as_ref(),
            )
            .await;
        let snapshot = self
            .conclude(&session, window_start, max_output_tokens, hygiene, reason)
            .await;
        let still_running = matches!(&snapshot, Ok(s) if s.session_id().is_some());
        if !is_poll || still_running {
            self.events.publish(
                &session.info.call_id,
                id,
                EventKind::TerminalInteraction { stdin: req.chars },
            );
        }
        snapshot
    }

    /// Writes `chars` to a piped stdin, then closes it when `eof` is asked.
    async fn write_pipe(
        &self,
        session: &Session,
        req: &WriteRequest,
        window: Duration,
    ) -> Result<(), ExecError> {
        let id = session.id();
        let failed = |message: String| ExecError::Write {
            session_id: id,
            message,
        };
        match deliver(session, req.chars.as_bytes(), req.eof, Some(window)).await? {
            Some(WriteOutcome::Accepted) => Ok(()),
            Some(WriteOutcome::StdinClosed) => Err(failed(
                "its stdin is closed (eof was sent, or the process closed it)".to_owned(),
            )),
            Some(WriteOutcome::UnknownProcess) => {
                session.mark_exited();
                Ok(())
            }
            None => Err(failed(format!(
                "the process did not read its input within {} ms",
                window.as_millis()
            ))),
        }
    }

    /// Writes to a session without observing it (people: the output stays for the session's
    /// owner). `chars` goes to the terminal or the stdin pipe; on a pipe session without one,
    /// only `"\u{3}"` (an interrupt) is accepted; `eof` closes a stdin pipe.
    pub async fn send_input(&self, id: i32, chars: &str, eof: bool) -> Result<(), ExecError> {
        if chars.len() > MAX_WRITE_CHARS_BYTES {
            return Err(ExecError::invalid(
                "chars",
                format!(
                    "{} bytes is more than the {MAX_WRITE_CHARS_BYTES} a single write accepts",
                    chars.len()
                ),
            ));
        }
        let session = self.touch(id).ok_or(ExecError::UnknownProcess(id))?;
        if eof && !session.info.pipe_stdin {
            return Err(ExecError::invalid(
                "eof",
                format!("session {id} has no piped stdin to close"),
            ));
        }
        let failed = |message: String| ExecError::Write {
            session_id: id,
            message,
        };
        if chars == "\u{3}" && !session.info.tty {
            return session
                .control()
                .signal(Signal::Interrupt)
                .await
                .map_err(|e| failed(e.message));
        }
        if !session.info.tty && !session.info.pipe_stdin {
            return Err(ExecError::StdinClosed { session_id: id });
        }
        let within = Duration::from_millis(SEND_INPUT_WITHIN_MS);
        match deliver(&session, chars.as_bytes(), eof, Some(within)).await? {
            Some(WriteOutcome::Accepted) => {
                self.events.publish(
                    &session.info.call_id,
                    id,
                    EventKind::TerminalInteraction {
                        stdin: chars.to_owned(),
                    },
                );
                Ok(())
            }
            Some(_) => Err(failed("its input is closed".to_owned())),
            None => Err(failed(
                "the process did not read its input within 30 s".to_owned(),
            )),
        }
    }
}

/// How long a person's write (`uexec send`) may wait for the process to take its input.
const SEND_INPUT_WITHIN_MS: u64 = 30_000;

/// The one write path: `chars` (if any) to the session's terminal or stdin, then, when
/// `eof` is asked and the write went in, its stdin closed; within `within` when given.
/// `None` when the process did not take it in time. What each outcome means is the
/// caller's to say: a model's write, a person's, an attached terminal's.
pub(super) async fn deliver(
    session: &Session,
    chars: &[u8],
    eof: bool,
    within: Option<Duration>,
) -> Result<Option<WriteOutcome>, ExecError> {
    let work = write_then_close(session, chars, eof);
    match within {
        Some(limit) => match tokio::time::timeout(limit, work).await {
            Ok(outcome) => outcome.map(Some),
            Err(_) => Ok(None),
        },
        None => work.await.map(Some),
    }
}

/// Writes `chars` (if any) to a session's stdin, then closes it when `eof` is asked and the
/// write went in.
async fn write_then_close(
    session: &Session,
    chars: &[u8],
    eof: bool,
) -> Result<WriteOutcome, ExecError> {
    let failed = |message: String| ExecError::Write {
        session_id: session.id(),
        message,
    };
    let mut outcome = WriteOutcome::Accepted;
    if !chars.is_empty() {
        outcome = session
            .control()
            .write(chars.to_vec())
            .await
            .map_err(|e| failed(e.message))?;
    }
    if eof && outcome == WriteOutcome::Accepted {
        outcome = session
            .control()
            .close_stdin()
            .await
            .map_err(|e| failed(e.message))?;
    }
    Ok(outcome)
}
