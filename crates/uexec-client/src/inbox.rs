//! The inbox of one remote process's feed: what the feed is told ([`FeedEvent`]) and the cheap
//! handle ([`FeedHandle`]) through which the session, the backend and the process's control
//! tell it.
//!
//! A module of its own so that the session, which routes server notifications to feeds, and
//! the feed task, which calls the session back for its reads, do not name each other: both
//! name the inbox.
//!
//! How it stays bounded:
//! 1. the channel is unbounded by count, so the connection's reader never waits for one
//!    process;
//! 2. server notifications are admitted against a budget of `feed_inbox_events` and
//!    `feed_inbox_bytes` (an empty inbox takes any one event); one that does not fit is
//!    dropped, the highest dropped seq remembered;
//! 3. the feed is told once ([`FeedEvent::Overflow`]) and reads the dropped events again,
//!    like any gap;
//! 4. the client's own events (one per start, resume, read, terminate) are never dropped:
//!    they are few.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;
use uexec_core::backend::Stream;
use uexec_protocol::{OutputStream, ReadResult};

use crate::error::ClientError;

/// What a feed is told.
#[derive(Debug)]
pub(crate) enum FeedEvent {
    Output {
        seq: u64,
        stream: Stream,
        bytes: Bytes,
    },
    Exited {
        seq: u64,
        exit_code: i32,
    },
    Closed {
        seq: u64,
    },
    /// The server confirmed `process/start`: from now on the process may be read.
    Started,
    /// The connection was resumed: read what was missed.
    Resumed,
    /// The answer to this feed's gap-filling read (after the given seq).
    ReadDone {
        after_seq: u64,
        result: Result<ReadResult, ClientError>,
    },
    /// The process is being terminated: a lost connection is then no failure.
    Terminating,
    /// The server no longer knows the process (a write said `unknownProcess`): it is gone,
    /// how it ended is unknown.
    Gone,
    /// The connection is gone for good (the failure message).
    Lost(String),
    /// Notifications were dropped for want of room in the inbox (up to the given seq).
    Overflow,
}

/// What the inbox holds of server notifications, to refuse more than its bounds.
#[derive(Debug)]
pub(crate) struct InboxBudget {
    events: AtomicUsize,
    bytes: AtomicUsize,
    max_events: usize,
    max_bytes: usize,
    /// The highest seq dropped since the feed last looked.
    dropped: AtomicU64,
    /// An [`FeedEvent::Overflow`] is on its way.
    overflow_sent: AtomicBool,
}

impl InboxBudget {
    /// Takes an event of `bytes` bytes in, unless that passes a bound (an empty inbox takes
    /// any one event).
    fn admit(&self, bytes: usize) -> bool {
        let events = self.events.load(Ordering::SeqCst);
        let queued = self.bytes.load(Ordering::SeqCst);
        if events > 0
            && (events >= self.max_events || queued.saturating_add(bytes) > self.max_bytes)
        {
            return false;
        }
        self.events.fetch_add(1, Ordering::SeqCst);
        self.bytes.fetch_add(bytes, Ordering::SeqCst);
        true
    }

    /// Gives back what a received notification of `bytes` bytes held.
    pub fn release(&self, bytes: usize) {
        self.events.fetch_sub(1, Ordering::SeqCst);
        self.bytes.fetch_sub(bytes, Ordering::SeqCst);
    }

    /// The highest seq dropped since the last look (0: none), for the feed that got the
    /// [`FeedEvent::Overflow`]; the next drop sends another.
    pub fn take_dropped(&self) -> u64 {
        self.overflow_sent.store(false, Ordering::SeqCst);
        self.dropped.swap(0, Ordering::SeqCst)
    }
}

impl FeedEvent {
    /// The seq and size of a server notification (`None` for the client's own events).
    pub fn notification(&self) -> Option<(u64, usize)> {
        match self {
            Self::Output { seq, bytes, .. } => Some((*seq, bytes.len())),
            Self::Exited { seq, .. } | Self::Closed { seq } => Some((*seq, 0)),
            _ => None,
        }
    }
}

/// A cheap handle on a feed.
#[derive(Debug, Clone)]
pub(crate) struct FeedHandle {
    tx: mpsc::UnboundedSender<FeedEvent>,
    finished: Arc<AtomicBool>,
    budget: Arc<InboxBudget>,
}

impl FeedHandle {
    /// A fresh inbox admitting up to `max_events` notifications or `max_bytes` of output,
    /// and its receiving end for the feed task.
    pub fn new(max_events: usize, max_bytes: usize) -> (Self, mpsc::UnboundedReceiver<FeedEvent>) {
        // Unbounded by count, bounded by `notify`'s budget (see the module docs).
        let (tx, rx) = mpsc::unbounded_channel();
        let budget = Arc::new(InboxBudget {
            events: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            max_events,
            max_bytes,
            dropped: AtomicU64::new(0),
            overflow_sent: AtomicBool::new(false),
        });
        let handle = Self {
            tx,
            finished: Arc::new(AtomicBool::new(false)),
            budget,
        };
        (handle, rx)
    }

    /// The budget the feed task gives back to as it receives notifications.
    pub fn budget(&self) -> Arc<InboxBudget> {
        self.budget.clone()
    }

    /// A sender that does not keep the inbox open (the feed's own, for its reads' answers).
    pub fn downgrade(&self) -> mpsc::WeakUnboundedSender<FeedEvent> {
        self.tx.downgrade()
    }

    /// The flag the feed task sets when it ends.
    pub fn finished_flag(&self) -> Arc<AtomicBool> {
        self.finished.clone()
    }

    /// Sends one of the client's own events (never dropped).
    pub fn send(&self, event: FeedEvent) {
        let _ = self.tx.send(event);
    }

    /// Sends a server notification, or drops it when the inbox is full (the feed is told, and
    /// reads it again).
    pub fn notify(&self, event: FeedEvent) {
        let Some((seq, bytes)) = event.notification() else {
            return self.send(event);
        };
        if self.budget.admit(bytes) {
            if self.tx.send(event).is_err() {
                self.budget.release(bytes);
            }
            return;
        }
        self.budget.dropped.fetch_max(seq, Ordering::SeqCst);
        if !self.budget.overflow_sent.swap(true, Ordering::SeqCst) {
            self.send(FeedEvent::Overflow);
        }
    }

    /// Whether the feed ended (output closed, exit reported).
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    /// Whether `finished` is this feed's flag.
    pub fn owns(&self, finished: &Arc<AtomicBool>) -> bool {
        Arc::ptr_eq(&self.finished, finished)
    }
}

/// The engine's name of a wire stream.
pub(crate) fn engine_stream(stream: OutputStream) -> Stream {
    match stream {
        OutputStream::Stdout => Stream::Stdout,
        OutputStream::Stderr => Stream::Stderr,
        OutputStream::Pty => Stream::Pty,
    }
}
