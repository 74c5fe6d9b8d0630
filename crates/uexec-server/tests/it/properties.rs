//! Property tests of the pure parts: stdio framing, chunk splitting, retention and paging.

use bytes::Bytes;
use proptest::prelude::*;
use uexec_protocol::OutputStream;
use uexec_server::process::retention::{split_chunk, RetainedChunk, Retention};
use uexec_server::transport::lines::{Frame, LineFramer};

fn frame_all(max: usize, data: &[u8], cuts: &[usize]) -> Vec<Frame> {
    let mut framer = LineFramer::new(max);
    let mut out = Vec::new();
    let mut start = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    points.sort_unstable();
    for p in points.into_iter().chain([data.len()]) {
        framer.push(&data[start..p.max(start)], &mut out);
        start = p.max(start);
    }
    out.extend(framer.finish());
    out
}

proptest! {
    #[test]
    fn lines_survive_any_split(
        lines in prop::collection::vec(prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n' && *b != b'\r'), 0..40), 0..12),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let data: Vec<u8> = lines.iter().flat_map(|l| l.iter().copied().chain([b'\n'])).collect();
        let expected: Vec<Frame> = lines.iter().map(|l| Frame::Line(l.clone())).collect();
        prop_assert_eq!(frame_all(1024, &data, &cuts), expected);
    }

    #[test]
    fn oversized_lines_are_flagged_and_the_rest_survives(
        lines in prop::collection::vec(prop::collection::vec(b'a'..=b'z', 0..30), 1..12),
        max in 1usize..20,
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let data: Vec<u8> = lines.iter().flat_map(|l| l.iter().copied().chain([b'\n'])).collect();
        let expected: Vec<Frame> = lines
            .iter()
            .map(|l| if l.len() > max { Frame::Oversized } else { Frame::Line(l.clone()) })
            .collect();
        prop_assert_eq!(frame_all(max, &data, &cuts), expected);
    }

    #[test]
    fn split_pieces_are_bounded_and_rejoin(data in prop::collection::vec(any::<u8>(), 0..5000), max in 1usize..700) {
        let pieces: Vec<Bytes> = split_chunk(Bytes::from(data.clone()), max).collect();
        prop_assert!(pieces.iter().all(|p| !p.is_empty() && p.len() <= max));
        prop_assert_eq!(pieces.concat(), data);
    }

    #[test]
    fn retention_keeps_the_newest_whole_chunks_within_budget(
        sizes in prop::collection::vec(1usize..300, 1..80),
        budget in 300usize..3000,
    ) {
        let mut retention = Retention::new(budget);
        for (i, size) in sizes.iter().enumerate() {
            retention.push(RetainedChunk {
                seq: i as u64 + 1,
                stream: OutputStream::Stdout,
                bytes: Bytes::from(vec![b'x'; *size]),
            });
        }
        let kept = retention.select(0, None);
        let total: usize = kept.iter().map(|c| c.bytes.len()).sum();
        prop_assert!(total <= budget);
        // The kept chunks are a suffix of what was pushed ...
        let n = kept.len();
        prop_assert!(n >= 1);
        let first_kept = sizes.len() - n;
        prop_assert_eq!(kept[0].seq, first_kept as u64 + 1);
        // ... and the longest one that fits.
        if first_kept > 0 {
            prop_assert!(total + sizes[first_kept - 1] > budget);
        }
    }

    #[test]
    fn paging_with_max_bytes_returns_everything_in_order(
        sizes in prop::collection::vec(1usize..50, 0..40),
        page in 0u64..120,
    ) {
        let mut retention = Retention::new(usize::MAX);
        for (i, size) in sizes.iter().enumerate() {
            retention.push(RetainedChunk {
                seq: i as u64 + 1,
                stream: OutputStream::Stderr,
                bytes: Bytes::from(vec![b'y'; *size]),
            });
        }
        let mut cursor = 0;
        let mut seen = Vec::new();
        loop {
            let chunks = retention.select(cursor, Some(page));
            if chunks.is_empty() { break; }
            let bytes: u64 = chunks.iter().map(|c| c.bytes.len() as u64).sum();
            prop_assert!(chunks.len() == 1 || bytes <= page);
            cursor = chunks.last().map(|c| c.seq).unwrap_or(cursor);
            seen.extend(chunks.into_iter().map(|c| c.seq));
        }
        prop_assert_eq!(seen, (1..=sizes.len() as u64).collect::<Vec<_>>());
    }
}
