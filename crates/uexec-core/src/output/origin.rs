//! Where a position in a cleaned text comes from in the bytes the command printed, so that
//! a result that cut its text names the session bytes it left out, not offsets in a text
//! the session never printed.
//!
//! A text is made from raw bytes in up to three steps, each undone here in reverse order:
//! 1. lossy decoding: a valid run maps byte for byte, an invalid one (1 to 3 bytes) becomes
//!    one U+FFFD (3 bytes);
//! 2. `strip_ansi`: kept bytes keep their order, escape sequences go;
//! 3. `collapse_cr`: a line without a carriage return in it stays as it is; one with some is
//!    redrawn as a terminal shows it, so its characters no longer sit where they were
//!    printed: a position inside it maps to the whole line (its start seen from the head
//!    of a cut, its end seen from the tail), which widens a cut to that line, never
//!    narrows it.
//!
//! An [`Edge`] says which side of a cut a position is: everything mapped before a head edge
//! is in the text before it, everything mapped after a tail edge is in the text after it.

use std::borrow::Cow;

use super::text::{collapse_cr, strip_ansi, AnsiStripper};
use super::Hygiene;

/// Which side of a cut a text position is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edge {
    /// The text before the position is shown: maps to the first raw byte not shown.
    HeadEnd,
    /// The text from the position on is shown: maps to the first raw byte shown.
    TailStart,
}

/// Where position `at` of `hygiene.apply(lossy(raw))` falls in `raw`, seen from `edge`.
pub(crate) fn raw_offset(raw: &[u8], hygiene: Hygiene, at: usize, edge: Edge) -> usize {
    let decoded = String::from_utf8_lossy(raw);
    if matches!(decoded, Cow::Borrowed(_)) && hygiene == Hygiene::default() {
        return at.min(raw.len());
    }
    let stripped = if hygiene.strip_ansi {
        Cow::Owned(strip_ansi(&decoded))
    } else {
        Cow::Borrowed(decoded.as_ref())
    };
    let at = if hygiene.collapse_cr {
        before_collapse(&stripped, at, edge)
    } else {
        at
    };
    let at = if hygiene.strip_ansi {
        before_strip(decoded.as_bytes(), at, edge)
    } else {
        at
    };
    before_decode(raw, at, edge)
}

/// Position `at` of `collapse_cr(s)`, in `s`.
fn before_collapse(s: &str, at: usize, edge: Edge) -> usize {
    let (mut from, mut to) = (0, 0);
    for line in s.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let redrawn = body.trim_end_matches('\r').contains('\r');
        let shown = if redrawn {
            collapse_cr(line).len()
        } else {
            line.len()
        };
        if at == to {
            return from;
        }
        if at < to + shown {
            return match (redrawn, edge) {
                (false, _) => from + (at - to),
                (true, Edge::HeadEnd) => from,
                (true, Edge::TailStart) => from + line.len(),
            };
        }
        from += line.len();
        to += shown;
    }
    from
}

/// Position `at` of `strip_ansi(s)`, in `s`: the kept byte at `at` (head), or just after
/// the kept byte before it (tail); the escape sequences between them are in neither text.
fn before_strip(s: &[u8], at: usize, edge: Edge) -> usize {
    let mut found = None;
    let mut kept = 0;
    AnsiStripper::default().feed(s, |i, _| {
        let wanted = match edge {
            Edge::HeadEnd => kept == at,
            Edge::TailStart => kept + 1 == at,
        };
        if wanted && found.is_none() {
            found = Some(match edge {
                Edge::HeadEnd => i,
                Edge::TailStart => i + 1,
            });
        }
        kept += 1;
    });
    match (found, edge) {
        (Some(i), _) => i,
        (None, Edge::TailStart) if at == 0 => 0,
        (None, _) => s.len(),
    }
}

/// Position `at` of `String::from_utf8_lossy(raw)`, in `raw`.
fn before_decode(raw: &[u8], at: usize, edge: Edge) -> usize {
    let (mut from, mut to) = (0, 0);
    for chunk in raw.utf8_chunks() {
        let valid = chunk.valid().len();
        if at <= to + valid {
            return from + (at - to);
        }
        from += valid;
        to += valid;
        let invalid = chunk.invalid().len();
        if invalid > 0 {
            let replaced = char::REPLACEMENT_CHARACTER.len_utf8();
            if at < to + replaced {
                // Inside U+FFFD (never at a character boundary): the whole of it.
                return match edge {
                    Edge::HeadEnd => from,
                    Edge::TailStart => from + invalid,
                };
            }
            from += invalid;
            to += replaced;
        }
    }
    from
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BOTH: Hygiene = Hygiene {
        strip_ansi: true,
        collapse_cr: true,
    };

    fn clean(raw: &[u8], hygiene: Hygiene) -> String {
        hygiene.apply(String::from_utf8_lossy(raw).into_owned())
    }

    #[test]
    fn plain_text_maps_byte_for_byte() {
        let raw = b"hello\nworld\n";
        for at in 0..=raw.len() {
            for edge in [Edge::HeadEnd, Edge::TailStart] {
                assert_eq!(raw_offset(raw, Hygiene::default(), at, edge), at);
            }
        }
    }

    #[test]
    fn escape_sequences_between_kept_bytes_are_on_neither_side() {
        let raw = b"ab\x1b[1mcd\x1b[0m\n";
        let h = Hygiene {
            strip_ansi: true,
            ..Hygiene::default()
        };
        assert_eq!(clean(raw, h), "abcd\n");
        // The cut after "ab": the head ends before `c`, the tail starts after `b`.
        assert_eq!(raw_offset(raw, h, 2, Edge::HeadEnd), 6);
        assert_eq!(raw_offset(raw, h, 2, Edge::TailStart), 2);
        assert_eq!(raw_offset(raw, h, 4, Edge::TailStart), 8);
        assert_eq!(raw_offset(raw, h, 5, Edge::HeadEnd), raw.len());
        assert_eq!(raw_offset(raw, h, 0, Edge::TailStart), 0);
    }

    #[test]
    fn a_redrawn_line_counts_whole() {
        let raw = "one\n10%\r99%\rdone\ntwo\n".as_bytes();
        let h = Hygiene {
            collapse_cr: true,
            ..Hygiene::default()
        };
        assert_eq!(clean(raw, h), "one\ndone\ntwo\n");
        assert_eq!(raw_offset(raw, h, 2, Edge::HeadEnd), 2);
        // Inside `done`: the whole line `10%\r99%\rdone\n`, raw 4..17.
        assert_eq!(raw_offset(raw, h, 6, Edge::HeadEnd), 4);
        assert_eq!(raw_offset(raw, h, 6, Edge::TailStart), 17);
        assert_eq!(raw_offset(raw, h, 4, Edge::TailStart), 4);
        assert_eq!(raw_offset(raw, h, 9, Edge::HeadEnd), 17);
        assert_eq!(raw_offset(raw, h, 10, Edge::HeadEnd), 18);
    }

    #[test]
    fn an_invalid_byte_is_its_replacement_character() {
        let raw = b"a\xffb";
        assert_eq!(clean(raw, Hygiene::default()), "a\u{fffd}b");
        assert_eq!(raw_offset(raw, Hygiene::default(), 1, Edge::HeadEnd), 1);
        assert_eq!(raw_offset(raw, Hygiene::default(), 4, Edge::HeadEnd), 2);
        assert_eq!(raw_offset(raw, Hygiene::default(), 4, Edge::TailStart), 2);
        assert_eq!(raw_offset(raw, Hygiene::default(), 5, Edge::TailStart), 3);
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![
                Just(b'\n'),
                Just(b'\r'),
                Just(0x1b),
                Just(b'['),
                Just(b'm'),
                Just(0xc3),
                Just(0xa9),
                Just(0xff),
                b'a'..=b'e',
            ],
            0..80,
        )
    }

    proptest! {
        /// Whatever was cleaned: the raw bytes before a head edge are in the text before
        /// it, those after a tail edge in the text after it; a plain text maps exactly.
        #[test]
        fn what_is_outside_the_edges_is_in_the_text(
            raw in bytes(),
            strip_ansi in any::<bool>(),
            collapse_cr in any::<bool>(),
            at in 0usize..200,
        ) {
            let h = Hygiene { strip_ansi, collapse_cr };
            let text = clean(&raw, h);
            let mut at = at.min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let head = raw_offset(&raw, h, at, Edge::HeadEnd);
            let tail = raw_offset(&raw, h, at, Edge::TailStart);
            prop_assert!(head <= raw.len() && tail <= raw.len());
            prop_assert!(text[..at].starts_with(&clean(&raw[..head], h)),
                "head {head}: {:?} in {:?}", clean(&raw[..head], h), &text[..at]);
            prop_assert!(text[at..].ends_with(&clean(&raw[tail..], h)),
                "tail {tail}: {:?} in {:?}", clean(&raw[tail..], h), &text[at..]);
            if h == Hygiene::default() && std::str::from_utf8(&raw).is_ok() {
                prop_assert_eq!((head, tail), (at, at));
            }
        }
    }

    #[test]
    fn both_steps_compose() {
        let raw = b"\x1b[32mok\x1b[0m\n10%\r\x1b[Kdone\nend";
        assert_eq!(clean(raw, BOTH), "ok\ndone\nend");
        // Inside the redrawn line: all of it, escapes included.
        assert_eq!(raw_offset(raw, BOTH, 5, Edge::HeadEnd), 12);
        assert_eq!(raw_offset(raw, BOTH, 5, Edge::TailStart), 24);
        // Before the line end: the escape sequence before it is on neither side.
        assert_eq!(raw_offset(raw, BOTH, 2, Edge::HeadEnd), 11);
        assert_eq!(raw_offset(raw, BOTH, 2, Edge::TailStart), 7);
    }
}
