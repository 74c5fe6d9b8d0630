//! A character split across two reads arrives whole, in snapshots and in output deltas.

use uexec_core::EventKind;

use crate::helpers::{collect, exec, store};

#[tokio::test]
async fn a_character_split_across_two_reads_arrives_whole() {
    let store = store();
    let mut events = store.subscribe();
    let first = store
        .exec_command(exec(r"printf '\303'; sleep 1; printf '\251\n'", 250))
        .await
        .unwrap();
    assert!(first.session_id().is_some(), "still running after 250 ms");
    assert_eq!(first.output, "", "half a character is not shown yet");
    let (out, last) = collect(&store, first).await;
    assert_eq!(last.exit_code(), Some(0));
    assert_eq!(out, "é\n");
    let mut deltas = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let EventKind::OutputDelta { chunk } = &e.kind {
            deltas.push(chunk.clone());
        }
    }
    for d in &deltas {
        assert!(
            std::str::from_utf8(d).is_ok(),
            "delta {d:?} is cut mid-character"
        );
    }
    assert_eq!(deltas.concat(), "é\n".as_bytes());
}

#[tokio::test]
async fn really_invalid_bytes_still_become_replacement_characters() {
    let store = store();
    let s = store
        .exec_command(exec(r"printf 'a\377b\303'", 2000))
        .await
        .unwrap();
    assert_eq!(s.exit_code(), Some(0));
    assert_eq!(s.output, "a\u{FFFD}b\u{FFFD}");
}
