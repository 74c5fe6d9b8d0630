//! Putting a process's events back in `seq` order.
//!
//! A server numbers `process/output`, `process/exited` and `process/closed` on one counter per
//! process, starting at 1, without gaps. Notifications on a live connection arrive in that
//! order, but a reconnect loses the ones sent while the client was away (servers do not
//! replay them), and a server is free to send them out of order. So the client:
//! 1. delivers an event only when every smaller seq was delivered ([`Sequencer::push`]);
//! 2. keeps what came early in a buffer; a buffer holding anything is a *gap*, and a full
//!    buffer ([`Sequencer::is_full`]) is a gap to fill at once rather than after a grace;
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
    /// Events that arrived before their turn.
    early: BTreeMap<u64, T>,
    max_early: usize,
}

impl<T> Sequencer<T> {
    /// A sequencer expecting seq 1 that holds up to `max_early` early events before it calls
    /// itself full.
    pub fn new(max_early: usize) -> Self {
        Self {
            next: 1,
            early: BTreeMap::new(),
            max_early: max_early.max(1),
        }
    }

    /// The seq the next delivered event must carry; every smaller one was delivered or given
    /// up.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Takes an event; returns the events now deliverable, in order. A seq already delivered
    /// (or given up) is a duplicate and is dropped; a repeated early seq keeps the first.
    pub fn push(&mut self, seq: u64, event: T) -> Vec<T> {
        if seq < self.next {
            return Vec::new();
        }
        self.early.entry(seq).or_insert(event);
        self.release()
    }

    /// Whether an early event waits for a missing one.
    pub fn has_gap(&self) -> bool {
        !self.early.is_empty()
    }

    /// Whether the buffer of early events is at its bound.
    pub fn is_full(&self) -> bool {
        self.early.len() >= self.max_early
    }

    /// Declares every seq below `seq` accounted for: early events below it are released in
    /// order (the missing ones are given up), then whatever follows on from `seq`.
    pub fn skip_to(&mut self, seq: u64) -> Vec<T> {
        let mut out = Vec::new();
        if seq > self.next {
            let later = self.early.split_off(&seq);
            out.extend(std::mem::replace(&mut self.early, later).into_values());
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
        std::mem::take(&mut self.early).into_values().collect()
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
        self.early.values().any(f)
    }

    fn release(&mut self) -> Vec<T> {
        let mut out = Vec::new();
        while let Some(event) = self.early.remove(&self.next) {
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
        let mut s = Sequencer::new(8);
        assert_eq!(s.push(1, 'a'), vec!['a']);
        assert_eq!(s.push(2, 'b'), vec!['b']);
        assert!(!s.has_gap());
        assert_eq!(s.next_seq(), 3);
    }

    #[test]
    fn early_events_wait_for_the_missing_one() {
        let mut s = Sequencer::new(8);
        assert!(s.push(2, 'b').is_empty());
        assert!(s.push(3, 'c').is_empty());
        assert!(s.has_gap());
        assert_eq!(s.push(1, 'a'), vec!['a', 'b', 'c']);
        assert!(!s.has_gap());
    }

    #[test]
    fn duplicates_are_dropped() {
        let mut s = Sequencer::new(8);
        s.push(1, 'a');
        assert!(s.push(1, 'x').is_empty());
        assert!(s.push(3, 'c').is_empty());
        assert!(s.push(3, 'y').is_empty());
        assert_eq!(s.push(2, 'b'), vec!['b', 'c']);
    }

    #[test]
    fn skip_to_gives_up_on_holes_below_it() {
        let mut s = Sequencer::new(8);
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
    fn fullness_is_bounded_by_early_events() {
        let mut s = Sequencer::new(2);
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
            let mut s = Sequencer::new(64);
            let mut out = Vec::new();
            for seq in order.iter().chain(dups.iter()) {
                out.extend(s.push(*seq, *seq));
            }
            prop_assert_eq!(out, (1..=40).collect::<Vec<_>>());
            prop_assert!(!s.has_gap());
        }
    }
}
