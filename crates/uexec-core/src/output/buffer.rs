//! The pending-output buffer of a session: the first half of its capacity keeps the oldest
//! bytes, the second half the newest; what falls between is counted, never silently lost:
//! its bytes, and its line ends as they are dropped (so a result counts every line the
//! command printed, in bounded memory).

use std::collections::VecDeque;

/// What a drain hands over: the kept bytes on both sides of the cut and how many were dropped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Drained {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
    pub omitted_bytes: u64,
    /// Line ends (`\n`) among the omitted bytes.
    pub omitted_newlines: u64,
}

impl Drained {
    /// Kept bytes in order (without any marker).
    pub fn kept_len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Lines of everything drained, the omitted ones included, counted as `str::lines`
    /// counts them: a last line without its line end counts too.
    pub fn lines(&self) -> u64 {
        let ends = newlines(&self.head) + self.omitted_newlines + newlines(&self.tail);
        let last = self.tail.last().or(self.head.last());
        ends + u64::from(last.is_some_and(|&b| b != b'\n'))
    }
}

/// Line ends in `bytes`.
fn newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Head/tail buffer bounded to `capacity` bytes.
#[derive(Debug)]
pub struct HeadTailBuffer {
    head_capacity: usize,
    tail_capacity: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    omitted_bytes: u64,
    omitted_newlines: u64,
}

impl HeadTailBuffer {
    pub fn new(capacity: usize) -> Self {
        let head_capacity = capacity / 2;
        Self {
            head_capacity,
            tail_capacity: capacity - head_capacity,
            head: Vec::new(),
            tail: VecDeque::new(),
            omitted_bytes: 0,
            omitted_newlines: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < self.head_capacity {
            let take = bytes.len().min(self.head_capacity - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() {
            return;
        }
        if bytes.len() >= self.tail_capacity {
            let skip = bytes.len() - self.tail_capacity;
            self.omitted_bytes += (self.tail.len() + skip) as u64;
            self.omitted_newlines += self.tail_newlines(self.tail.len()) + newlines(&bytes[..skip]);
            self.tail.clear();
            self.tail.extend(&bytes[skip..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_capacity);
        if overflow > 0 {
            self.omitted_newlines += self.tail_newlines(overflow);
            self.tail.drain(..overflow);
            self.omitted_bytes += overflow as u64;
        }
        self.tail.extend(bytes);
    }

    /// Line ends among the first `n` bytes of the tail.
    fn tail_newlines(&self, n: usize) -> u64 {
        let (front, back) = self.tail.as_slices();
        let in_front = n.min(front.len());
        newlines(&front[..in_front]) + newlines(&back[..n - in_front])
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty() && self.omitted_bytes == 0
    }

    /// Bytes dropped from the middle since the last drain.
    pub fn omitted(&self) -> u64 {
        self.omitted_bytes
    }

    /// Bytes currently held.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// The last `n` bytes printed, as one run: at most what the tail holds once something
    /// was cut between head and tail (the head is not next to it then).
    pub fn last_run(&self, n: usize) -> Vec<u8> {
        let n = if self.omitted_bytes == 0 {
            n
        } else {
            n.min(self.tail.len())
        };
        self.last_bytes(n)
    }

    /// The last `n` bytes held (fewer when less is held), leaving them in place.
    pub fn last_bytes(&self, n: usize) -> Vec<u8> {
        let from_tail = self.tail.len().min(n);
        let from_head = (n - from_tail).min(self.head.len());
        let mut out = Vec::with_capacity(from_head + from_tail);
        out.extend_from_slice(&self.head[self.head.len() - from_head..]);
        out.extend(self.tail.range(self.tail.len() - from_tail..));
        out
    }

    /// A copy of what is held, leaving it in place.
    pub fn peek(&self) -> Drained {
        Drained {
            head: self.head.clone(),
            tail: self.tail.iter().copied().collect(),
            omitted_bytes: self.omitted_bytes,
            omitted_newlines: self.omitted_newlines,
        }
    }

    /// Like [`Self::drain`], but an incomplete character at the very end stays in the buffer
    /// to be completed by the next push (while more output may still come).
    pub fn drain_whole_chars(&mut self) -> Drained {
        let mut drained = self.drain();
        let end = if drained.tail.is_empty() {
            &mut drained.head
        } else {
            &mut drained.tail
        };
        let keep = crate::utf8::incomplete_suffix_len(end);
        let held = end.split_off(end.len() - keep);
        self.push(&held);
        drained
    }

    /// Takes everything and starts over (the head fills again from the next byte).
    pub fn drain(&mut self) -> Drained {
        let drained = Drained {
            head: std::mem::take(&mut self.head),
            tail: self.tail.drain(..).collect(),
            omitted_bytes: self.omitted_bytes,
            omitted_newlines: self.omitted_newlines,
        };
        self.omitted_bytes = 0;
        self.omitted_newlines = 0;
        drained
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn flat(d: &Drained) -> Vec<u8> {
        [d.head.clone(), d.tail.clone()].concat()
    }

    #[test]
    fn small_writes_are_kept_whole() {
        let mut b = HeadTailBuffer::new(16);
        b.push(b"abc");
        b.push(b"def");
        let d = b.drain();
        assert_eq!(flat(&d), b"abcdef");
        assert_eq!(d.omitted_bytes, 0);
    }

    #[test]
    fn capacity_zero_keeps_nothing_but_counts() {
        let mut b = HeadTailBuffer::new(0);
        b.push(b"hello");
        let d = b.drain();
        assert_eq!(d.kept_len(), 0);
        assert_eq!(d.omitted_bytes, 5);
    }

    #[test]
    fn capacity_one_keeps_the_last_byte() {
        let mut b = HeadTailBuffer::new(1);
        b.push(b"hello");
        let d = b.drain();
        assert_eq!(flat(&d), b"o");
        assert_eq!(d.omitted_bytes, 4);
    }

    #[test]
    fn oversize_chunk_keeps_head_and_tail() {
        let mut b = HeadTailBuffer::new(8);
        b.push(b"0123456789abcdef");
        let d = b.drain();
        assert_eq!(d.head, b"0123");
        assert_eq!(d.tail, b"cdef");
        assert_eq!(d.omitted_bytes, 8);
    }

    #[test]
    fn drain_resets_the_head() {
        let mut b = HeadTailBuffer::new(4);
        b.push(b"abcdef");
        let _ = b.drain();
        assert!(b.is_empty());
        b.push(b"xyz");
        let d = b.drain();
        assert_eq!(flat(&d), b"xyz");
        assert_eq!(d.omitted_bytes, 0);
    }

    #[test]
    fn every_line_is_counted_also_those_dropped_from_the_middle() {
        let mut b = HeadTailBuffer::new(8);
        for i in 1..=1000 {
            b.push(format!("{i}\n").as_bytes());
        }
        let d = b.drain();
        assert!(d.omitted_bytes > 0);
        assert_eq!(d.lines(), 1000);
        b.push(b"no line end");
        assert_eq!(b.drain().lines(), 1);
        assert_eq!(b.drain().lines(), 0);
    }

    #[test]
    fn an_incomplete_character_waits_for_the_next_drain() {
        let mut b = HeadTailBuffer::new(1024);
        b.push(b"caf\xc3");
        assert_eq!(flat(&b.drain_whole_chars()), b"caf");
        b.push(b"\xa9!");
        assert_eq!(flat(&b.drain_whole_chars()), "é!".as_bytes());
        b.push(b"\xff");
        assert_eq!(
            flat(&b.drain_whole_chars()),
            b"\xff",
            "invalid bytes are not held"
        );
        assert!(b.is_empty());
    }

    proptest! {
        #[test]
        fn keeps_prefix_and_suffix_and_counts_the_rest(
            cap in 0usize..64,
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20),
        ) {
            let mut b = HeadTailBuffer::new(cap);
            let all: Vec<u8> = chunks.concat();
            for c in &chunks { b.push(c); }
            let d = b.drain();
            prop_assert_eq!(d.kept_len() as u64 + d.omitted_bytes, all.len() as u64);
            prop_assert!(d.kept_len() <= cap);
            prop_assert_eq!(&d.head[..], &all[..d.head.len()]);
            prop_assert_eq!(&d.tail[..], &all[all.len() - d.tail.len()..]);
            if d.omitted_bytes == 0 { prop_assert_eq!(flat(&d), all.clone()); }
            if !d.tail.is_empty() || !d.head.is_empty() || all.is_empty() {
                let lines = String::from_utf8_lossy(&all).lines().count() as u64;
                prop_assert_eq!(d.lines(), lines);
            }
        }
    }
}
