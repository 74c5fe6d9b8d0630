//! The event stream of a store (SPEC §5): every face subscribes to the same ordered stream.
//!
//! Events carry a store-wide sequence number assigned under the publishing lock, so every
//! subscriber sees the same order. Delivery is unbounded per subscriber: a slow listener
//! costs memory, never a lost event (a lossy broadcast would drop output deltas).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Receives a store's events in order.
pub type EventStream = mpsc::UnboundedReceiver<Arc<Event>>;

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
    subscribers: Vec<mpsc::UnboundedSender<Arc<Event>>>,
}

impl EventBus {
    pub fn subscribe(&self) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = lock(&self.inner);
        // Subscribers that went away while nothing was published are forgotten here too:
        // a store without output must not collect the senders of clients that came and went.
        inner.subscribers.retain(|s| !s.is_closed());
        inner.subscribers.push(tx);
        self.has_subscribers.store(true, Ordering::SeqCst);
        rx
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
        inner.subscribers.retain(|s| s.send(event.clone()).is_ok());
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
