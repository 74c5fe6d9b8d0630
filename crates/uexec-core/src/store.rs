//! The session store: the calls of SPEC §2–§3 over a table of live sessions.
//!
//! `exec_command`, in order:
//! 1. validate and plan (argv, cwd, environment, window, budget); reserve an id;
//! 2. spawn through the backend (a failure releases the id and emits Begin + a failed End);
//! 3. wait up to `EARLY_EXIT_GRACE_MS` for an exit; a process still running is stored
//!    *before* the window starts, so cancelling the call cannot lose it;
//! 4. observe until the window ends, or the process exited and its output closed;
//! 5. refresh: running → snapshot with the id; exited → entry removed, snapshot with the code.
//!
//! One store per owner (an MCP connection, a daemon namespace, an exec-server client).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{Backend, Signal, WriteOutcome};
use crate::config::StoreConfig;
use crate::error::ExecError;
use crate::events::{lock, EndStatus, EventBus, EventKind, EventStream};
use crate::limits::{
    write_window_ms, EARLY_EXIT_GRACE_MS, MAX_SESSION_ID_EXCLUSIVE, MAX_WRITE_CHARS_BYTES,
    MIN_SESSION_ID, POST_EXIT_CLOSE_WAIT_MS, PROTECTED_RECENT_SESSIONS, TRAILING_OUTPUT_GRACE_MS,
    TTY_WRITE_SETTLE_MS,
};
use crate::plan::{self, Plan};
use crate::prune::{session_to_prune, SessionMeta};
use crate::request::{ExecRequest, SessionInfo, WriteRequest};
use crate::session::{PolicyMonitor, Session, SessionMetaInfo};
use crate::snapshot::Snapshot;

/// Live sessions of one owner, and the calls on them.
pub struct SessionStore {
    backend: Arc<dyn Backend>,
    /// Named other places to run commands (`environment_id`), e.g. remote exec servers.
    environments: HashMap<String, Arc<dyn Backend>>,
    config: StoreConfig,
    inner: Mutex<StoreInner>,
    events: Arc<EventBus>,
}

#[derive(Default)]
struct StoreInner {
    sessions: HashMap<i32, Entry>,
    /// Ids of stored sessions plus those reserved by calls in flight.
    reserved: HashSet<i32>,
    use_counter: u64,
    shut_down: bool,
}

struct Entry {
    session: Arc<Session>,
    last_used: u64,
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
        Arc::new(Self {
            backend,
            environments,
            config,
            inner: Mutex::new(StoreInner::default()),
            events: Arc::new(EventBus::default()),
        })
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Names of the environments besides the default one, sorted.
    pub fn environment_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.environments.keys().cloned().collect();
        names.sort();
        names
    }

    /// Every event of every session of this store, in order, from now on.
    pub fn subscribe(&self) -> EventStream {
        self.events.subscribe()
    }

    /// Starts a command and observes it for its window (SPEC §2).
    pub async fn exec_command(self: &Arc<Self>, req: ExecRequest) -> Result<Snapshot, ExecError> {
        self.exec_command_monitored(req, Vec::new()).await
    }

    /// [`Self::exec_command`] with policy monitors attached to the new session (SPEC §7).
    pub async fn exec_command_monitored(
        self: &Arc<Self>,
        req: ExecRequest,
        monitors: Vec<Box<dyn PolicyMonitor>>,
    ) -> Result<Snapshot, ExecError> {
        let backend = self.backend_for(req.environment_id.as_deref())?;
        let mut plan = Plan::new(&self.config, &req, backend.placement())?;
        plan.use_shell_snapshot(&self.config).await;
        let reservation = self.reserve_id()?;
        let id = reservation.id;
        let call_id = req.call_id.clone().unwrap_or_else(new_call_id);
        let argv = plan.spec.argv.clone();
        let cwd = plan.spec.cwd.clone();
        // Cancelled here, the reservation releases the id (the backend cleans up its side).
        let process = match backend.spawn(plan.spec.clone()).await {
            Ok(p) => p,
            Err(e) => {
                drop(reservation);
                let begin = EventKind::Begin { command: argv, cwd };
                self.events.publish(&call_id, id, begin);
                self.events.publish(
                    &call_id,
                    id,
                    EventKind::End {
                        exit_code: None,
                        status: EndStatus::Failed,
                        aggregated_output: String::new(),
                        duration: Duration::ZERO,
                        failure: Some(e.message.clone()),
                    },
                );
                return Err(ExecError::Spawn(e.message));
            }
        };
        self.events.publish(
            &call_id,
            id,
            EventKind::Begin {
                command: argv,
                cwd: cwd.clone(),
            },
        );
        let info = SessionMetaInfo {
            id,
            call_id,
            command: plan.command,
            cwd,
            tty: plan.spec.tty,
        };
        let session = Session::start(info, process, self.events.clone(), monitors);
        // From here on the first-call guard owns the id: it stores the session or finishes it.
        reservation.hand_over();
        let mut guard = FirstCall {
            store: self.clone(),
            session: session.clone(),
            stored: false,
            done: false,
        };
        let _interaction = session.interaction.lock().await;

        let exited_early = session
            .wait_exited(Duration::from_millis(EARLY_EXIT_GRACE_MS))
            .await;
        let mut refused = None;
        if !exited_early {
            session.set_first_call_active(true);
            match self.store_session(session.clone()) {
                Ok(()) => guard.stored = true,
                Err(e) => {
                    // The store shut down during the grace: nothing may live on in it.
                    session.set_first_call_active(false);
                    session.terminate();
                    refused = Some(e);
                }
            }
        }
        let window_start = Instant::now();
        session
            .observe_until(
                window_start + plan.window,
                Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS),
            )
            .await;
        let snapshot = self
            .conclude(&session, window_start, plan.max_output_tokens)
            .await;
        session.set_first_call_active(false);
        if !guard.stored {
            // Never stored: this call owns the End (SPEC §5, inline). Cancelled while it
            // settles, the guard finishes the job.
            finish_unstored(self, &session).await;
        }
        guard.done = true;
        match refused {
            Some(e) => Err(e),
            None => snapshot,
        }
    }

    /// Writes to (or polls) a session and observes it for its window (SPEC §3).
    pub async fn write_stdin(self: &Arc<Self>, req: WriteRequest) -> Result<Snapshot, ExecError> {
        let id = req.session_id;
        let max_output_tokens = plan::token_budget(&self.config, req.max_output_tokens)?;
        if req.chars.len() > MAX_WRITE_CHARS_BYTES {
            return Err(ExecError::invalid(
                "chars",
                format!(
                    "{} bytes is more than the {MAX_WRITE_CHARS_BYTES} a single write accepts",
                    req.chars.len()
                ),
            ));
        }
        let is_poll = req.chars.is_empty();
        let window = Duration::from_millis(write_window_ms(req.yield_time_ms, is_poll));
        let session = self.touch(id).ok_or(ExecError::UnknownProcess(id))?;
        let _interaction = session.interaction.lock().await;
        // A call queued behind the one that reported the exit finds the id dead.
        if session.lifecycle().reported {
            return Err(ExecError::UnknownProcess(id));
        }

        if !is_poll {
            if session.info.tty {
                let write = session.control().write(req.chars.clone().into_bytes());
                let outcome = match tokio::time::timeout(window, write).await {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(e)) => {
                        return Err(ExecError::Write {
                            session_id: id,
                            message: e.message,
                        })
                    }
                    Err(_) => {
                        return Err(ExecError::Write {
                            session_id: id,
                            message: format!(
                                "the process did not read its input within {} ms",
                                window.as_millis()
                            ),
                        })
                    }
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
        session
            .observe_until(
                window_start + window,
                Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS),
            )
            .await;
        let snapshot = self
            .conclude(&session, window_start, max_output_tokens)
            .await;
        let still_running = matches!(&snapshot, Ok(s) if s.session_id.is_some());
        if !is_poll || still_running {
            self.events.publish(
                &session.info.call_id,
                id,
                EventKind::TerminalInteraction { stdin: req.chars },
            );
        }
        snapshot
    }

    /// Live sessions, oldest first.
    pub fn list_sessions(&self) -> Vec<SessionInfo> {
        let inner = lock(&self.inner);
        let mut list: Vec<SessionInfo> = inner
            .sessions
            .values()
            .map(|e| {
                let s = &e.session;
                SessionInfo {
                    session_id: s.id(),
                    command: s.info.command.clone(),
                    cwd: s.info.cwd.clone(),
                    tty: s.info.tty,
                    running_time: s.started_at.elapsed(),
                    exited: s.lifecycle().exited(),
                    pid: s.pid,
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
            if !session.lifecycle().first_call_active {
                inner.sessions.remove(&session_id);
                inner.reserved.remove(&session_id);
            }
            session
        };
        session.terminate();
        Ok(())
    }

    /// Terminates every session of the store.
    pub fn clean_all(&self) {
        let sessions: Vec<Arc<Session>> = {
            let mut inner = lock(&self.inner);
            let ids: Vec<i32> = inner.sessions.keys().copied().collect();
            for id in &ids {
                inner.reserved.remove(id);
            }
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

    fn backend_for(&self, environment: Option<&str>) -> Result<Arc<dyn Backend>, ExecError> {
        match environment {
            None | Some("") => Ok(self.backend.clone()),
            Some(name) => self.environments.get(name).cloned().ok_or_else(|| {
                let known = self.environment_names().join(", ");
                ExecError::invalid(
                    "environment_id",
                    format!("unknown environment {name:?} (configured: {known})"),
                )
            }),
        }
    }

    fn reserve_id(self: &Arc<Self>) -> Result<IdReservation, ExecError> {
        let mut inner = lock(&self.inner);
        if inner.shut_down {
            return Err(ExecError::ShutDown);
        }
        let id = if self.config.deterministic_ids {
            inner
                .reserved
                .iter()
                .max()
                .map_or(MIN_SESSION_ID, |max| max + 1)
        } else {
            loop {
                let id = rand::random_range(MIN_SESSION_ID..MAX_SESSION_ID_EXCLUSIVE);
                if !inner.reserved.contains(&id) {
                    break id;
                }
            }
        };
        inner.reserved.insert(id);
        Ok(IdReservation {
            store: self.clone(),
            id,
            held: true,
        })
    }

    fn release_id(&self, id: i32) {
        let mut inner = lock(&self.inner);
        if !inner.sessions.contains_key(&id) {
            inner.reserved.remove(&id);
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
                if let Some(victim) = session_to_prune(&meta, PROTECTED_RECENT_SESSIONS) {
                    inner.reserved.remove(&victim);
                    pruned = inner.sessions.remove(&victim).map(|e| e.session);
                }
            }
            inner.use_counter += 1;
            let last_used = inner.use_counter;
            inner.reserved.insert(session.id());
            inner.sessions.insert(
                session.id(),
                Entry {
                    session: session.clone(),
                    last_used,
                },
            );
            pruned
        };
        if let Some(victim) = pruned {
            tracing::info!(session_id = victim.id(), "store full: pruned the session");
            victim.terminate();
        }
        tokio::spawn(session.watch_lifecycle(Duration::from_millis(TRAILING_OUTPUT_GRACE_MS)));
        Ok(())
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

    /// Builds the snapshot at the end of a window (SPEC §2 step 5). A running session keeps
    /// its pending output's incomplete last character for the next call. An exited one is
    /// first settled (output closed or `POST_EXIT_CLOSE_WAIT_MS`, monitors' verdicts), so the
    /// call reports exactly what the End will; then, without another await (a cancelled call
    /// loses nothing), exactly one call claims the report, drains everything and removes the
    /// entry.
    async fn conclude(
        &self,
        session: &Arc<Session>,
        window_start: Instant,
        max_output_tokens: u64,
    ) -> Result<Snapshot, ExecError> {
        if !session.lifecycle().exited() {
            let drained = session.drain(true);
            return Ok(Snapshot::new(
                &drained,
                max_output_tokens,
                window_start.elapsed(),
                None,
                Some(session.id()),
            ));
        }
        let outcome = session
            .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
            .await;
        let wall_time = window_start.elapsed();
        if !session.claim_report() {
            return Err(ExecError::UnknownProcess(session.id()));
        }
        let drained = session.drain(false);
        {
            let mut inner = lock(&self.inner);
            let same = inner
                .sessions
                .get(&session.id())
                .is_some_and(|e| Arc::ptr_eq(&e.session, session));
            if same {
                inner.sessions.remove(&session.id());
                inner.reserved.remove(&session.id());
            }
        }
        session.control().kill_leftovers();
        if let Some(message) = outcome.failure {
            return Err(ExecError::ProcessFailed {
                session_id: session.id(),
                message,
            });
        }
        Ok(Snapshot::new(
            &drained,
            max_output_tokens,
            wall_time,
            outcome.exit_code,
            None,
        ))
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
    }
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// An id reserved for a call whose process is not started yet: released when the call is
/// dropped (cancelled) before it hands the id over.
struct IdReservation {
    store: Arc<SessionStore>,
    id: i32,
    held: bool,
}

impl IdReservation {
    /// The id now belongs to a started session (and its [`FirstCall`] guard).
    fn hand_over(mut self) {
        self.held = false;
    }
}

impl Drop for IdReservation {
    fn drop(&mut self) {
        if self.held {
            self.store.release_id(self.id);
        }
    }
}

/// Keeps the promises of a first call that is dropped mid-way (an MCP cancel): a stored
/// session lives on and loses its guard; an unstored one is stored if still running (or
/// killed, when the store shut down), and finished (End emitted, id released) otherwise.
struct FirstCall {
    store: Arc<SessionStore>,
    session: Arc<Session>,
    stored: bool,
    done: bool,
}

impl Drop for FirstCall {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.session.set_first_call_active(false);
        if self.stored {
            return;
        }
        if !self.session.lifecycle().exited() {
            if self.store.store_session(self.session.clone()).is_ok() {
                return;
            }
            self.session.terminate();
        }
        let session = self.session.clone();
        let store = self.store.clone();
        tokio::spawn(async move { finish_unstored(&store, &session).await });
    }
}

/// Ends a session that was never stored: End once settled, leftovers killed, id released.
async fn finish_unstored(store: &SessionStore, session: &Session) {
    session
        .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
        .await;
    session.emit_end();
    session.control().kill_leftovers();
    store.release_id(session.id());
}

fn new_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}
