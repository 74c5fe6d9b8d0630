//! The feed of one remote process: the owner task that turns the server's events into what
//! the engine expects of a backend (output chunks in order, one exit report, the output
//! channel closing last).
//!
//! Per event, in the task:
//! 1. notifications (`process/output|exited|closed`, routed here by process id) go through
//!    the [`Sequencer`], which releases them in seq order: output to the output channel,
//!    the exit to the exit oneshot, and `closed` (always the last seq) ends the feed. An
//!    `exited` may carry a lower seq than trailing output (Codex's exit watcher and pipe
//!    readers race), so the exit is *not* the end;
//! 2. a gap (an event waiting for a smaller seq) that lasts `gap_fill_delay`, or a full
//!    buffer, is filled with `process/read {afterSeq}`; so is everything after a resumed
//!    connection (servers do not replay what they sent while the client was away). The
//!    read runs in its own task and comes back as an event, so notifications keep flowing.
//!    No read goes out before `process/start` was answered (the server may not know the
//!    process yet);
//! 3. output the server no longer retained is reported in the output as a marker line,
//!    never dropped silently;
//! 4. a connection lost for good fails the process: exit unknown, failure `connection to
//!    <url> lost: ...` (no failure when the process was being terminated anyway).
//!
//! The output channel is bounded: a slow reader of the output slows this task. Its inbox
//! (`inbox.rs`) never makes the connection's reader wait for one process, and is bounded all
//! the same: server notifications beyond `feed_inbox_events` or `feed_inbox_bytes` are
//! dropped, the feed is told once ([`FeedEvent::Overflow`]) and reads them again like any
//! gap.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use uexec_core::backend::{ExitReport, OutputChunk, Stream};
use uexec_protocol::{Method, ReadParams, ReadResult};

use crate::error::ClientError;
use crate::inbox::{engine_stream, FeedEvent, FeedHandle, InboxBudget};
use crate::remote_session::RemoteSession;
use crate::sequencer::{lost_output_events, ReadAccount, Sequencer};

/// Chunks in flight between a feed and the engine's session before the feed waits.
const OUTPUT_CHANNEL_CHUNKS: usize = 64;

/// The engine's ends of a feed.
pub(crate) struct FeedOutputs {
    pub handle: FeedHandle,
    pub output: mpsc::Receiver<OutputChunk>,
    pub exit: oneshot::Receiver<ExitReport>,
}

/// Registers a feed for `process_id` in `session` and starts its task. Register before
/// `process/start` is sent, so no event can come before its feed.
pub(crate) fn start(session: &Arc<RemoteSession>, process_id: String) -> FeedOutputs {
    let (out_tx, output) = mpsc::channel(OUTPUT_CHANNEL_CHUNKS);
    let (exit_tx, exit) = oneshot::channel();
    let config = session.config();
    let (handle, rx) = FeedHandle::new(config.feed_inbox_events, config.feed_inbox_bytes);
    session.register_feed(&process_id, handle.clone());
    let feed = Feed {
        process_id,
        session: Arc::downgrade(session),
        me: handle.downgrade(),
        finished: handle.finished_flag(),
        sequencer: Sequencer::new(config.max_early_events, config.max_early_bytes),
        budget: handle.budget(),
        gap_fill_delay: config.gap_fill_delay,
        output: Some(out_tx),
        exit: Some(exit_tx),
        exit_seen: false,
        closed_seen: false,
        started: false,
        read_in_flight: false,
        read_again: false,
        gap_since: None,
        retry_read_at: None,
        terminating: false,
    };
    tokio::spawn(feed.run(rx));
    FeedOutputs {
        handle,
        output,
        exit,
    }
}

/// An event released in order.
enum Item {
    Output(OutputChunk),
    Exited(i32),
    Closed,
}

#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Done,
}

struct Feed {
    process_id: String,
    session: Weak<RemoteSession>,
    /// Its own inbox, for the answers of its reads (weak: the inbox closes when every
    /// handle is gone).
    me: mpsc::WeakUnboundedSender<FeedEvent>,
    finished: Arc<AtomicBool>,
    budget: Arc<InboxBudget>,
    sequencer: Sequencer<Item>,
    gap_fill_delay: std::time::Duration,
    /// `None` once closed.
    output: Option<mpsc::Sender<OutputChunk>>,
    /// `None` once the exit was reported.
    exit: Option<oneshot::Sender<ExitReport>>,
    /// A `process/exited` was received (delivered or waiting).
    exit_seen: bool,
    /// A `process/closed` was received (delivered or waiting).
    closed_seen: bool,
    /// `process/start` was answered: before that a read could find no such process.
    started: bool,
    read_in_flight: bool,
    /// Read (again) once possible: a resume happened before the start was confirmed or while
    /// a read was in flight.
    read_again: bool,
    gap_since: Option<Instant>,
    /// A read that failed for want of a link (a timeout) is tried again then.
    retry_read_at: Option<Instant>,
    terminating: bool,
}

impl Feed {
    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<FeedEvent>) {
        let mut lost = None;
        loop {
            let gap_deadline = self.gap_deadline();
            let event = tokio::select! {
                event = inbox.recv() => event,
                _ = sleep_until(gap_deadline), if gap_deadline.is_some() => {
                    self.start_read();
                    continue;
                }
            };
            let Some(event) = event else {
                // Every sender is gone: the spawn failed and nobody will look.
                break;
            };
            if let Some((_, bytes)) = event.notification() {
                self.budget.release(bytes);
            }
            let flow = match event {
                FeedEvent::Lost(reason) => {
                    let items = self.sequencer.drain();
                    self.deliver(items).await;
                    lost = Some(reason);
                    Flow::Done
                }
                FeedEvent::Gone => {
                    let items = self.sequencer.drain();
                    self.deliver(items).await;
                    Flow::Done
                }
                other => self.on_event(other).await,
            };
            if flow == Flow::Done {
                break;
            }
        }
        self.finish(lost);
    }

    async fn on_event(&mut self, event: FeedEvent) -> Flow {
        let items = match event {
            FeedEvent::Output { seq, stream, bytes } => {
                let len = bytes.len();
                let item = Item::Output(OutputChunk { stream, bytes });
                self.sequencer.push_sized(seq, item, len)
            }
            FeedEvent::Exited { seq, exit_code } => {
                // Seen only if held: one dropped for want of room is read again.
                self.exit_seen |= self.sequencer.accepts(seq, 0);
                self.sequencer.push(seq, Item::Exited(exit_code))
            }
            FeedEvent::Closed { seq } => {
                self.closed_seen |= self.sequencer.accepts(seq, 0);
                self.sequencer.push(seq, Item::Closed)
            }
            FeedEvent::Overflow => {
                let dropped = self.budget.take_dropped();
                self.sequencer.note_dropped(dropped);
                Vec::new()
            }
            FeedEvent::Started => {
                self.started = true;
                if std::mem::take(&mut self.read_again) {
                    self.start_read();
                }
                Vec::new()
            }
            FeedEvent::Resumed => {
                if self.read_in_flight || !self.started {
                    self.read_again = true;
                } else {
                    self.start_read();
                }
                Vec::new()
            }
            FeedEvent::ReadDone { after_seq, result } => {
                self.read_in_flight = false;
                return self.on_read(after_seq, result).await;
            }
            FeedEvent::Terminating => {
                self.terminating = true;
                Vec::new()
            }
            FeedEvent::Lost(_) | FeedEvent::Gone => Vec::new(),
        };
        let flow = self.deliver(items).await;
        self.track_gap();
        flow
    }

    async fn on_read(&mut self, after_seq: u64, result: Result<ReadResult, ClientError>) -> Flow {
        let read = match result {
            Ok(read) => read,
            Err(e) if e.rpc_error().is_some() => {
                // The server no longer knows the process (its session ended, say).
                tracing::debug!(process = %self.process_id, "process/read failed: {e}");
                let reason = format!("the exec server lost track of the process: {e}");
                let items = self.sequencer.drain();
                self.deliver(items).await;
                self.report_exit(None, Some(reason));
                return Flow::Done;
            }
            Err(e) => {
                // The link (reads already wait out a resume): try again in a while, unless
                // the loss of the link ends the feed first.
                tracing::debug!(process = %self.process_id, "process/read failed: {e}");
                self.retry_read_at = Some(Instant::now() + self.gap_fill_delay);
                return Flow::Continue;
            }
        };
        let mut items = Vec::new();
        let lost = self.lost_in(after_seq, &read);
        if lost > 0 {
            items.push(Item::Output(self.lost_marker(lost)));
        }
        let from = self.sequencer.next_seq();
        for chunk in read.chunks {
            if chunk.seq >= from {
                let item = Item::Output(OutputChunk {
                    stream: engine_stream(chunk.stream),
                    bytes: chunk.chunk.into_bytes(),
                });
                items.extend(self.sequencer.push(chunk.seq, item));
            }
        }
        items.extend(self.sequencer.skip_to(read.next_seq));
        if self.deliver(items).await == Flow::Done {
            return Flow::Done;
        }
        if read.exited {
            self.report_exit(read.exit_code, read.failure);
        }
        if read.closed {
            self.output = None;
            return Flow::Done;
        }
        self.track_gap();
        if std::mem::take(&mut self.read_again) {
            self.start_read();
        }
        Flow::Continue
    }

    /// Output events in the read's range that neither the read nor the notifications hold.
    fn lost_in(&self, after_seq: u64, read: &ReadResult) -> u64 {
        // Events delivered since the read was sent are no longer in question.
        let after = after_seq.max(self.sequencer.next_seq().saturating_sub(1));
        let range = after + 1..read.next_seq;
        let held: BTreeSet<u64> = read
            .chunks
            .iter()
            .map(|c| c.seq)
            .filter(|seq| range.contains(seq))
            .chain(self.sequencer.early_seqs(range.clone()))
            .collect();
        lost_output_events(ReadAccount {
            after_seq: after,
            next_seq: read.next_seq,
            held: held.len() as u64,
            exit_unseen: read.exited && !self.exit_seen,
            close_unseen: read.closed && !self.closed_seen,
        })
    }

    fn lost_marker(&self, lost: u64) -> OutputChunk {
        let url = self
            .session
            .upgrade()
            .map(|s| s.url().to_string())
            .unwrap_or_default();
        let text = format!("\n[… {lost} chunks of output lost: {url} no longer retained them …]\n");
        OutputChunk {
            stream: Stream::Stdout,
            bytes: Bytes::from(text),
        }
    }

    async fn deliver(&mut self, items: Vec<Item>) -> Flow {
        for item in items {
            match item {
                Item::Output(chunk) => {
                    if let Some(output) = &self.output {
                        // A closed receiver means the session is gone; keep draining.
                        let _ = output.send(chunk).await;
                    }
                }
                Item::Exited(code) => self.report_exit(Some(code), None),
                Item::Closed => {
                    self.output = None;
                    return Flow::Done;
                }
            }
        }
        Flow::Continue
    }

    /// Reports the exit once; a negative code means "unknown" on the wire.
    fn report_exit(&mut self, exit_code: Option<i32>, failure: Option<String>) {
        if let Some(exit) = self.exit.take() {
            let _ = exit.send(ExitReport {
                exit_code: exit_code.filter(|c| *c >= 0),
                failure,
            });
        }
    }

    fn track_gap(&mut self) {
        if !self.sequencer.has_gap() {
            self.gap_since = None;
        } else if self.gap_since.is_none() {
            self.gap_since = Some(Instant::now());
        }
    }

    /// When to read next: a gap's grace is over (at once when the buffer is full), or a failed
    /// read is due again.
    fn gap_deadline(&self) -> Option<Instant> {
        if self.read_in_flight || !self.started {
            return None;
        }
        let gap = self.gap_since.map(|since| {
            if self.sequencer.is_full() {
                Instant::now()
            } else {
                since + self.gap_fill_delay
            }
        });
        match (gap, self.retry_read_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Reads everything after the last delivered seq, in a task of its own.
    fn start_read(&mut self) {
        let (Some(session), Some(me)) = (self.session.upgrade(), self.me.upgrade()) else {
            return;
        };
        self.read_in_flight = true;
        self.retry_read_at = None;
        let after_seq = self.sequencer.next_seq().saturating_sub(1);
        let params = ReadParams {
            process_id: self.process_id.clone(),
            after_seq: Some(after_seq),
            max_bytes: None,
            wait_ms: None,
        };
        tokio::spawn(async move {
            let timeout = Some(session.config().request_timeout);
            let result = session
                .call(Method::ProcessRead.as_str(), &params, timeout, true)
                .await;
            let _ = me.send(FeedEvent::ReadDone { after_seq, result });
        });
    }

    /// Ends the feed: the exit is reported (failed when the connection was lost), the output
    /// closed, the process forgotten.
    fn finish(&mut self, lost: Option<String>) {
        let failure = lost.filter(|_| !self.terminating);
        self.report_exit(None, failure);
        self.output = None;
        self.finished.store(true, Ordering::SeqCst);
        if let Some(session) = self.session.upgrade() {
            session.unregister_feed(&self.process_id, &self.finished);
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
