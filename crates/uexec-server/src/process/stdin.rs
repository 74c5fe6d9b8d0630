//! Stdin of one process: an ordered queue in front of the backend, and `writeId` idempotency.
//!
//! Why a queue: a write to a pipe nobody reads blocks, and a connection must not stall behind
//! it. So `process/write`
//! 1. is admitted by its `writeId` ([`WriteLog`]): a repeated id is answered with what the
//!    first write got (`accepted` while it is still in flight) and written no second time;
//! 2. is queued in arrival order, never waiting: a queue already holding
//!    `STDIN_QUEUE_WRITES` writes or [`STDIN_QUEUE_MAX_BYTES`] bytes (a process that does
//!    not read its stdin) refuses it with [`stdin_full`] (`-32603`, `data.kind =
//!    "stdinFull"`) and forgets its `writeId`, so the client may send it again later;
//! 3. is answered once the process's writer task has written it, without holding up later
//!    requests on the connection.
//!
//! Codex 0.171 has no such bound: its connection stops reading after ~130 writes to a
//! process that does not read, and then never sees `process/terminate` or a dropped socket.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use uexec_core::backend::{BackendError, ProcessControl, WriteOutcome};
use uexec_protocol::{RpcError, WriteStatus};

use crate::config::{lock, STDIN_QUEUE_MAX_BYTES};

/// What the log says about a `writeId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Never seen: write it.
    New,
    /// Seen before: answer this, write nothing.
    Repeat(WriteStatus),
}

/// The `writeId`s of one process, newest last, bounded.
#[derive(Debug)]
pub struct WriteLog {
    /// `None` while the write is in flight.
    statuses: HashMap<String, Option<WriteStatus>>,
    order: VecDeque<String>,
    capacity: usize,
}

impl WriteLog {
    pub fn new(capacity: usize) -> Self {
        Self {
            statuses: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Admits a write; a new id is remembered as in flight.
    pub fn admit(&mut self, write_id: &str) -> Admission {
        if let Some(status) = self.statuses.get(write_id) {
            return Admission::Repeat(status.unwrap_or(WriteStatus::Accepted));
        }
        if self.order.len() >= self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.statuses.remove(&oldest);
            }
        }
        self.statuses.insert(write_id.to_string(), None);
        self.order.push_back(write_id.to_string());
        Admission::New
    }

    /// Records how a write ended; `None` forgets the id (the write failed, a retry may write).
    pub fn settle(&mut self, write_id: &str, status: Option<WriteStatus>) {
        match status {
            Some(status) => {
                if let Some(slot) = self.statuses.get_mut(write_id) {
                    *slot = Some(status);
                }
            }
            None => {
                self.statuses.remove(write_id);
                self.order.retain(|id| id != write_id);
            }
        }
    }
}

struct QueuedWrite {
    bytes: Bytes,
    reply: oneshot::Sender<Result<WriteOutcome, BackendError>>,
}

/// The writing side of one process's stdin.
pub struct StdinQueue {
    tx: mpsc::Sender<QueuedWrite>,
    log: Arc<Mutex<WriteLog>>,
    /// Bytes queued and not yet written (the one being written included).
    queued_bytes: Arc<AtomicUsize>,
    max_bytes: usize,
}

/// A write that was queued (or answered at once).
pub enum PendingWrite {
    Done(WriteStatus),
    /// The queue is full: the write was not queued.
    Refused(RpcError),
    Queued {
        reply: oneshot::Receiver<Result<WriteOutcome, BackendError>>,
        log: Arc<Mutex<WriteLog>>,
        write_id: String,
    },
}

/// The refusal of a write the queue cannot take.
pub fn stdin_full(process_id: &str, writes: usize, bytes: usize) -> RpcError {
    RpcError::internal(format!(
        "stdin of process {process_id} is full ({writes} writes or {bytes} bytes waiting): \
         the process is not reading it; send this write again later"
    ))
    .with_data(serde_json::json!({"kind": STDIN_FULL_KIND}))
}

/// The `data.kind` of [`stdin_full`].
pub const STDIN_FULL_KIND: &str = "stdinFull";

impl StdinQueue {
    /// Starts the writer task of a process, holding up to `max_writes` writes and
    /// [`STDIN_QUEUE_MAX_BYTES`]; it ends when the queue is dropped.
    pub fn spawn(
        control: Arc<dyn ProcessControl>,
        max_writes: usize,
        ids_remembered: usize,
    ) -> Self {
        Self::spawn_bounded(control, max_writes, STDIN_QUEUE_MAX_BYTES, ids_remembered)
    }

    /// [`StdinQueue::spawn`] holding at most `max_writes` writes and `max_bytes` bytes (one
    /// write larger than that is taken when the queue is empty).
    pub fn spawn_bounded(
        control: Arc<dyn ProcessControl>,
        max_writes: usize,
        max_bytes: usize,
        ids_remembered: usize,
    ) -> Self {
        let (tx, mut rx) = mpsc::channel::<QueuedWrite>(max_writes.max(1));
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let written = queued_bytes.clone();
        tokio::spawn(async move {
            while let Some(write) = rx.recv().await {
                let len = write.bytes.len();
                let outcome = control.write(write.bytes.to_vec()).await;
                written.fetch_sub(len, Ordering::SeqCst);
                let _ = write.reply.send(outcome);
            }
        });
        Self {
            tx,
            log: Arc::new(Mutex::new(WriteLog::new(ids_remembered))),
            queued_bytes,
            max_bytes,
        }
    }

    /// Admits and queues a write, in call order, without waiting: a full queue refuses it.
    pub fn submit(&self, process_id: &str, write_id: String, bytes: Bytes) -> PendingWrite {
        if let Admission::Repeat(status) = lock(&self.log).admit(&write_id) {
            return PendingWrite::Done(status);
        }
        let len = bytes.len();
        // Only this (the connection's) side adds, so the check and the add cannot race.
        let queued = self.queued_bytes.load(Ordering::SeqCst);
        let (reply_tx, reply) = oneshot::channel();
        let queued_write = QueuedWrite {
            bytes,
            reply: reply_tx,
        };
        let refused = if queued > 0 && queued.saturating_add(len) > self.max_bytes {
            true
        } else {
            self.queued_bytes.fetch_add(len, Ordering::SeqCst);
            match self.tx.try_send(queued_write) {
                Ok(()) => false,
                Err(e) => {
                    self.queued_bytes.fetch_sub(len, Ordering::SeqCst);
                    match e {
                        mpsc::error::TrySendError::Full(_) => true,
                        mpsc::error::TrySendError::Closed(_) => {
                            lock(&self.log).settle(&write_id, Some(WriteStatus::StdinClosed));
                            return PendingWrite::Done(WriteStatus::StdinClosed);
                        }
                    }
                }
            }
        };
        if refused {
            lock(&self.log).settle(&write_id, None);
            let writes = self.tx.max_capacity() - self.tx.capacity();
            return PendingWrite::Refused(stdin_full(process_id, writes, queued));
        }
        PendingWrite::Queued {
            reply,
            log: self.log.clone(),
            write_id,
        }
    }
}

impl PendingWrite {
    /// Waits for the writer task's verdict.
    pub async fn finish(self) -> Result<WriteStatus, RpcError> {
        let (reply, log, write_id) = match self {
            PendingWrite::Done(status) => return Ok(status),
            PendingWrite::Refused(error) => return Err(error),
            PendingWrite::Queued {
                reply,
                log,
                write_id,
            } => (reply, log, write_id),
        };
        let result = match reply.await {
            Ok(Ok(WriteOutcome::Accepted)) => Ok(WriteStatus::Accepted),
            Ok(Ok(WriteOutcome::StdinClosed)) | Err(_) => Ok(WriteStatus::StdinClosed),
            Ok(Ok(WriteOutcome::UnknownProcess)) => Ok(WriteStatus::UnknownProcess),
            Ok(Err(e)) => Err(RpcError::internal(e.message)),
        };
        lock(&log).settle(&write_id, result.as_ref().ok().copied());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_id_is_admitted_once() {
        let mut log = WriteLog::new(8);
        assert_eq!(log.admit("w"), Admission::New);
        assert_eq!(
            log.admit("w"),
            Admission::Repeat(WriteStatus::Accepted),
            "in flight"
        );
        log.settle("w", Some(WriteStatus::StdinClosed));
        assert_eq!(log.admit("w"), Admission::Repeat(WriteStatus::StdinClosed));
    }

    #[test]
    fn a_failed_write_may_be_retried() {
        let mut log = WriteLog::new(8);
        assert_eq!(log.admit("w"), Admission::New);
        log.settle("w", None);
        assert_eq!(log.admit("w"), Admission::New);
    }

    /// A stdin nobody reads: every write waits forever.
    struct Deaf;

    impl ProcessControl for Deaf {
        fn write(
            &self,
            _: Vec<u8>,
        ) -> futures::future::BoxFuture<'_, Result<WriteOutcome, BackendError>> {
            Box::pin(std::future::pending())
        }
        fn signal(
            &self,
            _: uexec_core::backend::Signal,
        ) -> futures::future::BoxFuture<'_, Result<(), BackendError>> {
            Box::pin(async { Ok(()) })
        }
        fn terminate(&self) {}
        fn kill_leftovers(&self) {}
    }

    fn refused(pending: &PendingWrite) -> bool {
        matches!(pending, PendingWrite::Refused(e) if e.data.as_ref().is_some_and(|d| d["kind"] == STDIN_FULL_KIND))
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_by_count_and_by_bytes() {
        let queue = StdinQueue::spawn_bounded(Arc::new(Deaf), 2, 100, 8);
        let bytes = |n: usize| Bytes::from(vec![b'x'; n]);
        // One write larger than the byte bound is taken by an empty queue.
        assert!(matches!(
            queue.submit("p", "a".into(), bytes(150)),
            PendingWrite::Queued { .. }
        ));
        let next = queue.submit("p", "b".into(), bytes(1));
        assert!(refused(&next), "bytes");
        // A refused id is forgotten: the same write may be sent again.
        assert!(refused(&queue.submit("p", "b".into(), bytes(1))));

        let queue = StdinQueue::spawn_bounded(Arc::new(Deaf), 2, 100, 8);
        for id in ["a", "b", "c"] {
            // The writer task takes the first write off the queue once it runs.
            assert!(
                matches!(
                    queue.submit("p", id.into(), bytes(1)),
                    PendingWrite::Queued { .. }
                ),
                "{id}"
            );
            tokio::task::yield_now().await;
        }
        assert!(refused(&queue.submit("p", "d".into(), bytes(1))), "count");
    }

    #[test]
    fn the_oldest_ids_are_forgotten_past_capacity() {
        let mut log = WriteLog::new(2);
        log.admit("a");
        log.admit("b");
        log.admit("c");
        assert_eq!(log.admit("a"), Admission::New);
        assert!(matches!(log.admit("c"), Admission::Repeat(_)));
    }
}
