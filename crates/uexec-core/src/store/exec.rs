//! `exec_command` (SPEC §2), in order:
//! 1. through the front door ([`crate::spawn`]): validate and plan (argv, cwd, environment,
//!    window, budget), then the rules, a person's yes, the confinement and the shell
//!    snapshot; reserve an id;
//! 2. spawn through the backend (a failure releases the id and emits Begin + a failed End);
//! 3. wait up to `EARLY_EXIT_GRACE_MS` for an exit; a process still running is stored
//!    *before* the window starts, so cancelling the call cannot lose it;
//! 4. observe until the window ends, or the process exited and its output closed;
//! 5. conclude: running → snapshot with the id; exited → entry removed, snapshot with the
//!    code. A call dropped mid-way keeps those promises through its [`FirstCall`] guard.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::ids::new_call_id;
use super::SessionStore;
use crate::config::StoreConfig;
use crate::error::ExecError;
use crate::events::{EndStatus, EventKind};
use crate::limits::{EARLY_EXIT_GRACE_MS, POST_EXIT_CLOSE_WAIT_MS};
use crate::output::snapshot::Snapshot;
use crate::policy::PolicyMonitor;
use crate::request::ExecRequest;
use crate::session::{Session, SessionMetaInfo};
use crate::spawn::{admit, Approver, Plan};
use crate::transcript::TranscriptPlan;

impl SessionStore {
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
        let with = CallWith {
            monitors,
            ..CallWith::default()
        };
        self.exec_command_for(&self.config, req, with).await
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
        with: CallWith,
    ) -> Result<Snapshot, ExecError> {
        let Launched {
            session,
            reservation,
            window,
        } = self.launch(caller, req, with).await?;
        // The call's wall time counts from the spawn, as Codex's does: the early-exit grace
        // below comes before the window, and a result's time is the whole wait.
        let spawned_at = Instant::now();
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
                window_start + window.length,
                Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS),
                window.condition.as_ref(),
            )
            .await;
        let snapshot = self
            .conclude(
                &session,
                spawned_at,
                window.max_output_tokens,
                window.hygiene,
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

    /// Steps 1 and 2: passes the command through the front door, reserves its id, spawns it
    /// (a failure releases the id and publishes Begin and a failed End) and starts its
    /// session, not yet stored.
    pub(super) async fn launch(
        self: &Arc<Self>,
        caller: &StoreConfig,
        req: ExecRequest,
        with: CallWith,
    ) -> Result<Launched, ExecError> {
        let count = |why| {
            if let Some(m) = &self.config.metrics {
                m.spawn_failed(why);
            }
        };
        let backend = self.backend_for(caller, req.environment_id.as_deref())?;
        backend.prepare().await.map_err(|e| {
            count(spawn_failure(e.kind));
            ExecError::Spawn(e.message)
        })?;
        // Bad input is no spawn failure; a policy's refusal is.
        let refusal = |e: &ExecError| {
            if matches!(e, ExecError::Widening(_) | ExecError::Refused { .. }) {
                count(crate::metrics::SpawnFailure::Refused);
            }
        };
        let plan = Plan::new(caller, &req, backend.placement()).inspect_err(refusal)?;
        let mut admitted = admit(
            caller,
            plan,
            with.pre_spawn.as_deref(),
            with.approver.as_deref(),
        )
        .await
        .inspect_err(refusal)?;
        // A pre-spawn hook's rewrite is what runs, and what the session is named by.
        let req = admitted.updated.take().unwrap_or(req);
        let mut monitors = with.monitors;
        monitors.extend(admitted.confined.as_ref().and_then(|s| s.take_monitor()));
        let reservation = self.reserve_id(req.name.as_deref())?;
        let id = reservation.id;
        if let (Some(socket), Some(rules)) = (admitted.exec_socket.take(), &caller.rules) {
            let watch = crate::spawn::ExecWatch::new(
                socket,
                rules.clone(),
                caller.decisions.clone(),
                with.approver.clone(),
                id,
            );
            // A person's yes to the script covers the execs its rules hold, in this session.
            monitors.push(Box::new(watch.with_text_yes(&admitted.verdict)));
        }
        let call_id = req.call_id.clone().unwrap_or_else(new_call_id);
        let (argv, _) = admitted.plan.spec.command();
        let cwd = admitted.plan.spec.cwd.clone();
        // Cancelled here, the reservation releases the id (the backend cleans up its side).
        let process = match admitted.spawn(backend.as_ref()).await {
            Ok(p) => p,
            Err(e) => {
                drop(reservation);
                count(spawn_failure(e.kind));
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
                        usage: None,
                        ending: crate::usage::Ending::default(),
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
        let crate::spawn::Admitted { plan, confined, .. } = admitted;
        let info = SessionMetaInfo {
            id,
            call_id,
            command: plan.command,
            name: req.name.clone(),
            cwd,
            tty: plan.spec.tty,
            pipe_stdin: plan.spec.pipe_stdin,
            hygiene: plan.hygiene,
            sandbox: confined,
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
            crate::session::Watchers {
                screen: self.config.screens.clone(),
                metrics: self.config.metrics.clone(),
            },
        );
        if let Some(m) = &self.config.metrics {
            m.spawned();
        }
        Ok(Launched {
            session,
            reservation,
            window: Window {
                length: plan.window,
                condition: plan.condition,
                max_output_tokens: plan.max_output_tokens,
                hygiene: plan.hygiene,
            },
        })
    }
}

/// What a call brings besides its request and its caller's defaults: the policy monitors
/// of its session, its pre-spawn hooks, and whom a command the rules or hooks hold asks
/// ([`crate::spawn::admit`]).
#[derive(Default)]
pub struct CallWith {
    pub monitors: Vec<Box<dyn PolicyMonitor>>,
    /// Asks a person for a yes when the rules say `prompt`; `None`: such a command is
    /// refused, saying no one could be asked.
    pub approver: Option<Arc<dyn Approver>>,
    /// Hooks consulted after the rules, before a person ([`crate::spawn::PreSpawn`]).
    pub pre_spawn: Option<Arc<dyn crate::spawn::PreSpawn>>,
}

/// A command spawned and its session started ([`SessionStore::launch`]): the caller stores
/// it, or finishes it, and hands the id over.
pub(super) struct Launched {
    pub(super) session: Arc<Session>,
    pub(super) reservation: super::ids::IdReservation,
    /// How the first call watches it, when one does.
    pub(super) window: Window,
}

/// A first call's window, as planned.
pub(super) struct Window {
    length: Duration,
    condition: Option<crate::output::until::Condition>,
    max_output_tokens: u64,
    hygiene: crate::output::Hygiene,
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
pub(super) async fn finish_unstored(store: &SessionStore, session: &Session) {
    session
        .settle(Duration::from_millis(POST_EXIT_CLOSE_WAIT_MS))
        .await;
    session.emit_end();
    session.control().kill_leftovers();
    store.release_id(session.id());
}

/// Why a spawn failed, as the figures count it.
fn spawn_failure(kind: crate::backend::BackendErrorKind) -> crate::metrics::SpawnFailure {
    use crate::backend::BackendErrorKind as Kind;
    use crate::metrics::SpawnFailure;
    match kind {
        Kind::NotFound => SpawnFailure::NotFound,
        Kind::PermissionDenied => SpawnFailure::PermissionDenied,
        Kind::Unavailable => SpawnFailure::Unavailable,
        Kind::Other => SpawnFailure::Other,
    }
}
