//! The event stream of a store (SPEC §5): every face subscribes to the same ordered stream.
//!
//! Events carry a store-wide sequence number assigned under the publishing lock, so every
//! subscriber sees the same order. No event is lost, and a slow subscriber costs bounded
//! memory:
//!
//! 1. Begin, End and typed input are few: each is queued for every subscriber.
//! 2. Output deltas are many (a flood is 8 KiB chunks as fast as the pump reads). Each
//!    subscriber holds at most [`EVENT_QUEUE_MAX_OUTPUT_BYTES`] of them unread; beyond that,
//!    a delta is counted, not queued.
//! 3. Before the subscriber's next event, each session's counted gap arrives as one
//!    [`EventKind::OutputSkipped`], in stream order: the subscriber knows how many bytes it
//!    missed and where, and the bytes themselves are in the session's buffer and transcript.
//! 4. A subscriber that wants no output ([`EventBus::subscribe_changes`]) queues none.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndStatus {
    Completed,
    Failed,
}

/// One thing that happened to a session.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    Begin {
        command: Vec<String>,
        cwd: PathBuf,
    },
    OutputDelta {
        chunk: Bytes,
    },
    /// Output this subscriber fell too far behind to be given (step 3 of the module doc):
    /// `bytes` of the session's output came here, between the deltas before and after.
    OutputSkipped {
        bytes: u64,
    },
    TerminalInteraction {
        stdin: String,
    },
    End {
        exit_code: Option<i32>,
        status: EndStatus,
        aggregated_output: String,
        duration: Duration,
        failure: Option<String>,
        /// Where every byte of the output is, when the store keeps transcripts.
        transcript: Option<std::path::PathBuf>,
        /// What its processes used, where its backend counts (a cgroup per session).
        usage: Option<crate::usage::Usage>,
        /// Whether its command left processes running at its exit (killed then: the End
        /// comes at the command's exit, SPEC §6) or the whole tree ended with it, and the
        /// limits its processes ran into; empty where its backend cannot tell.
        ending: crate::usage::Ending,
    },
}

/// An event with its place in the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Store-wide, strictly increasing.
    pub seq: u64,
    /// The `exec_command` call that started the session (never a later `write_stdin`).
    pub call_id: String,
    pub session_id: i32,
    pub kind: EventKind,
}

/// Most bytes of output deltas one subscriber holds unread (step 2 of the module doc).
pub const EVENT_QUEUE_MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// Receives a store's events in order.
#[derive(Debug)]
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<Arc<Event>>,
    shared: Arc<Shared>,
}

/// What a subscriber and the bus both see.
#[derive(Debug, Default)]
struct Shared {
    /// Bytes of output deltas queued and not yet received.
    queued: AtomicUsize,
    /// Output counted, not queued: always after every event in the queue. The bus holds
    /// this lock while it queues, and the stream while it looks for the next event, so a
    /// gap is never taken ahead of an event queued before it.
    skipped: Mutex<Vec<Gap>>,
    /// Told when a first gap is counted into an empty queue (nothing else would wake the
    /// stream for it).
    gap_counted: tokio::sync::Notify,
}

/// One session's output counted, not queued.
#[derive(Debug)]
struct Gap {
    call_id: String,
    session_id: i32,
    bytes: u64,
    /// Of the first delta counted: gaps are kept in the order they began, so their numbers
    /// rise, and each lies between the events queued before it and those after.
    seq: u64,
}

impl Gap {
    fn into_event(self) -> Arc<Event> {
        Arc::new(Event {
            seq: self.seq,
            call_id: self.call_id,
            session_id: self.session_id,
            kind: EventKind::OutputSkipped { bytes: self.bytes },
        })
    }
}

impl EventStream {
    /// The next event; `None` once the bus is gone and everything was received.
    pub async fn recv(&mut self) -> Option<Arc<Event>> {
        let shared = self.shared.clone();
        loop {
            let counted = shared.gap_counted.notified();
            tokio::pin!(counted);
            counted.as_mut().enable();
            match self.try_recv() {
                Ok(event) => return Some(event),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            tokio::select! {
                event = self.rx.recv() => {
                    let event = event?;
                    self.received(&event);
                    return Some(event);
                }
                () = &mut counted => {}
            }
        }
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Result<Arc<Event>, mpsc::error::TryRecvError> {
        let mut skipped = lock(&self.shared.skipped);
        match self.rx.try_recv() {
            Ok(event) => {
                self.received(&event);
                Ok(event)
            }
            Err(empty_or_gone) if skipped.is_empty() => Err(empty_or_gone),
            Err(_) => Ok(skipped.remove(0).into_event()),
        }
    }

    /// Events ready now.
    pub fn len(&self) -> usize {
        let skipped = lock(&self.shared.skipped);
        self.rx.len() + skipped.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of output deltas queued and not yet received.
    pub fn queued_output_bytes(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed)
    }

    fn received(&self, event: &Event) {
        if let EventKind::OutputDelta { chunk } = &event.kind {
            self.shared.queued.fetch_sub(chunk.len(), Ordering::Relaxed);
        }
    }
}

/// Fan-out of events to subscribers.
#[derive(Debug, Default)]
pub struct EventBus {
    inner: Mutex<BusInner>,
    /// Lets hot paths skip building events nobody will read.
    has_subscribers: AtomicBool,
}

#[derive(Debug, Default)]
struct BusInner {
    next_seq: u64,
    subscribers: Vec<Subscriber>,
}

#[derive(Debug)]
struct Subscriber {
    tx: mpsc::UnboundedSender<Arc<Event>>,
    shared: Arc<Shared>,
    wants_output: bool,
}

impl Subscriber {
    /// Queues `event` after the gaps counted before it, or counts it (steps 2–3 of the
    /// module doc); false once the receiver is gone.
    fn offer(&self, event: &Arc<Event>) -> bool {
        let mut skipped = lock(&self.shared.skipped);
        if let EventKind::OutputDelta { chunk } = &event.kind {
            if !self.wants_output {
                return !self.tx.is_closed();
            }
            let queued = self.shared.queued.load(Ordering::Relaxed);
            if queued + chunk.len() > EVENT_QUEUE_MAX_OUTPUT_BYTES {
                count_gap(&mut skipped, event, chunk.len() as u64);
                if skipped.len() == 1 {
                    self.shared.gap_counted.notify_one();
                }
                return !self.tx.is_closed();
            }
            self.shared.queued.fetch_add(chunk.len(), Ordering::Relaxed);
        }
        for gap in skipped.drain(..) {
            if self.tx.send(gap.into_event()).is_err() {
                return false;
            }
        }
        self.tx.send(event.clone()).is_ok()
    }
}

fn count_gap(skipped: &mut Vec<Gap>, event: &Event, bytes: u64) {
    let same = |gap: &&mut Gap| gap.session_id == event.session_id && gap.call_id == event.call_id;
    match skipped.iter_mut().find(same) {
        Some(gap) => gap.bytes += bytes,
        None => skipped.push(Gap {
            call_id: event.call_id.clone(),
            session_id: event.session_id,
            bytes,
            seq: event.seq,
        }),
    }
}

impl EventBus {
    /// Every event, output deltas included (bounded: see the module doc).
    pub fn subscribe(&self) -> EventStream {
        self.add(true)
    }

    /// Every event but output deltas: for subscribers that only tell what changed.
    pub fn subscribe_changes(&self) -> EventStream {
        self.add(false)
    }

    fn add(&self, wants_output: bool) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::default());
        let mut inner = lock(&self.inner);
        // Subscribers that went away while nothing was published are forgotten here too:
        // a store without output must not collect the senders of clients that came and went.
        inner.subscribers.retain(|s| !s.tx.is_closed());
        inner.subscribers.push(Subscriber {
            tx,
            shared: shared.clone(),
            wants_output,
        });
        self.has_subscribers.store(true, Ordering::SeqCst);
        EventStream { rx, shared }
    }

    pub fn has_subscribers(&self) -> bool {
        self.has_subscribers.load(Ordering::Relaxed)
    }

    pub fn publish(&self, call_id: &str, session_id: i32, kind: EventKind) {
        let mut inner = lock(&self.inner);
        inner.next_seq += 1;
        let event = Arc::new(Event {
            seq: inner.next_seq,
            call_id: call_id.to_owned(),
            session_id,
            kind,
        });
        inner.subscribers.retain(|s| s.offer(&event));
        self.has_subscribers
            .store(!inner.subscribers.is_empty(), Ordering::SeqCst);
    }
}

/// Locks a std mutex, recovering the data if a panicking thread poisoned it (every critical
/// section in the engine leaves its data consistent).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_see_every_event_in_order() {
        let bus = EventBus::default();
        let mut a = bus.subscribe();
        for i in 0..1000 {
            bus.publish(
                "c",
                1,
                EventKind::TerminalInteraction {
                    stdin: i.to_string(),
                },
            );
        }
        let mut b = bus.subscribe();
        bus.publish(
            "c",
            1,
            EventKind::TerminalInteraction {
                stdin: "late".into(),
            },
        );
        let mut last = 0;
        for _ in 0..1001 {
            let e = a.recv().await.expect("event");
            assert!(e.seq > last);
            last = e.seq;
        }
        assert_eq!(b.recv().await.expect("event").seq, 1001);
    }

    #[test]
    fn subscribers_that_come_and_go_without_events_do_not_pile_up() {
        let bus = EventBus::default();
        for _ in 0..1000 {
            drop(bus.subscribe());
        }
        let _live = bus.subscribe();
        assert_eq!(lock(&bus.inner).subscribers.len(), 1);
    }

    fn delta(bus: &EventBus, session_id: i32, bytes: usize) {
        bus.publish(
            "c",
            session_id,
            EventKind::OutputDelta {
                chunk: Bytes::from(vec![b'x'; bytes]),
            },
        );
    }

    /// Reads what is ready: `(bytes delivered, bytes skipped, events)` per the whole stream.
    fn drain(stream: &mut EventStream) -> (u64, u64, Vec<Arc<Event>>) {
        let (mut delivered, mut skipped, mut events) = (0, 0, Vec::new());
        while let Ok(e) = stream.try_recv() {
            match &e.kind {
                EventKind::OutputDelta { chunk } => delivered += chunk.len() as u64,
                EventKind::OutputSkipped { bytes } => skipped += bytes,
                _ => {}
            }
            events.push(e);
        }
        (delivered, skipped, events)
    }

    #[test]
    fn a_subscriber_that_reads_nothing_holds_a_bounded_queue_and_learns_what_it_missed() {
        let bus = EventBus::default();
        let mut slow = bus.subscribe();
        // 100 MB of output in the pump's 8 KiB chunks, nobody reading.
        for _ in 0..12_207 {
            delta(&bus, 1, 8192);
        }
        assert!(
            slow.queued_output_bytes() <= EVENT_QUEUE_MAX_OUTPUT_BYTES,
            "{} bytes queued",
            slow.queued_output_bytes()
        );
        bus.publish("c", 1, EventKind::TerminalInteraction { stdin: "q".into() });
        let (delivered, skipped, events) = drain(&mut slow);
        assert_eq!(
            delivered + skipped,
            12_207 * 8192,
            "every byte is delivered or counted"
        );
        assert!(delivered <= EVENT_QUEUE_MAX_OUTPUT_BYTES as u64);
        // In order: the deltas queued, one gap, then the event after it.
        let kinds: Vec<_> = events.iter().rev().take(2).map(|e| &e.kind).collect();
        assert!(
            matches!(kinds[0], EventKind::TerminalInteraction { .. }),
            "{kinds:?}"
        );
        assert!(
            matches!(kinds[1], EventKind::OutputSkipped { .. }),
            "{kinds:?}"
        );
        assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
        assert_eq!(slow.queued_output_bytes(), 0);
    }

    #[test]
    fn a_gap_is_told_when_the_output_stops_and_the_subscriber_catches_up() {
        let bus = EventBus::default();
        let mut slow = bus.subscribe();
        // Two sessions printing at once, each past the queue.
        for _ in 0..200 {
            for session in [1, 2] {
                delta(&bus, session, 8192);
            }
        }
        // The first goes on alone.
        delta(&bus, 1, 8192);
        // Nothing follows the burst: the gaps come once the queue is read.
        let (delivered, skipped, events) = drain(&mut slow);
        assert_eq!(delivered + skipped, (2 * 200 + 1) * 8192);
        let gaps: Vec<_> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::OutputSkipped { .. }))
            .map(|e| e.session_id)
            .collect();
        assert_eq!(gaps, [1, 2]);
        assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
        // Once caught up, deltas are queued again.
        delta(&bus, 1, 10);
        assert_eq!(drain(&mut slow).0, 10);
    }

    #[tokio::test]
    async fn a_waiting_subscriber_is_woken_by_a_gap() {
        let bus = Arc::new(EventBus::default());
        let mut slow = bus.subscribe();
        for _ in 0..200 {
            delta(&bus, 1, 8192);
        }
        while let Ok(e) = slow.try_recv() {
            if matches!(e.kind, EventKind::OutputSkipped { .. }) {
                break;
            }
        }
        // The queue is empty; a burst larger than the queue arrives while it waits.
        let publisher = bus.clone();
        let waiting = tokio::spawn(async move {
            let mut skipped = 0;
            while skipped == 0 {
                if let EventKind::OutputSkipped { bytes } =
                    slow.recv().await.expect("an event").kind
                {
                    skipped = bytes;
                }
            }
            skipped
        });
        for _ in 0..200 {
            delta(&publisher, 1, 8192);
        }
        let skipped = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("woken")
            .expect("joined");
        assert!(skipped > 0);
    }

    #[test]
    fn a_change_subscriber_queues_no_output() {
        let bus = EventBus::default();
        let mut changes = bus.subscribe_changes();
        for _ in 0..1000 {
            delta(&bus, 1, 8192);
        }
        assert_eq!(changes.queued_output_bytes(), 0);
        bus.publish("c", 1, EventKind::TerminalInteraction { stdin: "q".into() });
        let (delivered, skipped, events) = drain(&mut changes);
        assert_eq!((delivered, skipped, events.len()), (0, 0, 1));
    }

    #[test]
    fn dropped_subscribers_are_forgotten() {
        let bus = EventBus::default();
        drop(bus.subscribe());
        assert!(bus.has_subscribers());
        bus.publish(
            "c",
            1,
            EventKind::TerminalInteraction {
                stdin: String::new(),
            },
        );
        assert!(!bus.has_subscribers());
    }
}
