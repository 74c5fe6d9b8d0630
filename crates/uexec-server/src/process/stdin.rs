//! Stdin of one process: an ordered queue in front of the backend, and `writeId` idempotency.
//!
//! Why a queue: a write to a pipe nobody reads blocks, and a connection must not stall behind
//! it. So `process/write`
//! 1. is admitted by its `writeId` ([`WriteLog`]): a repeated id is answered with what the
//!    first write got (`accepted` while it is still in flight) and written no second time;
//! 2. is queued in arrival order (the connection waits only when the queue is full);
//! 3. is answered once the process's writer task has written it, without holding up later
//!    requests on the connection.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use uexec_core::backend::{BackendError, ProcessControl, WriteOutcome};
use uexec_protocol::{RpcError, WriteStatus};

use crate::config::lock;

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
}

/// A write that was queued (or answered at once).
pub enum PendingWrite {
    Done(WriteStatus),
    Queued {
        reply: oneshot::Receiver<Result<WriteOutcome, BackendError>>,
        log: Arc<Mutex<WriteLog>>,
        write_id: String,
    },
}

impl StdinQueue {
    /// Starts the writer task of a process; it ends when the queue is dropped.
    pub fn spawn(
        control: Arc<dyn ProcessControl>,
        queue_len: usize,
        ids_remembered: usize,
    ) -> Self {
        let (tx, mut rx) = mpsc::channel::<QueuedWrite>(queue_len.max(1));
        tokio::spawn(async move {
            while let Some(write) = rx.recv().await {
                let outcome = control.write(write.bytes.to_vec()).await;
                let _ = write.reply.send(outcome);
            }
        });
        Self {
            tx,
            log: Arc::new(Mutex::new(WriteLog::new(ids_remembered))),
        }
    }

    /// Admits and queues a write, in call order.
    pub async fn submit(&self, write_id: String, bytes: Bytes) -> PendingWrite {
        if let Admission::Repeat(status) = lock(&self.log).admit(&write_id) {
            return PendingWrite::Done(status);
        }
        let (reply_tx, reply) = oneshot::channel();
        let queued = QueuedWrite {
            bytes,
            reply: reply_tx,
        };
        if self.tx.send(queued).await.is_err() {
            lock(&self.log).settle(&write_id, Some(WriteStatus::StdinClosed));
            return PendingWrite::Done(WriteStatus::StdinClosed);
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
