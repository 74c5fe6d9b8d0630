//! A person joined to a session (`uexec attach`): the screen as it is now or the last bytes
//! printed, then a live feed; with the input lease, their keystrokes go through the one
//! write path ([`super::write::deliver`]) and the model's writes are refused meanwhile.
//! The person's terminal size is the session's while they hold the lease; when they let go
//! the session gets its own size back, so its owner's next result is not drawn for a
//! terminal it does not have.

use std::sync::Arc;
use std::time::Duration;

use super::write::deliver;
use super::SessionStore;
use crate::backend::WriteOutcome;
use crate::error::ExecError;
use crate::limits::POST_EXIT_CLOSE_WAIT_MS;
use crate::session::Session;

impl SessionStore {
    /// Joins a person to a session (`uexec attach`): the screen as it is now (a PTY session
    /// with a kept screen, at `size` when given: the screen takes it) or the last
    /// `seed_bytes` printed, then a live feed of what follows; with `write`, the input lease
    /// (the model's writes are refused until it is dropped). Pipe sessions attach read-only.
    pub async fn attach(
        &self,
        id: i32,
        write: bool,
        seed_bytes: usize,
        size: Option<(u16, u16)>,
    ) -> Result<Attachment, ExecError> {
        let session = self.touch(id).ok_or(ExecError::UnknownProcess(id))?;
        let lease = if write {
            if !session.info.tty {
                return Err(ExecError::invalid(
                    "write",
                    format!("session {id} has no terminal: pipe sessions attach read-only, as a live log view"),
                ));
            }
            Some(session.take_lease().ok_or_else(|| {
                ExecError::invalid(
                    "write",
                    format!("someone else is attached to session {id} with --write"),
                )
            })?)
        } else {
            None
        };
        // The size to give back when the lease goes: the session's own, before the person's.
        let own_size = lease.as_ref().map(|_| SizeBack {
            session: session.clone(),
            size: session
                .screen()
                .map_or((crate::limits::PTY_ROWS, crate::limits::PTY_COLS), |k| {
                    k.size()
                }),
        });
        let view = match session.screen() {
            Some(keeper) => keeper.view(size).await,
            None => None,
        };
        let (screen, watch) = match view {
            Some(view) => (Some(view.screen), view.watch),
            None => (None, session.watch_output(seed_bytes)),
        };
        Ok(Attachment {
            session,
            screen,
            watch,
            _own_size: own_size,
            _lease: lease,
        })
    }
}

/// How an [`Attachment`] catches up after its feed lagged.
pub enum CatchUp {
    /// The kept screen, drawn.
    Screen(Vec<u8>),
    /// The last bytes printed, to draw from.
    Seed(Vec<u8>),
}

/// A person joined to a session ([`SessionStore::attach`]).
pub struct Attachment {
    session: Arc<Session>,
    /// The kept screen as it was when the feed began (PTY sessions with a kept screen);
    /// otherwise draw from the watch's seed.
    pub screen: Option<Vec<u8>>,
    /// The output: a seed to redraw from, then the live feed.
    pub watch: crate::session::OutputWatch,
    /// With the lease: the session's own terminal size, given back when it is dropped.
    _own_size: Option<SizeBack>,
    _lease: Option<crate::session::Lease>,
}

/// Gives a session its own terminal size back when dropped (a person let go of its input).
struct SizeBack {
    session: Arc<Session>,
    size: (u16, u16),
}

impl Drop for SizeBack {
    fn drop(&mut self) {
        if self.session.lifecycle().exited() {
            return;
        }
        let (rows, cols) = self.size;
        if let Err(e) = self.session.resize_terminal(rows, cols) {
            tracing::debug!(session_id = self.session.id(), "size not given back: {e}");
        }
    }
}

impl Attachment {
    pub fn session_id(&self) -> i32 {
        self.session.id()
    }

    pub fn tty(&self) -> bool {
        self.session.info.tty
    }

    /// The feed dropped chunks (the person's terminal is slower than the output).
    pub fn lagged(&self) -> bool {
        self.watch.lagged.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Catches up after [`Self::lagged`]: the kept screen now (`Screen`) or a new seed
    /// (`Seed`); the feed goes on from there.
    pub async fn resync(&mut self, size: (u16, u16), seed_bytes: usize) -> CatchUp {
        if let Some(keeper) = self.session.screen() {
            // A reader sees the screen at the session's size; a writer has set it to theirs.
            let size = self._lease.is_some().then_some(size);
            if let Some(view) = keeper.view(size).await {
                self.watch = view.watch;
                return CatchUp::Screen(view.screen);
            }
        }
        CatchUp::Seed(self.session.resync(&mut self.watch, seed_bytes))
    }

    /// Types into the session (only with the lease).
    pub async fn write(&self, bytes: Vec<u8>) -> Result<(), ExecError> {
        let id = self.session.id();
        if self._lease.is_none() {
            return Err(ExecError::invalid("write", "attached read-only"));
        }
        match deliver(&self.session, &bytes, false, None).await? {
            Some(WriteOutcome::Accepted) => Ok(()),
            _ => Err(ExecError::Write {
                session_id: id,
                message: "its terminal is closed".to_owned(),
            }),
        }
    }

    /// Sets the session's terminal size (only with the lease: one person drives it).
    pub fn resize(&self, rows: u16, cols: u16) -> Result<(), ExecError> {
        if self._lease.is_none() {
            return Ok(());
        }
        self.session.resize_terminal(rows, cols)
    }

    /// Resolves with the outcome once the session exited and settled (its exit report stays
    /// for its owner).
    pub fn exit_future(
        &self,
    ) -> impl std::future::Future<Output = crate::session::Outcome> + Send + 'static {
        let session = self.session.clone();
        async move {
            session
                .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
                .await
        }
    }
}
