//! One session: a spawned process, its pending output and its lifecycle.
//!
//! Ownership (the three timelines of SPEC §1):
//! - the *pump* task owns the backend's output channel and exit report; it fills the pending
//!   buffer, publishes output deltas and records exit and close in the lifecycle `watch`;
//! - calls (the `exec_command` that started it, later `write_stdin`s) hold an `Arc<Session>`
//!   for the length of their window, serialised by the interaction lock;
//! - the store entry is one more `Arc`, removed when a call reports the exit, on terminate,
//!   or on prune; the process and its pump may outlive it by the time it takes to die.
//!
//! Nothing here polls: every wait is on the lifecycle `watch` with a deadline.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{timeout_at, Instant};

use crate::backend::{ExitReport, OutputChunk, ProcessControl, SpawnedProcess};
use crate::buffer::{Drained, HeadTailBuffer};
use crate::events::{lock, EndStatus, EventBus, EventKind};
use crate::limits::{LATE_FAILURE_GRACE_MS, OUTPUT_BUFFER_MAX_BYTES, OUTPUT_DELTA_MAX_BYTES};
use crate::snapshot::Body;
use crate::utf8::{incomplete_suffix_len, split_chunks, Utf8Carry};

/// Everything that changes about a session, in one `watch`: every transition is one method
/// of [`Session`], and every wait (a call's window, the End's settling, a monitor) is a wait
/// on this one value.
///
/// The facts are independent and arrive in any order: the exit, the close of the output, a
/// monitor's verdict, a call reporting the exit. `exited` is the truth (`exit_code` may stay
/// unknown); the first failure message wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    /// When the process was known gone: the backend reported its exit, or it was killed, or
    /// the backend no longer knows it ([`Lifecycle::exited`]).
    pub exited_at: Option<Instant>,
    /// The backend's own exit report arrived (it carries the code).
    pub exit_reported: bool,
    pub exit_code: Option<i32>,
    pub failure: Option<String>,
    pub output_closed: bool,
    /// Policy monitors still watching (SPEC §7).
    pub monitors_running: usize,
    /// What every call and the End report about the exit, fixed once the monitors settled
    /// (or their grace ran out), so the two can never disagree.
    pub outcome: Option<Outcome>,
    /// A call has reported the exit: the id is dead to every later call.
    pub reported: bool,
    /// The `exec_command` that stored the session is still in its window: the entry stays
    /// in the store until that call reports the exit.
    pub first_call_active: bool,
}

impl Lifecycle {
    /// The process is gone (the truth; `exit_code` may stay unknown).
    pub fn exited(&self) -> bool {
        self.exited_at.is_some()
    }
}

/// How a process ended, as reported to callers and in the End.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub failure: Option<String>,
}

/// Fixed facts about a session.
#[derive(Debug, Clone)]
pub(crate) struct SessionMetaInfo {
    pub id: i32,
    pub call_id: String,
    pub command: String,
    pub cwd: PathBuf,
    pub tty: bool,
}

pub(crate) struct Session {
    pub info: SessionMetaInfo,
    pub pid: Option<u32>,
    pub started_at: Instant,
    control: Arc<dyn ProcessControl>,
    state: watch::Sender<Lifecycle>,
    output: Mutex<OutputBuffers>,
    /// Serialises calls on this session (SPEC §3).
    pub interaction: tokio::sync::Mutex<()>,
    /// Held while publishing output deltas and the End: exactly one End, no delta after it.
    ended: Mutex<bool>,
    events: Arc<EventBus>,
}

struct OutputBuffers {
    /// Delivered (and emptied) by the next call.
    pending: HeadTailBuffer,
    /// Everything, bounded the same way, for the End event and for people.
    aggregated: HeadTailBuffer,
    /// Output deltas end on character boundaries: a split character waits here.
    delta_carry: Utf8Carry,
}

/// A policy monitor watches a session and may fail it (SPEC §7).
pub trait PolicyMonitor: Send + 'static {
    /// Runs until the monitor has nothing more to say. The session's End waits for it, at
    /// most `LATE_FAILURE_GRACE_MS` after the exit.
    fn watch(self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()>;
}

/// What a monitor may do to its session.
#[derive(Clone)]
pub struct MonitorHandle {
    session: Weak<Session>,
    state: watch::Receiver<Lifecycle>,
}

impl MonitorHandle {
    /// Records `message` (unless a failure is already recorded) and terminates the process.
    pub fn fail_and_terminate(&self, message: impl Into<String>) {
        if let Some(s) = self.session.upgrade() {
            s.fail_and_terminate(message.into());
        }
    }

    /// Resolves once the process has exited.
    pub async fn exited(&self) {
        let mut rx = self.state.clone();
        let _ = rx.wait_for(|s| s.exited()).await.is_ok();
    }
}

impl std::fmt::Debug for MonitorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonitorHandle").finish_non_exhaustive()
    }
}

impl Session {
    /// Wraps a spawned process and starts its pump and monitors.
    pub fn start(
        info: SessionMetaInfo,
        process: SpawnedProcess,
        events: Arc<EventBus>,
        monitors: Vec<Box<dyn PolicyMonitor>>,
    ) -> Arc<Self> {
        let SpawnedProcess {
            pid,
            output,
            exit,
            control,
        } = process;
        let state = Lifecycle {
            monitors_running: monitors.len(),
            ..Lifecycle::default()
        };
        let session = Arc::new(Self {
            info,
            pid,
            started_at: Instant::now(),
            control,
            state: watch::channel(state).0,
            output: Mutex::new(OutputBuffers {
                pending: HeadTailBuffer::new(OUTPUT_BUFFER_MAX_BYTES),
                aggregated: HeadTailBuffer::new(OUTPUT_BUFFER_MAX_BYTES),
                delta_carry: Utf8Carry::default(),
            }),
            interaction: tokio::sync::Mutex::new(()),
            ended: Mutex::new(false),
            events,
        });
        tokio::spawn(session.clone().pump(output, exit));
        for monitor in monitors {
            let handle = MonitorHandle {
                session: Arc::downgrade(&session),
                state: session.state.subscribe(),
            };
            let weak = Arc::downgrade(&session);
            tokio::spawn(async move {
                monitor.watch(handle).await;
                if let Some(s) = weak.upgrade() {
                    s.state
                        .send_modify(|s| s.monitors_running = s.monitors_running.saturating_sub(1));
                }
            });
        }
        session
    }

    pub fn id(&self) -> i32 {
        self.info.id
    }

    pub fn control(&self) -> &Arc<dyn ProcessControl> {
        &self.control
    }

    pub fn lifecycle(&self) -> Lifecycle {
        self.state.borrow().clone()
    }

    async fn pump(
        self: Arc<Self>,
        mut output: mpsc::Receiver<OutputChunk>,
        exit: oneshot::Receiver<ExitReport>,
    ) {
        let mut exit = exit;
        let mut exit_pending = true;
        let mut output_open = true;
        while output_open || exit_pending {
            tokio::select! {
                // Output first: bytes written before the exit land before it is recorded.
                biased;
                chunk = output.recv(), if output_open => match chunk {
                    Some(chunk) => self.on_output(&chunk.bytes),
                    None => {
                        output_open = false;
                        self.on_close();
                    }
                },
                report = &mut exit, if exit_pending => {
                    exit_pending = false;
                    // A backend that vanished without a report: exited, code unknown.
                    self.on_exit(report.unwrap_or_default());
                }
            }
        }
    }

    fn on_output(&self, bytes: &[u8]) {
        let whole = {
            let mut out = lock(&self.output);
            out.pending.push(bytes);
            out.aggregated.push(bytes);
            out.delta_carry.join(bytes)
        };
        self.publish_deltas(&whole);
    }

    fn on_close(&self) {
        let rest = lock(&self.output).delta_carry.finish();
        self.publish_deltas(&rest);
        self.state.send_modify(|s| s.output_closed = true);
    }

    fn publish_deltas(&self, bytes: &[u8]) {
        if bytes.is_empty() || !self.events.has_subscribers() {
            return;
        }
        let ended = lock(&self.ended);
        if *ended {
            return;
        }
        for chunk in split_chunks(bytes, OUTPUT_DELTA_MAX_BYTES) {
            self.events.publish(
                &self.info.call_id,
                self.info.id,
                EventKind::OutputDelta {
                    chunk: bytes::Bytes::copy_from_slice(chunk),
                },
            );
        }
    }

    fn on_exit(&self, report: ExitReport) {
        self.state.send_modify(|s| {
            s.exited_at.get_or_insert_with(Instant::now);
            s.exit_reported = true;
            if s.exit_code.is_none() {
                s.exit_code = report.exit_code;
            }
            if s.failure.is_none() {
                s.failure = report.failure;
            }
        });
    }

    /// Marks the process exited now, whether or not its exit was observed (a backend that
    /// no longer knows it, a terminate).
    pub fn mark_exited(&self) {
        self.state.send_if_modified(|s| {
            if s.exited() {
                return false;
            }
            s.exited_at = Some(Instant::now());
            true
        });
    }

    /// SIGKILL to the group, then the process; output closed; marked exited.
    pub fn terminate(&self) {
        self.control.terminate();
        self.mark_exited();
    }

    pub fn fail_and_terminate(&self, message: String) {
        self.state.send_modify(|s| {
            if s.failure.is_none() {
                s.failure = Some(message);
            }
        });
        self.terminate();
    }

    /// Whether the `exec_command` that stored the session is still in its window.
    pub fn set_first_call_active(&self, active: bool) {
        self.state
            .send_if_modified(|s| std::mem::replace(&mut s.first_call_active, active) != active);
    }

    /// Claims the report of the exit for the calling call: true for exactly one caller.
    pub fn claim_report(&self) -> bool {
        self.state
            .send_if_modified(|s| s.exited() && !std::mem::replace(&mut s.reported, true))
    }

    /// Waits until `done` holds, or until the deadline `deadline_of` gives (`None`: none),
    /// both re-evaluated whenever the lifecycle changes.
    async fn wait_until(
        &self,
        done: impl Fn(&Lifecycle) -> bool,
        deadline_of: impl Fn(&Lifecycle) -> Option<Instant>,
    ) {
        let mut rx = self.state.subscribe();
        loop {
            let (finished, deadline) = {
                let s = rx.borrow_and_update();
                (done(&s), deadline_of(&s))
            };
            if finished {
                return;
            }
            let changed = match deadline {
                Some(deadline) if Instant::now() >= deadline => return,
                Some(deadline) => timeout_at(deadline, rx.changed()).await.ok(),
                None => Some(rx.changed().await),
            };
            if !matches!(changed, Some(Ok(()))) {
                return;
            }
        }
    }

    /// Waits up to `grace` for the exit; true when it came.
    pub async fn wait_exited(&self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        self.wait_until(|s| s.exited(), |_| Some(deadline)).await;
        self.lifecycle().exited()
    }

    /// Waits until `deadline`, or earlier once the process has exited and its output closed
    /// (after the exit, at most `close_wait` for the close). Output alone never ends the wait.
    pub async fn observe_until(&self, deadline: Instant, close_wait: Duration) {
        self.wait_until(Self::drained, |s| {
            Some(match s.exited_at {
                Some(at) => deadline.min(at + close_wait),
                None => deadline,
            })
        })
        .await;
    }

    /// Exited, its output closed and its exit report in: nothing more will come.
    fn drained(s: &Lifecycle) -> bool {
        s.exited() && s.output_closed && s.exit_reported
    }

    /// Waits until the exit can be reported (SPEC §5): the exit observed, the output drained
    /// (closed, or `drain_grace` after the exit), and every monitor settled (at most
    /// `LATE_FAILURE_GRACE_MS` after the exit); then fixes the [`Outcome`].
    pub async fn settle(&self, drain_grace: Duration) -> Outcome {
        self.wait_until(|s| s.exited(), |_| None).await;
        self.wait_until(Self::drained, |s| s.exited_at.map(|at| at + drain_grace))
            .await;
        let monitor_grace = Duration::from_millis(LATE_FAILURE_GRACE_MS);
        self.wait_until(
            |s| s.monitors_running == 0,
            |s| s.exited_at.map(|at| at + monitor_grace),
        )
        .await;
        self.fix_outcome()
    }

    /// The outcome, fixed now from what is known unless it already was.
    fn fix_outcome(&self) -> Outcome {
        self.state.send_if_modified(|s| {
            if s.outcome.is_some() {
                return false;
            }
            s.outcome = Some(Outcome {
                exit_code: s.exit_code,
                failure: s.failure.clone(),
            });
            true
        });
        self.state.borrow().outcome.clone().unwrap_or_default()
    }

    /// Takes the output printed since the last call. While more may come, an incomplete
    /// character at the end stays for the next drain (`whole_chars`).
    pub fn drain(&self, whole_chars: bool) -> Drained {
        let mut out = lock(&self.output);
        if whole_chars {
            out.pending.drain_whole_chars()
        } else {
            out.pending.drain()
        }
    }

    /// The last `max_bytes` of everything the session printed, for people.
    pub fn recent_output(&self, max_bytes: usize) -> String {
        let all = self.aggregated_text(true);
        let start = all.len().saturating_sub(max_bytes);
        let start = (start..=all.len())
            .find(|i| all.is_char_boundary(*i))
            .unwrap_or(all.len());
        all[start..].to_owned()
    }

    /// Everything kept of the output as text; `whole_chars` leaves out an incomplete
    /// character at the end (more may come).
    fn aggregated_text(&self, whole_chars: bool) -> String {
        let mut d = lock(&self.output).aggregated.peek();
        if whole_chars {
            let end = if d.tail.is_empty() {
                &mut d.head
            } else {
                &mut d.tail
            };
            end.truncate(end.len() - incomplete_suffix_len(end));
        }
        Body::from_drained(&d, u64::MAX / 8).text
    }

    /// Publishes the session's End unless it was already published; true when this call did.
    pub fn emit_end(&self) -> bool {
        let outcome = self.fix_outcome();
        let mut ended = lock(&self.ended);
        if *ended {
            return false;
        }
        *ended = true;
        let mut aggregated_output = self.aggregated_text(false);
        let (status, exit_code) = match &outcome.failure {
            Some(message) => {
                if !aggregated_output.is_empty() && !aggregated_output.ends_with('\n') {
                    aggregated_output.push('\n');
                }
                aggregated_output.push_str(message);
                (EndStatus::Failed, Some(-1))
            }
            None if outcome.exit_code == Some(0) => (EndStatus::Completed, outcome.exit_code),
            None => (EndStatus::Failed, outcome.exit_code),
        };
        self.events.publish(
            &self.info.call_id,
            self.info.id,
            EventKind::End {
                exit_code,
                status,
                aggregated_output,
                duration: self.started_at.elapsed(),
                failure: outcome.failure,
            },
        );
        true
    }

    /// The lifecycle watcher of a stored session (SPEC §5): End once the exit is observed,
    /// the output drained, the monitors settled and the interaction lock free.
    pub async fn watch_lifecycle(self: Arc<Self>, drain_grace: Duration) {
        self.settle(drain_grace).await;
        let _interaction = self.interaction.lock().await;
        self.emit_end();
        self.control.kill_leftovers();
    }
}
