//! The observable state of one process: its seq counter, retained output, exit and close.
//!
//! One value per process lives in a `tokio::sync::watch` owned by the process's pump (see
//! `pump.rs`): the pump is the only writer, every change bumps the watch, and a long-polling
//! `process/read` waits on it. Everything here is pure, so the rules are tested without
//! processes:
//! 1. output, exit and close each take the next seq (one counter, starting at 1);
//! 2. close happens once, after the exit is known and the output ended;
//! 3. a read returns the retained chunks after `afterSeq` and is *ready* (a long poll may
//!    answer) when it has chunks, the process closed, or it exited after `afterSeq`.

use bytes::Bytes;
use uexec_protocol::{OutputStream, ProcessChunk, ReadResult};

use super::retention::{RetainedChunk, Retention};

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitInfo {
    /// Status, `128 + N` for signal N, `-1` when the backend could not tell.
    pub code: i32,
    pub failure: Option<String>,
}

/// Where a process is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lifecycle {
    Running,
    Exited(ExitInfo),
    /// Exited and every output stream hit EOF; nothing more will happen.
    Closed(ExitInfo),
}

/// Seq counter, retained output and lifecycle of one process.
#[derive(Debug, Clone)]
pub struct ProcessState {
    next_seq: u64,
    retention: Retention,
    lifecycle: Lifecycle,
}

impl ProcessState {
    /// A running process that has emitted nothing, retaining `retained_max_bytes` of output.
    pub fn new(retained_max_bytes: usize) -> Self {
        Self {
            next_seq: 1,
            retention: Retention::new(retained_max_bytes),
            lifecycle: Lifecycle::Running,
        }
    }

    /// The seq the next event will take.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// The exit, once known.
    pub fn exit(&self) -> Option<&ExitInfo> {
        match &self.lifecycle {
            Lifecycle::Running => None,
            Lifecycle::Exited(e) | Lifecycle::Closed(e) => Some(e),
        }
    }

    pub fn has_exited(&self) -> bool {
        self.exit().is_some()
    }

    pub fn is_closed(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Closed(_))
    }

    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Records one piece of output; returns its seq.
    pub fn record_output(&mut self, stream: OutputStream, bytes: Bytes) -> u64 {
        let seq = self.take_seq();
        self.retention.push(RetainedChunk { seq, stream, bytes });
        seq
    }

    /// Records the exit; returns its seq, or `None` if the exit was already known.
    pub fn record_exit(&mut self, exit: ExitInfo) -> Option<u64> {
        if self.has_exited() {
            return None;
        }
        let seq = self.take_seq();
        self.lifecycle = Lifecycle::Exited(exit);
        Some(seq)
    }

    /// Records the close; returns its seq, or `None` unless the process exited and is not
    /// closed yet.
    pub fn record_closed(&mut self) -> Option<u64> {
        let Lifecycle::Exited(exit) = &self.lifecycle else {
            return None;
        };
        let exit = exit.clone();
        let seq = self.take_seq();
        self.lifecycle = Lifecycle::Closed(exit);
        Some(seq)
    }

    /// Answers `process/read` from what is known now.
    pub fn read(&self, after_seq: u64, max_bytes: Option<u64>) -> ReadResult {
        let chunks = self.retention.select(after_seq, max_bytes);
        let next_seq = match (max_bytes, chunks.last()) {
            (Some(_), Some(last)) => last.seq + 1,
            _ => self.next_seq,
        };
        let exit = self.exit();
        ReadResult {
            chunks: chunks
                .into_iter()
                .map(|c| ProcessChunk {
                    seq: c.seq,
                    stream: c.stream,
                    chunk: c.bytes.into(),
                })
                .collect(),
            next_seq,
            exited: exit.is_some(),
            exit_code: exit.map(|e| e.code),
            closed: self.is_closed(),
            failure: exit.and_then(|e| e.failure.clone()),
            sandbox_denied: false,
        }
    }

    /// Whether a long poll after `after_seq` may answer now: there are chunks to return, the
    /// process closed, or its exit came after `after_seq`.
    pub fn read_is_ready(&self, after_seq: u64, result: &ReadResult) -> bool {
        !result.chunks.is_empty()
            || result.closed
            || (result.exited && after_seq < self.next_seq.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: i32) -> ExitInfo {
        ExitInfo {
            code,
            failure: None,
        }
    }

    #[test]
    fn one_counter_for_output_exit_and_close() {
        let mut s = ProcessState::new(1024);
        assert_eq!(
            s.record_output(OutputStream::Stdout, Bytes::from_static(b"a")),
            1
        );
        assert_eq!(s.record_closed(), None, "no close before the exit");
        assert_eq!(s.record_exit(exit(3)), Some(2));
        assert_eq!(s.record_exit(exit(4)), None, "the first exit stands");
        assert_eq!(
            s.record_output(OutputStream::Stderr, Bytes::from_static(b"b")),
            3
        );
        assert_eq!(s.record_closed(), Some(4));
        assert_eq!(s.record_closed(), None);
        let r = s.read(0, None);
        assert_eq!(r.next_seq, 5);
        assert_eq!(r.exit_code, Some(3));
        assert!(r.exited && r.closed);
        assert_eq!(
            r.chunks.iter().map(|c| c.seq).collect::<Vec<_>>(),
            vec![1, 3]
        );
    }

    #[test]
    fn next_seq_with_max_bytes_follows_the_last_chunk() {
        let mut s = ProcessState::new(1024);
        s.record_output(OutputStream::Stdout, Bytes::from_static(b"hi"));
        s.record_output(OutputStream::Stdout, Bytes::from_static(b"yo"));
        s.record_exit(exit(0));
        assert_eq!(s.read(0, Some(1)).next_seq, 2);
        assert_eq!(s.read(0, Some(100)).next_seq, 3);
        assert_eq!(s.read(99, Some(100)).next_seq, 4);
        assert_eq!(s.read(0, None).next_seq, 4);
    }

    #[test]
    fn readiness_of_a_long_poll() {
        let mut s = ProcessState::new(1024);
        let r = s.read(0, None);
        assert!(!s.read_is_ready(0, &r));
        s.record_exit(exit(7));
        let r = s.read(0, None);
        assert!(s.read_is_ready(0, &r), "an exit after afterSeq is news");
        let r = s.read(1, None);
        assert!(!s.read_is_ready(1, &r), "an exit already seen is not");
        s.record_closed();
        let r = s.read(2, None);
        assert!(s.read_is_ready(2, &r), "closed always answers");
    }
}
