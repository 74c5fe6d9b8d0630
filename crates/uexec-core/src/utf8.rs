//! Cutting byte streams on UTF-8 boundaries without ever stalling on invalid input.

/// Largest `n <= max` such that `bytes[..n]` ends on a UTF-8 boundary; when no boundary exists
/// in that range (invalid bytes, or `max` smaller than one character), `max` itself, so a
/// splitter always makes progress.
pub fn boundary_at_or_before(bytes: &[u8], max: usize) -> usize {
    if bytes.len() <= max {
        return bytes.len();
    }
    // A boundary is any index whose byte is not a continuation byte (10xxxxxx).
    let mut i = max;
    while i > 0 && max - i < 4 && is_continuation(bytes[i]) {
        i -= 1;
    }
    if i == 0 || is_continuation(bytes[i]) {
        max
    } else {
        i
    }
}

/// Smallest `n >= min` such that `bytes[n..]` starts on a UTF-8 boundary (at most 3 bytes on).
pub fn boundary_at_or_after(bytes: &[u8], min: usize) -> usize {
    let mut i = min;
    while i < bytes.len() && i - min < 3 && is_continuation(bytes[i]) {
        i += 1;
    }
    i
}

/// Length (0..=3) of the end of `bytes` that is the valid beginning of a character still to
/// be completed by bytes not yet read: a lead byte followed by fewer continuation bytes than
/// it announces, each in its allowed range. Bytes that can never become a character count 0,
/// so they are decoded (as U+FFFD) rather than held back forever.
pub fn incomplete_suffix_len(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let start = bytes.len() - back;
        let lead = bytes[start];
        if is_continuation(lead) {
            continue;
        }
        let (needed, second) = match lead {
            0xC2..=0xDF => (2, 0x80..=0xBF),
            0xE0 => (3, 0xA0..=0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (3, 0x80..=0xBF),
            0xED => (3, 0x80..=0x9F),
            0xF0 => (4, 0x90..=0xBF),
            0xF1..=0xF3 => (4, 0x80..=0xBF),
            0xF4 => (4, 0x80..=0x8F),
            _ => return 0,
        };
        let tail = &bytes[start + 1..];
        let valid = back < needed
            && tail.first().is_none_or(|b| second.contains(b))
            && tail.iter().skip(1).all(|&b| is_continuation(b));
        return if valid { back } else { 0 };
    }
    0
}

/// Joins reads of a byte stream into pieces that end on character boundaries: an incomplete
/// character at the end of one read waits (at most 3 bytes) for the next.
#[derive(Debug, Default, Clone)]
pub struct Utf8Carry {
    held: Vec<u8>,
}

impl Utf8Carry {
    /// `bytes` with what was held before in front, minus an incomplete character at the end,
    /// which is held for the next call.
    pub fn join(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut joined = std::mem::take(&mut self.held);
        joined.extend_from_slice(bytes);
        let keep = incomplete_suffix_len(&joined);
        self.held = joined.split_off(joined.len() - keep);
        joined
    }

    /// What is held, at the end of the stream (it will never be completed).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Splits `bytes` into chunks of at most `max` bytes (`max >= 1`), each ending on a UTF-8
/// boundary when one exists.
pub fn split_chunks(bytes: &[u8], max: usize) -> impl Iterator<Item = &[u8]> {
    let max = max.max(1);
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = boundary_at_or_before(rest, max).max(1);
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ascii_splits_at_max() {
        let v: Vec<_> = split_chunks(b"abcdefg", 3).collect();
        assert_eq!(v, vec![&b"abc"[..], b"def", b"g"]);
    }

    #[test]
    fn multibyte_is_not_cut() {
        let s = "aéé".as_bytes(); // 1 + 2 + 2
        let v: Vec<_> = split_chunks(s, 2).collect();
        assert_eq!(v, vec![&b"a"[..], "é".as_bytes(), "é".as_bytes()]);
        let s = "€€".as_bytes(); // 3 + 3
        let v: Vec<_> = split_chunks(s, 4).collect();
        assert_eq!(v, vec!["€".as_bytes(), "€".as_bytes()]);
    }

    #[test]
    fn invalid_bytes_still_progress() {
        let s = [0x80u8; 10];
        let v: Vec<_> = split_chunks(&s, 4).collect();
        assert_eq!(v.iter().map(|c| c.len()).collect::<Vec<_>>(), vec![4, 4, 2]);
        // A character wider than max is cut rather than looping.
        let v: Vec<_> = split_chunks("€".as_bytes(), 1).collect();
        assert_eq!(v.len(), 3);
    }

    #[test]
    fn boundaries_for_truncation() {
        let s = "aéb".as_bytes(); // a, c3 a9, b
        assert_eq!(boundary_at_or_before(s, 2), 1);
        assert_eq!(boundary_at_or_after(s, 2), 3);
        assert_eq!(boundary_at_or_after(s, 1), 1);
    }

    #[test]
    fn incomplete_characters_are_recognised_and_invalid_ones_are_not() {
        assert_eq!(incomplete_suffix_len(b"abc"), 0);
        assert_eq!(incomplete_suffix_len(b"a\xc3"), 1);
        assert_eq!(incomplete_suffix_len("é".as_bytes()), 0);
        assert_eq!(incomplete_suffix_len(b"\xe2\x82"), 2);
        assert_eq!(incomplete_suffix_len(b"\xf0\x9f\x98"), 3);
        assert_eq!(incomplete_suffix_len(b"\xf0\x9f\x98\x80"), 0);
        // Never valid: a stray continuation, an overlong lead, a surrogate, beyond U+10FFFF.
        assert_eq!(incomplete_suffix_len(b"\x80"), 0);
        assert_eq!(incomplete_suffix_len(b"\xc0"), 0);
        assert_eq!(incomplete_suffix_len(b"\xed\xa0"), 0);
        assert_eq!(incomplete_suffix_len(b"\xf5"), 0);
        assert_eq!(incomplete_suffix_len(b"\xe0\x80"), 0);
    }

    #[test]
    fn a_character_split_across_reads_is_joined() {
        let mut carry = Utf8Carry::default();
        assert_eq!(carry.join(b"a\xc3"), b"a");
        assert_eq!(carry.join(b"\xa9\n"), "é\n".as_bytes());
        assert_eq!(carry.join(b"\xe2"), b"");
        assert_eq!(carry.finish(), b"\xe2");
    }

    proptest! {
        #[test]
        fn carried_reads_decode_like_the_whole_stream(
            s in ".{0,60}",
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let bytes = s.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut carry = Utf8Carry::default();
            let mut text = String::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain(std::iter::once(bytes.len())) {
                let piece = carry.join(&bytes[from..cut]);
                text.push_str(std::str::from_utf8(&piece).expect("whole characters"));
                from = cut;
            }
            prop_assert!(carry.finish().is_empty());
            prop_assert_eq!(text, s);
        }

        #[test]
        fn chunks_reassemble_and_valid_text_stays_valid(s in ".{0,200}", max in 1usize..16) {
            let chunks: Vec<_> = split_chunks(s.as_bytes(), max).collect();
            prop_assert_eq!(chunks.concat(), s.as_bytes().to_vec());
            for c in &chunks {
                prop_assert!(c.len() <= max);
                if max >= 4 { prop_assert!(std::str::from_utf8(c).is_ok()); }
            }
        }

        #[test]
        fn arbitrary_bytes_reassemble(b in proptest::collection::vec(any::<u8>(), 0..300), max in 1usize..20) {
            let chunks: Vec<_> = split_chunks(&b, max).collect();
            prop_assert_eq!(chunks.concat(), b);
        }
    }
}
