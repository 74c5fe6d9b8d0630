//! What a result's output left out, located in what the command printed.
//!
//! A body may leave bytes out twice: the pending buffer drops the middle of more than it
//! holds (`[… N bytes omitted …]`), and the token budget cuts the middle of the text that is
//! left (`…N tokens truncated…`). The model reads one text; the range it is told of covers
//! both cuts, in session offsets (what `read_output` takes), found as follows:
//! 1. the body's text is laid out as pieces of raw bytes ([`Layout`]): all the drained bytes,
//!    or the head, the marker standing for the dropped bytes, and the tail;
//! 2. each edge of the token budget's cut is mapped back through its piece's cleaning
//!    ([`super::origin`]);
//! 3. the range is the span of both cuts. When the budget's cut lies wholly in the head or
//!    the tail, apart from the buffer's, the span includes what the text shows between
//!    them: a range a little too wide sends a reader to bytes it has seen, one too narrow
//!    would hide some it has not.

use std::ops::Range;

use super::origin::{raw_offset, Edge};
use super::Hygiene;

/// What a result's output left out of what the command printed since the last read, and
/// how many lines that was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Omitted {
    /// Session offsets of every byte the output leaves out, the pending buffer's cut and the
    /// token budget's as one range: every byte outside it is in the output (cleaned, where
    /// hygiene was asked for; a line redrawn at a carriage return counts whole).
    pub range: Range<u64>,
    /// Lines the command printed since the last read, the left-out ones included.
    pub lines: u64,
    /// Bytes of the truncation warning that leads the output, in Codex's words (its line
    /// count is of the text kept before truncation); 0 when the token budget cut nothing.
    pub warning_len: usize,
}

/// How a body's text (before truncation) is made of the drained bytes.
pub(super) enum Layout<'a> {
    /// All of them, cleaned.
    Whole(&'a [u8]),
    /// The head cleaned (`head_len` bytes of text), the marker (`marker_len`) standing for
    /// the bytes at drained offsets `gap`, then the tail cleaned (from drained offset
    /// `gap.end`).
    Cut {
        head: &'a [u8],
        head_len: usize,
        marker_len: usize,
        gap: Range<u64>,
        tail: &'a [u8],
    },
}

impl Layout<'_> {
    /// The drained offset of text position `at`, seen from `edge`.
    fn raw_at(&self, at: usize, edge: Edge, hygiene: Hygiene) -> u64 {
        match self {
            Self::Whole(raw) => raw_offset(raw, hygiene, at, edge) as u64,
            Self::Cut {
                head,
                head_len,
                marker_len,
                gap,
                tail,
            } => {
                let marker_end = head_len + marker_len;
                if at < *head_len || (at == *head_len && edge == Edge::HeadEnd) {
                    raw_offset(head, hygiene, at, edge) as u64
                } else if at > marker_end || (at == marker_end && edge == Edge::TailStart) {
                    gap.end + raw_offset(tail, hygiene, at - marker_end, edge) as u64
                } else if edge == Edge::HeadEnd {
                    gap.start
                } else {
                    gap.end
                }
            }
        }
    }

    /// The drained offsets of every byte left out: the buffer's gap and the text positions
    /// `kept` (the end of the kept head, the start of the kept tail) cut away.
    pub(super) fn left_out(
        &self,
        kept: Option<(usize, usize)>,
        hygiene: Hygiene,
    ) -> Option<Range<u64>> {
        let gap = match self {
            Self::Cut { gap, .. } => Some(gap.clone()),
            Self::Whole(_) => None,
        };
        let cut = kept
            .filter(|(head_end, tail_start)| head_end < tail_start)
            .map(|(head_end, tail_start)| {
                self.raw_at(head_end, Edge::HeadEnd, hygiene)
                    ..self.raw_at(tail_start, Edge::TailStart, hygiene)
            })
            .filter(|r| r.start < r.end);
        match (gap, cut) {
            (Some(a), Some(b)) => Some(a.start.min(b.start)..a.end.max(b.end)),
            (a, b) => a.or(b),
        }
    }
}
