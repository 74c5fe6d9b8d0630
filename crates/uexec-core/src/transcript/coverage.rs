//! Which part of the bytes a result left out a transcript has: the one place that decides
//! what a result may promise `read_output` has.
//!
//! A cut `A..B` (session offsets) meets a transcript that keeps `first_kept..total`:
//! - `max(A, first_kept)..min(B, total)` is on disk: `read_output` has it;
//! - what lies before `first_kept` rotated away (the per-session cap keeps the newest bytes);
//! - what lies from `total` on is lost if the transcript stopped, else still on its way to
//!   disk (the writer runs behind the output by at most its queue).

use std::ops::Range;

use super::TranscriptInfo;

/// What a transcript has of the bytes a result left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OmittedCoverage {
    /// On disk: `read_output` has these.
    pub readable: Option<Range<u64>>,
    /// Rotated away before the result was made.
    pub rotated: Option<Range<u64>>,
    /// Not on disk: lost when the transcript stopped ([`TranscriptInfo::stop`]), else still
    /// being written.
    pub unwritten: Option<Range<u64>>,
}

impl OmittedCoverage {
    /// Whether the transcript has every byte of the cut.
    pub fn complete(&self) -> bool {
        self.rotated.is_none() && self.unwritten.is_none()
    }
}

/// What `info` has of the cut `omitted` ([the module docs](self)).
pub fn coverage(omitted: &Range<u64>, info: &TranscriptInfo) -> OmittedCoverage {
    let non_empty = |r: Range<u64>| (r.start < r.end).then_some(r);
    if info.stop.as_ref().is_some_and(|s| s.deleted) {
        // Deleted under it: nothing of the cut is on disk any more.
        return OmittedCoverage {
            readable: None,
            rotated: None,
            unwritten: non_empty(omitted.clone()),
        };
    }
    let kept_from = info.first_kept.clamp(omitted.start, omitted.end);
    let kept_to = info.total.clamp(kept_from, omitted.end);
    OmittedCoverage {
        readable: non_empty(kept_from..kept_to),
        rotated: non_empty(omitted.start..kept_from),
        unwritten: non_empty(kept_to..omitted.end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::TranscriptStop;

    fn info(first_kept: u64, total: u64) -> TranscriptInfo {
        TranscriptInfo {
            dir: "/t".into(),
            total,
            first_kept,
            stop: None,
        }
    }

    #[test]
    fn a_cut_within_what_is_kept_is_readable_whole() {
        let c = coverage(&(100..200), &info(0, 1000));
        assert_eq!(c.readable, Some(100..200));
        assert!(c.complete());
    }

    #[test]
    fn a_transcript_that_stopped_inside_the_cut_has_the_part_before_the_stop() {
        let mut stopped = info(0, 150);
        stopped.stop = Some(TranscriptStop {
            at: 150,
            error: "No space left on device".into(),
            deleted: false,
        });
        let c = coverage(&(100..200), &stopped);
        assert!(!c.complete());
        assert_eq!(
            (c.readable, c.rotated, c.unwritten),
            (Some(100..150), None, Some(150..200))
        );
    }

    #[test]
    fn a_transcript_that_stopped_before_the_cut_has_none_of_it() {
        let c = coverage(&(100..200), &info(0, 40));
        assert_eq!((c.readable, c.unwritten), (None, Some(100..200)));
        let c = coverage(&(100..200), &info(0, 0));
        assert_eq!((c.readable, c.unwritten), (None, Some(100..200)));
    }

    #[test]
    fn what_rotated_away_is_not_readable() {
        let c = coverage(&(100..200), &info(160, 1000));
        assert_eq!((c.rotated, c.readable), (Some(100..160), Some(160..200)));
        let c = coverage(&(100..200), &info(300, 1000));
        assert_eq!(
            (c.rotated, c.readable, c.unwritten),
            (Some(100..200), None, None)
        );
    }

    #[test]
    fn both_ends_can_be_missing_at_once() {
        let c = coverage(&(100..200), &info(120, 180));
        assert_eq!(
            (c.rotated, c.readable, c.unwritten),
            (Some(100..120), Some(120..180), Some(180..200))
        );
    }

    #[test]
    fn a_transcript_deleted_under_its_writer_has_nothing_of_the_cut() {
        let mut deleted = info(0, 1000);
        deleted.stop = Some(TranscriptStop::deleted(1000));
        let c = coverage(&(100..200), &deleted);
        assert_eq!(
            (c.readable, c.rotated, c.unwritten),
            (None, None, Some(100..200))
        );
    }
}
