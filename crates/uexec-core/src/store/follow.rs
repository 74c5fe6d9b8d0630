//! A person's foreground run (`uexec run`): the command starts as a stored session of its
//! owner, as any other, and is followed from its first byte to its end, with no window: every
//! byte it prints is handed out once and in order, and its end is reported to the follower
//! (no exit notice says it again).
//!
//! Memory stays bounded whatever the follower's speed: the feed is a tap
//! ([`Session::follow_output`]), and a follower that falls a tap's worth behind is told how many
//! bytes it skipped ([`Followed::Skipped`]), then given the last [`CATCH_UP_TAIL_BYTES`]
//! printed, instead of being queued for without end; the transcript, when kept, still has
//! them all. A follower that goes away leaves the session running,
//! as its owner's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::exec::{finish_unstored, Launched};
use super::write::deliver;
use super::SessionStore;
use crate::backend::{Signal, WriteOutcome};
use crate::config::StoreConfig;
use crate::error::ExecError;
use crate::limits::POST_EXIT_CLOSE_WAIT_MS;
use crate::request::ExecRequest;
use crate::session::{Outcome, OutputWatch, Session};

/// What a follower that fell behind gets of what it missed: the last bytes, to see where
/// things stand (a screenful of lines, and then some).
pub const CATCH_UP_TAIL_BYTES: usize = 64 * 1024;

impl SessionStore {
    /// Starts `req` as a stored session with `caller`'s defaults (see
    /// [`Self::exec_command_for`]) and follows it from its first byte ([`Run::next`]). Its
    /// window and wait condition do not apply: the run lasts until the command ends.
    pub async fn run(
        self: &Arc<Self>,
        caller: &StoreConfig,
        req: ExecRequest,
    ) -> Result<Run, ExecError> {
        let Launched {
            session,
            reservation,
            ..
        } = self
            .launch(caller, req, super::exec::CallWith::default())
            .await?;
        self.follow_launched(session, reservation).await
    }

    /// [`Self::run`] once its command runs: what it printed already (it may have, on a
    /// loaded machine) is the follower's first bytes, then everything after.
    async fn follow_launched(
        self: &Arc<Self>,
        session: Arc<Session>,
        reservation: super::ids::IdReservation,
    ) -> Result<Run, ExecError> {
        let (mut watch, from) = session.follow_output();
        let printed = std::mem::take(&mut watch.seed);
        reservation.hand_over();
        if let Err(e) = self.store_session(session.clone()) {
            // The store shut down: nothing may live on in it.
            session.terminate();
            finish_unstored(self, &session).await;
            return Err(e);
        }
        let settled = {
            let session = session.clone();
            Box::pin(async move {
                session
                    .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
                    .await
            })
        };
        Ok(Run {
            store: self.clone(),
            session,
            watch,
            next: from,
            skipped_first: from,
            settled: Some(settled),
            outcome: None,
            tail: (!printed.is_empty()).then(|| bytes::Bytes::from(printed)),
            feed_open: true,
            ended: false,
        })
    }
}

/// What a [`Run`] hands out next.
#[derive(Debug)]
pub enum Followed {
    /// Bytes it printed (stdout and stderr as one stream on pipes), in order.
    Output(bytes::Bytes),
    /// This many bytes were printed and not handed out: the follower fell behind.
    Skipped(u64),
    /// How it ended; nothing follows.
    Ended(Outcome),
}

/// A command followed to its end ([`SessionStore::run`]).
pub struct Run {
    store: Arc<SessionStore>,
    session: Arc<Session>,
    watch: OutputWatch,
    /// The session offset of the next byte to hand out.
    next: u64,
    /// Bytes printed before the follower's first (none, unless the kept output was cut).
    skipped_first: u64,
    settled: Option<Pin<Box<dyn Future<Output = Outcome> + Send>>>,
    outcome: Option<Outcome>,
    /// Bytes printed and not handed out yet, outside the feed: those printed before the
    /// follower came, or the last ones after a [`Followed::Skipped`].
    tail: Option<bytes::Bytes>,
    /// The tap still feeds (it closes only with the session).
    feed_open: bool,
    ended: bool,
}

impl Run {
    pub fn session_id(&self) -> i32 {
        self.session.id()
    }

    /// Whether it runs on a terminal.
    pub fn tty(&self) -> bool {
        self.session.info.tty
    }

    /// Its input, for a task of its own: writes wait for the process to read, and the
    /// output goes on meanwhile.
    pub fn input(&self) -> RunInput {
        RunInput {
            session: self.session.clone(),
        }
    }

    /// The next bytes, the bytes skipped, or the end (then None). Cancel-safe: a call dropped
    /// while it waits loses nothing.
    pub async fn next(&mut self) -> Option<Followed> {
        if self.ended {
            return None;
        }
        if self.skipped_first > 0 {
            return Some(Followed::Skipped(std::mem::take(&mut self.skipped_first)));
        }
        loop {
            // What a catch-up kept comes before anything printed after it.
            if let Some(tail) = self.tail.take() {
                self.next += tail.len() as u64;
                return Some(Followed::Output(tail));
            }
            if let Ok(chunk) = self.watch.output.try_recv() {
                self.next += chunk.len() as u64;
                return Some(Followed::Output(chunk));
            }
            if self.watch.lagged.load(std::sync::atomic::Ordering::SeqCst) {
                let (tail, from) =
                    self.session
                        .catch_up(&mut self.watch, self.next, CATCH_UP_TAIL_BYTES);
                let skipped = from.saturating_sub(self.next);
                self.next = from;
                if !tail.is_empty() {
                    self.tail = Some(bytes::Bytes::from(tail));
                }
                if skipped > 0 {
                    return Some(Followed::Skipped(skipped));
                }
                continue;
            }
            if let Some(outcome) = self.outcome.take() {
                // Settled, and every byte it printed is out: the end is this follower's to
                // report.
                self.ended = true;
                if self.session.claim_report() {
                    self.store.forget_reported(&self.session);
                }
                return Some(Followed::Ended(outcome));
            }
            let settled = self.settled.as_mut()?;
            tokio::select! {
                chunk = self.watch.output.recv(), if self.feed_open => match chunk {
                    Some(chunk) => {
                        self.next += chunk.len() as u64;
                        return Some(Followed::Output(chunk));
                    }
                    // The feed closed: only the end is left to wait for.
                    None => self.feed_open = false,
                },
                outcome = settled.as_mut() => {
                    self.settled = None;
                    self.outcome = Some(outcome);
                }
            }
        }
    }
}

/// A followed command's input ([`Run::input`]).
#[derive(Clone)]
pub struct RunInput {
    session: Arc<Session>,
}

impl RunInput {
    /// Writes to its terminal or stdin pipe, once the process takes it.
    pub async fn write(&self, bytes: &[u8]) -> Result<(), ExecError> {
        match deliver(&self.session, bytes, false, None).await? {
            Some(WriteOutcome::Accepted) => Ok(()),
            _ => Err(self.closed()),
        }
    }

    /// Closes its stdin pipe (a terminal or a session without one: nothing to close).
    pub async fn eof(&self) -> Result<(), ExecError> {
        if !self.session.info.pipe_stdin {
            return Ok(());
        }
        match deliver(&self.session, &[], true, None).await? {
            Some(WriteOutcome::Accepted) => Ok(()),
            _ => Err(self.closed()),
        }
    }

    /// Ctrl-C: `^C` typed on its terminal, SIGINT to its process group on pipes.
    pub async fn interrupt(&self) -> Result<(), ExecError> {
        if self.session.info.tty {
            return self.write(b"\x03").await;
        }
        self.session
            .control()
            .signal(Signal::Interrupt)
            .await
            .map_err(|e| ExecError::Write {
                session_id: self.session.id(),
                message: e.message,
            })
    }

    /// Ends it (SIGTERM to its group, then SIGKILL, as `terminate_session`); the run still
    /// reports how it ended.
    pub fn terminate(&self) {
        self.session.terminate();
    }

    /// Its terminal takes the person's size (a pipe session has none).
    pub fn resize(&self, rows: u16, cols: u16) -> Result<(), ExecError> {
        if !self.session.info.tty {
            return Ok(());
        }
        self.session.resize_terminal(rows, cols)
    }

    fn closed(&self) -> ExecError {
        ExecError::Write {
            session_id: self.session.id(),
            message: "its input is closed".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::local::LocalBackend;

    /// What a command printed before its follower came (a loaded machine: the reader can
    /// run before the run's tap is set) is handed out first, not lost.
    #[tokio::test]
    async fn what_a_run_printed_before_it_was_followed_is_its_first_output() {
        let store = SessionStore::new(Arc::new(LocalBackend), StoreConfig::default());
        let req = ExecRequest {
            cmd: "echo before; exec sleep 30".into(),
            login: Some(false),
            ..ExecRequest::default()
        };
        let caller = store.config.clone();
        let Launched {
            session,
            reservation,
            ..
        } = store
            .launch(&caller, req, crate::CallWith::default())
            .await
            .expect("launched");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while session.printed() < 7 {
            assert!(std::time::Instant::now() < deadline, "it printed nothing");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut run = store
            .follow_launched(session, reservation)
            .await
            .expect("followed");
        match run.next().await {
            Some(Followed::Output(bytes)) => assert_eq!(&bytes[..], b"before\n"),
            other => panic!("{other:?}"),
        }
        run.input().terminate();
        while let Some(followed) = run.next().await {
            if let Followed::Output(bytes) = followed {
                panic!("printed again: {bytes:?}");
            }
        }
    }
}
