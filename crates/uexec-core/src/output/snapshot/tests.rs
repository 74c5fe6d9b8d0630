//! The snapshot's unit tests: its text, its truncation, its body.
use super::*;

fn drained(bytes: &[u8]) -> Drained {
    Drained {
        head: bytes.to_vec(),
        ..Drained::default()
    }
}

#[test]
fn exited_text_layout() {
    let s = Snapshot::new(
        &drained(b"abcdefghij"),
        10_000,
        Duration::ZERO,
        Status::Exited { exit_code: Some(0) },
    );
    assert_eq!(
        s.to_text(),
        format!(
            "Chunk ID: {}\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 3\nOutput:\nabcdefghij",
            s.chunk_id
        )
    );
    assert_eq!(s.chunk_id.len(), 6);
    assert!(s
        .chunk_id
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
}

#[test]
fn annotated_text_puts_uexecs_lines_before_the_count() {
    let mut s = Snapshot::new(
        &drained(b"ok\n"),
        10_000,
        Duration::ZERO,
        Status::Exited {
            exit_code: Some(124),
        },
    );
    s.timed_out_ms = Some(500);
    assert_eq!(
        s.to_text_annotated(),
        format!(
            "Chunk ID: {}\nWall time: 0.0000 seconds\nProcess exited with code 124\nProcess timed out after 500 ms (SIGTERM, then SIGKILL); reported as exit code 124\nReason: exited\nOriginal token count: 1\nOutput:\nok\n",
            s.chunk_id
        )
    );
    let mut m = Snapshot::new(
        &drained(b"ready\n"),
        10_000,
        Duration::ZERO,
        Status::Running { session_id: 1000 },
    );
    m.reason = Reason::Matched;
    m.matched = Some(Match {
        text: "ready".into(),
        offset: 42,
    });
    assert!(m
        .to_text_annotated()
        .contains("Process running with session ID 1000\nReason: matched \"ready\" at output byte 42\nOriginal"));
}

#[test]
fn running_text_layout() {
    let s = Snapshot::new(
        &drained(b"READY"),
        10_000,
        Duration::from_millis(2003),
        Status::Running { session_id: 1000 },
    );
    assert!(s.to_text().ends_with(
        "Wall time: 2.0030 seconds\nProcess running with session ID 1000\nOriginal token count: 2\nOutput:\nREADY"
    ));
}

#[test]
fn truncation_of_999_lines_matches_the_contract() {
    let full: String = (1..1000)
        .map(|i| format!("EXEC-LINE-{i:04} {}\n", "x".repeat(20)))
        .collect();
    assert_eq!(full.len(), 35964);
    let body = Body::from_drained(&drained(full.as_bytes()), 50);
    assert_eq!(body.original_token_count, 8991);
    assert!(body.text.starts_with(
        "Warning: truncated output (original token count: 8991)\nTotal output lines: 999\n\n"
    ));
    assert!(body.text.contains("\u{2026}8941 tokens truncated\u{2026}"));
    let head = &full[..100];
    let tail = &full[full.len() - 100..];
    assert!(body.text.ends_with(&format!(
        "{head}\u{2026}8941 tokens truncated\u{2026}{tail}"
    )));
}

#[test]
fn truncation_cuts_on_utf8_boundaries() {
    let s = format!("a{}b", "é".repeat(100));
    let body = Body::from_drained(&drained(s.as_bytes()), 5);
    assert_eq!(body.original_token_count, 51);
    assert_eq!(
        body.text,
        format!(
            "Warning: truncated output (original token count: 51)\nTotal output lines: 1\n\na{}\u{2026}46 tokens truncated\u{2026}{}b",
            "é".repeat(4),
            "é".repeat(4)
        )
    );
}

#[test]
fn budget_boundary_is_inclusive() {
    let body = Body::from_drained(&drained(b"0123456789abcdefghij"), 5);
    assert_eq!(body.text, "0123456789abcdefghij");
    let body = Body::from_drained(&drained(b"0123456789abcdefghijk"), 5);
    assert_eq!(
        body.text,
        "Warning: truncated output (original token count: 6)\nTotal output lines: 1\n\n0123456789\u{2026}1 tokens truncated\u{2026}bcdefghijk"
    );
}

#[test]
fn omitted_bytes_are_marked_and_counted() {
    let d = Drained {
        head: b"HEAD".to_vec(),
        tail: b"TAIL".to_vec(),
        omitted_bytes: 1000,
        omitted_newlines: 0,
    };
    let body = Body::from_drained(&d, 10_000);
    assert_eq!(body.original_token_count, 252); // (8 + 1000) / 4
    assert_eq!(body.text, "HEAD[\u{2026} 1000 bytes omitted \u{2026}]TAIL");
    let body = Body::from_drained(&d, 1);
    assert!(body
        .text
        .starts_with("Warning: truncated output (original token count: 252)\n"));
    assert!(body.text.contains("\u{2026}251 tokens truncated\u{2026}"));
}

#[test]
fn invalid_utf8_is_replaced() {
    let body = Body::from_drained(&drained(&[b'a', 0xff, b'b']), 100);
    assert_eq!(body.text, "a\u{fffd}b");
    assert_eq!(body.original_token_count, 2); // 5 bytes as text
}

fn cut_snapshot(total: u64, first_kept: u64, stop_at: Option<u64>) -> Snapshot {
    use crate::transcript::{coverage, TranscriptInfo, TranscriptStop};
    let mut s = Snapshot::new(
        &drained(b"x"),
        100,
        Duration::ZERO,
        Status::Exited { exit_code: Some(0) },
    );
    let stop = stop_at.map(|at| TranscriptStop {
        at,
        error: "No space left on device".into(),
        deleted: false,
    });
    let info = TranscriptInfo {
        dir: "/t/1000-abcdef".into(),
        total,
        first_kept,
        stop: stop.clone(),
    };
    s.transcript = Some(info.dir.clone());
    s.omitted_range = Some(Omitted {
        range: 100..200,
        lines: 0,
        warning_len: 0,
    });
    s.omitted_coverage = Some(coverage(&(100..200), &info));
    s.transcript_stop = stop;
    s
}

#[test]
fn the_transcript_line_promises_only_the_bytes_on_disk() {
    let line = |s: Snapshot| s.transcript_line().expect("a cut names the transcript");
    assert_eq!(
        line(cut_snapshot(1000, 0, None)),
        "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has them)"
    );
    assert_eq!(
        line(cut_snapshot(150, 0, Some(150))),
        "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has 100..150; \
         150..200 are lost: the transcript stopped at byte 150: No space left on device)"
    );
    assert_eq!(
        line(cut_snapshot(50, 0, Some(50))),
        "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has none of them; \
         100..200 are lost: the transcript stopped at byte 50: No space left on device)"
    );
    assert_eq!(
        line(cut_snapshot(900, 0, Some(900))),
        "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has them; \
         the transcript stopped at byte 900: No space left on device)"
    );
    assert_eq!(
        line(cut_snapshot(170, 120, None)),
        "Transcript: /t/1000-abcdef (bytes 100..200 left out here; read_output has 120..170; \
         100..120 rotated away; 170..200 are still being written)"
    );
}

#[test]
fn a_transcript_that_could_not_be_made_says_the_cut_is_lost() {
    let mut s = cut_snapshot(0, 0, Some(0));
    s.transcript = None;
    assert_eq!(
        s.transcript_line().as_deref(),
        Some(
            "Transcript: none (bytes 100..200 left out here are lost: no transcript could be made: \
             No space left on device)"
        )
    );
    s.transcript_stop = None;
    assert_eq!(
        s.transcript_line(),
        None,
        "no transcripts kept: nothing to say"
    );
}
