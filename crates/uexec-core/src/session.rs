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
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::timeout_at;

use crate::backend::{ExitReport, OutputChunk, ProcessControl, SpawnedProcess};
use crate::buffer::{Drained, HeadTailBuffer};
use crate::events::{lock, EndStatus, EventBus, EventKind};
use crate::limits::{LATE_FAILURE_GRACE_MS, OUTPUT_BUFFER_MAX_BYTES, OUTPUT_DELTA_MAX_BYTES};
use crate::snapshot::Body;
use crate::utf8::split_chunks;

/// What is known of the process. Exit and failure are independent facts: `exited` is the
/// truth, `exit_code` may stay unknown, and the first failure message wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    pub exited: bool,
    pub exit_code: Option<i32>,
    pub failure: Option<String>,
    pub output_closed: bool,
    pub exited_at: Option<Instant>,
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
    /// Set while the `exec_command` that stored the session is in its window: the entry then
    /// stays in the store until that call reports the exit.
    pub first_call_active: AtomicBool,
    /// Guards "exactly one End, and no delta after it".
    ended: Mutex<bool>,
    monitors_running: watch::Sender<usize>,
    events: Arc<EventBus>,
}

struct OutputBuffers {
    /// Delivered (and emptied) by the next call.
    pending: HeadTailBuffer,
    /// Everything, bounded the same way, for the End event and for people.
    aggregated: HeadTailBuffer,
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
        let _ = rx.wait_for(|s| s.exited).await.is_ok();
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
        let session = Arc::new(Self {
            info,
            pid,
            started_at: Instant::now(),
            control,
            state: watch::channel(Lifecycle::default()).0,
            output: Mutex::new(OutputBuffers {
                pending: HeadTailBuffer::new(OUTPUT_BUFFER_MAX_BYTES),
                aggregated: HeadTailBuffer::new(OUTPUT_BUFFER_MAX_BYTES),
            }),
            interaction: tokio::sync::Mutex::new(()),
            first_call_active: AtomicBool::new(false),
            ended: Mutex::new(false),
            monitors_running: watch::channel(monitors.len()).0,
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
                    s.monitors_running.send_modify(|n| *n = n.saturating_sub(1));
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
                        self.state.send_modify(|s| s.output_closed = true);
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
        {
            let mut out = lock(&self.output);
            out.pending.push(bytes);
            out.aggregated.push(bytes);
        }
        if self.events.has_subscribers() {
            let ended = lock(&self.ended);
            if !*ended {
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
        }
    }

    fn on_exit(&self, report: ExitReport) {
        self.state.send_modify(|s| {
            if !s.exited {
                s.exited = true;
                s.exited_at = Some(Instant::now());
            }
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
            if s.exited {
                return false;
            }
            s.exited = true;
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

    /// Waits up to `grace` for the exit; true when it came.
    pub async fn wait_exited(&self, grace: Duration) -> bool {
        let mut rx = self.state.subscribe();
        let exited = async move { rx.wait_for(|s| s.exited).await.is_ok() };
        tokio::time::timeout(grace, exited).await.unwrap_or(false)
    }

    /// Waits until `deadline`, or earlier once the process has exited and its output closed
    /// (after the exit, at most `close_wait` for the close). Output alone never ends the wait.
    pub async fn observe_until(&self, deadline: Instant, close_wait: Duration) {
        let mut rx = self.state.subscribe();
        loop {
            let s = rx.borrow_and_update().clone();
            let mut until = deadline;
            if s.exited {
                if s.output_closed {
                    return;
                }
                let close_deadline = s.exited_at.unwrap_or_else(Instant::now) + close_wait;
                until = until.min(close_deadline);
            }
            if Instant::now() >= until {
                return;
            }
            match timeout_at(until, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return,
            }
        }
    }

    /// Takes the output printed since the last call.
    pub fn drain(&self) -> Drained {
        lock(&self.output).pending.drain()
    }

    /// The last `max_bytes` of everything the session printed, for people.
    pub fn recent_output(&self, max_bytes: usize) -> String {
        let all = self.aggregated_text();
        let start = all.len().saturating_sub(max_bytes);
        let start = (start..=all.len())
            .find(|i| all.is_char_boundary(*i))
            .unwrap_or(all.len());
        all[start..].to_owned()
    }

    fn aggregated_text(&self) -> String {
        let d = lock(&self.output).aggregated.peek();
        Body::from_drained(&d, u64::MAX / 8).text
    }

    /// Waits until the End can be classified: exit observed, output drained (closed, or
    /// `drain_grace` after the exit), and every monitor settled (at most
    /// `LATE_FAILURE_GRACE_MS` after the exit).
    pub async fn settle(&self, drain_grace: Duration) {
        let mut rx = self.state.subscribe();
        let exited_at = {
            let _ = rx.wait_for(|s| s.exited).await;
            self.lifecycle().exited_at.unwrap_or_else(Instant::now)
        };
        let closed = async move {
            let _ = rx.wait_for(|s| s.output_closed).await;
        };
        let _ = timeout_at(exited_at + drain_grace, closed).await;
        let mut monitors = self.monitors_running.subscribe();
        let monitor_deadline = exited_at + Duration::from_millis(LATE_FAILURE_GRACE_MS);
        let settled = async move {
            let _ = monitors.wait_for(|n| *n == 0).await;
        };
        let _ = timeout_at(monitor_deadline, settled).await;
    }

    /// Publishes the session's End unless it was already published; true when this call did.
    pub fn emit_end(&self) -> bool {
        let mut ended = lock(&self.ended);
        if *ended {
            return false;
        }
        *ended = true;
        let s = self.lifecycle();
        let mut aggregated_output = self.aggregated_text();
        let (status, exit_code) = match &s.failure {
            Some(message) => {
                if !aggregated_output.is_empty() && !aggregated_output.ends_with('\n') {
                    aggregated_output.push('\n');
                }
                aggregated_output.push_str(message);
                (EndStatus::Failed, Some(-1))
            }
            None if s.exit_code == Some(0) => (EndStatus::Completed, s.exit_code),
            None => (EndStatus::Failed, s.exit_code),
        };
        self.events.publish(
            &self.info.call_id,
            self.info.id,
            EventKind::End {
                exit_code,
                status,
                aggregated_output,
                duration: self.started_at.elapsed(),
                failure: s.failure,
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
