//! Transcripts: every byte on disk, the range a snapshot left out, and `read_output`.

use std::path::PathBuf;

use uexec_core::transcript::TranscriptConfig;
use uexec_core::{ExecError, ReadOutputRequest};

use crate::helpers::{collect, exec, store_with};

fn temp_root() -> PathBuf {
    std::env::temp_dir()
        .join(format!("uexec-it-transcripts-{:08x}", rand_u32()))
        .join("sessions")
}

fn rand_u32() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    t.subsec_nanos() ^ (std::process::id() << 8)
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[tokio::test]
async fn a_flood_is_kept_byte_for_byte_and_the_cut_is_located() {
    let root = temp_root();
    let store = store_with(|c| c.transcripts = Some(TranscriptConfig::at(root.clone())));
    let mut events = store.subscribe();
    // 8 MiB of numbered lines: more than the 1 MiB a snapshot keeps.
    let first = store
        .exec_command(exec("seq 1 1100000", 30_000))
        .await
        .unwrap();
    let (_, last) = collect(&store, first.clone()).await;
    assert_eq!(last.exit_code(), Some(0));
    let cut = first
        .omitted_range
        .clone()
        .or(last.omitted_range.clone())
        .expect("the snapshot left bytes out")
        .range;
    let dir = last.transcript.clone().expect("a transcript");
    assert!(dir.starts_with(&root));
    // The End says where the transcript is, too.
    let end_transcript = loop {
        let event = events.recv().await.expect("the End");
        if let uexec_core::EventKind::End { transcript, .. } = &event.kind {
            break transcript.clone();
        }
    };
    assert_eq!(end_transcript.as_ref(), Some(&dir));
    let mut want = Vec::new();
    for i in 1..=1_100_000 {
        want.extend_from_slice(format!("{i}\n").as_bytes());
    }
    let got = std::fs::read(dir.join("output.000000")).unwrap();
    assert_eq!((got.len(), fnv(&got)), (want.len(), fnv(&want)));
    // read_output finds the session after its exit, and pages through the cut.
    let id = 1000;
    let page = store
        .read_output(ReadOutputRequest {
            session_id: Some(id),
            offset: Some(cut.start as i64),
            limit: Some(64),
            ..ReadOutputRequest::default()
        })
        .unwrap();
    assert_eq!(page.offset, cut.start);
    assert_eq!(
        page.text.as_bytes(),
        &want[cut.start as usize..cut.start as usize + 64]
    );
    assert_eq!(page.next_offset, cut.start + 64);
    let tail = store
        .read_output(ReadOutputRequest {
            session_id: Some(id),
            tail_lines: Some(2),
            ..ReadOutputRequest::default()
        })
        .unwrap();
    assert_eq!(tail.text, "1099999\n1100000\n");
    let grep = store
        .read_output(ReadOutputRequest {
            session_id: Some(id),
            grep: Some("^54321$".into()),
            ..ReadOutputRequest::default()
        })
        .unwrap();
    let at = want.windows(7).position(|w| w == b"\n54321\n").unwrap() as u64 + 1;
    assert_eq!(grep.text, format!("{at}: 54321\n"));
    assert_eq!(grep.matches, Some(1));
}

#[tokio::test]
async fn read_output_bad_input_names_the_field() {
    let root = temp_root();
    let store = store_with(|c| c.transcripts = Some(TranscriptConfig::at(root)));
    let s = store.exec_command(exec("echo hi", 5000)).await.unwrap();
    assert_eq!(s.exit_code(), Some(0));
    for (req, field) in [
        (
            ReadOutputRequest {
                limit: Some(0),
                ..ReadOutputRequest::default()
            },
            "limit",
        ),
        (
            ReadOutputRequest {
                offset: Some(-1),
                ..ReadOutputRequest::default()
            },
            "offset",
        ),
        (
            ReadOutputRequest {
                grep: Some("(".into()),
                ..ReadOutputRequest::default()
            },
            "grep",
        ),
        (
            ReadOutputRequest {
                tail_lines: Some(3),
                grep: Some("x".into()),
                ..ReadOutputRequest::default()
            },
            "tail_lines",
        ),
    ] {
        let req = ReadOutputRequest {
            session_id: Some(1000),
            ..req
        };
        match store.read_output(req) {
            Err(ExecError::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert_eq!(
        store
            .read_output(ReadOutputRequest {
                session_id: Some(4242),
                ..ReadOutputRequest::default()
            })
            .unwrap_err(),
        ExecError::UnknownProcess(4242)
    );
}

#[tokio::test]
async fn a_session_that_prints_nothing_names_no_transcript_and_reads_as_empty() {
    let root = temp_root();
    let store = store_with(|c| c.transcripts = Some(TranscriptConfig::at(root.clone())));
    let page = |id| {
        store
            .read_output(ReadOutputRequest {
                session_id: Some(id),
                ..ReadOutputRequest::default()
            })
            .unwrap()
    };
    // Exits at once, silent: no path in the result (nothing to read there), an empty page.
    let quiet = store.exec_command(exec("true", 5000)).await.unwrap();
    assert_eq!(
        (quiet.exit_code(), quiet.transcript.clone()),
        (Some(0), None)
    );
    let empty = page(1000);
    assert_eq!((empty.total, empty.text.as_str()), (0, ""));
    // Alive and silent until typed into: named from its first byte on.
    let mut waiting = exec("read -r x; echo \"got $x\"", 300);
    waiting.pipe_stdin = true;
    let first = store.exec_command(waiting).await.unwrap();
    let id = first.session_id().expect("still waiting for its line");
    assert_eq!(first.transcript, None);
    assert_eq!(page(id).total, 0);
    let typed = store
        .write_stdin(uexec_core::WriteRequest {
            session_id: id,
            chars: "hi\n".into(),
            yield_time_ms: Some(5000),
            ..uexec_core::WriteRequest::default()
        })
        .await
        .unwrap();
    let (out, last) = collect(&store, typed).await;
    assert_eq!((out.as_str(), last.exit_code()), ("got hi\n", Some(0)));
    let dir = last.transcript.expect("a transcript once it printed");
    assert!(dir.starts_with(&root), "{}", dir.display());
    assert_eq!(
        std::fs::read(dir.join("output.000000")).unwrap(),
        b"got hi\n"
    );
    assert_eq!(page(id).text, "got hi\n");
}
