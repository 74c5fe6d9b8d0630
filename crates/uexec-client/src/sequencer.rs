//! Putting a process's events back in `seq` order.
//!
//! A server numbers `process/output`, `process/exited` and `process/closed` on one counter per
//! process, starting at 1, without gaps. Notifications on a live connection arrive in that
//! order, but a reconnect loses the ones sent while the client was away (servers do not
//! replay them), and a server is free to send them out of order. So the client:
//! 1. delivers an event only when every smaller seq was delivered ([`Sequencer::push`]);
//! 2. keeps what came early in a buffer, bounded in events and bytes; a buffer holding
//!    anything is a *gap*, and a full buffer ([`Sequencer::is_full`]) is a gap to fill at once
//!    rather than after a grace. What comes early into a full buffer is dropped, not kept
//!    (a hostile or runaway server cannot grow it): the gap it leaves counts as a gap until a
//!    read accounts for it, so the read fetches it again;
//! 3. fills gaps with a `process/read {afterSeq}`: its chunks are pushed like notifications,
//!    then everything below its `nextSeq` counts as accounted for ([`Sequencer::skip_to`]);
//! 4. counts what the read could not return ([`lost_output_events`]): a server retains only
//!    its newest output, and what it evicted is gone.
//!
//! Pure data, no I/O: the process's feed task (`feed.rs`) drives it.

use std::collections::BTreeMap;

/// Events of one process, released in seq order.
#[derive(Debug, Clone)]
pub struct Sequencer<T> {
    /// The seq the next delivered event must carry.
    next: u64,
    /// Events that arrived before their turn, with their sizes.
    early: BTreeMap<u64, (T, usize)>,
    early_bytes: usize,
    max_early: usize,
    max_early_bytes: usize,
    /// The highest seq dropped for want of room (a gap until something accounts for it).
    dropped: Option<u64>,
}

impl<T> Sequencer<T> {
    /// A sequencer expecting seq 1 that holds up to `max_early` early events and
    /// `max_early_bytes` bytes of them (one bigger event is held alone) before it calls itself
    /// full.
    pub fn new(max_early: usize, max_early_bytes: usize) -> Self {
        Self {
            next: 1,
            early: BTreeMap::new(),
            early_bytes: 0,
            max_early: max_early.max(1),
            max_early_bytes,
            dropped: None,
        }
    }

    /// The seq the next delivered event must carry; every smaller one was delivered or given
    /// up.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Whether [`Sequencer::push_sized`] would deliver or hold this event (rather than
    /// dropping it as a duplicate or for want of room).
    pub fn accepts(&self, seq: u64, bytes: usize) -> bool {
        if seq < self.next || self.early.contains_key(&seq) {
            return false;
        }
        seq == self.next || self.early.is_empty() || !self.would_overflow(bytes)
    }

    fn would_overflow(&self, bytes: usize) -> bool {
        self.early.len() >= self.max_early
            || self.early_bytes.saturating_add(bytes) > self.max_early_bytes
    }

    /// Takes an event; returns the events now deliverable, in order. A seq already delivered
    /// (or given up) is a duplicate and is dropped; a repeated early seq keeps the first.
    pub fn push(&mut self, seq: u64, event: T) -> Vec<T> {
        self.push_sized(seq, event, 0)
    }

    /// [`Sequencer::push`] of an event of `bytes` bytes: an early one that does not fit is
    /// dropped and leaves a gap.
    pub fn push_sized(&mut self, seq: u64, event: T, bytes: usize) -> Vec<T> {
        if seq < self.next || self.early.contains_key(&seq) {
            return Vec::new();
        }
        if seq != self.next && !self.early.is_empty() && self.would_overflow(bytes) {
            self.dropped = self.dropped.max(Some(seq));
            return Vec::new();
        }
        self.early_bytes += bytes;
        self.early.insert(seq, (event, bytes));
        self.release()
    }

    /// Records that events up to `seq` were dropped before they got here (a gap until a
    /// read accounts for them).
    pub fn note_dropped(&mut self, seq: u64) {
        if seq >= self.next {
            self.dropped = self.dropped.max(Some(seq));
        }
    }

    /// Whether an event is missing: an early event waits for it, or a dropped one is not
    /// accounted for yet.
    pub fn has_gap(&self) -> bool {
        !self.early.is_empty() || self.dropped.is_some_and(|seq| seq >= self.next)
    }

    /// Whether the buffer of early events is at its bound. (Dropped events alone are a gap,
    /// not fullness: a server whose reads never account for them is not read in a loop.)
    pub fn is_full(&self) -> bool {
        self.early.len() >= self.max_early
            || (!self.early.is_empty() && self.early_bytes >= self.max_early_bytes)
    }

    /// Declares every seq below `seq` accounted for: early events below it are released in
    /// order (the missing ones are given up), then whatever follows on from `seq`.
    pub fn skip_to(&mut self, seq: u64) -> Vec<T> {
        let mut out = Vec::new();
        if seq > self.next {
            let later = self.early.split_off(&seq);
            let below = std::mem::replace(&mut self.early, later);
            out.extend(below.into_values().map(|(event, bytes)| {
                self.early_bytes -= bytes;
                event
            }));
            self.next = seq;
        }
        out.extend(self.release());
        out
    }

    /// Gives up on every gap: all early events, in order.
    pub fn drain(&mut self) -> Vec<T> {
        if let Some((&last, _)) = self.early.last_key_value() {
            self.next = self.next.max(last + 1);
        }
        self.early_bytes = 0;
        self.dropped = None;
        std::mem::take(&mut self.early)
            .into_values()
            .map(|(event, _)| event)
            .collect()
    }

    /// Seqs of the early events within `range`.
    pub fn early_seqs(&self, range: std::ops::Range<u64>) -> Vec<u64> {
        if range.start >= range.end {
            return Vec::new();
        }
        self.early.range(range).map(|(seq, _)| *seq).collect()
    }

    /// Whether an early event satisfies `f`.
    pub fn any_early(&self, f: impl Fn(&T) -> bool) -> bool {
        self.early.values().any(|(event, _)| f(event))
    }

    fn release(&mut self) -> Vec<T> {
        let mut out = Vec::new();
        while let Some((event, bytes)) = self.early.remove(&self.next) {
            self.early_bytes -= bytes;
            out.push(event);
            self.next += 1;
        }
        out
    }
}

/// What a `process/read` after `after_seq` accounted for, to count what it could not return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadAccount {
    pub after_seq: u64,
    /// The read's `nextSeq` (no `maxBytes` was sent: the process's next seq).
    pub next_seq: u64,
    /// Distinct seqs in `after_seq + 1 .. next_seq` the client holds: the read's chunks plus
    /// early notifications.
    pub held: u64,
    /// The read reports an exit whose `process/exited` the client never received.
    pub exit_unseen: bool,
    /// The read reports a close whose `process/closed` the client never received.
    pub close_unseen: bool,
}

/// Output events in the read's range the server no longer retains: seqs neither held nor
/// taken by the exit and close events the read reports.
pub fn lost_output_events(account: ReadAccount) -> u64 {
    let range = account
        .next_seq
        .saturating_sub(account.after_seq)
        .saturating_sub(1);
    range
        .saturating_sub(account.held)
        .saturating_sub(u64::from(account.exit_unseen))
        .saturating_sub(u64::from(account.close_unseen))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn in_order_events_flow_straight_through() {
        let mut s = Sequencer::new(8, usize::MAX);
        assert_eq!(s.push(1, 'a'), vec!['a']);
        assert_eq!(s.push(2, 'b'), vec!['b']);
        assert!(!s.has_gap());
        assert_eq!(s.next_seq(), 3);
    }

    #[test]
    fn early_events_wait_for_the_missing_one() {
        let mut s = Sequencer::new(8, usize::MAX);
        assert!(s.push(2, 'b').is_empty());
        assert!(s.push(3, 'c').is_empty());
        assert!(s.has_gap());
        assert_eq!(s.push(1, 'a'), vec!['a', 'b', 'c']);
        assert!(!s.has_gap());
    }

    #[test]
    fn duplicates_are_dropped() {
        let mut s = Sequencer::new(8, usize::MAX);
        s.push(1, 'a');
        assert!(s.push(1, 'x').is_empty());
        assert!(s.push(3, 'c').is_empty());
        assert!(s.push(3, 'y').is_empty());
        assert_eq!(s.push(2, 'b'), vec!['b', 'c']);
    }

    #[test]
    fn skip_to_gives_up_on_holes_below_it() {
        let mut s = Sequencer::new(8, usize::MAX);
        s.push(1, 'a');
        s.push(3, 'c');
        s.push(6, 'f');
        s.push(7, 'g');
        assert_eq!(s.skip_to(5), vec!['c']);
        assert_eq!(s.next_seq(), 5);
        assert!(s.has_gap(), "6 and 7 still wait for 5");
        assert_eq!(s.skip_to(6), vec!['f', 'g']);
        assert_eq!(s.next_seq(), 8);
        assert!(s.skip_to(2).is_empty(), "never goes back");
        assert_eq!(s.next_seq(), 8);
    }

    #[test]
    fn a_full_buffer_drops_what_comes_early_and_calls_that_a_gap() {
        let mut s = Sequencer::new(2, 100);
        s.push_sized(3, 'c', 10);
        s.push_sized(4, 'd', 10);
        assert!(!s.accepts(5, 10));
        assert!(s.push_sized(5, 'e', 10).is_empty(), "dropped: no room");
        assert_eq!(s.early_seqs(1..10), vec![3, 4]);
        // The next event in order is always taken.
        assert_eq!(s.push_sized(1, 'a', 10), vec!['a']);
        // A read accounting for 2..5 releases what was held; 5 is still missing.
        assert_eq!(s.skip_to(3), vec!['c', 'd']);
        assert!(s.has_gap() && !s.is_full(), "5 was dropped");
        assert_eq!(s.skip_to(6), Vec::<char>::new());
        assert!(!s.has_gap());

        let mut s = Sequencer::new(100, 100);
        s.push_sized(3, 'c', 200);
        assert!(s.is_full(), "one big event is held alone");
        assert!(s.push_sized(4, 'd', 1).is_empty());
        assert_eq!(s.early_seqs(1..10), vec![3]);
    }

    #[test]
    fn fullness_is_bounded_by_early_events() {
        let mut s = Sequencer::new(2, usize::MAX);
        s.push(3, 'c');
        assert!(!s.is_full());
        s.push(4, 'd');
        assert!(s.is_full());
        assert_eq!(s.drain(), vec!['c', 'd']);
        assert_eq!(s.next_seq(), 5);
    }

    #[test]
    fn lost_output_is_what_neither_chunks_nor_exit_and_close_explain() {
        // Read after 2 returns nextSeq 9: seqs 3..=8. Chunks 6, 7 held; exit and close unseen.
        let account = ReadAccount {
            after_seq: 2,
            next_seq: 9,
            held: 2,
            exit_unseen: true,
            close_unseen: true,
        };
        assert_eq!(lost_output_events(account), 2);
        let nothing_missing = ReadAccount {
            after_seq: 0,
            next_seq: 4,
            held: 1,
            exit_unseen: true,
            close_unseen: true,
        };
        assert_eq!(lost_output_events(nothing_missing), 0);
        let empty = ReadAccount {
            after_seq: 5,
            next_seq: 6,
            held: 0,
            exit_unseen: false,
            close_unseen: false,
        };
        assert_eq!(lost_output_events(empty), 0);
    }

    proptest! {
        #[test]
        fn any_arrival_order_is_delivered_in_seq_order_exactly_once(
            order in Just((1u64..=40).collect::<Vec<_>>()).prop_shuffle(),
            dups in proptest::collection::vec(1u64..=40, 0..10),
        ) {
            let mut s = Sequencer::new(64, usize::MAX);
            let mut out = Vec::new();
            for seq in order.iter().chain(dups.iter()) {
                out.extend(s.push(*seq, *seq));
            }
            prop_assert_eq!(out, (1..=40).collect::<Vec<_>>());
            prop_assert!(!s.has_gap());
        }
    }
}
