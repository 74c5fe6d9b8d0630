//! What a body leaves out, and says it left out (`super::super::omitted`), on real
//! floods and on random bytes through every hygiene.
use proptest::prelude::*;

use crate::output::buffer::HeadTailBuffer;
use crate::output::snapshot::{truncation_warning, Body};
use crate::output::Hygiene;

/// What `seq N` prints.
fn seq(n: u32) -> Vec<u8> {
    (1..=n)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect()
}

/// What a body shows of the output: its text after the warning, without the marks of
/// its cuts (`[… N bytes omitted …]` unless the token budget cut into it, then `…N
/// tokens truncated…`), and where the first mark was.
fn shown(body: &Body) -> (String, usize) {
    let warning_len = body.omitted.as_ref().map_or(0, |o| o.warning_len);
    let mut text = body.text[warning_len..].to_owned();
    let mut first = text.len();
    if let Some(at) = text.find("[\u{2026} ") {
        if let Some(len) = text[at..].find(" \u{2026}]") {
            if !text[at..at + len].contains("tokens truncated") {
                text.replace_range(at..at + len + " \u{2026}]".len(), "");
                first = at;
            }
        }
    }
    if let Some(end) = text.find(" tokens truncated\u{2026}") {
        let at = text[..end].rfind('\u{2026}').expect("the mark's start");
        text.replace_range(at..end + " tokens truncated\u{2026}".len(), "");
        first = first.min(at);
    }
    (text, first)
}

#[test]
fn a_truncated_flood_names_every_byte_it_left_out_and_counts_every_line() {
    let all = seq(200_000);
    let mut buffer = HeadTailBuffer::new(1 << 20);
    for chunk in all.chunks(4096) {
        buffer.push(chunk);
    }
    let body = Body::cleaned(&buffer.drain(), 200, Hygiene::default());
    let o = body.omitted.clone().expect("bytes were left out");
    let (text, cut) = shown(&body);
    // Not the buffer's cut alone (524288..764607): all the token budget cut too.
    assert_eq!(o.range, 400..all.len() as u64 - 400);
    assert_eq!(cut, 400);
    assert_eq!(
        text.as_bytes(),
        [&all[..400], &all[all.len() - 400..]].concat()
    );
    assert_eq!(o.lines, 200_000);
    // Codex's warning counts the lines of the text it kept.
    assert_eq!(o.warning_len, truncation_warning(322_224, 164_131).len());
    assert!(body.text.starts_with(&truncation_warning(322_224, 164_131)));
}

#[test]
fn a_body_within_its_budget_leaves_out_only_the_buffer_s_cut() {
    let all = seq(1000);
    let mut buffer = HeadTailBuffer::new(64);
    buffer.push(&all);
    let body = Body::cleaned(&buffer.drain(), 10_000, Hygiene::default());
    let o = body.omitted.expect("the buffer's cut");
    assert_eq!(o.range, 32..all.len() as u64 - 32);
    assert_eq!((o.lines, o.warning_len), (1000, 0));
    let whole = Body::cleaned(
        &crate::output::buffer::Drained {
            head: all.clone(),
            ..Default::default()
        },
        10_000,
        Hygiene::default(),
    );
    assert_eq!(whole.omitted, None, "nothing left out, nothing said");
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            4 => b'a'..=b'e',
            2 => Just(b'\n'),
            1 => Just(b'\r'),
            1 => Just(0x1b),
            1 => Just(b'['),
            1 => Just(b'm'),
            1 => Just(0xc3),
            1 => Just(0xa9),
            1 => Just(0xff),
        ],
        0..300,
    )
}

proptest! {
    /// Whatever was cut, cleaned or dropped: the text shows every byte before the range
    /// at its start and every byte after it at its end, and counts every line.
    #[test]
    fn every_byte_outside_the_range_is_shown(
        chunks in proptest::collection::vec(bytes(), 1..6),
        capacity in 8usize..200,
        tokens in 0u64..60,
        strip_ansi in any::<bool>(),
        collapse_cr in any::<bool>(),
    ) {
        let hygiene = Hygiene { strip_ansi, collapse_cr };
        let clean = |raw: &[u8]| hygiene.apply(String::from_utf8_lossy(raw).into_owned());
        let all = chunks.concat();
        let mut buffer = HeadTailBuffer::new(capacity);
        for c in &chunks {
            buffer.push(c);
        }
        let drained = buffer.drain();
        let body = Body::cleaned(&drained, tokens, hygiene);
        let Some(o) = body.omitted.clone() else {
            prop_assert_eq!(drained.omitted_bytes, 0);
            prop_assert!(!body.text.starts_with("Warning: truncated output"));
            return Ok(());
        };
        let (text, _) = shown(&body);
        let (a, b) = (o.range.start as usize, o.range.end as usize);
        prop_assert!(a < b && b <= all.len(), "{:?} of {}", o.range, all.len());
        prop_assert!(text.starts_with(&clean(&all[..a])), "{:?} before {:?}", text, o.range);
        prop_assert!(text.ends_with(&clean(&all[b..])), "{:?} after {:?}", text, o.range);
        prop_assert_eq!(o.lines, String::from_utf8_lossy(&all).lines().count() as u64);
    }
}
