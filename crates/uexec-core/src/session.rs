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

use crate::backend::{ExitReport, InputWait, OutputChunk, ProcessControl, Signal, SpawnedProcess};
use crate::buffer::{Drained, HeadTailBuffer};
use crate::config::Hygiene;
use crate::events::{lock, EndStatus, EventBus, EventKind};
use crate::limits::{
    LATE_FAILURE_GRACE_MS, OUTPUT_BUFFER_MAX_BYTES, OUTPUT_DELTA_MAX_BYTES, PTY_COLS, PTY_ROWS,
    TIMEOUT_EXIT_CODE, TIMEOUT_KILL_GRACE_MS,
};
use crate::snapshot::Body;
use crate::text::strip_ansi;
use crate::transcript::{Transcript, TranscriptFeed, TranscriptInfo, TranscriptPlan};
use crate::until::{Condition, Match, Matcher, Reason, PROMPT_FIRST_CHECK_MS, PROMPT_QUIET_MS};
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
    /// The hard timeout (`timeout_ms`) fired: the group got SIGTERM, then SIGKILL.
    pub timed_out_ms: Option<u64>,
    /// Verdicts a monitor recorded without terminating ([`MonitorHandle::record_verdict`]),
    /// in order.
    pub verdicts: Vec<String>,
    /// How many of `verdicts` a snapshot has already reported.
    pub verdicts_reported: usize,
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
    /// Killed by the hard timeout (the exit code is then [`TIMEOUT_EXIT_CODE`]).
    pub timed_out_ms: Option<u64>,
    /// Verdicts recorded without terminating: the process ran on to its own exit, and the
    /// End is failed all the same.
    pub verdicts: Vec<String>,
}

/// Fixed facts about a session.
#[derive(Debug, Clone)]
pub(crate) struct SessionMetaInfo {
    pub id: i32,
    pub call_id: String,
    pub command: String,
    pub cwd: PathBuf,
    pub tty: bool,
    /// Pipe mode with a stdin pipe that `write_stdin` may write and close.
    pub pipe_stdin: bool,
    /// Output hygiene of this session's snapshots unless a call says otherwise.
    pub hygiene: Hygiene,
    /// The sandbox the command runs in (its private tmp goes with the session).
    pub sandbox: Option<crate::sandbox::SandboxSession>,
}

/// Where the output stands, for calls that wait on it (wait conditions). Written by the pump
/// with the output lock held, so a call that installs a matcher under that lock misses
/// nothing.
#[derive(Debug, Default)]
struct OutputMark {
    /// Bytes printed so far.
    total: u64,
    last_at: Option<Instant>,
    /// A waiting call wants to hear of the next output (changes are not announced otherwise).
    want_output: bool,
    /// The pattern of the call in its window, if any, and what it matched.
    matcher: Option<Matcher>,
    matched: Option<Match>,
}

pub(crate) struct Session {
    pub info: SessionMetaInfo,
    pub pid: Option<u32>,
    pub started_at: Instant,
    control: Arc<dyn ProcessControl>,
    state: watch::Sender<Lifecycle>,
    output: Mutex<OutputBuffers>,
    mark: watch::Sender<OutputMark>,
    /// Serialises calls on this session (SPEC §3).
    pub interaction: tokio::sync::Mutex<()>,
    /// Held while publishing output deltas and the End: exactly one End, no delta after it.
    ended: Mutex<bool>,
    /// A person holds the input lease (`uexec attach --write`).
    lease: std::sync::atomic::AtomicBool,
    /// The keeper of a PTY session's screen (faces that attach people configure one).
    screen: std::sync::OnceLock<crate::screen::KeeperHandle>,
    events: Arc<EventBus>,
}

struct OutputBuffers {
    /// Delivered (and emptied) by the next call.
    pending: HeadTailBuffer,
    /// Everything, bounded the same way, for the End event and for people.
    aggregated: HeadTailBuffer,
    /// Output deltas end on character boundaries: a split character waits here.
    delta_carry: Utf8Carry,
    /// Bytes printed so far (the session offset of the next byte).
    total: u64,
    /// Every byte, on disk (when the store keeps transcripts).
    transcript: Option<Transcript>,
    /// People watching the output live (`uexec attach`).
    taps: Vec<Tap>,
}

/// One live watcher's feed: bounded in bytes; a watcher that falls behind is marked lagged
/// and catches up from the buffer instead (what does not fit is dropped, never queued
/// without end).
struct Tap {
    tx: mpsc::UnboundedSender<bytes::Bytes>,
    /// Bytes sent and not yet received.
    queued: Arc<std::sync::atomic::AtomicUsize>,
    lagged: Arc<std::sync::atomic::AtomicBool>,
}

impl Tap {
    fn offer(&self, chunk: &bytes::Bytes) {
        use std::sync::atomic::Ordering::SeqCst;
        let queued = self.queued.load(SeqCst);
        if queued + chunk.len() > TAP_MAX_QUEUED_BYTES || self.lagged.load(SeqCst) {
            self.lagged.store(true, SeqCst);
            return;
        }
        self.queued.fetch_add(chunk.len(), SeqCst);
        if self.tx.send(chunk.clone()).is_err() {
            self.queued.fetch_sub(chunk.len(), SeqCst);
        }
    }
}

/// Bytes a live watcher may have in flight before it is marked lagged: a burst a terminal
/// emulator takes a moment to parse fits; a flood it cannot follow does not.
const TAP_MAX_QUEUED_BYTES: usize = 1 << 20;

/// The receiving end of a live watcher's feed.
pub struct TapReceiver {
    rx: mpsc::UnboundedReceiver<bytes::Bytes>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
}

impl TapReceiver {
    /// The next chunk; `None` once the session is gone.
    pub async fn recv(&mut self) -> Option<bytes::Bytes> {
        let chunk = self.rx.recv().await?;
        self.queued
            .fetch_sub(chunk.len(), std::sync::atomic::Ordering::SeqCst);
        Some(chunk)
    }

    /// The next chunk if one is queued.
    pub fn try_recv(&mut self) -> Result<bytes::Bytes, mpsc::error::TryRecvError> {
        let chunk = self.rx.try_recv()?;
        self.queued
            .fetch_sub(chunk.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(chunk)
    }
}

/// A live view of a session's output: where it stands now, then what follows.
pub struct OutputWatch {
    /// The last bytes printed before the watch began (to redraw a screen from).
    pub seed: Vec<u8>,
    /// Every byte printed since, in order, unless [`OutputWatch::lagged`].
    pub output: TapReceiver,
    /// Set when chunks were dropped: call [`Session::resync`] (through the store).
    pub lagged: Arc<std::sync::atomic::AtomicBool>,
}

/// Registers a live watcher: the last `seed_bytes` printed, then every byte after.
fn add_tap(out: &mut OutputBuffers, seed_bytes: usize) -> OutputWatch {
    // Unbounded in chunks, bounded in bytes: `Tap::offer` queues at most
    // TAP_MAX_QUEUED_BYTES and marks the watcher lagged beyond.
    let (tx, rx) = mpsc::unbounded_channel();
    let lagged = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    out.taps.push(Tap {
        tx,
        queued: queued.clone(),
        lagged: lagged.clone(),
    });
    OutputWatch {
        seed: out.aggregated.last_bytes(seed_bytes),
        output: TapReceiver { rx, queued },
        lagged,
    }
}

/// A policy monitor watches a session and may fail it, or record a verdict and let it run
/// (SPEC §7).
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

    /// Records `message` as a verdict and lets the process run on: the next snapshot of the
    /// session reports it (once), and the End is failed with it, keeping the exit code.
    pub fn record_verdict(&self, message: impl Into<String>) {
        if let Some(s) = self.session.upgrade() {
            let message = message.into();
            s.state.send_modify(|s| s.verdicts.push(message));
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

/// The input lease of a session; released when dropped.
pub struct Lease(Arc<Session>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0
            .lease
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Ends a call's pattern matching when the call ends (or is dropped).
struct MatcherGuard<'a>(&'a Session);

impl Drop for MatcherGuard<'_> {
    fn drop(&mut self) {
        self.0.mark.send_if_modified(|m| {
            m.matcher = None;
            m.want_output = false;
            false
        });
    }
}

impl Session {
    /// Wraps a spawned process and starts its pump and monitors.
    pub fn start(
        info: SessionMetaInfo,
        process: SpawnedProcess,
        events: Arc<EventBus>,
        monitors: Vec<Box<dyn PolicyMonitor>>,
        timeout: Option<Duration>,
        transcript: Option<TranscriptPlan>,
        screen: Option<crate::screen::ScreenFactory>,
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
                total: 0,
                transcript: None,
                taps: Vec::new(),
            }),
            mark: watch::channel(OutputMark::default()).0,
            interaction: tokio::sync::Mutex::new(()),
            ended: Mutex::new(false),
            lease: std::sync::atomic::AtomicBool::new(false),
            screen: std::sync::OnceLock::new(),
            events,
        });
        if let (Some(factory), true) = (screen, session.info.tty) {
            let keeper = crate::screen::start(&session, factory, (PTY_ROWS, PTY_COLS));
            let _ = session.screen.set(keeper);
        }
        let feed = transcript.map(|plan| {
            let (transcript, feed) = Transcript::start(plan);
            lock(&session.output).transcript = Some(transcript);
            feed
        });
        tokio::spawn(session.clone().pump(output, exit, feed));
        if let Some(limit) = timeout {
            tokio::spawn(session.clone().enforce_timeout(limit));
        }
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
        mut transcript: Option<TranscriptFeed>,
    ) {
        let mut exit = exit;
        let mut exit_pending = true;
        let mut output_open = true;
        while output_open || exit_pending {
            tokio::select! {
                // Output first: bytes written before the exit land before it is recorded.
                biased;
                chunk = output.recv(), if output_open => match chunk {
                    Some(chunk) => {
                        // The transcript's directory exists before the first byte shows:
                        // a snapshot with output can name it.
                        if let Some(feed) = &mut transcript {
                            if !feed.begin().await {
                                transcript = None;
                            }
                        }
                        self.on_output(&chunk.bytes);
                        // In order, after the buffers: a disk slower than the output holds
                        // the pump here (and the process at its pipe), never memory.
                        if let Some(feed) = &mut transcript {
                            if !feed.send(chunk.bytes).await {
                                transcript = None;
                            }
                        }
                    }
                    None => {
                        output_open = false;
                        // Closed output means a complete transcript: the last write first.
                        if let Some(feed) = transcript.take() {
                            feed.close().await;
                        }
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
            if !out.taps.is_empty() {
                out.taps.retain(|t| !t.tx.is_closed());
                let chunk = bytes::Bytes::copy_from_slice(bytes);
                for tap in &out.taps {
                    tap.offer(&chunk);
                }
            }
            let offset = out.total;
            out.total += bytes.len() as u64;
            let total = out.total;
            self.mark.send_if_modified(|m| {
                m.total = total;
                m.last_at = Some(Instant::now());
                let mut announce = std::mem::take(&mut m.want_output);
                if m.matched.is_none() {
                    if let Some(found) = m.matcher.as_mut().and_then(|mt| mt.feed(bytes, offset)) {
                        m.matched = Some(found);
                        announce = true;
                    }
                }
                announce
            });
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

    /// The verdicts recorded since the last call to this (each is returned once).
    pub fn take_new_verdicts(&self) -> Vec<String> {
        let mut new = Vec::new();
        self.state.send_if_modified(|s| {
            new = s.verdicts[s.verdicts_reported..].to_vec();
            s.verdicts_reported = s.verdicts.len();
            false
        });
        new
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

    /// Like [`Self::observe_until`], but also ends when `condition` holds; says why it ended.
    /// While it runs, the condition's pattern sees every byte of output (pending output from
    /// before the call first).
    pub async fn observe(
        &self,
        deadline: Instant,
        close_wait: Duration,
        condition: Option<&Condition>,
    ) -> Reason {
        let Some(condition) = condition.filter(|c| c.watches_output()) else {
            self.observe_until(deadline, close_wait).await;
            return if self.lifecycle().exited() {
                Reason::Exited
            } else {
                Reason::Window
            };
        };
        let call_start = Instant::now();
        let (start_total, had_pending) = self.install_matcher(condition);
        let _uninstall = MatcherGuard(self);
        let mut lifecycle = self.state.subscribe();
        let mut marks = self.mark.subscribe();
        let mut prompt_seen_total = u64::MAX;
        let mut prompt_backoff = Duration::from_millis(PROMPT_FIRST_CHECK_MS);
        loop {
            let now = Instant::now();
            let mut wake = deadline;
            {
                let s = lifecycle.borrow_and_update();
                if Self::drained(&s) {
                    return Reason::Exited;
                }
                if let Some(at) = s.exited_at {
                    if now >= at + close_wait {
                        return Reason::Exited;
                    }
                    wake = wake.min(at + close_wait);
                }
            }
            if now >= deadline {
                return Reason::Window;
            }
            let mut want_output = false;
            {
                let m = marks.borrow_and_update();
                if m.matched.is_some() {
                    return Reason::Matched;
                }
                let has_output = had_pending || m.total > start_total;
                if let Some(idle) = condition.idle {
                    if has_output {
                        let at = m.last_at.unwrap_or(call_start) + idle;
                        if now >= at {
                            return Reason::Idle;
                        }
                        wake = wake.min(at);
                    } else {
                        want_output = true;
                    }
                }
                if condition.prompt {
                    let quiet_since = m.last_at.unwrap_or(self.started_at);
                    if m.total != prompt_seen_total {
                        prompt_seen_total = m.total;
                        prompt_backoff = Duration::from_millis(PROMPT_FIRST_CHECK_MS);
                    }
                    let first = quiet_since + Duration::from_millis(PROMPT_FIRST_CHECK_MS);
                    if now < first {
                        wake = wake.min(first);
                    } else {
                        drop(m);
                        if self.waits_for_input(now - quiet_since) {
                            return Reason::Prompt;
                        }
                        // Input may be awaited later without a byte of output: look again,
                        // less and less often (at most every second), and at the next output.
                        wake = wake.min(now + prompt_backoff);
                        prompt_backoff = (prompt_backoff * 2).min(Duration::from_secs(1));
                        want_output = true;
                    }
                }
            }
            if want_output {
                // Silently: announcing it would wake this very loop.
                self.mark.send_if_modified(|m| {
                    m.want_output = true;
                    false
                });
            }
            tokio::select! {
                changed = lifecycle.changed() => if changed.is_err() { return Reason::Window },
                changed = marks.changed() => if changed.is_err() { return Reason::Window },
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Starts matching the condition's pattern (pending output first); returns the output
    /// total at the start and whether output was pending.
    fn install_matcher(&self, condition: &Condition) -> (u64, bool) {
        let out = lock(&self.output);
        let had_pending = !out.pending.is_empty();
        let start_total = out.total;
        let matcher = condition.regex.clone().map(|regex| {
            let mut matcher = Matcher::new(regex);
            let pending = out.pending.peek();
            let base = out.total - (pending.kept_len() as u64 + pending.omitted_bytes);
            let mut found = matcher.feed(&pending.head, base);
            if found.is_none() && !pending.tail.is_empty() {
                if pending.omitted_bytes > 0 {
                    matcher.gap();
                }
                let tail_at = out.total - pending.tail.len() as u64;
                found = matcher.feed(&pending.tail, tail_at);
            }
            (matcher, found)
        });
        self.mark.send_if_modified(|m| {
            m.want_output = false;
            match matcher {
                Some((matcher, found)) => {
                    m.matcher = Some(matcher);
                    m.matched = found;
                }
                None => {
                    m.matcher = None;
                    m.matched = None;
                }
            }
            false
        });
        drop(out);
        (start_total, had_pending)
    }

    /// Starts a live view: the last `seed_bytes` printed, then everything after, with no gap
    /// and no byte twice (both under the output lock).
    pub fn watch_output(&self, seed_bytes: usize) -> OutputWatch {
        add_tap(&mut lock(&self.output), seed_bytes)
    }

    /// For a screen keeper, under the output lock: what is queued for its `tap` (or, when it
    /// has none or it dropped chunks, a new tap to rebuild from), and a person's new feed.
    pub(crate) fn sync_screen(&self, tap: Option<&mut OutputWatch>) -> crate::screen::Synced {
        let mut out = lock(&self.output);
        let (queued, rebuilt_tap) = match tap {
            Some(tap) if !tap.lagged.load(std::sync::atomic::Ordering::SeqCst) => {
                let mut queued = Vec::new();
                while let Ok(bytes) = tap.output.try_recv() {
                    queued.push(bytes);
                }
                (queued, None)
            }
            _ => (
                Vec::new(),
                Some(add_tap(&mut out, crate::screen::REBUILD_SEED_BYTES)),
            ),
        };
        let person = add_tap(&mut out, 0);
        crate::screen::Synced {
            queued,
            rebuilt_tap,
            person,
        }
    }

    /// The keeper of this session's screen, if it has one.
    pub fn screen(&self) -> Option<&crate::screen::KeeperHandle> {
        self.screen.get()
    }

    /// Catches a lagged watch up: drops what it has queued and returns a new seed (the last
    /// `seed_bytes`), under the output lock so nothing is missed or repeated after it.
    pub fn resync(&self, watch: &mut OutputWatch, seed_bytes: usize) -> Vec<u8> {
        let out = lock(&self.output);
        while watch.output.try_recv().is_ok() {}
        watch
            .lagged
            .store(false, std::sync::atomic::Ordering::SeqCst);
        out.aggregated.last_bytes(seed_bytes)
    }

    /// Takes the input lease (a person types; the model's writes are refused meanwhile);
    /// `None` when someone holds it already.
    pub fn take_lease(self: &Arc<Self>) -> Option<Lease> {
        self.lease
            .compare_exchange(
                false,
                true,
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
            )
            .is_ok()
            .then(|| Lease(self.clone()))
    }

    /// Whether a person holds the input lease.
    pub fn leased(&self) -> bool {
        self.lease.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The last non-empty line of output, escape sequences removed (at most 200 bytes).
    pub fn last_line(&self) -> String {
        let last = lock(&self.output).aggregated.last_bytes(512);
        let text = strip_ansi(&String::from_utf8_lossy(&last));
        let line = text
            .lines()
            .rev()
            .map(|l| l.rsplit('\r').next().unwrap_or(l).trim_end())
            .find(|l| !l.is_empty())
            .unwrap_or("");
        let mut end = line.len().min(200);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line[..end].to_owned()
    }

    /// What the call's pattern matched, if anything.
    pub fn matched(&self) -> Option<Match> {
        self.mark.borrow().matched.clone()
    }

    /// A PTY whose terminal reads a line with echo off: a password prompt.
    pub fn awaiting_secret(&self) -> bool {
        self.info.tty && self.control.input_modes().is_some_and(|m| m.secret())
    }

    /// Whether the session waits for input, after `quiet` without output: a secret prompt;
    /// a process asleep reading its stdin; one in `select`/`poll` (readline, REPLs) after an
    /// unfinished last line (`$ `, `>>> `, `Continue? [y/N] `); where the backend cannot
    /// see its processes, [`PROMPT_QUIET_MS`] of quiet after an unfinished last line.
    fn waits_for_input(&self, quiet: Duration) -> bool {
        if self.awaiting_secret() {
            return true;
        }
        match self.control.input_wait() {
            Some(InputWait::Reading) => return true,
            Some(InputWait::Neither) => return false,
            // Servers poll too: a poller waits for input when it showed a prompt.
            Some(InputWait::Polling) => {}
            None if quiet < Duration::from_millis(PROMPT_QUIET_MS) => return false,
            None => {}
        }
        let last = lock(&self.output).aggregated.last_bytes(512);
        let text = strip_ansi(&String::from_utf8_lossy(&last));
        let line = text.rsplit('\n').next().unwrap_or("");
        !line.trim().is_empty()
    }

    /// The hard timeout (`timeout_ms`): at the deadline SIGTERM to the group, then SIGKILL
    /// after [`TIMEOUT_KILL_GRACE_MS`] if it is still running.
    async fn enforce_timeout(self: Arc<Self>, limit: Duration) {
        let deadline = self.started_at + limit;
        self.wait_until(|s| s.exited(), |_| Some(deadline)).await;
        if self.lifecycle().exited() {
            return;
        }
        let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        self.state.send_modify(|s| {
            s.timed_out_ms.get_or_insert(ms);
        });
        if let Err(e) = self.control.signal(Signal::Terminate).await {
            tracing::debug!(session_id = self.id(), "timeout SIGTERM failed: {e}");
        }
        let grace = Instant::now() + Duration::from_millis(TIMEOUT_KILL_GRACE_MS);
        self.wait_until(|s| s.exited(), |_| Some(grace)).await;
        if !self.lifecycle().exited() {
            self.terminate();
        }
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
                exit_code: if s.timed_out_ms.is_some() {
                    Some(TIMEOUT_EXIT_CODE)
                } else {
                    s.exit_code
                },
                failure: s.failure.clone(),
                timed_out_ms: s.timed_out_ms,
                verdicts: s.verdicts.clone(),
            });
            true
        });
        self.state.borrow().outcome.clone().unwrap_or_default()
    }

    /// Takes the output printed since the last call (while more may come, an incomplete
    /// character at the end stays for the next drain: `whole_chars`), with the session offsets of the bytes it left out (when the pending
    /// buffer dropped a middle).
    pub fn drain_located(&self, whole_chars: bool) -> (Drained, Option<std::ops::Range<u64>>) {
        let mut out = lock(&self.output);
        let start = out.total - (out.pending.len() as u64 + out.pending.omitted());
        let drained = if whole_chars {
            out.pending.drain_whole_chars()
        } else {
            out.pending.drain()
        };
        let cut = start + drained.head.len() as u64;
        let omitted = (drained.omitted_bytes > 0).then(|| cut..cut + drained.omitted_bytes);
        (drained, omitted)
    }

    /// Before a result that cuts output: waits, at most `within`, until the transcript has
    /// every byte printed so far or stopped, so that what the result says it has holds
    /// (its writer runs behind the output by up to its queue). Other results never wait.
    pub async fn transcript_caught_up(&self, within: Duration) {
        let (mut progress, printed) = {
            let out = lock(&self.output);
            match &out.transcript {
                Some(t) if out.pending.omitted() > 0 => (t.progress(), out.total),
                _ => return,
            }
        };
        progress.reached(printed, within).await;
    }

    /// What the session's transcript holds, if it has one.
    pub fn transcript(&self) -> Option<TranscriptInfo> {
        lock(&self.output).transcript.as_ref().map(Transcript::info)
    }

    /// Where the session's transcript is, once it printed something (a session that printed
    /// nothing names none: there is nothing to read).
    pub fn transcript_dir(&self) -> Option<std::path::PathBuf> {
        lock(&self.output)
            .transcript
            .as_ref()
            .and_then(Transcript::written_dir)
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
        let mut append = |message: &str| {
            if !aggregated_output.is_empty() && !aggregated_output.ends_with('\n') {
                aggregated_output.push('\n');
            }
            aggregated_output.push_str(message);
        };
        let mut failure = outcome.failure;
        let (status, exit_code) = match &failure {
            Some(message) => {
                append(message);
                (EndStatus::Failed, Some(-1))
            }
            // Recorded verdicts: the process ran to its own end, but never as a success.
            None if !outcome.verdicts.is_empty() => {
                let message = outcome.verdicts.join("\n");
                append(&message);
                failure = Some(message);
                (EndStatus::Failed, outcome.exit_code)
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
                failure,
                transcript: self.transcript_dir(),
            },
        );
        true
    }

    /// The lifecycle watcher of a stored session (SPEC §5): End once the exit is observed,
    /// the output drained, the monitors settled and the interaction lock free.
    /// True when no call reported the exit by then: nobody watched it end.
    pub async fn watch_lifecycle(self: Arc<Self>, drain_grace: Duration) -> bool {
        self.settle(drain_grace).await;
        let _interaction = self.interaction.lock().await;
        self.emit_end();
        self.control.kill_leftovers();
        !self.lifecycle().reported
    }
}
