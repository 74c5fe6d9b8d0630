//! The fuzz targets' bodies, shared by `cargo fuzz` (`fuzz/fuzz_targets/*.rs`) and the stable
//! corpus replay (`crates/uexec/tests/it/fuzz_corpus.rs`), so the two cannot drift. Each body
//! takes the fuzzer's bytes and checks properties, not only the absence of panics.
#![allow(dead_code)] // each fuzz target uses one body; the replay uses them all

use serde_json::{Map, Value};
use uexec_client::sequencer::Sequencer;
use uexec_core::buffer::{Drained, HeadTailBuffer};
use uexec_core::snapshot::{truncate, Body};
use uexec_core::utf8::split_chunks;
use uexec_protocol::jsonrpc::{parse, Incoming};

/// A fuzz target's body: panics when a property does not hold.
pub type TargetBody = fn(&[u8]);

/// The targets by name: the name is also the corpus directory (`fuzz/corpus/NAME`).
pub const TARGETS: &[(&str, TargetBody)] = &[
    ("jsonrpc_frame", jsonrpc_frame),
    ("mcp_args", mcp_args),
    ("head_tail", head_tail),
    ("truncate", truncate_text),
    ("sequencer", sequencer),
];

/// Longest header `truncate` puts before the kept text: the warning line, the line count and
/// the marker between head and tail, each number at most 20 digits.
const TRUNCATION_HEADER_MAX_BYTES: usize = 160;

/// `uexec_protocol::jsonrpc::parse`: a frame it accepts is a JSON object whose `method` (if
/// any) is the one it reports.
pub fn jsonrpc_frame(data: &[u8]) {
    let Ok(message) = parse(data) else { return };
    let value: Value = match serde_json::from_slice(data) {
        Ok(value) => value,
        Err(e) => panic!("parse accepted a frame serde_json rejects: {e}"),
    };
    let Value::Object(object) = value else {
        panic!("parse accepted a non-object: {value}");
    };
    match &message {
        Incoming::Request { method, .. } | Incoming::Notification { method, .. } => {
            assert_eq!(object.get("method"), Some(&Value::String(method.clone())));
        }
        Incoming::Response { .. } => assert!(object.get("method").is_none()),
    }
    assert_eq!(
        matches!(message, Incoming::Notification { .. }),
        object.get("method").is_some() && object.get("id").is_none(),
        "a notification is a message with a method and no id"
    );
}

/// `uexec_mcp::tools::{exec_command, write_stdin}::request`: first byte selects
/// `environments`, the rest is the arguments object. Accepted arguments hold only known
/// fields and the required ones; a refusal names the field at fault (one given, or a known
/// one).
pub fn mcp_args(data: &[u8]) {
    let Some((&flags, json)) = data.split_first() else {
        return;
    };
    let Ok(Value::Object(args)) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let environments = flags & 1 == 1;
    let extended = flags & 4 == 4;
    let dialect = uexec_mcp::tools::parse::Dialect {
        environments,
        extended,
        wrapped: flags & 8 == 8,
    };
    let args = Some(&args).filter(|_| flags & 2 == 0);
    let empty = Map::new();
    let fields = args.unwrap_or(&empty);
    // A refusal inside `until` names its key: `until.pattern`.
    let given = |field: &str| {
        fields.contains_key(field)
            || field
                .strip_prefix("until.")
                .is_some_and(|_| fields.contains_key("until"))
    };
    match uexec_mcp::tools::exec_command::request(args, dialect) {
        Ok(request) => {
            for key in fields.keys() {
                assert!(
                    uexec_mcp::tools::exec_command::FIELDS.contains(&key.as_str())
                        || (environments && key == "environment_id")
                        || (extended
                            && uexec_mcp::tools::exec_command::EXTENDED_FIELDS
                                .contains(&key.as_str())),
                    "exec_command accepted the unknown field {key:?}"
                );
            }
            assert_eq!(fields.get("cmd"), Some(&Value::String(request.cmd)));
        }
        Err(e) => assert!(
            given(&e.field)
                || uexec_mcp::tools::exec_command::FIELDS.contains(&e.field.as_str())
                || e.field == "environment_id",
            "a refusal names neither a given nor a known field: {e}"
        ),
    }
    match uexec_mcp::tools::write_stdin::request(args, dialect) {
        Ok(request) => {
            for key in fields.keys() {
                assert!(
                    uexec_mcp::tools::write_stdin::FIELDS.contains(&key.as_str())
                        || (extended
                            && uexec_mcp::tools::write_stdin::EXTENDED_FIELDS
                                .contains(&key.as_str())),
                    "write_stdin accepted the unknown field {key:?}"
                );
            }
            // An integral number, whatever its JSON spelling (`3`, `3.0`, `-0`).
            assert_eq!(
                fields.get("session_id").and_then(Value::as_f64),
                Some(f64::from(request.session_id))
            );
        }
        Err(e) => assert!(
            given(&e.field) || uexec_mcp::tools::write_stdin::FIELDS.contains(&e.field.as_str()),
            "a refusal names neither a given nor a known field: {e}"
        ),
    }
}

/// `HeadTailBuffer` against a model that keeps every byte, then the UTF-8 splitter and the
/// snapshot body over what it kept. Bytes: capacity, then ops (`op`, `len`): an even `op`
/// pushes the next `len` bytes, an odd one drains (every third drain only peeks).
pub fn head_tail(data: &[u8]) {
    let Some((&capacity, mut rest)) = data.split_first() else {
        return;
    };
    let capacity = usize::from(capacity) + 1;
    let mut buffer = HeadTailBuffer::new(capacity);
    let mut model: Vec<u8> = Vec::new();
    let mut drains = 0u32;
    while let [op, len, tail @ ..] = rest {
        if op % 2 == 0 {
            let n = usize::from(*len).min(tail.len());
            buffer.push(&tail[..n]);
            model.extend_from_slice(&tail[..n]);
            rest = &tail[n..];
        } else {
            drains += 1;
            let drained = if drains.is_multiple_of(3) {
                buffer.peek()
            } else {
                buffer.drain()
            };
            check_drained(&drained, &model, capacity);
            check_body(&drained, u64::from(*len));
            if !drains.is_multiple_of(3) {
                model.clear();
            }
            rest = tail;
        }
    }
    let drained = buffer.drain();
    check_drained(&drained, &model, capacity);
    let kept = [drained.head.as_slice(), drained.tail.as_slice()].concat();
    for max in [1, 3, 4, capacity] {
        check_split(&kept, max);
    }
}

/// The buffer keeps a prefix and a suffix of what was pushed since the last drain, within
/// its capacity, and counts the rest.
fn check_drained(drained: &Drained, model: &[u8], capacity: usize) {
    let head_capacity = capacity / 2;
    assert_eq!(drained.head.len(), model.len().min(head_capacity));
    assert_eq!(drained.head, model[..drained.head.len()]);
    assert!(drained.kept_len() <= capacity);
    assert_eq!(
        drained.kept_len() as u64 + drained.omitted_bytes,
        model.len() as u64,
        "kept + omitted != pushed"
    );
    assert_eq!(drained.tail, model[model.len() - drained.tail.len()..]);
    if drained.omitted_bytes > 0 {
        assert_eq!(drained.tail.len(), capacity - head_capacity);
    }
}

fn check_body(drained: &Drained, max_output_tokens: u64) {
    let body = Body::from_drained(drained, max_output_tokens);
    let all = [drained.head.as_slice(), drained.tail.as_slice()].concat();
    let text = String::from_utf8_lossy(&all);
    if drained.omitted_bytes == 0 && text.len() as u64 <= max_output_tokens * 4 {
        assert_eq!(body.text, text);
    }
}

/// Chunks are non-empty, at most `max` bytes, rebuild the input, and cut valid UTF-8 only
/// between characters.
fn check_split(bytes: &[u8], max: usize) {
    let chunks: Vec<&[u8]> = split_chunks(bytes, max).collect();
    assert!(chunks.iter().all(|c| !c.is_empty() && c.len() <= max));
    assert_eq!(chunks.concat(), bytes);
    if max >= 4 && std::str::from_utf8(bytes).is_ok() {
        assert!(chunks.iter().all(|c| std::str::from_utf8(c).is_ok()));
    }
}

/// `uexec_core::snapshot::truncate`: first byte is the token budget, the rest the text (made
/// UTF-8). Within budget the text is returned as is; over it, the output is the header, a
/// prefix and a suffix of the text, within budget + header.
pub fn truncate_text(data: &[u8]) {
    let Some((&tokens, text)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    let max_output_tokens = u64::from(tokens);
    let budget = max_output_tokens as usize * 4;
    let out = truncate(&text, text.len() as u64, max_output_tokens);
    if text.len() <= budget {
        assert_eq!(out, text);
        return;
    }
    assert!(out.starts_with("Warning: truncated output"));
    assert!(
        out.len() <= budget + TRUNCATION_HEADER_MAX_BYTES,
        "{} bytes out for a budget of {budget}",
        out.len()
    );
    let removed_tokens = (text.len() - budget).div_ceil(4);
    let marker = format!("\u{2026}{removed_tokens} tokens truncated\u{2026}");
    let Some((_, kept)) = out.split_once("\n\n") else {
        panic!("no header in {out:?}");
    };
    assert!(
        kept.match_indices(&marker).any(|(at, _)| {
            text.starts_with(&kept[..at]) && text.ends_with(&kept[at + marker.len()..])
        }),
        "the output is not a prefix, the marker and a suffix of the text: {out:?}"
    );
}

/// The remote client's `Sequencer`: ops from bytes (push, skip_to, drain, over seqs near its
/// `next_seq`). It never delivers a seq twice nor out of order, never delivers a seq it gave
/// up (one below `next_seq` before the op), and holds nothing below `next_seq`.
pub fn sequencer(data: &[u8]) {
    let Some((&max_early, mut ops)) = data.split_first() else {
        return;
    };
    let mut sequencer = Sequencer::new(usize::from(max_early % 16), usize::MAX);
    let mut last_delivered = 0u64;
    while let [op, arg, rest @ ..] = ops {
        ops = rest;
        let before = sequencer.next_seq();
        let seq = (before + u64::from(*arg % 32)).saturating_sub(4).max(1);
        let out = match op % 8 {
            0..=5 => sequencer.push(seq, seq),
            6 => sequencer.skip_to(seq),
            _ => sequencer.drain(),
        };
        let after = sequencer.next_seq();
        assert!(after >= before, "next_seq went back");
        for &s in &out {
            assert!(
                s > last_delivered,
                "seq {s} delivered after {last_delivered}"
            );
            assert!(
                s >= before,
                "seq {s} delivered though below next_seq {before}"
            );
            assert!(s < after, "seq {s} delivered at or past next_seq {after}");
            last_delivered = s;
        }
        assert!(
            sequencer.early_seqs(0..after).is_empty(),
            "holds a seq below next_seq"
        );
        if op % 8 <= 5 && seq == before {
            assert_eq!(
                out.first(),
                Some(&seq),
                "the expected seq was not delivered"
            );
        }
    }
    for s in sequencer.drain() {
        assert!(s > last_delivered, "seq {s} drained after {last_delivered}");
        last_delivered = s;
    }
}
