//! The session store: the calls of SPEC §2–§3 over a table of live sessions, one file per
//! verb: [`exec`], [`write`] (the one write path), [`wait`], [`read`], [`attach`], with
//! the end of every window in [`conclude`] and ids in [`ids`]. This file holds the table:
//! storing, touching, listing, terminating and shutting down.
//!
//! One store per owner (an MCP connection, a daemon namespace, an exec-server client).
mod attach;
mod conclude;
mod ended;
mod exec;
mod follow;
mod ids;
mod keep;
mod pause;
mod read;
mod wait;
mod write;

pub use attach::{Attachment, CatchUp};
pub use exec::CallWith;
pub use follow::{Followed, Run, RunInput};
pub use ids::IdSpace;
pub use read::{READ_OUTPUT_DEFAULT_BYTES, READ_OUTPUT_MAX_BYTES};

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::{Backend, Signal};
use crate::config::StoreConfig;
use crate::environments::{Environments, Lookup};
use crate::error::ExecError;
use crate::events::{lock, EventBus, EventStream};
use crate::limits::{PROTECTED_RECENT_SESSIONS, TRAILING_OUTPUT_GRACE_MS};
use crate::notice::ExitNotice;
use crate::prune::{session_to_prune, SessionMeta};
use crate::request::SessionInfo;
use crate::session::Session;
use crate::transcript;

/// Live sessions of one owner, and the calls on them.
pub struct SessionStore {
    /// This store, for the tasks it starts (they must not keep it alive).
    me: std::sync::Weak<SessionStore>,
    backend: Arc<dyn Backend>,
    /// Named other places to run commands (`environment_id`), e.g. remote exec servers.
    environments: Environments,
    config: StoreConfig,
    inner: Mutex<StoreInner>,
    events: Arc<EventBus>,
}

#[derive(Default)]
struct StoreInner {
    sessions: HashMap<i32, Entry>,
    /// Ids of stored sessions plus those reserved by calls in flight.
    reserved: HashSet<i32>,
    /// The names of reserved ids that have one.
    names: HashMap<i32, String>,
    /// The ids in use in every store sharing this space (this store's among them).
    ids: Arc<IdSpace>,
    use_counter: u64,
    shut_down: bool,
    /// Exits no call watched, waiting for the owner's next result (bounded: the oldest
    /// give way to [`MAX_EXIT_NOTICES`] newer ones).
    notices: VecDeque<ExitNotice>,
    /// Transcripts of sessions no longer stored, newest last (bounded by
    /// [`FINISHED_TRANSCRIPTS`]), for `read_output` after the exit: where each is, or, for
    /// a session that printed nothing, where it would have been.
    finished: VecDeque<(i32, FinishedTranscript)>,
    /// Sessions no longer stored, for people (see [`ended`]).
    ended: VecDeque<ended::Ended>,
    /// Why uexec ended stored sessions it ended (pruned, their client gone), until their
    /// [`ended::Ended`] record takes it: at most one per stored session.
    stops: HashMap<i32, crate::request::Stopped>,
}

/// Sessions gone from the store whose transcripts `read_output` still finds by id.
const FINISHED_TRANSCRIPTS: usize = 256;

/// A gone session's transcript.
#[derive(Clone)]
struct FinishedTranscript {
    dir: std::path::PathBuf,
    /// False when the session printed nothing: then there is nothing to read.
    written: bool,
    /// Where and why it stopped, if it did (`meta` says so too, when the disk let it).
    stop: Option<transcript::TranscriptStop>,
}

impl StoreInner {
    /// Removes a session's entry and id, remembering where its transcript is and, for
    /// people, how it ended.
    fn forget(&mut self, session: &Session) {
        self.sessions.remove(&session.id());
        self.release(session.id());
        self.remember_gone(session);
    }

    /// Remembers a session gone from the store: its transcript, and how it ended.
    fn remember_gone(&mut self, session: &Session) {
        self.remember_transcript(session);
        self.remember_ended(session);
    }

    fn hold(&mut self, id: i32) {
        self.reserved.insert(id);
        lock(&self.ids.0).insert(id);
    }

    fn release(&mut self, id: i32) {
        self.names.remove(&id);
        if self.reserved.remove(&id) {
            lock(&self.ids.0).remove(&id);
        }
    }

    /// Keeps a gone session's transcript findable by id.
    fn remember_transcript(&mut self, session: &Session) {
        if let Some(t) = session.transcript() {
            self.finished.retain(|(id, _)| *id != session.id());
            if self.finished.len() >= FINISHED_TRANSCRIPTS {
                self.finished.pop_front();
            }
            let written = session.transcript_dir().is_some();
            self.finished.push_back((
                session.id(),
                FinishedTranscript {
                    dir: t.dir,
                    written,
                    stop: t.stop,
                },
            ));
        }
    }
}

struct Entry {
    session: Arc<Session>,
    last_used: u64,
    /// Kept by a person ([`SessionStore::keep`]): it outlives its owner's clients.
    kept: bool,
}

impl SessionStore {
    pub fn new(backend: Arc<dyn Backend>, config: StoreConfig) -> Arc<Self> {
        Self::with_environments(backend, config, HashMap::new())
    }

    /// A store whose commands may also run in named environments (`environment_id`).
    pub fn with_environments(
        backend: Arc<dyn Backend>,
        config: StoreConfig,
        environments: HashMap<String, Arc<dyn Backend>>,
    ) -> Arc<Self> {
        Self::with_shared_environments(backend, config, Environments::new(environments))
    }

    /// A store whose environments may change while it runs (the table is shared: see
    /// [`Environments`]).
    pub fn with_shared_environments(
        backend: Arc<dyn Backend>,
        config: StoreConfig,
        environments: Environments,
    ) -> Arc<Self> {
        Self::with_id_space(backend, config, environments, Arc::default())
    }

    /// A store whose session ids are unique among every store of `ids` (a daemon's
    /// owners: a person addresses any session by its id alone).
    pub fn with_id_space(
        backend: Arc<dyn Backend>,
        config: StoreConfig,
        environments: Environments,
        ids: Arc<IdSpace>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            backend,
            environments,
            config,
            inner: Mutex::new(StoreInner {
                ids,
                ..StoreInner::default()
            }),
            events: Arc::new(EventBus::default()),
        })
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Names of the environments besides the default one, sorted.
    pub fn environment_names(&self) -> Vec<String> {
        self.environments.names()
    }

    /// Every event of every session of this store, in order, from now on.
    pub fn subscribe(&self) -> EventStream {
        self.events.subscribe()
    }

    /// The store's events but output deltas: for subscribers that only tell what changed.
    pub fn subscribe_changes(&self) -> EventStream {
        self.events.subscribe_changes()
    }

    /// Whether this store holds session `id`.
    pub fn contains(&self, id: i32) -> bool {
        lock(&self.inner).sessions.contains_key(&id)
    }

    /// Whether this store holds session `id` or still has its transcript or its record.
    pub fn knows(&self, id: i32) -> bool {
        let inner = lock(&self.inner);
        inner.sessions.contains_key(&id)
            || inner.finished.iter().any(|(f, _)| *f == id)
            || inner.remembers_ended(id)
    }

    /// Stored sessions (running, or exited and not yet reported), oldest first.
    pub fn list_sessions(&self) -> Vec<SessionInfo> {
        let stored: Vec<(Arc<Session>, bool, Option<crate::request::Stopped>)> = {
            let inner = lock(&self.inner);
            inner
                .sessions
                .values()
                .map(|e| {
                    let stop = inner.stops.get(&e.session.id()).cloned();
                    (e.session.clone(), e.kept, stop)
                })
                .collect()
        };
        // Outside the store's lock: what a session waits for reads its output.
        let mut list: Vec<SessionInfo> = stored
            .into_iter()
            .map(|(s, kept, stopped)| {
                let lifecycle = s.lifecycle();
                let end = ended::end_of(&lifecycle)
                    .map(|end| crate::request::SessionEnd { stopped, ..end });
                let waiting = match lifecycle.exited() {
                    true => None,
                    false => s.prompt().map(|p| match p.secret {
                        true => crate::request::Waiting::Password,
                        false => crate::request::Waiting::Input,
                    }),
                };
                SessionInfo {
                    session_id: s.id(),
                    command: s.info.command.clone(),
                    name: s.info.name.clone(),
                    cwd: s.info.cwd.clone(),
                    tty: s.info.tty,
                    running_time: s.started_at.elapsed(),
                    exited: lifecycle.exited(),
                    pid: s.pid,
                    last_line: s.last_line(),
                    transcript: s.transcript_dir(),
                    started: ended::started_wall(&s),
                    end,
                    reported: false,
                    usage: s.control().usage(),
                    paused: s.control().paused(),
                    kept,
                    output_bytes: s.output_total(),
                    waiting,
                }
            })
            .collect();
        list.sort_by_key(|i| std::cmp::Reverse(i.running_time));
        list
    }

    /// Ids held by stored sessions and by calls in flight (a diagnostic: with no call in
    /// flight it equals the number of stored sessions).
    pub fn reserved_ids(&self) -> usize {
        lock(&self.inner).reserved.len()
    }

    /// The last `max_bytes` a live session printed (for people and resources).
    pub fn recent_output(&self, session_id: i32, max_bytes: usize) -> Option<String> {
        let session = lock(&self.inner).sessions.get(&session_id)?.session.clone();
        Some(session.recent_output(max_bytes))
    }

    /// Kills a session (SPEC §6). Does not wait for calls in flight on it: they return the
    /// exited snapshot. The entry stays while the first `exec_command` is in its window.
    pub fn terminate(&self, session_id: i32) -> Result<(), ExecError> {
        let session = {
            let mut inner = lock(&self.inner);
            let entry = inner
                .sessions
                .get(&session_id)
                .ok_or(ExecError::UnknownProcess(session_id))?;
            let session = entry.session.clone();
            if !session.first_call_active() {
                inner.forget(&session);
            }
            session
        };
        session.terminate();
        Ok(())
    }

    /// [`Self::terminate`] on behalf of someone else than its owner (`by`, e.g. "a person
    /// (uexec kill)"): the owner's next result says so, in an exit notice, instead of leaving
    /// it to find `Unknown process id`.
    pub fn terminate_by(&self, session_id: i32, by: &str) -> Result<(), ExecError> {
        self.stop(session_id, by, crate::request::Stopped::By(by.to_owned()))
    }

    /// [`Self::terminate_by`], `ls -a` saying why (`stopped`).
    pub(super) fn stop(
        &self,
        session_id: i32,
        by: &str,
        stopped: crate::request::Stopped,
    ) -> Result<(), ExecError> {
        let command = {
            let mut inner = lock(&self.inner);
            let command = inner
                .sessions
                .get(&session_id)
                .map(|e| e.session.info.command.clone())
                .ok_or(ExecError::UnknownProcess(session_id))?;
            inner.stops.insert(session_id, stopped);
            command
        };
        if let Err(e) = self.terminate(session_id) {
            lock(&self.inner).stops.remove(&session_id);
            return Err(e);
        }
        let mut inner = lock(&self.inner);
        inner.notices.retain(|n| n.session_id != session_id);
        if inner.notices.len() >= crate::limits::MAX_EXIT_NOTICES {
            inner.notices.pop_front();
        }
        inner.notices.push_back(crate::notice::ExitNotice {
            session_id,
            command,
            exit_code: None,
            failure: None,
            timed_out_ms: None,
            stopped_by: Some(by.to_owned()),
            exited_at: tokio::time::Instant::now(),
            ending: crate::usage::Ending::default(),
        });
        Ok(())
    }

    /// Sends `signal` to a running session's process group, and nothing else: the session
    /// ends, if it does, as any exit does (its code says the signal).
    pub async fn signal(&self, session_id: i32, signal: Signal) -> Result<(), ExecError> {
        let session = self
            .touch(session_id)
            .ok_or(ExecError::UnknownProcess(session_id))?;
        if session.lifecycle().exited() {
            return Err(ExecError::Signal {
                session_id,
                message: "it has exited".to_owned(),
            });
        }
        session
            .control()
            .signal(signal)
            .await
            .map_err(|e| ExecError::Signal {
                session_id,
                message: e.message,
            })
    }

    /// Terminates every session of the store.
    pub fn clean_all(&self) {
        let sessions: Vec<Arc<Session>> = {
            let mut inner = lock(&self.inner);
            let ids: Vec<i32> = inner.sessions.keys().copied().collect();
            for id in ids {
                inner.release(id);
            }
            inner.stops.clear();
            inner.sessions.drain().map(|(_, e)| e.session).collect()
        };
        for s in sessions {
            s.terminate();
        }
    }

    /// Terminates every session and refuses new ones.
    pub fn shutdown(&self) {
        lock(&self.inner).shut_down = true;
        self.clean_all();
    }

    /// The backend of `environment`, looked up in the caller's environments when it has
    /// its own ([`StoreConfig::environments`]), else in the store's.
    fn backend_for(
        &self,
        caller: &StoreConfig,
        environment: Option<&str>,
    ) -> Result<Arc<dyn Backend>, ExecError> {
        match environment {
            None | Some("") => Ok(self.backend.clone()),
            Some(name) => {
                let table = caller.environments.as_ref().unwrap_or(&self.environments);
                let known = || table.names().join(", ");
                match table.lookup(name) {
                    Lookup::Available(backend) => Ok(backend),
                    Lookup::Refused(reason) => Err(ExecError::invalid(
                        "environment_id",
                        format!("environment {name:?} {reason} (available: {})", known()),
                    )),
                    Lookup::Unknown => Err(ExecError::invalid(
                        "environment_id",
                        format!("unknown environment {name:?} (configured: {})", known()),
                    )),
                }
            }
        }
    }

    /// Stores a running session, pruning one when the store is full, and starts its
    /// lifecycle watcher. A store that is shut down refuses (the caller kills the session).
    fn store_session(&self, session: Arc<Session>) -> Result<(), ExecError> {
        let pruned = {
            let mut inner = lock(&self.inner);
            if inner.shut_down {
                return Err(ExecError::ShutDown);
            }
            let mut pruned = None;
            if inner.sessions.len() >= self.config.max_sessions {
                let meta: Vec<SessionMeta> = inner
                    .sessions
                    .values()
                    .map(|e| SessionMeta {
                        session_id: e.session.id(),
                        last_used: e.last_used,
                        exited: e.session.lifecycle().exited(),
                    })
                    .collect();
                let victim =
                    session_to_prune(&meta, PROTECTED_RECENT_SESSIONS, self.config.when_full);
                if let Some(victim) = victim {
                    pruned = inner.sessions.get(&victim).map(|e| e.session.clone());
                    if let Some(v) = &pruned {
                        inner.stops.insert(v.id(), crate::request::Stopped::Pruned);
                        inner.forget(v);
                    }
                }
            }
            inner.use_counter += 1;
            let last_used = inner.use_counter;
            inner.hold(session.id());
            inner.sessions.insert(
                session.id(),
                Entry {
                    session: session.clone(),
                    last_used,
                    kept: false,
                },
            );
            pruned
        };
        if let Some(victim) = pruned {
            tracing::info!(session_id = victim.id(), "store full: pruned the session");
            victim.terminate();
        }
        let store = self.me.clone();
        tokio::spawn(async move {
            let unwatched = session
                .clone()
                .watch_lifecycle(Duration::from_millis(TRAILING_OUTPUT_GRACE_MS))
                .await;
            if let (true, Some(store)) = (unwatched, store.upgrade()) {
                store.push_exit_notice(&session);
            }
        });
        Ok(())
    }

    /// The prompt session `id` waits at now, if any (see [`crate::Prompt`]): what a task
    /// shows its client. Neither takes its output nor counts as a use.
    pub fn prompt(&self, id: i32) -> Option<crate::Prompt> {
        let session = lock(&self.inner).sessions.get(&id)?.session.clone();
        session.prompt()
    }

    /// Looks a session up and counts a use.
    fn touch(&self, id: i32) -> Option<Arc<Session>> {
        let mut inner = lock(&self.inner);
        inner.use_counter += 1;
        let counter = inner.use_counter;
        let entry = inner.sessions.get_mut(&id)?;
        entry.last_used = counter;
        Some(entry.session.clone())
    }
}

impl Drop for SessionStore {
    fn drop(&mut self) {
        let inner = self
            .inner
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (_, entry) in inner.sessions.drain() {
            entry.session.terminate();
        }
        let mut space = lock(&inner.ids.0);
        for id in inner.reserved.drain() {
            space.remove(&id);
        }
    }
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
