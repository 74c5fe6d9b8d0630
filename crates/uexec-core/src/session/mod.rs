//! One session: a spawned process, its pending output and what is known of its end.
//!
//! Ownership (the three timelines of SPEC §1):
//! - the *pump* task ([`pump`]) owns the backend's output channel and exit report; it fills
//!   the pending buffer, publishes output deltas and records exit and close in the
//!   [`Lifecycle`] `watch`;
//! - calls (the `exec_command` that started it, later `write_stdin`s) hold an `Arc<Session>`
//!   for the length of their window ([`observe`]), serialised by the interaction lock; which
//!   of them reports the exit is the call timeline ([`Calls`]), kept apart;
//! - the store entry is one more `Arc`, removed when a call reports the exit, on terminate,
//!   or on prune; the process and its pump may outlive it by the time it takes to die, and
//!   its End ([`end`]) comes once the exit is settled.
//!
//! People and monitors watch from the side: live taps and the input lease ([`taps`]), the
//! screen of a PTY session ([`keeper`]), policy monitors ([`monitor`]).
//!
//! Nothing here polls: every wait is on the lifecycle `watch` with a deadline.

mod end;
pub mod keeper;
mod lifecycle;
mod monitor;
mod observe;
pub use observe::Prompt;
mod pump;
mod taps;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::backend::{ProcessControl, SpawnedProcess};
use crate::events::{lock, EventBus};
use crate::limits::{OUTPUT_BUFFER_MAX_BYTES, PTY_COLS, PTY_ROWS};
use crate::output::buffer::{Drained, HeadTailBuffer};
use crate::output::snapshot::Body;
use crate::output::text::strip_ansi;
use crate::output::until::{Match, Matcher};
use crate::output::Hygiene;
use crate::policy::{MonitorHandle, Monitored, PolicyMonitor};
use crate::transcript::{Transcript, TranscriptInfo, TranscriptPlan};
use crate::utf8::{incomplete_suffix_len, Utf8Carry};

pub(crate) use lifecycle::Lifecycle;
pub use lifecycle::Outcome;
use taps::Tap;
pub use taps::{Lease, OutputWatch};

/// The call timeline: whether the `exec_command` that stored the session is still in its
/// window, and whether a call has reported the exit (the id is then dead to every later
/// call). Nobody waits on it, so it stays out of the lifecycle `watch`.
#[derive(Debug, Default)]
struct Calls {
    first_call_active: bool,
    reported: bool,
}

/// Fixed facts about a session.
#[derive(Debug, Clone)]
pub(crate) struct SessionMetaInfo {
    pub id: i32,
    pub call_id: String,
    pub command: String,
    /// The name people may use instead of the id.
    pub name: Option<String>,
    pub cwd: PathBuf,
    pub tty: bool,
    /// Pipe mode with a stdin pipe that `write_stdin` may write and close.
    pub pipe_stdin: bool,
    /// Output hygiene of this session's snapshots unless a call says otherwise.
    pub hygiene: Hygiene,
    /// The sandbox the command runs in (its private tmp goes with the session).
    pub sandbox: Option<std::sync::Arc<dyn crate::confine::Confined>>,
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
    calls: Mutex<Calls>,
    output: Mutex<OutputBuffers>,
    mark: watch::Sender<OutputMark>,
    /// Serialises calls on this session (SPEC §3).
    pub interaction: tokio::sync::Mutex<()>,
    /// Held while publishing output deltas and the End: exactly one End, no delta after it.
    ended: Mutex<bool>,
    /// A person holds the input lease (`uexec attach --write`).
    lease: std::sync::atomic::AtomicBool,
    /// The keeper of a PTY session's screen (faces that attach people configure one).
    screen: std::sync::OnceLock<keeper::KeeperHandle>,
    events: Arc<EventBus>,
    /// Where its output and its end are counted, when the store counts them.
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// What watches a session besides its calls, as its store is configured.
#[derive(Default)]
pub struct Watchers {
    /// A terminal emulator for people who attach to a PTY session.
    pub screen: Option<keeper::ScreenFactory>,
    /// The process's figures ([`crate::metrics`]).
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
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

impl Session {
    /// Wraps a spawned process and starts its pump and monitors.
    pub fn start(
        info: SessionMetaInfo,
        process: SpawnedProcess,
        events: Arc<EventBus>,
        monitors: Vec<Box<dyn PolicyMonitor>>,
        timeout: Option<Duration>,
        transcript: Option<TranscriptPlan>,
        watchers: Watchers,
    ) -> Arc<Self> {
        let SpawnedProcess {
            pid,
            output,
            exit,
            control,
        } = process;
        let state = Lifecycle::new(monitors.len());
        let session = Arc::new(Self {
            info,
            pid,
            started_at: Instant::now(),
            control,
            state: watch::channel(state).0,
            calls: Mutex::new(Calls::default()),
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
            metrics: watchers.metrics,
        });
        // Monitors first: one may hold the command until it starts (the rules at exec).
        for monitor in monitors {
            let weak = Arc::downgrade(&session);
            let target: std::sync::Weak<dyn Monitored> = weak.clone();
            let handle = MonitorHandle::new(target);
            // Asked here, not in the task: a monitor may start its work at once (the rules at
            // exec hold the command's first exec until their judge listens).
            let watching = monitor.watch(handle);
            tokio::spawn(async move {
                watching.await;
                if let Some(s) = weak.upgrade() {
                    s.state.send_if_modified(Lifecycle::monitor_done);
                }
            });
        }
        if let (Some(factory), true) = (watchers.screen, session.info.tty) {
            let keeper = keeper::start(&session, factory, (PTY_ROWS, PTY_COLS));
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

    /// The lifecycle, followed: what people are told of a session gone from the store,
    /// without keeping its buffers alive.
    pub fn lifecycle_watch(&self) -> watch::Receiver<Lifecycle> {
        self.state.subscribe()
    }

    /// Marks the process exited now, whether or not its exit was observed (a backend that
    /// no longer knows it, a terminate).
    pub fn mark_exited(&self) {
        self.state.send_if_modified(|s| s.gone(Instant::now()));
    }

    /// SIGKILL to the group, then the process; output closed; marked exited.
    pub fn terminate(&self) {
        self.control.terminate();
        self.mark_exited();
    }

    pub fn fail_and_terminate(&self, message: String) {
        self.state.send_if_modified(|s| s.fail(message));
        self.terminate();
    }

    /// The notices recorded since the last call to this (each is returned once).
    pub fn take_new_notices(&self) -> Vec<String> {
        let mut new = Vec::new();
        self.state.send_if_modified(|s| {
            new = s.take_new_notices();
            false
        });
        new
    }

    /// The verdicts recorded since the last call to this (each is returned once).
    pub fn take_new_verdicts(&self) -> Vec<String> {
        let mut new = Vec::new();
        self.state.send_if_modified(|s| {
            new = s.take_new_verdicts();
            false
        });
        new
    }

    /// Whether the `exec_command` that stored the session is still in its window.
    pub fn set_first_call_active(&self, active: bool) {
        lock(&self.calls).first_call_active = active;
    }

    pub fn first_call_active(&self) -> bool {
        lock(&self.calls).first_call_active
    }

    /// Claims the report of the exit for the calling call: true for exactly one caller, and
    /// only once the process has exited (which it never stops being).
    pub fn claim_report(&self) -> bool {
        self.lifecycle().exited() && !std::mem::replace(&mut lock(&self.calls).reported, true)
    }

    /// A call has reported the exit.
    pub fn reported(&self) -> bool {
        lock(&self.calls).reported
    }

    /// The last non-empty line of output, escape sequences removed (at most 200 bytes).
    /// Bytes printed so far.
    pub fn printed(&self) -> u64 {
        lock(&self.output).total
    }

    /// Bytes printed so far, read or not.
    pub fn output_total(&self) -> u64 {
        self.mark.borrow().total
    }

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

    /// Takes the output printed since the last call (while more may come, an incomplete
    /// character at the end stays for the next drain: `whole_chars`), with the session
    /// offset of its first byte.
    pub fn drain_located(&self, whole_chars: bool) -> (Drained, u64) {
        let mut out = lock(&self.output);
        let start = out.total - (out.pending.len() as u64 + out.pending.omitted());
        let drained = if whole_chars {
            out.pending.drain_whole_chars()
        } else {
            out.pending.drain()
        };
        (drained, start)
    }

    /// Before a result that may cut output (the pending buffer dropped a middle, or holds
    /// more than `max_output_tokens` keep): waits, at most `within`, until the transcript
    /// has every byte printed so far or stopped, so that what the result says it has holds
    /// (its writer runs behind the output by up to its queue). Other results never wait.
    pub async fn transcript_caught_up(&self, max_output_tokens: u64, within: Duration) {
        let (mut progress, printed) = {
            let out = lock(&self.output);
            let budget = max_output_tokens.saturating_mul(4);
            let cuts = out.pending.omitted() > 0 || out.pending.len() as u64 > budget;
            match &out.transcript {
                Some(t) if cuts => (t.progress(), out.total),
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
}
