//! What `process/read` can still return: the newest output of a process, as whole chunks.
//!
//! Pure policy, no I/O:
//! 1. [`split_chunk`] cuts a backend read into notification-sized pieces (zero-copy slices);
//!    each piece gets its own seq.
//! 2. [`Retention::push`] keeps pieces in seq order and evicts the oldest while the total
//!    exceeds the budget, so what is kept is exactly the newest budget's worth of *whole*
//!    pieces (between `budget - piece` and `budget` bytes once output exceeded the budget).
//! 3. [`Retention::select`] answers a read: pieces after `after_seq`, paged by `max_bytes`
//!    the way Codex does it (at least one piece, then the largest prefix that fits).

use std::collections::VecDeque;

use bytes::Bytes;
use uexec_protocol::OutputStream;

/// One retained piece of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetainedChunk {
    pub seq: u64,
    pub stream: OutputStream,
    pub bytes: Bytes,
}

/// Splits `bytes` into pieces of at most `max_bytes` (at least 1) bytes, in order; an empty
/// input gives no piece.
pub fn split_chunk(bytes: Bytes, max_bytes: usize) -> impl Iterator<Item = Bytes> {
    let step = max_bytes.max(1);
    let len = bytes.len();
    (0..len)
        .step_by(step)
        .map(move |start| bytes.slice(start..len.min(start + step)))
}

/// The newest output of one process, bounded in bytes.
#[derive(Debug, Clone)]
pub struct Retention {
    chunks: VecDeque<RetainedChunk>,
    bytes: usize,
    max_bytes: usize,
}

impl Retention {
    /// An empty retention keeping at most `max_bytes` bytes.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            chunks: VecDeque::new(),
            bytes: 0,
            max_bytes,
        }
    }

    /// Keeps a piece (seqs must grow), then evicts the oldest pieces while over budget.
    pub fn push(&mut self, chunk: RetainedChunk) {
        self.bytes += chunk.bytes.len();
        self.chunks.push_back(chunk);
        while self.bytes > self.max_bytes {
            let Some(evicted) = self.chunks.pop_front() else {
                break;
            };
            self.bytes -= evicted.bytes.len();
        }
    }

    /// Bytes currently kept.
    pub fn retained_bytes(&self) -> usize {
        self.bytes
    }

    /// Pieces with `seq > after_seq`, oldest first. With a `max_bytes` budget: the first such
    /// piece always, then more while the total stays within the budget, stopping once it is
    /// reached.
    pub fn select(&self, after_seq: u64, max_bytes: Option<u64>) -> Vec<RetainedChunk> {
        let start = self.chunks.partition_point(|c| c.seq <= after_seq);
        let mut out = Vec::new();
        let mut total: u64 = 0;
        for chunk in self.chunks.iter().skip(start) {
            let len = chunk.bytes.len() as u64;
            if let Some(budget) = max_bytes {
                if !out.is_empty() && total + len > budget {
                    break;
                }
            }
            total += len;
            out.push(chunk.clone());
            if max_bytes.is_some_and(|budget| total >= budget) {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(seq: u64, text: &str) -> RetainedChunk {
        RetainedChunk {
            seq,
            stream: OutputStream::Stdout,
            bytes: Bytes::copy_from_slice(text.as_bytes()),
        }
    }

    fn seqs(chunks: &[RetainedChunk]) -> Vec<u64> {
        chunks.iter().map(|c| c.seq).collect()
    }

    #[test]
    fn split_cuts_into_bounded_pieces() {
        let parts: Vec<Bytes> = split_chunk(Bytes::from_static(b"abcdefg"), 3).collect();
        assert_eq!(parts, vec![&b"abc"[..], &b"def"[..], &b"g"[..]]);
        assert_eq!(split_chunk(Bytes::new(), 3).count(), 0);
    }

    #[test]
    fn eviction_keeps_the_newest_whole_pieces() {
        let mut r = Retention::new(10);
        r.push(piece(1, "aaaa"));
        r.push(piece(2, "bbbb"));
        r.push(piece(4, "cccc"));
        assert_eq!(seqs(&r.select(0, None)), vec![2, 4]);
        assert_eq!(r.retained_bytes(), 8);
    }

    #[test]
    fn select_pages_like_codex() {
        let mut r = Retention::new(100);
        r.push(piece(1, "one"));
        r.push(piece(2, "two"));
        r.push(piece(3, "three"));
        assert_eq!(seqs(&r.select(0, Some(0))), vec![1]);
        assert_eq!(seqs(&r.select(0, Some(1))), vec![1]);
        assert_eq!(seqs(&r.select(0, Some(6))), vec![1, 2]);
        assert_eq!(seqs(&r.select(0, Some(7))), vec![1, 2]);
        assert_eq!(seqs(&r.select(1, Some(3))), vec![2]);
        assert_eq!(seqs(&r.select(1, None)), vec![2, 3]);
        assert!(r.select(3, None).is_empty());
    }
}
