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

    proptest! {
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
