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

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{Backend, Signal, WriteOutcome};
use crate::config::{Hygiene, StoreConfig};
use crate::environments::{Environments, Lookup};
use crate::error::ExecError;
use crate::events::{lock, EndStatus, EventBus, EventKind, EventStream};
use crate::limits::{
    write_window_ms, EARLY_EXIT_GRACE_MS, MAX_EMPTY_POLL_YIELD_TIME_MS, MAX_EXIT_NOTICES,
    MAX_SESSION_ID_EXCLUSIVE, MAX_WAIT_SESSIONS, MAX_WRITE_CHARS_BYTES, MIN_SESSION_ID,
    MIN_YIELD_TIME_MS, POST_EXIT_CLOSE_WAIT_MS, PROTECTED_RECENT_SESSIONS,
    TRAILING_OUTPUT_GRACE_MS, TTY_WRITE_SETTLE_MS,
};
use crate::notice::ExitNotice;
use crate::plan::{self, Plan};
use crate::prune::{session_to_prune, SessionMeta};
use crate::request::{
    ExecRequest, OutputPage, ReadOutputRequest, SessionInfo, WaitRequest, WriteRequest,
};
use crate::session::{PolicyMonitor, Session, SessionMetaInfo};
use crate::snapshot::Snapshot;
use crate::transcript::{self, TranscriptInfo, TranscriptPlan};
use crate::until::{Condition, Reason};

/// Session ids in use, shared by the stores that must not reuse each other's.
#[derive(Debug, Default)]
pub struct IdSpace(Mutex<HashSet<i32>>);

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
    /// Removes a session's entry and id, remembering where its transcript is.
    fn forget(&mut self, session: &Session) {
        self.sessions.remove(&session.id());
        self.release(session.id());
        self.remember_transcript(session);
    }

    fn hold(&mut self, id: i32) {
        self.reserved.insert(id);
        lock(&self.ids.0).insert(id);
    }

    fn release(&mut self, id: i32) {
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
        self.exec_command_for(&self.config, req, monitors).await
    }

    /// [`Self::exec_command_monitored`] for a caller whose defaults are not the store's:
    /// `caller` says where and how a command runs when the request does not (working
    /// directory, environment and its policy, shell, token budget, hygiene, sandbox), as a
    /// daemon client does for each connection to an owner's store. What is the store's
    /// (ids, transcripts, screens, limits) stays the store's.
    pub async fn exec_command_for(
        self: &Arc<Self>,
        caller: &StoreConfig,
        req: ExecRequest,
        monitors: Vec<Box<dyn PolicyMonitor>>,
    ) -> Result<Snapshot, ExecError> {
        let backend = self.backend_for(req.environment_id.as_deref())?;
        backend
            .prepare()
            .await
            .map_err(|e| ExecError::Spawn(e.message))?;
        let mut plan = Plan::new(caller, &req, backend.placement())?;
        plan.use_shell_snapshot(caller).await;
        let mut monitors = monitors;
        monitors.extend(plan.sandbox.as_ref().and_then(|s| s.take_monitor()));
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
                        transcript: None,
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
            pipe_stdin: plan.spec.pipe_stdin,
            hygiene: plan.hygiene,
            sandbox: plan.sandbox,
        };
        let transcript = self.config.transcripts.as_ref().and_then(|config| {
            TranscriptPlan::new(config, id, &info.command, &info.cwd, info.tty)
                .map_err(|e| tracing::warn!(session_id = id, "no transcript: {e}"))
                .ok()
        });
        let session = Session::start(
            info,
            process,
            self.events.clone(),
            monitors,
            plan.timeout,
            transcript,
            self.config.screens.clone(),
        );
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
        let reason = session
            .observe(
                window_start + plan.window,
                Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS),
                plan.condition.as_ref(),
            )
            .await;
        let snapshot = self
            .conclude(
                &session,
                window_start,
                plan.max_output_tokens,
                plan.hygiene,
                reason,
            )
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
            return Err(ExecError::Write {
                session_id: id,
                message: "a person is typing in this session (uexec attach --write): poll it (empty chars) to see what happens, and write again once they detach".to_owned(),
            });
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
            return Err(ExecError::Write {
                session_id: id,
                message: format!("the session waits for a secret (a password prompt, echo off): do not type secrets; ask the person to answer it (with `uexec mcp --daemon` they can: `uexec attach {id} --write`). Ctrl-C (\"\\u0003\") aborts the prompt"),
            });
        }

        if session.info.pipe_stdin && (req.eof || (!req.chars.is_empty() && req.chars != "\u{3}")) {
            self.write_pipe(&session, &req, window).await?;
        } else if !req.chars.is_empty() {
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
        let work = write_then_close(session, req.chars.as_bytes(), req.eof);
        match tokio::time::timeout(window, work).await {
            Ok(Ok(WriteOutcome::Accepted)) => Ok(()),
            Ok(Ok(WriteOutcome::StdinClosed)) => Err(failed(
                "its stdin is closed (eof was sent, or the process closed it)".to_owned(),
            )),
            Ok(Ok(WriteOutcome::UnknownProcess)) => {
                session.mark_exited();
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(failed(format!(
                "the process did not read its input within {} ms",
                window.as_millis()
            ))),
        }
    }

    /// Waits on several sessions at once (the `wait` tool): returns when the first of them
    /// (or, with `all`, every one) exits or meets `until`, or when the window ends; then
    /// one snapshot per session, in the order asked. Nothing is checked lazily: a bad or
    /// unknown id fails the call before any session is touched.
    pub async fn wait(
        self: &Arc<Self>,
        req: WaitRequest,
    ) -> Result<Vec<(i32, Result<Snapshot, ExecError>)>, ExecError> {
        self.wait_for(&self.config, req).await
    }

    /// [`Self::wait`] with a caller's defaults (token budget): see
    /// [`Self::exec_command_for`].
    pub async fn wait_for(
        self: &Arc<Self>,
        caller: &StoreConfig,
        req: WaitRequest,
    ) -> Result<Vec<(i32, Result<Snapshot, ExecError>)>, ExecError> {
        if req.session_ids.is_empty() {
            return Err(ExecError::invalid(
                "session_ids",
                "give at least one session id",
            ));
        }
        if req.session_ids.len() > MAX_WAIT_SESSIONS {
            return Err(ExecError::invalid(
                "session_ids",
                format!(
                    "{} ids is more than the {MAX_WAIT_SESSIONS} one call may wait on",
                    req.session_ids.len()
                ),
            ));
        }
        let mut seen = HashSet::new();
        if let Some(dup) = req.session_ids.iter().find(|id| !seen.insert(**id)) {
            return Err(ExecError::invalid(
                "session_ids",
                format!("{dup} is listed twice"),
            ));
        }
        let condition = req.until.as_ref().map(Condition::new).transpose()?;
        let max_output_tokens = plan::token_budget(caller, req.max_output_tokens)?;
        let window_ms = req
            .yield_time_ms
            .map_or(crate::limits::DEFAULT_WAIT_YIELD_TIME_MS, |ms| {
                (ms.max(0) as u64).clamp(MIN_YIELD_TIME_MS, MAX_EMPTY_POLL_YIELD_TIME_MS)
            });
        let mut sessions = Vec::with_capacity(req.session_ids.len());
        for &id in &req.session_ids {
            sessions.push(self.touch(id).ok_or(ExecError::UnknownProcess(id))?);
        }
        // Locks in id order: two waits on overlapping sets cannot deadlock.
        let mut order: Vec<usize> = (0..sessions.len()).collect();
        order.sort_by_key(|&i| sessions[i].id());
        let mut guards = Vec::with_capacity(sessions.len());
        for &i in &order {
            guards.push(sessions[i].interaction.lock().await);
        }
        let window_start = Instant::now();
        let deadline = window_start + Duration::from_millis(window_ms);
        let close_wait = Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS);
        let live: Vec<&Arc<Session>> = sessions.iter().filter(|s| !s.reported()).collect();
        let mut reasons: HashMap<i32, Reason> = HashMap::new();
        if !live.is_empty() {
            let observations = live.iter().map(|s| {
                let condition = condition.as_ref();
                Box::pin(async move { (s.id(), s.observe(deadline, close_wait, condition).await) })
            });
            if req.all {
                for (id, reason) in futures::future::join_all(observations).await {
                    reasons.insert(id, reason);
                }
            } else {
                let ((id, reason), _, _) = futures::future::select_all(observations).await;
                reasons.insert(id, reason);
            }
        }
        let mut results = Vec::with_capacity(sessions.len());
        for session in &sessions {
            let id = session.id();
            if session.reported() {
                results.push((id, Err(ExecError::UnknownProcess(id))));
                continue;
            }
            let reason = reasons.get(&id).copied().unwrap_or_else(|| {
                if session.lifecycle().exited() {
                    Reason::Exited
                } else if session.matched().is_some() {
                    Reason::Matched
                } else {
                    Reason::Window
                }
            });
            let hygiene = session.info.hygiene;
            let snapshot = self
                .conclude(session, window_start, max_output_tokens, hygiene, reason)
                .await;
            results.push((id, snapshot));
        }
        drop(guards);
        Ok(results)
    }

    /// A page of a session's transcript (`read_output`), live or gone (the last
    /// [`FINISHED_TRANSCRIPTS`] gone sessions, until the transcript caps remove them), by
    /// session id or by the path a result named: this store's sessions only.
    pub fn read_output(&self, req: ReadOutputRequest) -> Result<OutputPage, ExecError> {
        self.read_output_within(req, Reach::Own)
    }

    /// [`Self::read_output`] for a person at the daemon: by path, also a session directory
    /// that no store remembers (an earlier daemon's), if it lies right under the root.
    pub fn read_any_output(&self, req: ReadOutputRequest) -> Result<OutputPage, ExecError> {
        self.read_output_within(req, Reach::AnyUnderRoot)
    }

    /// Whether `path` is the transcript of one of this store's sessions (live, or among
    /// the gone ones it remembers).
    pub fn owns_transcript(&self, path: &Path) -> bool {
        self.find_transcript(path).is_some()
    }

    fn read_output_within(
        &self,
        req: ReadOutputRequest,
        reach: Reach,
    ) -> Result<OutputPage, ExecError> {
        let Some(config) = self.config.transcripts.as_ref() else {
            return Err(ExecError::invalid(
                "session_id",
                "this server keeps no transcripts (started with --no-transcripts)",
            ));
        };
        let segment = transcript::segment_bytes(config);
        let (id, info) = match (req.session_id, &req.transcript) {
            (Some(id), None) => (Some(id), self.transcript_of(id, segment)?),
            (None, Some(path)) => match self.find_transcript(path) {
                Some((id, found)) => (Some(id), found.info(id, segment)?),
                None if reach == Reach::AnyUnderRoot => {
                    (None, transcript_under_root(&config.root, path, segment)?)
                }
                None => return Err(unknown_transcript(path)),
            },
            _ => {
                return Err(ExecError::invalid(
                    "session_id",
                    "give session_id or transcript (one of them)",
                ))
            }
        };
        read_page(&info, segment, id, &req)
    }

    fn transcript_of(&self, id: i32, segment: u64) -> Result<TranscriptInfo, ExecError> {
        let found = {
            let inner = lock(&self.inner);
            match inner.sessions.get(&id) {
                Some(e) => Some(FoundTranscript::Live(e.session.clone())),
                None => inner
                    .finished
                    .iter()
                    .rev()
                    .find(|(fid, _)| *fid == id)
                    .map(|(_, gone)| FoundTranscript::Gone(gone.clone())),
            }
        };
        found
            .ok_or(ExecError::UnknownProcess(id))?
            .info(id, segment)
    }

    /// This store's session whose transcript is at `path`: the same directory as one it
    /// made, written the same way or resolving to it. Only a directory this store made is
    /// ever read, whatever `path` names.
    fn find_transcript(&self, path: &Path) -> Option<(i32, FoundTranscript)> {
        let candidates: Vec<(i32, FoundTranscript)> = {
            let inner = lock(&self.inner);
            let live = inner
                .sessions
                .iter()
                .map(|(id, e)| (*id, FoundTranscript::Live(e.session.clone())));
            let gone = inner
                .finished
                .iter()
                .rev()
                .map(|(id, gone)| (*id, FoundTranscript::Gone(gone.clone())));
            live.chain(gone).collect()
        };
        let dirs: Vec<(i32, std::path::PathBuf, FoundTranscript)> = candidates
            .into_iter()
            .filter_map(|(id, found)| Some((id, found.dir()?, found)))
            .collect();
        if let Some(i) = dirs
            .iter()
            .position(|(_, dir, _)| dir.components().eq(path.components()))
        {
            let (id, _, found) = dirs.into_iter().nth(i)?;
            return Some((id, found));
        }
        // Another spelling of the same directory (relative, through a symlinked parent).
        let real = path.canonicalize().ok()?;
        dirs.into_iter()
            .filter(|(_, dir, _)| dir.file_name() == real.file_name())
            .find(|(_, dir, _)| dir.canonicalize().is_ok_and(|d| d == real))
            .map(|(id, _, found)| (id, found))
    }

    /// Exits that no call watched, each once: the owner's next result of any kind carries
    /// them (oldest first).
    pub fn take_exit_notices(&self) -> Vec<ExitNotice> {
        lock(&self.inner).notices.drain(..).collect()
    }

    fn push_exit_notice(&self, session: &Arc<Session>) {
        let state = session.lifecycle();
        let (Some(exited_at), Some(outcome)) = (state.exited_at(), state.outcome().cloned()) else {
            return;
        };
        let mut inner = lock(&self.inner);
        // Terminated or pruned sessions are gone on purpose: nothing to announce.
        let stored = inner
            .sessions
            .get(&session.id())
            .is_some_and(|e| Arc::ptr_eq(&e.session, session));
        if !stored || session.reported() {
            return;
        }
        if inner.notices.len() >= MAX_EXIT_NOTICES {
            inner.notices.pop_front();
        }
        inner.notices.push_back(ExitNotice {
            session_id: session.id(),
            command: session.info.command.clone(),
            exit_code: outcome.exit_code,
            failure: outcome.failure,
            timed_out_ms: outcome.timed_out_ms,
            exited_at,
        });
    }

    /// Whether this store holds session `id`.
    pub fn contains(&self, id: i32) -> bool {
        lock(&self.inner).sessions.contains_key(&id)
    }

    /// Whether this store holds session `id` or still has its transcript.
    pub fn knows(&self, id: i32) -> bool {
        let inner = lock(&self.inner);
        inner.sessions.contains_key(&id) || inner.finished.iter().any(|(f, _)| *f == id)
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
        let write = write_then_close(&session, chars.as_bytes(), eof);
        match tokio::time::timeout(Duration::from_secs(30), write).await {
            Ok(Ok(WriteOutcome::Accepted)) => {
                self.events.publish(
                    &session.info.call_id,
                    id,
                    EventKind::TerminalInteraction {
                        stdin: chars.to_owned(),
                    },
                );
                Ok(())
            }
            Ok(Ok(_)) => Err(failed("its input is closed".to_owned())),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(failed(
                "the process did not read its input within 30 s".to_owned(),
            )),
        }
    }

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
            _lease: lease,
        })
    }

    /// Waits (up to `limit`) for a session's exit without taking its output or its exit
    /// report (people: the owner's next call still gets both). `None` when it still runs.
    pub async fn await_exit(
        &self,
        id: i32,
        limit: Duration,
    ) -> Result<Option<crate::session::Outcome>, ExecError> {
        let session = self.touch(id).ok_or(ExecError::UnknownProcess(id))?;
        if !session.wait_exited(limit).await {
            return Ok(None);
        }
        Ok(Some(
            session
                .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
                .await,
        ))
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
                    last_line: s.last_line(),
                    transcript: s.transcript_dir(),
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

    /// Terminates every session of the store.
    pub fn clean_all(&self) {
        let sessions: Vec<Arc<Session>> = {
            let mut inner = lock(&self.inner);
            let ids: Vec<i32> = inner.sessions.keys().copied().collect();
            for id in ids {
                inner.release(id);
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
            Some(name) => {
                let known = || self.environment_names().join(", ");
                match self.environments.lookup(name) {
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

    fn reserve_id(self: &Arc<Self>) -> Result<IdReservation, ExecError> {
        let mut inner = lock(&self.inner);
        if inner.shut_down {
            return Err(ExecError::ShutDown);
        }
        let id = {
            let taken = lock(&inner.ids.0);
            if self.config.deterministic_ids {
                taken.iter().max().map_or(MIN_SESSION_ID, |max| max + 1)
            } else {
                loop {
                    let id = rand::random_range(MIN_SESSION_ID..MAX_SESSION_ID_EXCLUSIVE);
                    if !taken.contains(&id) {
                        break id;
                    }
                }
            }
        };
        inner.hold(id);
        Ok(IdReservation {
            store: self.clone(),
            id,
            held: true,
        })
    }

    fn release_id(&self, id: i32) {
        let mut inner = lock(&self.inner);
        if !inner.sessions.contains_key(&id) {
            inner.release(id);
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
                    pruned = inner.sessions.get(&victim).map(|e| e.session.clone());
                    if let Some(v) = &pruned {
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
        hygiene: Hygiene,
        reason: Reason,
    ) -> Result<Snapshot, ExecError> {
        // What every snapshot of this call says besides its output.
        let annotate = |mut snapshot: Snapshot, omitted: Option<std::ops::Range<u64>>| {
            snapshot.reason = reason;
            if reason == Reason::Matched {
                snapshot.matched = session.matched();
            }
            snapshot.transcript = session.transcript_dir();
            if let Some(info) = session.transcript() {
                snapshot.omitted_coverage =
                    omitted.as_ref().map(|cut| transcript::coverage(cut, &info));
                snapshot.transcript_stop = info.stop;
            }
            snapshot.omitted_range = omitted;
            snapshot.sandbox = session
                .info
                .sandbox
                .as_ref()
                .map(|s| s.judge(&snapshot.output, session.take_new_verdicts()));
            snapshot
        };
        // What the transcript has of a cut is looked at after this wait, and it comes
        // before the drain: a call cancelled while it waits loses nothing.
        let transcript_wait = Duration::from_millis(transcript::RESULT_WAITS_FOR_TRANSCRIPT_MS);
        if !session.lifecycle().exited() {
            session.transcript_caught_up(transcript_wait).await;
            let (drained, omitted) = session.drain_located(true);
            let mut snapshot = annotate(
                Snapshot::cleaned(
                    &drained,
                    max_output_tokens,
                    hygiene,
                    window_start.elapsed(),
                    None,
                    Some(session.id()),
                ),
                omitted,
            );
            snapshot.awaiting_secret = session.awaiting_secret();
            return Ok(snapshot);
        }
        let outcome = session
            .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
            .await;
        session.transcript_caught_up(transcript_wait).await;
        let wall_time = window_start.elapsed();
        if !session.claim_report() {
            return Err(ExecError::UnknownProcess(session.id()));
        }
        let (drained, omitted) = session.drain_located(false);
        {
            let mut inner = lock(&self.inner);
            // Reported here: a notice of the same exit would say it twice.
            inner.notices.retain(|n| n.session_id != session.id());
            let same = inner
                .sessions
                .get(&session.id())
                .is_some_and(|e| Arc::ptr_eq(&e.session, session));
            if same {
                inner.forget(session);
            } else {
                inner.remember_transcript(session);
            }
        }
        session.control().kill_leftovers();
        if let Some(message) = outcome.failure {
            return Err(ExecError::ProcessFailed {
                session_id: session.id(),
                message,
            });
        }
        let mut snapshot = annotate(
            Snapshot::cleaned(
                &drained,
                max_output_tokens,
                hygiene,
                wall_time,
                outcome.exit_code,
                None,
            ),
            omitted,
        );
        // Whatever ended the wait, the process is gone: that is what the caller acts on.
        if reason == Reason::Window {
            snapshot.reason = Reason::Exited;
        }
        snapshot.timed_out_ms = outcome.timed_out_ms;
        Ok(snapshot)
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

/// How far `read_output {transcript}` may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// This store's sessions (an agent, an HTTP token's client).
    Own,
    /// Also any session directory right under the root (a person at the daemon).
    AnyUnderRoot,
}

/// A session's transcript as a store knows it.
enum FoundTranscript {
    Live(Arc<Session>),
    Gone(FinishedTranscript),
}

impl FoundTranscript {
    /// Where it is, once it is on disk.
    fn dir(&self) -> Option<std::path::PathBuf> {
        match self {
            Self::Live(session) => session.transcript().map(|t| t.dir),
            Self::Gone(gone) => Some(gone.dir.clone()),
        }
    }

    fn info(self, id: i32, segment: u64) -> Result<TranscriptInfo, ExecError> {
        match self {
            Self::Live(session) => session.transcript().ok_or(ExecError::UnknownProcess(id)),
            Self::Gone(gone) if !gone.written => Ok(TranscriptInfo {
                stop: gone.stop,
                ..TranscriptInfo::empty(gone.dir)
            }),
            Self::Gone(gone) => {
                let mut info = transcript::info_of(&gone.dir, segment).map_err(|e| {
                    ExecError::invalid(
                        "session_id",
                        format!("session {id}'s transcript is gone: {e}"),
                    )
                })?;
                // What the writer knew beats what `meta` could hold on a full disk.
                if gone.stop.is_some() {
                    info.stop = gone.stop;
                }
                Ok(info)
            }
        }
    }
}

/// The refusal for a transcript path that is not one of the caller's sessions: the same
/// for every other path (another client's, made up, outside the root), so it tells nothing.
fn unknown_transcript(path: &Path) -> ExecError {
    ExecError::invalid(
        "transcript",
        format!(
            "unknown transcript {}: not one of this client's sessions (running, or among the last {FINISHED_TRANSCRIPTS} that ended)",
            path.display()
        ),
    )
}

/// The session directory at `path` for a person: it must resolve (symlinks and `..`
/// followed) to a directory right under the root, and be a private directory itself (not a
/// symlink); it is then read as the root's own entry of that name.
fn transcript_under_root(
    root: &Path,
    path: &Path,
    segment: u64,
) -> Result<TranscriptInfo, ExecError> {
    let refuse = || unknown_transcript(path);
    let real = path.canonicalize().map_err(|_| refuse())?;
    let real_root = root.canonicalize().map_err(|_| refuse())?;
    let name = real
        .file_name()
        .filter(|_| real.parent() == Some(real_root.as_path()))
        .ok_or_else(refuse)?;
    let dir = root.join(name);
    crate::fs::check_private_dir(&dir).map_err(|_| refuse())?;
    transcript::info_of(&dir, segment)
        .map_err(|e| ExecError::invalid("transcript", format!("{}: {e}", dir.display())))
}

/// Most bytes one `read_output` page returns, and the default.
pub const READ_OUTPUT_MAX_BYTES: u64 = 256 * 1024;
pub const READ_OUTPUT_DEFAULT_BYTES: u64 = 16 * 1024;
/// Most bytes one `grep` scans.
const GREP_SCAN_MAX_BYTES: u64 = 64 << 20;
/// Bytes read from the end for `tail_lines`.
const TAIL_SCAN_BYTES: usize = 1 << 20;

fn read_page(
    info: &TranscriptInfo,
    segment: u64,
    id: Option<i32>,
    req: &ReadOutputRequest,
) -> Result<OutputPage, ExecError> {
    let io = |e: std::io::Error| {
        ExecError::invalid(
            "transcript",
            format!("reading {} failed: {e}", info.dir.display()),
        )
    };
    let limit = match req.limit {
        None => READ_OUTPUT_DEFAULT_BYTES,
        Some(n) if (1..=READ_OUTPUT_MAX_BYTES as i64).contains(&n) => n as u64,
        Some(n) => {
            return Err(ExecError::invalid(
                "limit",
                format!("{n} is out of range (1..={READ_OUTPUT_MAX_BYTES})"),
            ))
        }
    };
    let offset = match req.offset {
        None => info.first_kept,
        Some(n) if n >= 0 => n as u64,
        Some(n) => {
            return Err(ExecError::invalid(
                "offset",
                format!("must not be negative (got {n})"),
            ))
        }
    };
    // Never through a symlink, never another user's directory.
    if info.total > 0 {
        crate::fs::check_private_dir(&info.dir)
            .map_err(|e| ExecError::invalid("transcript", e.to_string()))?;
    }
    let page = |offset: u64, next: u64, text: String, matches: Option<u64>| OutputPage {
        session_id: id,
        transcript: info.dir.clone(),
        offset,
        next_offset: next,
        total: info.total,
        first_kept: info.first_kept,
        stop: info.stop.clone(),
        text,
        matches,
    };
    if let Some(n) = req.tail_lines {
        if req.grep.is_some() || req.offset.is_some() {
            return Err(ExecError::invalid(
                "tail_lines",
                "give tail_lines alone, without offset or grep",
            ));
        }
        if !(1..=10_000).contains(&n) {
            return Err(ExecError::invalid(
                "tail_lines",
                format!("{n} is out of range (1..=10000)"),
            ));
        }
        let from = info.total.saturating_sub(TAIL_SCAN_BYTES as u64);
        let slice = transcript::read_slice(info, segment, from, TAIL_SCAN_BYTES).map_err(io)?;
        let bytes = &slice.bytes;
        // The last n lines: a trailing newline ends the last line, it does not start one.
        let body_end = bytes.len() - usize::from(bytes.last() == Some(&b'\n'));
        let mut start = body_end;
        let mut lines = 0;
        while start > 0 {
            if bytes[start - 1] == b'\n' {
                lines += 1;
                if lines == n {
                    break;
                }
            }
            start -= 1;
        }
        let mut text = &bytes[start..];
        if text.len() as u64 > limit {
            text = &text[text.len() - limit as usize..];
        }
        let at = slice.offset + (bytes.len() - text.len()) as u64;
        return Ok(page(
            at,
            slice.offset + bytes.len() as u64,
            String::from_utf8_lossy(text).into_owned(),
            None,
        ));
    }
    if let Some(pattern) = &req.grep {
        let regex = regex::bytes::RegexBuilder::new(pattern)
            .multi_line(true)
            .crlf(true)
            .size_limit(crate::until::PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|e| ExecError::invalid("grep", format!("not a valid regex: {e}")))?;
        let mut out = String::new();
        let mut matches = 0;
        let mut at = offset.max(info.first_kept);
        let stop = at.saturating_add(GREP_SCAN_MAX_BYTES).min(info.total);
        let start = at;
        let mut carry: Vec<u8> = Vec::new();
        let mut carry_at = at;
        while at < stop && (out.len() as u64) < limit {
            let slice = transcript::read_slice(info, segment, at, 1 << 20).map_err(io)?;
            if slice.bytes.is_empty() {
                break;
            }
            at = slice.offset + slice.bytes.len() as u64;
            carry.extend_from_slice(&slice.bytes);
            // Whole lines only; the unfinished last one waits for the next block.
            let whole = match carry.iter().rposition(|&b| b == b'\n') {
                Some(p) => p + 1,
                None if at >= stop || carry.len() >= 1 << 20 => carry.len(),
                None => continue,
            };
            let mut line_at = carry_at;
            for line in carry[..whole].split_inclusive(|&b| b == b'\n') {
                if regex.is_match(line) && (out.len() as u64) < limit {
                    matches += 1;
                    out.push_str(&format!("{line_at}: {}", String::from_utf8_lossy(line)));
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                }
                line_at += line.len() as u64;
            }
            carry.drain(..whole);
            carry_at = line_at;
        }
        let next = carry_at;
        return Ok(page(start, next, out, Some(matches)));
    }
    let slice = transcript::read_slice(info, segment, offset, limit as usize).map_err(io)?;
    let mut bytes = slice.bytes;
    // End on a character boundary; the rest starts the next page.
    let keep = bytes.len() - crate::utf8::incomplete_suffix_len(&bytes);
    if keep > 0 {
        bytes.truncate(keep);
    }
    let next = slice.offset + bytes.len() as u64;
    Ok(page(
        slice.offset,
        next,
        String::from_utf8_lossy(&bytes).into_owned(),
        None,
    ))
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
    _lease: Option<crate::session::Lease>,
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
        match self.session.control().write(bytes).await {
            Ok(WriteOutcome::Accepted) => Ok(()),
            Ok(_) => Err(ExecError::Write {
                session_id: id,
                message: "its terminal is closed".to_owned(),
            }),
            Err(e) => Err(ExecError::Write {
                session_id: id,
                message: e.message,
            }),
        }
    }

    /// Sets the session's terminal size (only with the lease: one person drives it).
    pub fn resize(&self, rows: u16, cols: u16) -> Result<(), ExecError> {
        if self._lease.is_none() {
            return Ok(());
        }
        let (rows, cols) = (rows.max(1), cols.max(1));
        self.session
            .control()
            .resize(rows, cols)
            .map_err(|e| ExecError::Write {
                session_id: self.session.id(),
                message: e.message,
            })?;
        if let Some(keeper) = self.session.screen() {
            keeper.resize(rows, cols);
        }
        Ok(())
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
