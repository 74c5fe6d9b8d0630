//! Sessions that ended, for people (`uexec ls`, `ls -a`, `rm`, `prune`), as `docker ps -a`
//! and `pueue status` show them.
//!
//! A session ends in two steps (SPEC §2 step 5, §6), and people see both:
//! 1. its process exits: the entry stays in the store until a call reports the exit, and
//!    [`SessionStore::list_sessions`] shows it with its exit code and end time;
//! 2. the exit is reported (or the session is terminated or pruned): the entry goes, and an
//!    [`Ended`] record stays, newest last and at most [`ENDED_SESSIONS`], until its
//!    transcript is pruned from the disk ([`SessionStore::list_ended`]).
//!
//! A record holds the session's fixed facts and a receiver of its lifecycle `watch`, never
//! the session: its buffers go with the entry, and a terminated session's exit code, which
//! comes after the entry went, is still seen.
//!
//! [`SessionStore::remove`] and [`SessionStore::prune_ended`] forget ended sessions of both
//! kinds, and delete their transcripts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::watch;

use super::{SessionStore, StoreInner};
use crate::error::ExecError;
use crate::events::lock;
use crate::request::{SessionEnd, SessionInfo};
use crate::session::{Lifecycle, Session};

/// Ended sessions a store remembers once they are gone from it (the oldest give way).
pub(super) const ENDED_SESSIONS: usize = 256;

/// What is left of a session gone from the store.
pub(super) struct Ended {
    id: i32,
    command: String,
    name: Option<String>,
    cwd: PathBuf,
    tty: bool,
    started: SystemTime,
    last_line: String,
    /// Its transcript directory, if it printed something.
    transcript: Option<PathBuf>,
    lifecycle: watch::Receiver<Lifecycle>,
    /// Bytes it printed, when it was last seen.
    output_bytes: u64,
    /// Why uexec ended it, when uexec did.
    stopped: Option<crate::request::Stopped>,
}

impl Ended {
    fn info(&self) -> SessionInfo {
        let lifecycle = self.lifecycle.borrow().clone();
        SessionInfo {
            session_id: self.id,
            command: self.command.clone(),
            name: self.name.clone(),
            cwd: self.cwd.clone(),
            tty: self.tty,
            running_time: self.started.elapsed().unwrap_or_default(),
            exited: lifecycle.exited(),
            pid: None,
            last_line: self.last_line.clone(),
            transcript: self.transcript.clone(),
            started: self.started,
            end: end_of(&lifecycle).map(|end| SessionEnd {
                stopped: self.stopped.clone(),
                ..end
            }),
            reported: true,
            usage: lifecycle.outcome().and_then(|o| o.usage),
            paused: false,
            kept: false,
            output_bytes: self.output_bytes,
            waiting: None,
        }
    }

    /// Its transcript was written and is gone from the disk (pruned by the total cap).
    fn pruned(&self) -> bool {
        self.transcript.as_ref().is_some_and(|dir| !dir.exists())
    }
}

/// A wall-clock time `elapsed` ago.
fn wall_time_ago(elapsed: std::time::Duration) -> SystemTime {
    SystemTime::now()
        .checked_sub(elapsed)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// When a session started, on the wall clock.
pub(super) fn started_wall(session: &Session) -> SystemTime {
    wall_time_ago(session.started_at.elapsed())
}

/// How a session ended, once it has.
pub(super) fn end_of(lifecycle: &Lifecycle) -> Option<SessionEnd> {
    let at = lifecycle.exited_at()?;
    Some(SessionEnd {
        at: wall_time_ago(at.elapsed()),
        exit_code: lifecycle.exit_code(),
        failure: lifecycle.failure().map(str::to_owned),
        stopped: None,
    })
}

impl StoreInner {
    /// Remembers a session that is gone from the store (newest last; a record of the same
    /// id, an earlier session, gives way).
    pub(super) fn remember_ended(&mut self, session: &Session) {
        self.ended.retain(|e| e.id != session.id());
        if self.ended.len() >= ENDED_SESSIONS {
            self.ended.pop_front();
        }
        self.ended.push_back(Ended {
            id: session.id(),
            command: session.info.command.clone(),
            name: session.info.name.clone(),
            cwd: session.info.cwd.clone(),
            tty: session.info.tty,
            started: started_wall(session),
            last_line: session.last_line(),
            transcript: session.transcript_dir(),
            lifecycle: session.lifecycle_watch(),
            output_bytes: session.output_total(),
            stopped: self.stops.remove(&session.id()),
        });
    }

    /// Forgets the records of session `id` (ended and transcript); the transcript
    /// directory it had, to delete.
    fn drop_records(&mut self, id: i32) -> Option<PathBuf> {
        self.stops.remove(&id);
        let mut dir = None;
        self.ended.retain(|e| {
            if e.id == id {
                dir = dir.take().or_else(|| e.transcript.clone());
            }
            e.id != id
        });
        self.finished.retain(|(f, gone)| {
            if *f == id && gone.written {
                dir = dir.take().or_else(|| Some(gone.dir.clone()));
            }
            *f != id
        });
        dir
    }

    pub(super) fn remembers_ended(&self, id: i32) -> bool {
        self.ended.iter().any(|e| e.id == id)
    }
}

impl SessionStore {
    /// How session `id` ended, if it is gone from the store and remembered (its exit was
    /// reported, or it was terminated).
    pub fn ended(&self, id: i32) -> Option<SessionEnd> {
        let inner = lock(&self.inner);
        let record = inner.ended.iter().rev().find(|e| e.id == id)?;
        let lifecycle = record.lifecycle.borrow().clone();
        end_of(&lifecycle)
    }

    /// How remembered session `id` ended (None: not remembered): its outcome, or what is
    /// known of it once its exit code or failure is in (a terminated session's code comes
    /// after its entry went: waited for, up to `limit`).
    pub(super) async fn ended_outcome(
        &self,
        id: i32,
        limit: std::time::Duration,
    ) -> Option<crate::session::Outcome> {
        let mut lifecycle = {
            let inner = lock(&self.inner);
            inner
                .ended
                .iter()
                .rev()
                .find(|e| e.id == id)?
                .lifecycle
                .clone()
        };
        let known = |l: &Lifecycle| {
            l.outcome().is_some() || l.exit_code().is_some() || l.failure().is_some()
        };
        let _ = tokio::time::timeout(limit, lifecycle.wait_for(known)).await;
        let l = lifecycle.borrow().clone();
        Some(
            l.outcome()
                .cloned()
                .unwrap_or_else(|| crate::session::Outcome {
                    exit_code: l.exit_code(),
                    failure: l.failure().map(str::to_owned),
                    ..crate::session::Outcome::default()
                }),
        )
    }

    /// Sessions gone from the store whose transcript is still on disk (or that have none),
    /// oldest first. Records whose transcript was pruned are dropped here.
    pub fn list_ended(&self) -> Vec<SessionInfo> {
        let mut inner = lock(&self.inner);
        inner.ended.retain(|e| !e.pruned());
        let mut list: Vec<SessionInfo> = inner.ended.iter().map(Ended::info).collect();
        list.sort_by_key(|i| i.started);
        list
    }

    /// Forgets an ended session (one whose exit is not reported yet too, which no call
    /// will then report) and deletes its transcript. A running one is refused
    /// ([`ExecError::StillRunning`]) unless `force`, which terminates it first.
    pub fn remove(&self, session_id: i32, force: bool) -> Result<(), ExecError> {
        let stored = lock(&self.inner)
            .sessions
            .get(&session_id)
            .map(|e| e.session.clone());
        if let Some(session) = &stored {
            if !session.lifecycle().exited() {
                if !force {
                    return Err(ExecError::StillRunning { session_id });
                }
                session.terminate();
            }
            // Nobody reports it now: a call in flight on it finds it gone.
            session.claim_report();
        }
        let dir = {
            let mut inner = lock(&self.inner);
            let same = stored.as_ref().is_some_and(|s| {
                inner
                    .sessions
                    .get(&session_id)
                    .is_some_and(|e| Arc::ptr_eq(&e.session, s))
            });
            if same {
                inner.sessions.remove(&session_id);
                inner.release(session_id);
            } else if stored.is_none() && !inner.remembers_ended(session_id) {
                return Err(ExecError::UnknownProcess(session_id));
            }
            let dir = inner.drop_records(session_id);
            dir.or_else(|| stored.as_ref()?.transcript_dir())
        };
        if let Some(session) = stored {
            // What is left of its process group goes with it, as after a reported exit.
            session.control().kill_leftovers();
        }
        delete_transcript(dir);
        Ok(())
    }

    /// Forgets every ended session of the store (as [`Self::remove`] does each) and returns
    /// their ids, oldest first.
    pub fn prune_ended(&self) -> Vec<i32> {
        let mut ids: Vec<(SystemTime, i32)> = {
            let inner = lock(&self.inner);
            let stored = inner
                .sessions
                .values()
                .filter(|e| e.session.lifecycle().exited())
                .map(|e| (started_wall(&e.session), e.session.id()));
            let gone = inner.ended.iter().map(|e| (e.started, e.id));
            stored.chain(gone).collect()
        };
        ids.sort();
        ids.into_iter()
            .filter_map(|(_, id)| self.remove(id, false).ok().map(|()| id))
            .collect()
    }
}

/// Deletes a transcript directory this store made (it is its own, whatever is in it).
fn delete_transcript(dir: Option<PathBuf>) {
    if let Some(dir) = dir {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), "cannot delete the transcript: {e}");
            }
        }
    }
}
